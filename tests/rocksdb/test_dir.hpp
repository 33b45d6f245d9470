// Test helpers: a temporary directory, and raw RocksDB reads that bypass idem.
#pragma once

#include <rocksdb/db.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace idem::testing {

// TempDir (tests/support/temp_dir.hpp) names its directories idem-rocksdb-<tag>-…

// Every key → value of column family `cf` of the database at `path`, read-only.
// Empty if the database or the column family does not exist.
inline std::map<std::string, std::string> raw_read_all(const std::string& path, const std::string& cf) {
  std::map<std::string, std::string> out;
  std::vector<std::string> names;
  if (!::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok()) return out;
  std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, ::rocksdb::ColumnFamilyOptions());
  std::vector<::rocksdb::ColumnFamilyHandle*> handles;
  ::rocksdb::DB* db = nullptr;
  if (!::rocksdb::DB::OpenForReadOnly(::rocksdb::DBOptions(), path, descs, &handles, &db).ok()) return out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] != cf) continue;
    std::unique_ptr<::rocksdb::Iterator> it(db->NewIterator(::rocksdb::ReadOptions(), handles[i]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) out[it->key().ToString()] = it->value().ToString();
  }
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  delete db;
  return out;
}

// Opens the database at `path` read-write with RocksDB itself (every column family),
// calls f(db, column family name → handle), and closes it. Returns false (without
// calling f) if it cannot be opened.
template <class F>
bool with_raw_db(const std::string& path, F&& f) {
  std::vector<std::string> names;
  if (!::rocksdb::DB::ListColumnFamilies(::rocksdb::DBOptions(), path, &names).ok()) return false;
  std::vector<::rocksdb::ColumnFamilyDescriptor> descs;
  for (const auto& n : names) descs.emplace_back(n, ::rocksdb::ColumnFamilyOptions());
  std::vector<::rocksdb::ColumnFamilyHandle*> handles;
  ::rocksdb::DB* db = nullptr;
  if (!::rocksdb::DB::Open(::rocksdb::DBOptions(), path, descs, &handles, &db).ok()) return false;
  std::map<std::string, ::rocksdb::ColumnFamilyHandle*> by_name;
  for (std::size_t i = 0; i < names.size(); ++i) by_name[names[i]] = handles[i];
  f(*db, by_name);
  for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
  delete db;
  return true;
}

}  // namespace idem::testing
