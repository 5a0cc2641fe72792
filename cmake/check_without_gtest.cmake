# The packaging.check_without_gtest test (cmake -P): the check engine, the suites, the reports and
# the shardcheck command need RapidCheck but not Google Test. Configures this project with the
# tests off and Google Test made unfindable, then checks that the command's target exists and that
# no source it compiles includes Google Test (compiling it all again would take minutes).
set(build ${BUILD_DIR}/check-without-gtest)
file(REMOVE_RECURSE ${build})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${build} -G Ninja -DCMAKE_CXX_COMPILER=${CXX}
          -DSHARDCHECK_BUILD_TESTS=OFF -DSHARDCHECK_BUILD_BENCH=OFF
          -DCMAKE_DISABLE_FIND_PACKAGE_GTest=TRUE -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_without_gtest: configuring with SHARDCHECK_BUILD_TESTS=OFF and "
                      "Google Test unfindable failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} --target help
                OUTPUT_VARIABLE targets RESULT_VARIABLE rc)
foreach(t shardcheck shardcheck_check shardcheck_cli shardcheck_reports)
  if(NOT targets MATCHES "(^|\n)${t}:")
    message(FATAL_ERROR "check_without_gtest: no target ${t} without the tests")
  endif()
endforeach()
file(READ ${build}/compile_commands.json commands)
string(REGEX MATCHALL "\"file\": \"[^\"]+\"" files "${commands}")
foreach(entry IN LISTS files)
  string(REGEX REPLACE "\"file\": \"([^\"]+)\"" "\\1" f "${entry}")
  file(STRINGS ${f} hits REGEX "#include [<\"](gtest|gmock|rapidcheck/gtest)")
  if(hits)
    message(FATAL_ERROR "check_without_gtest: ${f} includes Google Test: ${hits}")
  endif()
endforeach()
list(LENGTH files n)
message(STATUS "check_without_gtest: ${n} sources, none includes Google Test")
