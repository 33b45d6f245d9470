// Runs examples/ledger against a real broker: the test every adapter's suite shares.
#pragma once

#include <string>

namespace idem::ledger_example {

// The four URIs of one run: where payments are published and consumed from, where
// the example sends its events, and where the test reads them back.
struct Uris {
  std::string payments_to;    // a publisher URI
  std::string payments_from;  // the source URI the example consumes
  std::string events_to;      // the example's events destination
  std::string events_from;    // a source URI over that destination, for the check
};

// Publishes 12 payments over 3 accounts, with later versions first and 3 copies,
// runs the example in `dir` until it is idle, and checks through gtest assertions:
// exit status 0, each account's balance and versions 1,2,3,4 in that order, and one
// event per payment read back from events_from (ids "p-N#0"), none twice.
void run(const Uris& uris, const std::string& dir);

}  // namespace idem::ledger_example
