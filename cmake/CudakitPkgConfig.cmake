# cudakit.pc: a program built without CMake finds cudakit with pkg-config
# (`pkg-config --cflags --libs cudakit`). The file names its install prefix relative to
# itself (${pcfiledir}), so a moved install still works; the CUDA toolkit's include folder
# is the one this build used, since cudakit's headers include cuda.h. The static library
# needs the loader and thread libraries too (the driver is opened with dlopen).
file(RELATIVE_PATH CUDAKIT_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" CUDAKIT_PC_TO_PREFIX "${CUDAKIT_PC_TO_PREFIX}")
set(CUDAKIT_PC_CUDA_CFLAGS "")
foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
  string(APPEND CUDAKIT_PC_CUDA_CFLAGS " -I${dir}")
endforeach()
if(CUDAKIT_BUILD_SHARED)
  set(CUDAKIT_PC_LIBS_PRIVATE "-ldl -pthread")
  set(CUDAKIT_PC_LIBS "")
else()
  set(CUDAKIT_PC_LIBS_PRIVATE "")
  set(CUDAKIT_PC_LIBS " -ldl -pthread")
endif()
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/cudakit.pc CONTENT [=[
prefix=${pcfiledir}/@CUDAKIT_PC_TO_PREFIX@
includedir=${prefix}/@CMAKE_INSTALL_INCLUDEDIR@
libdir=${prefix}/@CMAKE_INSTALL_LIBDIR@

Name: cudakit
Description: @PROJECT_DESCRIPTION@
Version: @PROJECT_VERSION@
Cflags: -std=c++20 -I${includedir}@CUDAKIT_PC_CUDA_CFLAGS@
Libs: -L${libdir} -lcudakit@CUDAKIT_PC_LIBS@
Libs.private: @CUDAKIT_PC_LIBS_PRIVATE@
]=] @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/cudakit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
