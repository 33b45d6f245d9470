# idem_add_component(NAME SOURCES … [PUBLIC_LIBS …] [PRIVATE_LIBS …]): one idem
# library: target idem_<NAME>, alias idem::<NAME>, public headers in the calling
# folder's include/, installed and exported as find_package(idem COMPONENTS <NAME>).
function(idem_add_component name)
  cmake_parse_arguments(C "" "" "SOURCES;PUBLIC_LIBS;PRIVATE_LIBS" ${ARGN})
  set(target idem_${name})
  add_library(${target} ${C_SOURCES})
  add_library(idem::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME ${target})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC idem::core ${C_PUBLIC_LIBS} PRIVATE ${C_PRIVATE_LIBS})
  target_compile_options(${target} PRIVATE ${IDEM_WARNINGS})
  install(DIRECTORY include/idem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  set_property(GLOBAL APPEND PROPERTY IDEM_INSTALLED_TARGETS ${target})
  set_property(GLOBAL APPEND PROPERTY IDEM_ENABLED_COMPONENTS ${name})
endfunction()
