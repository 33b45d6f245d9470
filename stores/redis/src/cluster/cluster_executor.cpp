#include "cluster/cluster_executor.hpp"

#include <charconv>
#include <map>
#include <mutex>
#include <numeric>
#include <shared_mutex>
#include <thread>

#include "cluster/key_slot.hpp"
#include "cluster/slot_map.hpp"

namespace idem::redis::detail {

std::optional<Redirect> parse_redirect(const std::string& error, const Endpoint& from) {
  // <CODE> <slot> <host>:<port>
  const auto sp1 = error.find(' ');
  if (sp1 == std::string::npos) return std::nullopt;
  const auto sp2 = error.find(' ', sp1 + 1);
  if (sp2 == std::string::npos) return std::nullopt;
  const std::string slot = error.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string addr = error.substr(sp2 + 1);
  const auto colon = addr.rfind(':');
  if (colon == std::string::npos) return std::nullopt;
  Redirect r;
  unsigned port = 0;
  if (std::from_chars(slot.data(), slot.data() + slot.size(), r.slot).ec != std::errc{} || r.slot < 0 ||
      r.slot >= kSlotCount)
    return std::nullopt;
  const std::string p = addr.substr(colon + 1);
  if (std::from_chars(p.data(), p.data() + p.size(), port).ec != std::errc{} || port == 0 || port > 65535)
    return std::nullopt;
  r.to.host = addr.substr(0, colon);
  if (r.to.host.empty()) r.to.host = from.host;
  r.to.port = static_cast<std::uint16_t>(port);
  return r;
}

namespace {

class ClusterExecutor final : public Executor {
 public:
  ClusterExecutor(const Options& o, const ConnectOptions& co) : o_(o), co_(co) {}

  Status init() { return refresh(std::nullopt, 0); }

  std::vector<StatusOr<Reply>> run(std::span<const Command> cmds, int wait_replicas, Duration wait_timeout) override {
    const std::size_t n = cmds.size();
    std::vector<StatusOr<Reply>> out(n, StatusOr<Reply>(unavailable("redis cluster: not run")));
    std::vector<std::optional<Endpoint>> ask(n);
    std::vector<int> redirects(n, 0);
    std::vector<std::size_t> todo(n);
    for (std::size_t i = 0; i < n; ++i) todo[i] = i;
    int pauses = 0;
    while (!todo.empty()) {
      const std::uint64_t gen = generation();
      auto map = current();
      // Route: one group per node.
      struct Group {
        std::shared_ptr<NodePool> pool;
        std::unique_ptr<Connection> conn;
        std::vector<std::size_t> idx;
        std::vector<const Command*> cmds;
        std::unique_ptr<bool[]> asking;
      };
      std::map<std::string, Group> groups;
      std::vector<std::size_t> retry;
      bool need_refresh = false;
      bool need_pause = false;
      for (std::size_t i : todo) {
        std::optional<Endpoint> to = ask[i];
        if (!to) {
          const std::string* key = cmds[i].routing_key();
          to = key ? map->master_of(key_slot(*key)) : (map->nodes().empty() ? std::nullopt : std::optional(map->nodes().front()));
        }
        if (!to) {
          out[i] = unavailable("redis cluster: no node serves the slot of this key");
          retry.push_back(i);
          need_refresh = need_pause = true;
          continue;
        }
        Group& g = groups[to_string(*to)];
        if (!g.pool) g.pool = pool_for(*to);
        g.idx.push_back(i);
        g.cmds.push_back(&cmds[i]);
      }
      // Send to every node, then read every node.
      for (auto& [addr, g] : groups) {
        g.asking.reset(new bool[g.idx.size()]());
        for (std::size_t k = 0; k < g.idx.size(); ++k) g.asking[k] = ask[g.idx[k]].has_value();
        auto c = g.pool->borrow();
        if (!c.ok()) {
          for (std::size_t i : g.idx) {
            out[i] = c.status();
            retry.push_back(i);  // nothing was sent: safe to retry
          }
          need_refresh = need_pause = true;
          continue;
        }
        g.conn = std::move(c).value();
        queue_pipeline(*g.conn, g.cmds, std::span<const bool>(g.asking.get(), g.idx.size()), wait_replicas,
                       wait_timeout);
        g.conn->flush();
      }
      std::optional<Endpoint> hint;
      for (auto& [addr, g] : groups) {
        if (!g.conn) continue;
        auto replies = collect_pipeline(*g.conn, g.cmds, std::span<const bool>(g.asking.get(), g.idx.size()),
                                        wait_replicas, wait_timeout);
        if (g.conn->broken()) need_refresh = true;
        const Endpoint from = g.conn->endpoint();
        g.pool->give_back(std::move(g.conn));
        for (std::size_t k = 0; k < g.idx.size(); ++k) {
          const std::size_t i = g.idx[k];
          ask[i].reset();
          StatusOr<Reply>& r = replies[k];
          if (r.ok() && (r->error_is("MOVED") || r->error_is("ASK"))) {
            auto redirect = parse_redirect(r->str, from);
            if (redirect && ++redirects[i] <= o_.max_redirects) {
              if (r->error_is("ASK")) {
                ask[i] = redirect->to;
              } else {
                need_refresh = true;
                hint = redirect->to;
              }
              retry.push_back(i);
              out[i] = std::move(r);
              continue;
            }
          } else if (r.ok() && (r->error_is("TRYAGAIN") || r->error_is("CLUSTERDOWN"))) {
            need_pause = true;
            if (r->error_is("CLUSTERDOWN")) need_refresh = true;
            retry.push_back(i);
            out[i] = std::move(r);
            continue;
          }
          out[i] = std::move(r);
        }
      }
      if (retry.empty()) break;
      if (need_pause) {
        if (++pauses > o_.cluster_retries) break;
        std::this_thread::sleep_for(o_.cluster_retry_delay);
      }
      if (need_refresh) (void)refresh(hint, gen);
      todo = std::move(retry);
    }
    return out;
  }

