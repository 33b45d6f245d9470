# install(EXPORT) and idemConfig.cmake: find_package(idem COMPONENTS sqlite …).
include(CMakePackageConfigHelpers)
install(TARGETS ${IDEM_INSTALLED_TARGETS} EXPORT idemTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set(IDEM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/idem)
# For each component, the other components it links (idem::stores: the backends;
# idem::brokers: the adapters), so that idemConfig.cmake finds the dependencies of
# the components asked for and of those they link, and no others.
set(IDEM_COMPONENT_USES "")
foreach(target IN LISTS IDEM_INSTALLED_TARGETS)
  get_target_property(libs ${target} LINK_LIBRARIES)
  set(uses "")
  foreach(lib IN LISTS libs)
    if(lib MATCHES "^idem::(.+)$" AND NOT CMAKE_MATCH_1 STREQUAL "core")
      list(APPEND uses ${CMAKE_MATCH_1})
    endif()
  endforeach()
  string(REGEX REPLACE "^idem_" "" component ${target})
  string(APPEND IDEM_COMPONENT_USES "set(_idem_uses_${component} \"${uses}\")\n")
endforeach()
install(EXPORT idemTargets NAMESPACE idem:: DESTINATION ${IDEM_CMAKE_DIR})
configure_package_config_file(cmake/idemConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/idemConfig.cmake
  INSTALL_DESTINATION ${IDEM_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/idemConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/idemConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/idemConfigVersion.cmake
  cmake/IdemDependencies.cmake DESTINATION ${IDEM_CMAKE_DIR})
