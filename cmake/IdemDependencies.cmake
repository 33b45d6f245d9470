# Finds idem's dependencies (Debian 12 packages). Every lookup ends in a namespaced
# IMPORTED target. Also installed, for idemConfig.cmake to re-find what is enabled.
include(CMakeFindDependencyMacro)
find_package(PkgConfig QUIET)

if(NOT TARGET spdlog::spdlog)
  find_dependency(spdlog CONFIG)
endif()

# xxHash (libxxhash-dev): pkg-config, else find_path/find_library.
if(NOT TARGET idem_deps::xxhash)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_XXHASH QUIET IMPORTED_TARGET libxxhash)
  endif()
  add_library(idem_deps::xxhash INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_XXHASH)
    target_link_libraries(idem_deps::xxhash INTERFACE PkgConfig::IDEM_XXHASH)
  else()
    find_path(IDEM_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
    find_library(IDEM_XXHASH_LIBRARY xxhash REQUIRED)
    target_include_directories(idem_deps::xxhash INTERFACE ${IDEM_XXHASH_INCLUDE_DIR})
    target_link_libraries(idem_deps::xxhash INTERFACE ${IDEM_XXHASH_LIBRARY})
  endif()
endif()

if(IDEM_WITH_SQLITE AND NOT TARGET SQLite::SQLite3)
  find_dependency(SQLite3)
endif()
