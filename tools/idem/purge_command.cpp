// `idem purge --store URI (--expired | --id ID | --key KEY) [--yes] [--json]`: removes
// expired records, or one record or one entity (docs/design.md §8).
#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "operator_session.hpp"

namespace idem::cli {
namespace {

constexpr const char* kFooter =
    "--expired removes the records expired at --at-ms (default: now), --batch at a time, and prints how\n"
    "many it removed; it runs at once (an expired record is already absent to every consumer).\n"
    "--id and --key print what they would remove and remove it only with --yes. Removing an id makes a\n"
    "redelivery of it new again; removing a key resets its ordering and state (the next version is its\n"
    "first). Not every store can remove one id or key: those answer \"not supported by this store\".\n"
    "Exit status: 0 done (or shown); 1 the store failed or cannot do it; 2 invalid options or store URI;\n"
    "3 no such id or key.";

// The buffered messages a dry run of --key lists at most (all of them are removed).
constexpr std::size_t kShownBuffered = 1000;

struct PurgeArgs {
  OperatorArgs common;
  bool expired = false;
  std::optional<std::string> id;
  std::optional<std::string> key;
  bool yes = false;
  std::size_t batch = 1000;
  std::uint64_t max_steps = 1'000'000;
};

// Runs purge_expired(now, batch) until the records expired at the start are gone (a
// store that counts them), or until a step removes none (one that does not).
class ExpiredPurge {
 public:
  ExpiredPurge(OperatorSession& s, const PurgeArgs& a) : s_(s), a_(a) {}

  int run() {
    auto admin = s_.admin("counting records");
    auto counts = admin.ok() ? (*admin)->count_records(s_.now()) : StatusOr<RecordCounts>(admin.status());
    if (counts.ok()) {
      expected_ = counts->expired;
      expired_before_ = counts->expired;
    } else if (counts.status().code() != StatusCode::kUnimplemented) {
      return s_.fail(counts.status());  // the store failed, rather than cannot count
    }
    while (steps_ < a_.max_steps && !done()) {
      auto n = s_.store().purge_expired(s_.now(), a_.batch);
      if (!n.ok()) {
        print();
        return s_.fail(n.status());
      }
      ++steps_;
      removed_ += *n;
      last_ = *n;
      zero_run_ = *n == 0 ? zero_run_ + 1 : 0;
      // Steps that remove none are scanning live records (or another process took
      // some expired ids meanwhile): recount now and then, so as not to wait for
      // records that are gone.
      if (expected_ && zero_run_ > 0 && (zero_run_ & (zero_run_ - 1)) == 0) {
        auto left = (*admin)->count_records(s_.now());
        if (!left.ok()) {
          print();
          return s_.fail(left.status());
        }
        expected_ = removed_ + left->expired;
      }
    }
    print();
    return kExitOk;
  }

 private:
  bool done() const {
    if (steps_ == 0) return false;
    if (expected_) return removed_ >= *expected_;
    return last_ == 0;
  }

  void print() const {
    if (s_.json()) {
      std::cout << R"({"type":"purge","removed":)" << removed_ << R"(,"steps":)" << steps_;
      if (expired_before_) std::cout << R"(,"expired_before":)" << *expired_before_;
      std::cout << "}\n";
      return;
    }
    std::cout << "removed " << removed_ << " expired record" << (removed_ == 1 ? "" : "s") << " in " << steps_
              << " step" << (steps_ == 1 ? "" : "s") << " of at most " << a_.batch << '\n';
    if (s_.store().capabilities().native_ttl)
      std::cout << "this store expires its records by itself: there is nothing to purge\n";
    else if (!expected_)
      std::cout << "this store cannot count its expired records: stopped at the first step that removed none\n";
    else if (removed_ < *expected_)
      std::cout << "stopped after " << steps_ << " steps (--max-steps) with " << (*expected_ - removed_)
                << " expired records left\n";
  }

