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

# RocksDB (librocksdb-dev): its CMake config package → RocksDB::rocksdb.
if(IDEM_WITH_ROCKSDB AND NOT TARGET RocksDB::rocksdb)
  find_dependency(RocksDB CONFIG)
endif()

# libbloom (libbloom-dev 1.6): no .pc, no CMake config → find_path/find_library,
# wrapped in idem_deps::bloom.
if(IDEM_WITH_BLOOM AND NOT TARGET idem_deps::bloom)
  find_path(IDEM_BLOOM_INCLUDE_DIR bloom.h REQUIRED)
  find_library(IDEM_BLOOM_LIBRARY bloom REQUIRED)
  add_library(idem_deps::bloom UNKNOWN IMPORTED)
  set_target_properties(idem_deps::bloom PROPERTIES
    IMPORTED_LOCATION ${IDEM_BLOOM_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${IDEM_BLOOM_INCLUDE_DIR})
endif()

# hiredis (libhiredis-dev 0.14): pkg-config (an unversioned find_package(Hiredis) fails
# on Debian), else find_path/find_library; wrapped in idem_deps::hiredis.
# Include as <hiredis/hiredis.h>.
if((IDEM_WITH_REDIS OR IDEM_WITH_REDIS_STREAMS) AND NOT TARGET idem_deps::hiredis)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_HIREDIS QUIET IMPORTED_TARGET hiredis)
  endif()
  add_library(idem_deps::hiredis INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_HIREDIS)
    target_link_libraries(idem_deps::hiredis INTERFACE PkgConfig::IDEM_HIREDIS)
  else()
    find_path(IDEM_HIREDIS_INCLUDE_DIR hiredis/hiredis.h REQUIRED)
    find_library(IDEM_HIREDIS_LIBRARY hiredis REQUIRED)
    target_include_directories(idem_deps::hiredis INTERFACE ${IDEM_HIREDIS_INCLUDE_DIR})
    target_link_libraries(idem_deps::hiredis INTERFACE ${IDEM_HIREDIS_LIBRARY})
  endif()
endif()

# rabbitmq-c (librabbitmq-dev 0.11): pkg-config, else find_path/find_library; wrapped
# in idem_deps::rabbitmq. Include as <amqp.h> (Debian's 0.11 has no <rabbitmq-c/amqp.h>).
if(IDEM_WITH_RABBITMQ AND NOT TARGET idem_deps::rabbitmq)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_RABBITMQ QUIET IMPORTED_TARGET librabbitmq)
  endif()
  add_library(idem_deps::rabbitmq INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_RABBITMQ)
    target_link_libraries(idem_deps::rabbitmq INTERFACE PkgConfig::IDEM_RABBITMQ)
  else()
    find_path(IDEM_RABBITMQ_INCLUDE_DIR amqp.h REQUIRED)
    find_library(IDEM_RABBITMQ_LIBRARY rabbitmq REQUIRED)
    target_include_directories(idem_deps::rabbitmq INTERFACE ${IDEM_RABBITMQ_INCLUDE_DIR})
    target_link_libraries(idem_deps::rabbitmq INTERFACE ${IDEM_RABBITMQ_LIBRARY})
  endif()
endif()

# nats.c (libnats-dev 3.4): pkg-config libnats, else find_path/find_library; wrapped
# in idem_deps::nats. Include as <nats/nats.h>.
if(IDEM_WITH_NATS AND NOT TARGET idem_deps::nats)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_NATS QUIET IMPORTED_TARGET libnats)
  endif()
  add_library(idem_deps::nats INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_NATS)
    target_link_libraries(idem_deps::nats INTERFACE PkgConfig::IDEM_NATS)
  else()
    find_path(IDEM_NATS_INCLUDE_DIR nats/nats.h REQUIRED)
    find_library(IDEM_NATS_LIBRARY nats REQUIRED)
    target_include_directories(idem_deps::nats INTERFACE ${IDEM_NATS_INCLUDE_DIR})
    target_link_libraries(idem_deps::nats INTERFACE ${IDEM_NATS_LIBRARY})
  endif()
endif()

# librdkafka (librdkafka-dev 2.0): pkg-config `rdkafka`, else find_path/find_library;
# wrapped in idem_deps::rdkafka. Include as <librdkafka/rdkafka.h>.
if(IDEM_WITH_KAFKA AND NOT TARGET idem_deps::rdkafka)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_RDKAFKA QUIET IMPORTED_TARGET rdkafka)
  endif()
  add_library(idem_deps::rdkafka INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_RDKAFKA)
    target_link_libraries(idem_deps::rdkafka INTERFACE PkgConfig::IDEM_RDKAFKA)
  else()
    find_path(IDEM_RDKAFKA_INCLUDE_DIR librdkafka/rdkafka.h REQUIRED)
    find_library(IDEM_RDKAFKA_LIBRARY rdkafka REQUIRED)
    target_include_directories(idem_deps::rdkafka INTERFACE ${IDEM_RDKAFKA_INCLUDE_DIR})
    target_link_libraries(idem_deps::rdkafka INTERFACE ${IDEM_RDKAFKA_LIBRARY})
  endif()
endif()

# libpq (libpq-dev 15): pkg-config, else find_path/find_library; wrapped in
# idem_deps::libpq. Include as <libpq-fe.h>.
if(IDEM_WITH_POSTGRES AND NOT TARGET idem_deps::libpq)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_LIBPQ QUIET IMPORTED_TARGET libpq)
  endif()
  add_library(idem_deps::libpq INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_LIBPQ)
    target_link_libraries(idem_deps::libpq INTERFACE PkgConfig::IDEM_LIBPQ)
  else()
    find_path(IDEM_LIBPQ_INCLUDE_DIR libpq-fe.h PATH_SUFFIXES postgresql REQUIRED)
    find_library(IDEM_LIBPQ_LIBRARY pq REQUIRED)
    target_include_directories(idem_deps::libpq INTERFACE ${IDEM_LIBPQ_INCLUDE_DIR})
    target_link_libraries(idem_deps::libpq INTERFACE ${IDEM_LIBPQ_LIBRARY})
  endif()
endif()

# yaml-cpp (libyaml-cpp-dev 0.7): its CMake config package defines the unnamespaced
# target `yaml-cpp` (0.8 and later: yaml-cpp::yaml-cpp); wrapped in idem_deps::yaml_cpp.
if(IDEM_WITH_STATEMACHINE AND NOT TARGET idem_deps::yaml_cpp)
  find_dependency(yaml-cpp CONFIG)
  add_library(idem_deps::yaml_cpp INTERFACE IMPORTED)
  if(TARGET yaml-cpp::yaml-cpp)
    target_link_libraries(idem_deps::yaml_cpp INTERFACE yaml-cpp::yaml-cpp)
  else()
    target_link_libraries(idem_deps::yaml_cpp INTERFACE yaml-cpp)
  endif()
endif()
