// `idem bench` on redis: the raw primitive is SET NX PX per id, pipelined --batch at a
// time; the floor rows do the least Redis 7.0 allows for what idem does (a commit that
// checks the lease's owner is a script: there is no compare-and-set command) with
// hiredict alone: per message the commit of one id and the claim of the next in one
// round trip, or per batch one pipeline of claims and one script of commits. Raw keys
// are `<prefix>bench-raw:{<id>}` and expire after an hour. One standalone server
// (the first endpoint of the URI; over TLS as the store connects, for rediss://); a
// cluster gets the idem rows only.
#include <hiredict/hiredict.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_rows.hpp"
#include "idem/redis_store.hpp"
#include "tls_context.hpp"

namespace idem::cli {
namespace {

const std::function<void(const Msg&)> noop_handler = [](const Msg&) {};

const std::string kTtlPx = "3600000";                         // the raw keys' expiry, ms
const std::string kLeasePx = "30000";                         // the floor rows' lease, ms
const std::string kLease = "i:bench-lease-0000000000000000";  // values of idem's sizes
const std::string kDone = "c:bench-done-00000000000000000000";

// The floor rows' commit: KEYS the records; ARGV px, the owner's lease prefix, then one
// value per key. Writes each value if the old one was absent or this owner's lease.
const char* const kFloorCommit = R"lua(
local codes = {}
for i, k in ipairs(KEYS) do
  local old = redis.call('SET', k, ARGV[2 + i], 'PX', ARGV[1], 'GET')
  codes[i] = (not old or string.sub(old, 1, #ARGV[2]) == ARGV[2]) and '0' or '2'
end
return table.concat(codes)
)lua";

using ReplyPtr = std::unique_ptr<redictReply, decltype(&freeReplyObject)>;

// One hiredict connection: commands appended, replies read in order.
class RawRedis {
 public:
  RawRedis(const redis::Options& o, std::string prefix) : prefix_(std::move(prefix)) {
    const redis::Endpoint& at = o.endpoints.front();
    const std::string where = at.host + ":" + std::to_string(at.port);
    c_ = redictConnect(at.host.c_str(), at.port);
    if (c_ == nullptr || c_->err != 0) fail("connect to " + where);
    if (o.tls.enabled) {  // as the store connects (rediss://)
      auto tls = redis_tls::Context::make(o.tls);
      if (!tls.ok()) fail(tls.status().message());
      if (Status s = (*tls)->start(c_, at.host, where); !s.ok()) fail(s.message());
    }
    if (!o.password.empty()) {
      if (o.user.empty())
        call({"AUTH", o.password});
      else
        call({"AUTH", o.user, o.password});
    }
    if (o.db != 0) call({"SELECT", std::to_string(o.db)});
    sha_ = call({"SCRIPT", "LOAD", kFloorCommit})->str;
  }
  ~RawRedis() { redictFree(c_); }
  RawRedis(const RawRedis&) = delete;
  RawRedis& operator=(const RawRedis&) = delete;

  std::string key(const std::string& id) const { return prefix_ + "{" + id + "}"; }
  const std::string& sha() const { return sha_; }

  void append(const std::vector<std::string>& argv) {
    std::vector<const char*> ptrs;
    std::vector<std::size_t> lens;
    for (const std::string& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    if (redictAppendCommandArgv(c_, static_cast<int>(argv.size()), ptrs.data(), lens.data()) != REDICT_OK)
      fail("append");
  }
  ReplyPtr read() {
    void* r = nullptr;
    if (redictGetReply(c_, &r) != REDICT_OK || r == nullptr) fail("read");
    ReplyPtr reply(static_cast<redictReply*>(r), &freeReplyObject);
    if (reply->type == REDICT_REPLY_ERROR) throw std::runtime_error("raw redis: " + std::string(reply->str));
    return reply;
  }
  ReplyPtr call(const std::vector<std::string>& argv) {
    append(argv);
    return read();
  }
  // SET NX PX's answer: true iff the key was set (a new id).
  static bool was_set(const ReplyPtr& r) { return r->type == REDICT_REPLY_STATUS; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("raw redis: " + what + ": " + (c_ != nullptr ? c_->errstr : "out of memory"));
  }
  redictContext* c_ = nullptr;
  std::string prefix_;
  std::string sha_;
};

redis::Options options_of(const BenchSetup& s) {
  auto uri = StoreUri::parse(s.store_uri);
  if (!uri.ok()) throw std::runtime_error(uri.status().to_string());
  auto o = redis::parse_uri(*uri);
  if (!o.ok()) throw std::runtime_error(o.status().to_string());
  return *o;
}

std::shared_ptr<RawRedis> connect(const BenchSetup& s) {
  const redis::Options o = options_of(s);
  return std::make_shared<RawRedis>(o, o.prefix + "bench-raw:");
}

// raw (chunk 1) and raw_batch: SET NX PX per id, a chunk pipelined.
BenchRow set_nx(const std::string& path, std::size_t chunk, const BenchSetup& s) {
  auto r = connect(s);
  BenchRow row{path, chunk, nullptr, r};
  row.step = [c = r.get()](std::span<const Msg> ms, const Msg*, BenchCounts& n) {
    for (const Msg& m : ms) c->append({"SET", c->key(m.id), "1", "NX", "PX", kTtlPx});
    for (std::size_t i = 0; i < ms.size(); ++i) ++(RawRedis::was_set(c->read()) ? n.processed : n.duplicates);
  };
  return row;
}

// naive: EXISTS, handler, SET PX, each a round trip.
BenchRow naive(const BenchSetup& s) {
  auto r = connect(s);
  BenchRow row{"naive", 1, nullptr, r};
  row.step = [c = r.get()](std::span<const Msg> ms, const Msg*, BenchCounts& n) {
    for (const Msg& m : ms) {
      if (c->call({"EXISTS", c->key(m.id)})->integer != 0) {
        ++n.duplicates;
        continue;
      }
      noop_handler(m);
      c->call({"SET", c->key(m.id), "1", "PX", kTtlPx});
      ++n.processed;
    }
  };
  return row;
}

// floor: per message one round trip carrying its commit and the claim of the next
// message (the first message's claim goes alone).
class FloorSeq {
 public:
  explicit FloorSeq(std::shared_ptr<RawRedis> c) : c_(std::move(c)) {}

  void step(const Msg& m, const Msg* next, BenchCounts& n) {
    if (!claimed_) {
      granted_ = RawRedis::was_set(c_->call({"SET", c_->key(m.id), kLease, "NX", "PX", kLeasePx}));
    }
    if (granted_) c_->append({"EVALSHA", c_->sha(), "1", c_->key(m.id), kTtlPx, "i", kDone});
    if (next != nullptr) c_->append({"SET", c_->key(next->id), kLease, "NX", "PX", kLeasePx});
    if (granted_) {
      const ReplyPtr done = c_->read();
      ++(std::string(done->str, done->len) == "0" ? n.processed : n.other);
    } else {
      ++n.duplicates;
    }
    claimed_ = next != nullptr;
    if (claimed_) granted_ = RawRedis::was_set(c_->read());
  }

 private:
  std::shared_ptr<RawRedis> c_;
  bool claimed_ = false;  // the current message's claim was sent with the last step
  bool granted_ = false;  // and it was granted
};

BenchRow floor_seq(const BenchSetup& s) {
  auto f = std::make_shared<FloorSeq>(connect(s));
  BenchRow row{"floor", 1, nullptr, f};
  row.step = [f = f.get()](std::span<const Msg> ms, const Msg* next, BenchCounts& n) { f->step(ms[0], next, n); };
  return row;
}

// floor_batch: the chunk's claims pipelined, then one script commits the granted ones.
BenchRow floor_batch(const BenchSetup& s) {
  auto r = connect(s);
  BenchRow row{"floor_batch", s.batch, nullptr, r};
  row.step = [c = r.get()](std::span<const Msg> ms, const Msg*, BenchCounts& n) {
    for (const Msg& m : ms) c->append({"SET", c->key(m.id), kLease, "NX", "PX", kLeasePx});
    std::vector<std::string> argv = {"EVALSHA", c->sha(), ""};
    std::size_t granted = 0;
    for (const Msg& m : ms) {
      if (!RawRedis::was_set(c->read())) {
        ++n.duplicates;
        continue;
      }
      argv.push_back(c->key(m.id));
      ++granted;
    }
    if (granted == 0) return;
    argv[2] = std::to_string(granted);
    argv.push_back(kTtlPx);
    argv.push_back("i");
    argv.insert(argv.end(), granted, kDone);
    const ReplyPtr done = c->call(argv);
    n.processed += granted;
    if (std::string(done->str, done->len) != std::string(granted, '0')) n.other += granted;
  };
  return row;
}

}  // namespace

std::vector<RowFactory> redis_rows(const BenchSetup& s) {
  if (options_of(s).cluster || options_of(s).endpoints.size() != 1) return {};
  return {[s] { return set_nx("raw", 1, s); }, [s] { return set_nx("raw_batch", s.batch, s); },
          [s] { return naive(s); }, [s] { return floor_seq(s); }, [s] { return floor_batch(s); }};
}

}  // namespace idem::cli
