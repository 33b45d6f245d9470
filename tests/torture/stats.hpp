// The crash torture driver's counters, kept in a file across the runs a kill cuts
// short: the "broker" cursor and what the runs saw. One pwrite() per update, so a
// SIGKILL leaves either the old or the new record.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "idem/decision.hpp"

namespace idem::torture {

struct Stats {
  std::uint64_t cursor = 0;        // the first message not acknowledged to the broker
  std::uint64_t high = 0;          // one past the last message decided in this run
  std::uint64_t starts = 0;        // runs of the driver
  std::uint64_t redeliveries = 0;  // messages delivered again because a run died
  std::uint64_t processed = 0, duplicates = 0, buffered = 0, retries = 0, other = 0;

  void count(Reason r) {
    switch (r) {
      case Reason::kProcessed:
        ++processed;
        break;
      case Reason::kDuplicate:
        ++duplicates;
        break;
      case Reason::kBuffered:
        ++buffered;
        break;
      case Reason::kHandlerFailed:
      case Reason::kInProgress:
      case Reason::kStoreUnavailable:
        ++retries;
        break;
      default:
        ++other;
    }
  }
};

class StatsFile {
 public:
  explicit StatsFile(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ >= 0 && ::pread(fd_, &stats_, sizeof stats_, 0) != sizeof stats_) stats_ = Stats{};
  }
  ~StatsFile() {
    if (fd_ >= 0) ::close(fd_);
  }
  StatsFile(const StatsFile&) = delete;
  StatsFile& operator=(const StatsFile&) = delete;

  Stats& get() { return stats_; }
  bool save() { return fd_ >= 0 && ::pwrite(fd_, &stats_, sizeof stats_, 0) == sizeof stats_; }

 private:
  int fd_;
  Stats stats_;
};

}  // namespace idem::torture
