# Run by the install.* tests (cmake -P, CASE = custom_linear_example or library_only): install
# the build tree, build a consumer against the installed package, run it. Fails on any step.
set(prefix ${BUILD_DIR}/install-test/prefix)
set(consumer_build ${BUILD_DIR}/install-test/${CASE})
file(REMOVE_RECURSE ${BUILD_DIR}/install-test)

function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "install test: `${ARGN}` failed with ${rc}")
  endif()
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(CASE STREQUAL "custom_linear_example")
  step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom_linear -B ${consumer_build} -G Ninja
       -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
       -DCMAKE_BUILD_TYPE=Release)
  step(${CMAKE_COMMAND} --build ${consumer_build} -j2)
  step(${consumer_build}/my_shardcheck check linear --impl my-linear --cases 30)
elseif(CASE STREQUAL "library_only")
  # The test helpers are not installed.
  foreach(helper properties/testing properties/runtime properties/layout properties/budget)
    if(EXISTS ${prefix}/include/shardcheck/${helper})
      message(FATAL_ERROR "install test: test helpers were installed: include/shardcheck/${helper}")
    endif()
  endforeach()
  step(${CMAKE_COMMAND} -S ${SOURCE_DIR}/cmake/library_only_example -B ${consumer_build} -G Ninja
       -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${CXX_FLAGS}"
       -DCMAKE_BUILD_TYPE=Release -DCMAKE_DISABLE_FIND_PACKAGE_rapidcheck=TRUE
       -DCMAKE_DISABLE_FIND_PACKAGE_GTest=TRUE)
  step(${CMAKE_COMMAND} --build ${consumer_build} -j2)
  step(${consumer_build}/library_only)
else()
  message(FATAL_ERROR "install test: unknown CASE '${CASE}'")
endif()
