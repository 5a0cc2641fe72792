# Run by the install.custom_linear_example test (cmake -P): install, build the example against
# the installed package, run its checks. Fails on any step.
set(prefix ${BUILD_DIR}/install-test/prefix)
set(example_build ${BUILD_DIR}/install-test/example)
file(REMOVE_RECURSE ${BUILD_DIR}/install-test)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: `${ARGN}` failed with ${rc}")
  endif()
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom_linear -B ${example_build} -G Ninja
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
     -DCMAKE_BUILD_TYPE=Release)
step(${CMAKE_COMMAND} --build ${example_build} -j2)
step(${example_build}/my_shardcheck check linear --impl my-linear --cases 30)
