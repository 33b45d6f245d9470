// A Redis reply copied out of hiredict, so that nothing above the connection layer
// sees hiredict types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::redis::detail {

struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kError, kArray };
  Type type = Type::kNil;
  std::int64_t integer = 0;     // kInteger
  std::string str;              // kString, kStatus, kError
  std::vector<Reply> elements;  // kArray
  int replicas_acked = -1;      // set by a WAIT that followed this command; -1: none

  bool is_error() const { return type == Type::kError; }
  // True iff this is an error reply whose first word is `code` (e.g. "MOVED").
  bool error_is(std::string_view code) const {
    return type == Type::kError && str.size() >= code.size() && str.compare(0, code.size(), code) == 0 &&
           (str.size() == code.size() || str[code.size()] == ' ');
  }
};

// A reply read in place: a view of the connection's reply buffer, valid until the
// next read on that connection. Nothing is copied until to_reply(); for the batch
// paths, which look at one code per key.
class ReplyView {
 public:
  explicit ReplyView(const void* raw) : raw_(raw) {}
  Reply::Type type() const;
  bool is_error() const { return type() == Reply::Type::kError; }
  // True iff this is an error reply whose first word is `code`.
  bool error_is(std::string_view code) const;
  std::int64_t integer() const;       // kInteger, else 0
  std::string_view str() const;       // kString, kStatus, kError, else ""
  std::size_t size() const;           // kArray: its element count, else 0
  ReplyView at(std::size_t i) const;  // REQUIRES: i < size()
  // A copy, for the rare answers that the Reply-based decoders handle.
  Reply to_reply() const;

 private:
  const void* raw_;  // a redictReply
};

}  // namespace idem::redis::detail
