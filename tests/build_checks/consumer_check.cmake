# An outside project (tests/consumer: a C++ and a CUDA source) built against cudakit the
# ways a user gets it. Every step runs from scratch in WORK_DIR.
#
#   -DBUILD_DIR=<a configured and built cudakit>   install it into WORK_DIR/prefix, check
#       that the `cudakit` command was installed (EXPECT_COMMAND=ON), build and run the
#       consumer against the install, then against the build tree itself (its export);
#       build and run tests/consumer/main.cpp with make and the installed cudakit.pc
#       (pkg-config); build the README's first program with the README's CMakeLists.txt
#       (README names the file); make the binary and the source package with CPack (CPACK
#       names cpack)
#   -DSOURCE_DIR=<cudakit's sources>               configure, build and install a
#       library-only shared build (no tests, tools or kernels: nothing but the library and
#       its headers), then build and run the consumer against that install
#
# Other parameters: CONSUMER_SOURCE, CUDA_ROOT, CXX, NVCC, CPACK, README, and GENERATOR (Ninja by default).
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
file(REMOVE_RECURSE ${WORK_DIR})

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE r OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(r)
    message(FATAL_ERROR "${what} failed (${r}):\n${out}${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# Configures, builds and runs the consumer with `find_args` telling CMake where cudakit is.
function(build_consumer name)
  set(dir ${WORK_DIR}/consumer-${name})
  run("configuring the consumer (${name})" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${dir} -G ${GENERATOR}
      ${ARGN} -DCUDAToolkit_ROOT=${CUDA_ROOT} -DCMAKE_CXX_COMPILER=${CXX}
      -DCMAKE_CUDA_COMPILER=${NVCC} -DCMAKE_CUDA_HOST_COMPILER=${CXX} -DCMAKE_CUDA_ARCHITECTURES=75)
  run("building the consumer (${name})" ${CMAKE_COMMAND} --build ${dir})
  foreach(program consumer consumer_cuda)
    run("running ${program} (${name})" ${dir}/${program})
    message(STATUS "${program} (${name}) said: ${last_output}")
  endforeach()
endfunction()

if(SOURCE_DIR)
  set(lib_build ${WORK_DIR}/library-build)
  run("configuring the library-only build" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${lib_build} -G ${GENERATOR}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -DCUDAToolkit_ROOT=${CUDA_ROOT}
      -DCUDAKIT_BUILD_TESTS=OFF -DCUDAKIT_BUILD_TOOLS=OFF -DCUDAKIT_BUILD_KERNELS=OFF -DCUDAKIT_BUILD_SHARED=ON)
  run("building the library-only build" ${CMAKE_COMMAND} --build ${lib_build})
  set(BUILD_DIR ${lib_build})
endif()

run("installing" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
if(EXPECT_COMMAND AND NOT EXISTS ${WORK_DIR}/prefix/bin/cudakit)
  message(FATAL_ERROR "cmake --install did not install the cudakit command (bin/cudakit)")
endif()
if(SOURCE_DIR)
  file(GLOB shared ${WORK_DIR}/prefix/lib*/libcudakit.so*)
  file(GLOB_RECURSE strays ${WORK_DIR}/prefix/bin/* ${WORK_DIR}/prefix/*gtest*)
  if(NOT shared OR strays)
    message(FATAL_ERROR "a library-only install holds libcudakit.so and headers only; found shared: '${shared}', others: '${strays}'")
  endif()
endif()
build_consumer(installed -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
if(NOT SOURCE_DIR)
  build_consumer(build-tree -Dcudakit_DIR=${BUILD_DIR})
endif()

if(NOT SOURCE_DIR AND README)
  # The README's first program with the README's CMakeLists.txt, as a reader copies them.
  file(READ ${README} readme)
  string(REGEX MATCH "```cmake\n([^`]*)```" cmake_block "${readme}")
  set(lists "${CMAKE_MATCH_1}")
  string(REGEX MATCH "<!-- cpp program -->\n```cpp\n([^`]*)```" program_block "${readme}")
  set(program "${CMAKE_MATCH_1}")
  if(NOT lists MATCHES "find_package\\(cudakit" OR NOT program MATCHES "int main")
    message(FATAL_ERROR "README.md: no ```cmake block with find_package(cudakit), or no <!-- cpp program --> block")
  endif()
  string(REGEX MATCH "add_executable\\(([A-Za-z0-9_]+) ([A-Za-z0-9_.]+)\\)" executable "${lists}")
  set(readme_dir ${WORK_DIR}/readme-program)
  file(WRITE ${readme_dir}/CMakeLists.txt "${lists}")
  file(WRITE ${readme_dir}/${CMAKE_MATCH_2} "${program}")
  run("configuring the README's program" ${CMAKE_COMMAND} -S ${readme_dir} -B ${readme_dir}/build -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCUDAToolkit_ROOT=${CUDA_ROOT} -DCMAKE_CXX_COMPILER=${CXX})
  run("building the README's program" ${CMAKE_COMMAND} --build ${readme_dir}/build)
  message(STATUS "the README's program (${CMAKE_MATCH_1}) builds against the install")
endif()

if(NOT SOURCE_DIR)
  # Without CMake: a Makefile that asks pkg-config for the installed cudakit.pc.
  file(GLOB pc_files ${WORK_DIR}/prefix/lib*/pkgconfig/cudakit.pc ${WORK_DIR}/prefix/lib/*/pkgconfig/cudakit.pc)
  if(NOT pc_files)
    message(FATAL_ERROR "cmake --install did not install cudakit.pc (lib/pkgconfig)")
  endif()
  list(GET pc_files 0 pc_file)
  get_filename_component(pc_dir ${pc_file} DIRECTORY)
  find_program(MAKE_PROGRAM make)
  find_program(PKG_CONFIG_PROGRAM pkg-config)
  if(NOT MAKE_PROGRAM OR NOT PKG_CONFIG_PROGRAM)
    message(FATAL_ERROR "the pkg-config check needs make and pkg-config installed (found: '${MAKE_PROGRAM}', '${PKG_CONFIG_PROGRAM}')")
  endif()
  # The file names its prefix relative to itself: a moved install still works.
  file(RENAME ${WORK_DIR}/prefix ${WORK_DIR}/moved-prefix)
  string(REPLACE "${WORK_DIR}/prefix" "${WORK_DIR}/moved-prefix" pc_dir "${pc_dir}")
  run("building the consumer with make and pkg-config" ${CMAKE_COMMAND} -E env PKG_CONFIG_PATH=${pc_dir}
      ${MAKE_PROGRAM} --no-print-directory -C ${CONSUMER_SOURCE} CXX=${CXX} OUT=${WORK_DIR})
  run("running consumer_pkgconfig" ${WORK_DIR}/consumer_pkgconfig)
  message(STATUS "consumer_pkgconfig said: ${last_output}")

  # CPack: the binary package holds what the install holds, the source package the tree.
  if(CPACK)
    run("cpack (binary)" ${CPACK} -G TGZ --config ${BUILD_DIR}/CPackConfig.cmake -B ${WORK_DIR}/packages)
    run("cpack (source)" ${CPACK} --config ${BUILD_DIR}/CPackSourceConfig.cmake -B ${WORK_DIR}/packages)
    file(GLOB binary_package ${WORK_DIR}/packages/cudakit-*-Linux.tar.gz)
    file(GLOB source_package ${WORK_DIR}/packages/cudakit-*-source.tar.gz)
    if(NOT binary_package OR NOT source_package)
      file(GLOB made ${WORK_DIR}/packages/*)
      message(FATAL_ERROR "cpack made no binary or no source .tar.gz; it made: ${made}")
    endif()
    run("listing the binary package" ${CMAKE_COMMAND} -E tar tf ${binary_package})
    foreach(expected include/cudakit/cudakit.hpp include/cudakit/version.hpp /cudakitConfig.cmake /cudakit.pc /libcudakit)
      if(NOT last_output MATCHES "${expected}")
        message(FATAL_ERROR "the binary package lacks ${expected}:\n${last_output}")
      endif()
    endforeach()
    run("listing the source package" ${CMAKE_COMMAND} -E tar tf ${source_package})
    foreach(expected /CMakeLists.txt /include/cudakit/cudakit.hpp /tests/build_checks/consumer_check.cmake /CHANGELOG.md)
      if(NOT last_output MATCHES "${expected}")
        message(FATAL_ERROR "the source package lacks ${expected}")
      endif()
    endforeach()
    if(last_output MATCHES "/build/|CMakeCache.txt|/\\.git/")
      message(FATAL_ERROR "the source package holds a build folder or Git data")
    endif()
  endif()
endif()
