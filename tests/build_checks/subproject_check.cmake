# tests/consumer_subproject built with cudakit as a subproject, through add_subdirectory and
# through FetchContent from the source tree: one configure and one build each, unoptimized
# (the cheapest compile), with the parent build's compiler launcher (ccache) when it has
# one. Each checks that cudakit's tests and tools stayed off, that the program runs, and
# that the consumer's install holds its program and nothing of cudakit (CUDAKIT_INSTALL
# is off in a subproject).
#
#   cmake -DSOURCE_DIR=... -DWORK_DIR=... -DCXX=... -DCUDA_ROOT=... [-DLAUNCHER=ccache]
#         [-DGENERATOR=Ninja] -P subproject_check.cmake
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

set(launcher "")
if(LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
foreach(how add_subdirectory FetchContent)
  set(dir ${WORK_DIR}/${how})
  run("configuring the consumer (${how})" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer_subproject -B ${dir}
      -G ${GENERATOR} -DCUDAKIT_HOW=${how} -DCUDAKIT_SOURCE=${SOURCE_DIR} -DCMAKE_CXX_COMPILER=${CXX}
      -DCUDAToolkit_ROOT=${CUDA_ROOT} ${launcher})
  file(STRINGS ${dir}/CMakeCache.txt options REGEX "^CUDAKIT_(BUILD_TESTS|BUILD_TOOLS|BUILD_KERNELS|INSTALL):BOOL=ON$")
  if(options)
    message(FATAL_ERROR "${how}: a subproject's tests, tools, kernels and install rules are off by default; on: ${options}")
  endif()
  run("building the consumer (${how})" ${CMAKE_COMMAND} --build ${dir})
  run("running the consumer (${how})" ${dir}/consumer)
  message(STATUS "consumer (${how}) said: ${last_output}")
  run("installing the consumer (${how})" ${CMAKE_COMMAND} --install ${dir} --prefix ${dir}/prefix)
  file(GLOB_RECURSE installed RELATIVE ${dir}/prefix ${dir}/prefix/*)
  if(NOT installed STREQUAL "bin/consumer")
    message(FATAL_ERROR "${how}: the consumer's install holds only bin/consumer; it holds: ${installed}")
  endif()
endforeach()
