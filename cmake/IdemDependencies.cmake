# Finds idem's dependencies (Debian 12 packages). Every lookup ends in a namespaced
# IMPORTED target. Also installed, for idemConfig.cmake to re-find what is enabled.
include(CMakeFindDependencyMacro)
find_package(PkgConfig QUIET)

# idem_find_library(NAME MODULE HEADER LIBRARY [SUFFIX DIR]): the IMPORTED target
# idem_deps::NAME from pkg-config's MODULE, else from find_path(HEADER) (under DIR
# when given) and find_library(LIBRARY). Does nothing if the target exists.
function(idem_find_library name module header library)
  cmake_parse_arguments(F "" "SUFFIX" "" ${ARGN})
  if(TARGET idem_deps::${name})
    return()
  endif()
  string(TOUPPER ${name} upper)
  if(PkgConfig_FOUND)
    pkg_check_modules(IDEM_${upper} QUIET IMPORTED_TARGET ${module})
  endif()
  add_library(idem_deps::${name} INTERFACE IMPORTED)
  if(TARGET PkgConfig::IDEM_${upper})
    target_link_libraries(idem_deps::${name} INTERFACE PkgConfig::IDEM_${upper})
  else()
    find_path(IDEM_${upper}_INCLUDE_DIR ${header} PATH_SUFFIXES ${F_SUFFIX} REQUIRED)
    find_library(IDEM_${upper}_LIBRARY ${library} REQUIRED)
    target_include_directories(idem_deps::${name} INTERFACE ${IDEM_${upper}_INCLUDE_DIR})
    target_link_libraries(idem_deps::${name} INTERFACE ${IDEM_${upper}_LIBRARY})
  endif()
endfunction()

if(NOT TARGET spdlog::spdlog)
  find_dependency(spdlog CONFIG)
endif()

# xxHash (libxxhash-dev).
idem_find_library(xxhash libxxhash xxhash.h xxhash)

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

# hiredict (libhiredict-dev 1.3, bookworm-backports: Debian 12's hiredis 0.14 has no
# TLS), with its TLS part: pkg-config's hiredict and hiredict_ssl. Include as
# <hiredict/hiredict.h>; OpenSSL for the verifying context idem gives it.
if(IDEM_WITH_REDIS OR IDEM_WITH_REDIS_STREAMS)
  idem_find_library(hiredict "hiredict;hiredict_ssl" hiredict/hiredict.h hiredict)
  find_dependency(OpenSSL)
endif()

# rabbitmq-c (librabbitmq-dev 0.11). Include as <amqp.h> (Debian's 0.11 has no
# <rabbitmq-c/amqp.h>).
if(IDEM_WITH_RABBITMQ)
  idem_find_library(rabbitmq librabbitmq amqp.h rabbitmq)
  find_dependency(OpenSSL)  # its TLS context, to verify an IP address and load the system's CAs
endif()

# nats.c (libnats-dev 3.4). Include as <nats/nats.h>.
if(IDEM_WITH_NATS)
  idem_find_library(nats libnats nats/nats.h nats)
endif()

# Pulsar's adapter needs Boost.Beast (its own CMakeLists finds it) and OpenSSL (wss://).
if(IDEM_WITH_PULSAR)
  find_dependency(OpenSSL)
endif()

# librdkafka (librdkafka-dev 2.0). Include as <librdkafka/rdkafka.h>.
if(IDEM_WITH_KAFKA)
  idem_find_library(rdkafka rdkafka librdkafka/rdkafka.h rdkafka)
endif()

# libpq (libpq-dev 15). Include as <libpq-fe.h>.
if(IDEM_WITH_POSTGRES)
  idem_find_library(libpq libpq libpq-fe.h pq SUFFIX postgresql)
endif()

# nlohmann-json (nlohmann-json3-dev 3.11), header-only: public in idem::json's header.
if(IDEM_WITH_JSON AND NOT TARGET nlohmann_json::nlohmann_json)
  find_dependency(nlohmann_json 3 CONFIG)
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