  // As run(), for commands that encode themselves: one round per retry, each sending
  // to every node before reading any.
  void run_encoded(EncodedPipeline& p) override {
    EncodedState st(p.size());
    std::vector<std::size_t> todo(p.size());
    std::iota(todo.begin(), todo.end(), std::size_t{0});
    int pauses = 0;
    while (!todo.empty()) {
      Round r = encoded_round(p, todo, st);
      todo = std::move(r.retry);
      if (todo.empty() || (r.pause && ++pauses > o_.cluster_retries)) break;
      if (r.pause) std::this_thread::sleep_for(o_.cluster_retry_delay);
      if (r.refresh) (void)refresh(r.hint, r.generation);
    }
    for (std::size_t i : todo) p.fail(i, st.why[i]);
  }

  StatusOr<Reply> run_anywhere(const std::vector<std::string>& argv) override {
    Status last = unavailable("redis cluster: no node known");
    for (const Endpoint& e : candidates(std::nullopt)) {
      auto pool = pool_for(e);
      auto c = pool->borrow();
      if (!c.ok()) {
        last = c.status();
        continue;
      }
      auto r = (*c)->call(argv);
      pool->give_back(std::move(c).value());
      if (r.ok()) return r;
      last = r.status();
    }
    return last;
  }

  bool same_slot(const std::string& a, const std::string& b) const override { return key_slot(a) == key_slot(b); }

 private:
  // Per command of one run_encoded call: where its next try goes, and why it was held
  // back (its Status if the retries run out).
  struct EncodedState {
    explicit EncodedState(std::size_t n)
        : ask(n), eval(n, false), redirects(n, 0), why(n, unavailable("redis cluster: not run")) {}
    std::vector<std::optional<Endpoint>> ask;
    std::vector<bool> eval;  // the node answered NOSCRIPT: send the body
    std::vector<int> redirects;
    std::vector<Status> why;
  };
  // What one round leaves to the next.
  struct Round {
    std::uint64_t generation = 0;  // of the slot map the round routed by
    std::vector<std::size_t> retry;
    bool refresh = false;
    bool pause = false;
    std::optional<Endpoint> hint;  // where a MOVED pointed
  };
  struct NodeBatch {
    std::shared_ptr<NodePool> pool;
    std::unique_ptr<Connection> conn;
    std::vector<Encoded> cmds;
  };

  // Sends the commands todo of p to their nodes, then reads every node.
  Round encoded_round(EncodedPipeline& p, const std::vector<std::size_t>& todo, EncodedState& st) {
    Round out;
    out.generation = generation();
    const auto map = current();
    std::map<std::string, NodeBatch> nodes;
    for (std::size_t i : todo) {
      std::optional<Endpoint> to = st.ask[i] ? st.ask[i] : map->master_of(key_slot(p.key(i)));
      if (!to) {
        hold(i, unavailable("redis cluster: no node serves the slot of this key"), st, out);
        out.refresh = out.pause = true;
        continue;
      }
      NodeBatch& node = nodes[to_string(*to)];
      if (!node.pool) node.pool = pool_for(*to);
      node.cmds.push_back({i, st.eval[i], st.ask[i].has_value()});
      st.ask[i].reset();
    }
    for (auto& [addr, node] : nodes) {
      auto c = node.pool->borrow();
      if (!c.ok()) {
        for (const Encoded& e : node.cmds) hold(e.index, c.status(), st, out);  // nothing sent: safe to retry
        out.refresh = out.pause = true;
        continue;
      }
      node.conn = std::move(c).value();
      node.conn->send(p, node.cmds);
    }
    for (auto& [addr, node] : nodes) {
      if (node.conn) collect_encoded(p, node, st, out);
    }
    return out;
  }

