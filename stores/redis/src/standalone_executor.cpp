#include "executor.hpp"

namespace idem::redis::detail {
namespace {

class StandaloneExecutor final : public Executor {
 public:
  StandaloneExecutor(const Options& o, const ConnectOptions& co) : pool_(o.endpoints.front(), co, o) {}

  std::vector<StatusOr<Reply>> run(std::span<const Command> cmds, int wait_replicas, Duration wait_timeout) override {
    auto conn = pool_.borrow();
    if (!conn.ok()) return std::vector<StatusOr<Reply>>(cmds.size(), StatusOr<Reply>(conn.status()));
    std::vector<const Command*> ptrs;
    ptrs.reserve(cmds.size());
    for (const Command& c : cmds) ptrs.push_back(&c);
    std::unique_ptr<bool[]> asking(new bool[cmds.size()]());
    auto out =
        send_pipeline(**conn, ptrs, std::span<const bool>(asking.get(), cmds.size()), wait_replicas, wait_timeout);
    pool_.give_back(std::move(conn).value());
    return out;
  }

  void run_encoded(EncodedPipeline& p) override {
    auto conn = pool_.borrow();
    if (!conn.ok()) {
      for (std::size_t i = 0; i < p.size(); ++i) p.fail(i, conn.status());
      return;
    }
    (*conn)->run(p);
    pool_.give_back(std::move(conn).value());
  }

  StatusOr<Reply> run_anywhere(const std::vector<std::string>& argv) override {
    auto conn = pool_.borrow();
    if (!conn.ok()) return conn.status();
    auto r = (*conn)->call(argv);
    pool_.give_back(std::move(conn).value());
    return r;
  }

  bool same_slot(const std::string&, const std::string&) const override { return true; }

 private:
  NodePool pool_;
};

}  // namespace

std::unique_ptr<Executor> make_standalone_executor(const Options& o, const ConnectOptions& co) {
  return std::make_unique<StandaloneExecutor>(o, co);
}

}  // namespace idem::redis::detail
