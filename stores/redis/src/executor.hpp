// Runs commands against a standalone server or a cluster. The store above it knows
// nothing about nodes, slots or redirections.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "command.hpp"
#include "connection.hpp"
#include "reply.hpp"

namespace idem::redis::detail {

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs cmds in one round trip per node involved (the nodes in parallel); replies in
  // input order. A command that could not be run is kUnavailable. With
  // wait_replicas > 0, a WAIT follows the commands on each node and every reply
  // carries replicas_acked. Thread-safe.
  virtual std::vector<StatusOr<Reply>> run(std::span<const Command> cmds, int wait_replicas, Duration wait_timeout) = 0;
  // As run(), without WAIT, for commands that encode themselves: p.take() or p.fail()
  // is called once per command. Thread-safe.
  virtual void run_encoded(EncodedPipeline& p) = 0;
  // Runs one keyless command on some reachable node.
  virtual StatusOr<Reply> run_anywhere(const std::vector<std::string>& argv) = 0;
  // True iff one script may touch both keys.
  virtual bool same_slot(const std::string& a, const std::string& b) const = 0;
};

// One server, one pool.
std::unique_ptr<Executor> make_standalone_executor(const Options& o, const ConnectOptions& co);

}  // namespace idem::redis::detail
