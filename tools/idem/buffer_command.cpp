// `idem buffer show --store URI KEY`: the entity record of a key and its reorder buffer
// (strict ordering), as JSON lines; `idem buffer list --store URI`: the keys with
// buffered messages, oldest gap first.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "idem/open_store.hpp"

namespace idem::cli {
namespace {

using Json = nlohmann::json;

struct BufferArgs {
  std::string store;
  std::string key;
  std::size_t limit = 100;
};

// Bytes as a JSON string: valid UTF-8 as is, anything else replaced (U+FFFD).
std::string text(std::string_view bytes) {
  return Json(std::string(bytes)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

StatusOr<std::shared_ptr<Store>> open_for_tool(const std::string& uri) {
  auto store = open_store(uri);
  if (!store.ok()) return store.status();
  if (!(*store)->capabilities().entities)
    return invalid_argument("store \"" + uri + "\" keeps no entity records or reorder buffer");
  return store;
}

int fail(const Status& s) {
  std::cerr << "idem buffer: " << s.to_string() << '\n';
  return s.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure;
}

int show(const BufferArgs& a) {
  auto store = open_for_tool(a.store);
  if (!store.ok()) return fail(store.status());
  auto entity = (*store)->read_entity(a.key);
  if (!entity.ok()) return fail(entity.status());
  std::cout << R"({"type":"entity","key":)" << text(a.key) << R"(,"revision":)" << entity->revision << R"(,"version":)"
            << entity->version;
  if (!entity->state.empty()) std::cout << R"(,"state":)" << text(entity->state);
  std::cout << "}\n";
  auto entries = (*store)->buffer_read(a.key, a.limit);
  if (!entries.ok()) return fail(entries.status());
  for (const BufferEntry& e : *entries) {
    std::cout << R"({"type":"buffered","version":)" << e.version << R"(,"id":)" << text(e.id) << R"(,"buffered_at_ms":)"
              << to_unix_ms(e.buffered_at) << R"(,"bytes":)" << e.bytes() << "}\n";
  }
  return kExitOk;
}

int list(const BufferArgs& a) {
  auto store = open_for_tool(a.store);
  if (!store.ok()) return fail(store.status());
  auto summary = (*store)->buffer_summary(a.limit);
  if (!summary.ok()) return fail(summary.status());
  std::cout << R"({"type":"buffer","count":)" << summary->count << R"(,"bytes":)" << summary->bytes << "}\n";
  for (const BufferedKey& k : summary->keys) {
    std::cout << R"({"type":"key","key":)" << text(k.key) << R"(,"count":)" << k.count << R"(,"lowest_version":)"
              << k.lowest_version << R"(,"oldest_at_ms":)" << to_unix_ms(k.oldest_at) << "}\n";
  }
  return kExitOk;
}

}  // namespace

void add_buffer_command(CLI::App& app, Runner& selected) {
  CLI::App* cmd = app.add_subcommand("buffer", "Show the reorder buffer of a store (strict ordering)");
  cmd->require_subcommand(1);
  auto a = std::make_shared<BufferArgs>();
  CLI::App* show_cmd = cmd->add_subcommand("show", "Print a key's entity record and buffered messages as JSON lines");
  show_cmd->add_option("--store", a->store, "Store URI (sqlite:PATH, rocksdb:PATH, redis://…)")->required();
  show_cmd->add_option("key", a->key, "The entity key")->required();
  show_cmd->add_option("--limit", a->limit, "At most this many buffered messages")->capture_default_str();
  show_cmd->callback([&selected, a] { selected = [a] { return show(*a); }; });
  CLI::App* list_cmd = cmd->add_subcommand("list", "Print the buffer's totals and its keys, oldest gap first");
  list_cmd->add_option("--store", a->store, "Store URI (sqlite:PATH, rocksdb:PATH, redis://…)")->required();
  list_cmd->add_option("--limit", a->limit, "At most this many keys")->capture_default_str();
  list_cmd->callback([&selected, a] { selected = [a] { return list(*a); }; });
}

}  // namespace idem::cli
