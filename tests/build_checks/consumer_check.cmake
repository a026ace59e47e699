# An outside project (tests/consumer: a C++ and a CUDA source) built against cudakit the
# ways a user gets it. Every step runs from scratch in WORK_DIR.
#
#   -DBUILD_DIR=<a configured and built cudakit>   install it into WORK_DIR/prefix, check
#       that the `cudakit` command was installed (EXPECT_COMMAND=ON), build and run the
#       consumer against the install, then against the build tree itself (its export)
#   -DSOURCE_DIR=<cudakit's sources>               configure, build and install a
#       library-only shared build (no tests, tools or kernels: nothing but the library and
#       its headers), then build and run the consumer against that install
#
# Other parameters: CONSUMER_SOURCE, CUDA_ROOT, CXX, NVCC, and GENERATOR (Ninja by default).
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
