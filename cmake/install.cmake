# `cmake --install` puts the headers, the libraries and a CMake package in place, so a user's
# project can find_package(shardcheck), link its own implementation and run the suites on it
# (examples/custom_linear; tested by the "install" test).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed names match the aliases used in this tree (shardcheck::lib, shardcheck::check, ...).
foreach(t lib lib_base runtime layout kernels ops budget reference warnings check reports cli
          main)
  set_target_properties(shardcheck_${t} PROPERTIES EXPORT_NAME ${t})
endforeach()

install(TARGETS shardcheck_lib shardcheck_lib_base shardcheck_runtime shardcheck_layout
                shardcheck_kernels shardcheck_ops shardcheck_budget shardcheck_reference shardcheck_warnings shardcheck_check
                shardcheck_reports shardcheck_cli shardcheck_main
        EXPORT shardcheckTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/shardcheck-objects
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck)
install(TARGETS shardcheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT shardcheckTargets NAMESPACE shardcheck::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)

# Headers keep the include paths they have in the tree:
#   "runtime/…", "ops/…" (lib/)           -> include/shardcheck/
#   "reference/…", "reports/…", "tools/…" -> include/shardcheck/
#   "engine/…", "linear/…" (properties/)  -> include/shardcheck/properties/
install(DIRECTORY lib/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
        FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY reference DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
        FILES_MATCHING PATTERN "*.hpp")
install(DIRECTORY reports DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck
        FILES_MATCHING PATTERN "*.hpp")
install(FILES tools/shardcheck/cli.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck/tools/shardcheck)
install(DIRECTORY properties/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/shardcheck/properties
        FILES_MATCHING PATTERN "*.hpp")

configure_package_config_file(cmake/shardcheckConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/shardcheckConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)

# The test: install into the build tree, build examples/custom_linear against the installed
# package with the same compiler, and run the linear suite on its implementation.
# Packaging, not memory safety: the sanitizer presets skip it.
if(BUILD_TESTING AND NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  add_test(NAME install.custom_linear_example
    COMMAND ${CMAKE_COMMAND}
      -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${CMAKE_BINARY_DIR}
      -DCXX=${CMAKE_CXX_COMPILER} -DCXX_FLAGS=${CMAKE_CXX_FLAGS}
      -P ${PROJECT_SOURCE_DIR}/cmake/test_install.cmake)
  set_tests_properties(install.custom_linear_example PROPERTIES LABELS "install" TIMEOUT 1200)
endif()
