# cudakit builds where no nccl.h is installed: the toolkit's include folders are copied as
# links, nccl.h left out, and every source that uses NCCL (the library's NCCL layer, the
# command's NCCL benchmark with its stand-in header) is compiled against that copy.
#
#   cmake -DWORK_DIR=... -DSOURCE_DIR=... -DBINARY_DIR=... "-DTOOLKIT_INCLUDES=a;b" -DCXX=g++
#         -P without_nccl_header.cmake
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/include)
foreach(dir IN LISTS TOOLKIT_INCLUDES)
  file(GLOB entries RELATIVE ${dir} ${dir}/*)
  foreach(entry IN LISTS entries)
    if(NOT entry STREQUAL "nccl.h" AND NOT EXISTS ${WORK_DIR}/include/${entry})
      file(CREATE_LINK ${dir}/${entry} ${WORK_DIR}/include/${entry} SYMBOLIC)
    endif()
  endforeach()
endforeach()

# The copy really hides the header: a probe that finds it fails the check.
file(WRITE ${WORK_DIR}/probe.cpp "#if __has_include(<nccl.h>)\n#error nccl.h is still reachable\n#endif\n")
set(flags -std=c++20 -fsyntax-only -I${SOURCE_DIR}/include -I${BINARY_DIR}/include -I${SOURCE_DIR}/src
          -isystem ${WORK_DIR}/include)
execute_process(COMMAND ${CXX} ${flags} ${WORK_DIR}/probe.cpp RESULT_VARIABLE r ERROR_VARIABLE err)
if(r)
  message(FATAL_ERROR "the hidden toolkit copy still has nccl.h:\n${err}")
endif()

file(GLOB sources ${SOURCE_DIR}/src/libraries/nccl*.cpp)
list(LENGTH sources count)
if(count LESS 5)
  message(FATAL_ERROR "expected the NCCL layer's sources in ${SOURCE_DIR}/src/libraries, found ${count}")
endif()
foreach(source IN LISTS sources)
  execute_process(COMMAND ${CXX} ${flags} ${source} RESULT_VARIABLE r ERROR_VARIABLE err)
  if(r)
    message(FATAL_ERROR "${source} does not compile without nccl.h:\n${err}")
  endif()
endforeach()
set(bench ${SOURCE_DIR}/tools/cudakit/bench_nccl.cpp)
if(EXISTS ${bench})
  execute_process(COMMAND ${CXX} ${flags} -I${SOURCE_DIR}/tools/nccl_header -I${SOURCE_DIR}/tools/cudakit
                          -I${SOURCE_DIR}/tools -I${SOURCE_DIR} ${bench} RESULT_VARIABLE r ERROR_VARIABLE err)
  if(r)
    message(FATAL_ERROR "${bench} does not compile with the stand-in nccl.h:\n${err}")
  endif()
endif()
message(STATUS "${count} NCCL sources and the NCCL benchmark compile without nccl.h")
