// The host of the tests' precompiled headers (tests/CMakeLists.txt, idem_test_pch): an
// executable compiled like every test binary, so that they can reuse its headers.
#include <gtest/gtest.h>

TEST(PrecompiledHeaders, Compile) { SUCCEED(); }