  // Reads node's replies; a command whose reply was lost is never retried (it may
  // have run).
  void collect_encoded(EncodedPipeline& p, NodeBatch& node, EncodedState& st, Round& out) {
    const Endpoint from = node.conn->endpoint();
    const std::size_t read = node.conn->receive(node.cmds, [&](std::size_t k, const ReplyView& r) {
      encoded_reply(p, node.cmds[k].index, r, from, st, out);
    });
    if (read < node.cmds.size()) {
      const Status lost = unavailable("redis: connection to " + to_string(from) + " lost before the reply");
      for (std::size_t k = read; k < node.cmds.size(); ++k) p.fail(node.cmds[k].index, lost);
      out.refresh = true;
    }
    node.pool->give_back(std::move(node.conn));
  }

  // Hands command i's reply to p, or holds i for another round (a redirection, a
  // slot in migration, a script the node did not know).
  void encoded_reply(EncodedPipeline& p, std::size_t i, const ReplyView& r, const Endpoint& from, EncodedState& st,
                     Round& out) {
    if (r.error_is("NOSCRIPT") && !st.eval[i]) {
      st.eval[i] = true;
      hold(i, unavailable("redis cluster: NOSCRIPT"), st, out);
      return;
    }
    if (r.error_is("MOVED") || r.error_is("ASK")) {
      auto redirect = parse_redirect(std::string(r.str()), from);
      if (redirect && ++st.redirects[i] <= o_.max_redirects) {
        if (r.error_is("ASK")) {
          st.ask[i] = redirect->to;
        } else {
          out.refresh = true;
          out.hint = redirect->to;
        }
        hold(i, unavailable("redis cluster: " + std::string(r.str())), st, out);
        return;
      }
    } else if (r.error_is("TRYAGAIN") || r.error_is("CLUSTERDOWN")) {
      out.pause = true;
      out.refresh = out.refresh || r.error_is("CLUSTERDOWN");
      hold(i, unavailable("redis cluster: " + std::string(r.str())), st, out);
      return;
    }
    p.take(i, r);
  }

  static void hold(std::size_t i, Status why, EncodedState& st, Round& out) {
    st.why[i] = std::move(why);
    out.retry.push_back(i);
  }

  std::shared_ptr<const SlotMap> current() const {
    std::shared_lock lock(map_mu_);
    return map_;
  }
  std::uint64_t generation() const {
    std::shared_lock lock(map_mu_);
    return generation_;
  }

  std::vector<Endpoint> candidates(const std::optional<Endpoint>& hint) const {
    std::vector<Endpoint> out;
    if (hint) out.push_back(*hint);
    if (auto m = current()) out.insert(out.end(), m->nodes().begin(), m->nodes().end());
    out.insert(out.end(), o_.endpoints.begin(), o_.endpoints.end());
    return out;
  }

  // Reads CLUSTER SLOTS from the first node that answers (hint first) unless another
  // thread refreshed since generation `seen` (0: always).
  Status refresh(const std::optional<Endpoint>& hint, std::uint64_t seen) {
    std::lock_guard refreshing(refresh_mu_);
    if (seen != 0 && generation() != seen) return ok_status();
    Status last = unavailable("redis cluster: no node to read the slot map from");
    for (const Endpoint& e : candidates(hint)) {
      auto pool = pool_for(e);
      auto c = pool->borrow();
      if (!c.ok()) {
        last = c.status();
        if (last.code() == StatusCode::kInvalidArgument) return last;
        continue;
      }
      auto r = (*c)->call({"CLUSTER", "SLOTS"});
      pool->give_back(std::move(c).value());
      if (!r.ok()) {
        last = r.status();
        continue;
      }
      if (r->is_error()) {
        last = unavailable("redis cluster: CLUSTER SLOTS at " + to_string(e) + ": " + r->str);
        continue;
      }
      auto m = SlotMap::parse(*r, e);
      if (!m.ok()) {
        last = m.status();
        continue;
      }
      if (m->covered() == 0) {
        last = unavailable("redis cluster: " + to_string(e) + " knows no slots");
        continue;
      }
      std::unique_lock lock(map_mu_);
      map_ = std::make_shared<const SlotMap>(std::move(m).value());
      ++generation_;
      return ok_status();
    }
    return last;
  }

  std::shared_ptr<NodePool> pool_for(const Endpoint& e) {
    std::lock_guard lock(pools_mu_);
    auto& p = pools_[to_string(e)];
    if (!p) p = std::make_shared<NodePool>(e, co_, o_);
    return p;
  }

  const Options o_;
  const ConnectOptions co_;
  mutable std::shared_mutex map_mu_;
  std::shared_ptr<const SlotMap> map_;
  std::uint64_t generation_ = 1;
  std::mutex refresh_mu_;
  std::mutex pools_mu_;
  std::map<std::string, std::shared_ptr<NodePool>> pools_;
};

}  // namespace

StatusOr<std::unique_ptr<Executor>> make_cluster_executor(const Options& o, const ConnectOptions& co) {
  auto e = std::make_unique<ClusterExecutor>(o, co);
  if (Status s = e->init(); !s.ok()) return s;
  return std::unique_ptr<Executor>(std::move(e));
}

}  // namespace idem::redis::detail
