# cmake --install build --prefix P: the programs in P/bin, libkiln.so in P/lib,
# the C API's header (kiln.h, nothing internal) in P/include, a CMake package
# (find_package(kiln) gives kiln::kiln) and a pkg-config file (kiln.pc).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ${KILN_TOOLS} kiln-convert ${KILN_BENCHES} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS kiln-capi EXPORT kiln-targets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kiln.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set_target_properties(kiln-capi PROPERTIES EXPORT_NAME kiln)

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kiln-targets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})

# pkg-config paths relative to the .pc file, so the installed tree can move.
file(RELATIVE_PATH KILN_PC_TO_PREFIX /root/${CMAKE_INSTALL_LIBDIR}/pkgconfig /root)
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
