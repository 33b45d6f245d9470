// `idem bench --source URI`: idem's runtime on the user's broker against the plain
// loop over the same broker and the engine without it (bench_source.cpp). Internal to
// the idem command.
#pragma once

#include <cstddef>
#include <string>

namespace idem::cli {

struct SourceBenchArgs {
  std::string source;               // the broker URI; its destinations get a suffix of their own
  std::string store = "memory:";    // the floor and idem rows' store
  std::size_t messages = 0;         // deliveries per row; 0: 20,000
  std::size_t workers = 2;          // RuntimeOptions::workers
  std::size_t batch = 100;          // RuntimeOptions::batch
  double handler_ms = 0;            // each handler call sleeps this long
  double duplicates = 0.10;         // share of deliveries that re-send an earlier id
  int repeat = 1;                   // rounds, rows interleaved; the median round is kept
};

// Runs the rows, prints the table, the BENCH lines and the ratios; returns the exit
// status (0, or 1 when a row ran a message a wrong number of times or the broker or
// store failed, 2 for invalid options).
int run_source_bench(const SourceBenchArgs& args);

}  // namespace idem::cli
