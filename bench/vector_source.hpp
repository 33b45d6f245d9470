// A MessageSource over a vector of bodies, handed out in order; acks only count. The
// benchmarks' source without a broker: what the runtime costs over it is the engine's
// floor of a broker row.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "idem/source.hpp"

namespace idem::bench {

class VectorSource : public MessageSource {
 public:
  explicit VectorSource(std::vector<std::string> bodies) : bodies_(std::move(bodies)) {}
  Status fetch(std::size_t max, Duration, std::vector<Delivery>& out) override {
    for (std::size_t n = 0; n < max && next_ < bodies_.size(); ++n) {
      Delivery d;
      d.body = std::move(bodies_[next_++]);
      out.push_back(std::move(d));
    }
    return ok_status();
  }
  Status ack(const Delivery&) override {
    ++acked_;
    return ok_status();
  }
  Status retry(const Delivery&, Duration) override { return ok_status(); }
  Status dead_letter(const Delivery&, std::string_view, std::string_view) override { return ok_status(); }
  StatusOr<bool> drained() override { return next_ >= bodies_.size(); }
  std::string describe() const override { return "vector"; }
  void close() override {}
  std::size_t acked() const { return acked_; }

 private:
  std::vector<std::string> bodies_;
  std::size_t next_ = 0;
  std::size_t acked_ = 0;
};

}  // namespace idem::bench
