#include "support/ledger_example.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "idem/open_source.hpp"
#include "support/child_process.hpp"

namespace idem::ledger_example {
namespace {

struct Payment {
  std::string id, account;
  int version, amount;
};

// Account a (0..2) version v (1..4) pays 100 * (a + 1) + v.
std::vector<Payment> payments() {
  std::vector<Payment> out;
  for (int a = 0; a < 3; ++a)
    for (int v = 1; v <= 4; ++v)
      out.push_back({"p-" + std::to_string(a * 4 + v), "acc-" + std::to_string(a), v, 100 * (a + 1) + v});
  return out;
}

// Later versions first, and copies of three payments.
std::vector<OutgoingMessage> published() {
  const std::vector<Payment> p = payments();
  std::vector<OutgoingMessage> out;
  for (int i : {3, 1, 0, 2, 7, 6, 4, 5, 8, 11, 9, 10, 1, 6, 11}) {
    const nlohmann::json body = {{"id", p[i].id}, {"account", p[i].account}, {"version", p[i].version},
                                 {"amount", p[i].amount}};
    out.push_back({.id = p[i].id, .body = body.dump(), .key = p[i].account});
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The events on `uri`, by outgoing id, until none comes for a few seconds.
std::multiset<std::string> read_events(const std::string& uri) {
  std::multiset<std::string> ids;
  auto source = open_source(uri);
  EXPECT_TRUE(source.ok()) << source.status().to_string();
  if (!source.ok()) return ids;
  // Five quiet seconds before all have come; one after, to see any copy.
  for (int quiet = 0; quiet < (ids.size() >= 12 ? 1 : 5) && ids.size() < 20;) {
    std::vector<Delivery> got;
    EXPECT_TRUE((*source)->fetch(64, Duration(1000), got).ok());
    quiet = got.empty() ? quiet + 1 : 0;
    for (const Delivery& d : got) {
      const auto event = nlohmann::json::parse(d.body, nullptr, false);
      if (!event.is_discarded() && event.contains("payment"))
        ids.insert(event["payment"].get<std::string>() + "#0");
      EXPECT_TRUE((*source)->ack(d).ok());
    }
    EXPECT_TRUE((*source)->flush().ok());
  }
  (*source)->close();
  return ids;
}

}  // namespace

void run(const Uris& uris, const std::string& dir) {
  auto publisher = open_publisher(uris.payments_to);
  ASSERT_TRUE(publisher.ok()) << publisher.status().to_string();
  const std::vector<OutgoingMessage> messages = published();
  ASSERT_TRUE((*publisher)->publish(messages).ok());
  publisher->reset();

  const std::string log = dir + "/ledger.log";
  const pid_t pid = test_support::spawn(
      {IDEM_LEDGER_EXAMPLE, uris.payments_from, uris.events_to, dir + "/ledger.db", "1500"}, log);
  ASSERT_EQ(test_support::wait_exit(pid), 0) << read_text(log);
  const std::string out = read_text(log);
  for (int a = 0; a < 3; ++a) {
    const int balance = 4 * 100 * (a + 1) + 1 + 2 + 3 + 4;
    const std::string line = "account acc-" + std::to_string(a) + " balance " + std::to_string(balance) +
                             " versions 1,2,3,4\n";
    EXPECT_NE(out.find(line), std::string::npos) << "expected \"" << line << "\" in:\n" << out;
  }

  std::multiset<std::string> expected;
  for (const Payment& p : payments()) expected.insert(p.id + "#0");
  EXPECT_EQ(read_events(uris.events_from), expected);
}

}  // namespace idem::ledger_example
