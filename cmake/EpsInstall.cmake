# `cmake --install` and the Debian package (docs/plugins.md "Installing"): what an EP library vendor builds a
# plugin against and what a cluster runs.
#
# Under the prefix:
#   bin/epsuite                             the command line (RUNPATH $ORIGIN/../<libdir>)
#   <libdir>/libeps_device_{cuda,hip}.so    the GPU device plugins, where they were built
#   <libdir>/libepsuite-plugin-*.so         where installed EP plugins go: found by name (--transport plugin:NAME)
#   share/epsuite/plot/*.py                 the figure and report scripts of `epsuite plot` and `run`
#   include/epsuite/ep_plugin_v1.h          the EP plugin ABI
#   <libdir>/cmake/epsuite/                 find_package(epsuite): epsuite::plugin_abi, epsuite::epsuite and
#                                           epsuite_add_plugin()
#   <libdir>/pkgconfig/epsuite.pc           the same for pkg-config (cflags, plugindir)
#   <python dir>/epsuite/                   the Python bridge (python/, when it was built)
# `cpack -G DEB` in the build folder packs the same tree into epsuite_<version>_<arch>.deb, its dependencies
# found by dpkg-shlibdeps.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set_target_properties(epsuite PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
install(TARGETS epsuite EXPORT epsuiteTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(device_plugin IN ITEMS eps_device_cuda eps_device_hip)
  if(TARGET ${device_plugin})
    install(TARGETS ${device_plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
endforeach()
install(FILES harness/plot/epsuite_results.py harness/plot/epsuite_plot.py harness/plot/epsuite_report.py
              harness/plot/epsuite_model_plot.py
        DESTINATION ${CMAKE_INSTALL_DATADIR}/epsuite/plot)

set_target_properties(eps_plugin_abi PROPERTIES EXPORT_NAME plugin_abi)
install(TARGETS eps_plugin_abi EXPORT epsuiteTargets)
install(DIRECTORY impls/transport/plugin/include/epsuite DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(EPS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/epsuite)
install(EXPORT epsuiteTargets NAMESPACE epsuite:: DESTINATION ${EPS_CMAKE_DIR})
configure_package_config_file(cmake/epsuiteConfig.cmake.in ${PROJECT_BINARY_DIR}/epsuiteConfig.cmake
  INSTALL_DESTINATION ${EPS_CMAKE_DIR} PATH_VARS CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/epsuiteConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/epsuiteConfig.cmake ${PROJECT_BINARY_DIR}/epsuiteConfigVersion.cmake
        DESTINATION ${EPS_CMAKE_DIR})
file(RELATIVE_PATH EPS_PC_PREFIX_FROM_PCFILEDIR "/root/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/root")
configure_file(cmake/epsuite.pc.in ${PROJECT_BINARY_DIR}/epsuite.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/epsuite.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME epsuite)
set(CPACK_PACKAGE_VENDOR "epsuite")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Benchmark and conformance suite for MoE expert parallelism")
set(CPACK_PACKAGE_CONTACT "epsuite maintainers <epsuite@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, python3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3-matplotlib, python3-numpy, libfabric1, ibverbs-providers")
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
include(CPack)

# The package end to end (harness/tests/test_install.py): install into a temporary prefix, build and install the
# example plugin against it, check it at R = 1..4, run it beside `mpi` (bench, plots, report.md), import the installed
# Python package, pack the .deb. About 4 minutes on a 2-core machine, most of it the four checks and the run.
find_program(EPS_INSTALL_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
eps_add_pytest(install_example_plugin TEST test_install.py::test_example_plugin ARGS --python ${EPS_INSTALL_PYTHON3})
set_tests_properties(install_example_plugin PROPERTIES
  TIMEOUT 1800 LABELS "mpi;install;plugin" ENVIRONMENT "${EPS_MPI_TEST_ENVIRONMENT}" PROCESSORS 4)
