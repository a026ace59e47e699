# Installs the built library into a scratch prefix, then configures, builds and runs
# tests/consumer against it, the way an outside project would.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE r OUTPUT_QUIET)
if(r)
  message(FATAL_ERROR "install failed: ${r}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${WORK_DIR}/build -G Ninja
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCUDAToolkit_ROOT=${CUDA_ROOT}
                        -DCMAKE_CXX_COMPILER=${CXX}
                RESULT_VARIABLE r)
if(r)
  message(FATAL_ERROR "configuring the consumer failed: ${r}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE r)
if(r)
  message(FATAL_ERROR "building the consumer failed: ${r}")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE r OUTPUT_VARIABLE out)
message(STATUS "consumer said: ${out}")
if(r)
  message(FATAL_ERROR "the consumer failed: ${r}")
endif()
