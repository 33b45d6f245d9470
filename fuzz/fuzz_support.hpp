// Shared by the fuzz targets (docs/reliability.md): an invariant that must hold for every
// input. A broken invariant aborts, so libFuzzer (and the corpus replay in the test
// suite) report it as a crash with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>

#define IDEM_FUZZ_CHECK(cond)                                                                \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: fuzz invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                          \
    }                                                                                        \
  } while (0)
