# `cmake --install` puts the headers, the libraries and a CMake package in place, so a user's
# project can find_package(shardcheck), link the library and the reference, or link its own
# implementation and run the suites on it (examples/custom_linear; tested by the "install"
# tests).
#
# Two export sets, so a user who only links the library and the reference needs neither
# RapidCheck nor Google Test:
#   shardcheckTargets       lib (all its layers), reference          needs OpenMP, Eigen, Boost
#   shardcheckCheckTargets  cases, check, reports, cli, main (component "check")
#                                                          needs RapidCheck and nlohmann-json too
# Nothing installed needs Google Test; the test helpers (properties/testing/, runtime/, layout/,
# budget/, reference/) are not installed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installs the targets shardcheck_<name>, for each <name> after `export_set`, into the export set
# `export_set` under the installed name shardcheck::<name> (the alias used in this tree:
# shardcheck::lib, shardcheck::check, ...), and that set's CMake file: static libraries in the
# library folder, object libraries' objects in its shardcheck-objects folder.
function(shardcheck_install_export_set export_set)
  set(targets)
  foreach(t ${ARGN})
    set_target_properties(shardcheck_${t} PROPERTIES EXPORT_NAME ${t})
    list(APPEND targets shardcheck_${t})
  endforeach()
  install(TARGETS ${targets}
          EXPORT ${export_set}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/shardcheck-objects
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck)
  install(EXPORT ${export_set} NAMESPACE shardcheck::
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)
endfunction()

shardcheck_install_export_set(shardcheckTargets
  lib lib_base runtime layout kernels ops budget reference warnings)

# Headers keep the include paths they have in the tree:
#   "runtime/…", "ops/…" (lib/)           -> include/shardcheck/
#   "reference/…", "reports/…", "tools/…" -> include/shardcheck/
#   "engine/…", "suites/…" (properties/)  -> include/shardcheck/properties/
install(DIRECTORY lib/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
        FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY reference DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
        FILES_MATCHING PATTERN "*.hpp")

if(SHARDCHECK_BUILD_CHECK)
  shardcheck_install_export_set(shardcheckCheckTargets cases check reports cli main)
  install(TARGETS shardcheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(DIRECTORY reports DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
          FILES_MATCHING PATTERN "*.hpp")
  install(FILES tools/shardcheck/cli.hpp
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck/tools/shardcheck)
  # The engine, the suites (not their unit tests: only headers are installed, and the suites'
  # headers are what a user's implementation includes), the generators the cases use and
  # compare's engine; the case files' readers (cases/) beside lib's headers.
  install(DIRECTORY cases DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
          FILES_MATCHING PATTERN "*.hpp")
  foreach(dir engine suites generators compare)
    install(DIRECTORY properties/${dir}
            DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck/properties
            FILES_MATCHING PATTERN "*.hpp")
  endforeach()
endif()

configure_package_config_file(cmake/shardcheckConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)

# The tests: install into the build tree, then
#   install.custom_linear_example  build examples/custom_linear against the installed package
#                                  with the same compiler and run the linear suite on it
#   install.library_only           configure and build a project that links only shardcheck::lib
#                                  and ::reference with RapidCheck and Google Test made
#                                  unfindable (CMAKE_DISABLE_FIND_PACKAGE_*)
# Packaging, not memory safety: the sanitizer presets skip them.
if(BUILD_TESTING AND SHARDCHECK_BUILD_TESTS AND SHARDCHECK_BUILD_CHECK AND
   NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  foreach(case custom_linear_example library_only)
    add_test(NAME install.${case}
      COMMAND ${CMAKE_COMMAND}
        -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
        -DCXX=${CMAKE_CXX_COMPILER} -DCXX_FLAGS=${CMAKE_CXX_FLAGS} -DCASE=${case}
        -P ${PROJECT_SOURCE_DIR}/cmake/test_install.cmake)
    set_tests_properties(install.${case} PROPERTIES LABELS "install" TIMEOUT 1200
                         RESOURCE_LOCK install_prefix)
  endforeach()
  # The check engine and the command configure and compile without Google Test.
  add_test(NAME packaging.check_without_gtest
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
            -DCXX=${CMAKE_CXX_COMPILER} -P ${PROJECT_SOURCE_DIR}/cmake/check_without_gtest.cmake)
  set_tests_properties(packaging.check_without_gtest PROPERTIES LABELS "install" TIMEOUT 300)
endif()
