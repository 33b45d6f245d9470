# install(EXPORT) and idemConfig.cmake: find_package(idem COMPONENTS sqlite …).
include(CMakePackageConfigHelpers)
install(TARGETS ${IDEM_INSTALLED_TARGETS} EXPORT idemTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(IDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/idem)
install(EXPORT idemTargets NAMESPACE idem:: DESTINATION ${IDEM_CMAKE_DIR})
configure_package_config_file(cmake/idemConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/idemConfig.cmake
  INSTALL_DESTINATION ${IDEM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/idemConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/idemConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/idemConfigVersion.cmake
  cmake/IdemDependencies.cmake DESTINATION ${IDEM_CMAKE_DIR})
