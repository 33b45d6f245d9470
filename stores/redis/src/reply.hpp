// A Redis reply copied out of hiredis, so that nothing above the connection layer
// sees hiredis types.
#pragma once

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

}  // namespace idem::redis::detail
