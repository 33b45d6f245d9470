// Passwords in store URIs are never printed: redact_uri / scrub_secrets, and the idem
// command's error lines.
#include <gtest/gtest.h>

#include <string>

#include "cli/cli_store.hpp"
#include "store_uri_secret.hpp"

namespace idem::cli {
namespace {

TEST(UriSecret, ThePasswordOfTheUserPartIsHidden) {
  EXPECT_EQ(redact_uri("redis://:secret@host:6379/0"), "redis://:***@host:6379/0");
  EXPECT_EQ(redact_uri("redis://alice:secret@host:6379?prefix=a@b"), "redis://alice:***@host:6379?prefix=a@b");
  EXPECT_EQ(redact_uri("redis://secret@host:6379"), "redis://***@host:6379");
  EXPECT_EQ(redact_uri("redis://alice:p@ss@host:1,other:2"), "redis://alice:***@host:1,other:2");
  EXPECT_EQ(redact_uri("redis://host:6379"), "redis://host:6379");
  EXPECT_EQ(redact_uri("sqlite:/data/a@b.db"), "sqlite:/data/a@b.db") << "a path has no user part";
}

TEST(UriSecret, MessagesLoseTheUriPasswordAsWrittenAndDecoded) {
  const std::string uri = "redis://alice:s%65cret@host:6379";
  EXPECT_EQ(scrub_secrets("cannot open " + uri + ": AUTH secret refused", uri),
            "cannot open redis://alice:***@host:6379: AUTH *** refused");
  EXPECT_EQ(scrub_secrets("no secret here", "redis://host:1"), "no secret here");
}

#ifdef IDEM_CLI_WITH_REDIS
TEST(UriSecret, TheCommandsNeverPrintAPassword) {
  using testing::run_idem;
  // Nothing listens on port 1: every command fails to connect and says so.
  for (const std::string uri : {"redis://:hunter2@127.0.0.1:1", "redis://alice:hunter2@127.0.0.1:1/0",
                                "redis://hunter2@127.0.0.1:1", "redis://:hunt%65r2@127.0.0.1:1"}) {
    for (const testing::Lines& args :
         {testing::Lines{"inspect", "--store", uri}, testing::Lines{"inspect", "--store", uri, "--id", "x"},
          testing::Lines{"purge", "--store", uri, "--expired"}, testing::Lines{"replay", "--store", uri}}) {
      const testing::RunResult r = run_idem(args);
      EXPECT_EQ(r.exit_code, 1) << uri << ": " << r.err;
      EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
      EXPECT_EQ(r.err.find("hunt%65r2"), std::string::npos) << r.err;
      EXPECT_EQ(r.out.find("hunter2"), std::string::npos) << r.out;
    }
  }
}
#endif

}  // namespace
}  // namespace idem::cli
