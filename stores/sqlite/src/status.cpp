// Mapping of SQLite result codes to idem Status codes.
#include <sqlite3.h>

#include <string>

#include "statement.hpp"

namespace idem::sqlite::detail {

Status sqlite_status(int rc, sqlite3* db, std::string_view what, const std::string& path) {
  std::string m = "sqlite: " + std::string(what) + " " + path + ": ";
  m += db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return unavailable(m + " (" + kBusyMarker + ", or another connection of this one, past busy_timeout; "
                             "leases=local locks the file exclusively: use leases=shared in every process that "
                             "shares the file)");
    case SQLITE_READONLY:
      return unavailable(m + " (the file or its directory is read-only; idem needs write access to the file, "
                             "its directory and its -wal file)");
    case SQLITE_NOTADB:
    case SQLITE_CORRUPT:
      return data_loss(m + " (not an SQLite database, or a corrupt one)");
    case SQLITE_FULL:
      return resource_exhausted(m + " (disk full)");
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL:
      return unavailable(m);
    case SQLITE_NOMEM:
      return resource_exhausted(m);
    default:
      return internal_error(m);
  }
}

}  // namespace idem::sqlite::detail