  OperatorSession& s_;
  const PurgeArgs& a_;
  std::optional<std::size_t> expired_before_;  // records expired at now, if the store counts them
  std::optional<std::size_t> expected_;        // the records this run removes: as counted, then recounted
  std::uint64_t steps_ = 0;
  std::size_t removed_ = 0;
  std::size_t last_ = 0;        // removed by the last step
  std::uint64_t zero_run_ = 0;  // steps in a row that removed none
};

void print_removal(OperatorSession& s, std::string_view what, std::string_view name, bool removed) {
  if (s.json())
    std::cout << R"({"type":"removed",")" << what << R"(":)" << json_text(name) << R"(,"removed":)"
              << (removed ? "true" : "false") << "}\n";
  else
    std::cout << (removed ? "removed " : "nothing left to remove for ") << what << ' ' << json_text(name) << '\n';
}

void print_dry_run(OperatorSession& s, std::string_view what) {
  if (s.json())
    std::cout << R"({"type":"dry_run","removed":false})" << '\n';
  else
    std::cout << "dry run: nothing removed; run again with --yes to remove this " << what << '\n';
}

int purge_id(OperatorSession& s, const std::string& id, bool yes) {
  auto info = s.store().inspect(id, s.now());
  if (!info.ok()) return s.fail(info.status());
  if (!info->has_value())
    return s.fail(kExitNotFound, "no live record for id " + json_text(id) + " at " + iso_time(s.now()));
  print_record(std::cout, s.json(), id, **info, s.now());
  if (!yes) {
    print_dry_run(s, "record");
    return kExitOk;
  }
  auto admin = s.admin("removing one record");
  if (!admin.ok()) return s.fail(admin.status());
  auto removed = (*admin)->remove_record(id, s.now());
  if (!removed.ok()) return s.fail(removed.status());
  print_removal(s, "id", id, *removed);
  return kExitOk;
}

int purge_key(OperatorSession& s, const std::string& key, bool yes) {
  auto admin = s.admin("removing one entity");
  if (!admin.ok()) return s.fail(admin.status());
  auto entities = s.entities("removing one entity");
  if (!entities.ok()) return s.fail(entities.status());
  auto entity = (*entities)->read_entity(key);
  if (!entity.ok()) return s.fail(entity.status());
  auto buffered = (*entities)->buffer_read(key, kShownBuffered + 1);
  if (!buffered.ok()) return s.fail(buffered.status());
  if (entity->revision == 0 && buffered->empty())
    return s.fail(kExitNotFound, "key " + json_text(key) + " has no entity record and nothing buffered");
  const bool more = buffered->size() > kShownBuffered;
  if (more) buffered->resize(kShownBuffered);
  print_entity(std::cout, s.json(), key, *entity, *buffered, s.now());
  if (more) {
    if (s.json())
      std::cout << R"({"type":"more_buffered"})" << '\n';
    else
      std::cout << "  … and more buffered messages, not shown\n";
  }
  if (!yes) {
    print_dry_run(s, "entity record and its buffered messages");
    return kExitOk;
  }
  auto removed = (*admin)->remove_entity(key);
  if (!removed.ok()) return s.fail(removed.status());
  print_removal(s, "key", key, *removed);
  return kExitOk;
}

int run_purge(const PurgeArgs& a) {
  OperatorSession s("idem purge", a.common);
  const int chosen = (a.expired ? 1 : 0) + (a.id ? 1 : 0) + (a.key ? 1 : 0);
  if (chosen != 1) return s.fail(kExitUsage, "give exactly one of --expired, --id, --key (see idem purge --help)");
  if ((a.id && a.id->empty()) || (a.key && a.key->empty()))
    return s.fail(kExitUsage, "--id and --key must not be empty");
  if (int rc = s.open(); rc != kExitOk) return rc;
  if (a.expired) return ExpiredPurge(s, a).run();
  if (a.id) return purge_id(s, *a.id, a.yes);
  return purge_key(s, *a.key, a.yes);
}

}  // namespace

void add_purge_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("purge", "Remove expired records, or one record or entity");
  cmd->footer(kFooter);
  auto a = std::make_shared<PurgeArgs>();
  add_operator_options(*cmd, a->common);
  cmd->add_flag("--expired", a->expired, "Remove every record expired at --at-ms (default: now)");
  cmd->add_option("--id", a->id, "Remove the record of this message id (with --yes)");
  cmd->add_option("--key", a->key, "Remove this entity key's record and buffered messages (with --yes)");
  cmd->add_flag("--yes", a->yes, "Remove what --id or --key names; without it, only print it");
  cmd->add_option("--batch", a->batch, "--expired: records removed per step (one bounded store call)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-steps", a->max_steps, "--expired: at most this many steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->callback([&selected, a] { selected = [a] { return run_purge(*a); }; });
}

}  // namespace idem::cli
