// The RESP text of pipelined commands, written straight into one buffer: no argv
// arrays, no string per argument. Binary-safe.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace idem::redis::detail {

class RespWriter {
 public:
  // Forgets what was written; keeps the buffer's capacity.
  void clear() { out_.clear(); }
  void reserve(std::size_t bytes) { out_.reserve(bytes); }

  // Starts a command of argc arguments (the command name counts). REQUIRES: exactly
  // argc arg*() calls follow before the next command().
  void command(std::size_t argc) { put_count('*', argc); }
  void arg(std::string_view a) {
    put_count('$', a.size());
    out_.append(a);
    out_ += "\r\n";
  }
  // The decimal text of v.
  void arg_int(std::int64_t v) {
    char digits[24];
    arg(std::string_view(digits,
                         static_cast<std::size_t>(std::to_chars(digits, digits + sizeof digits, v).ptr - digits)));
  }
  // One argument: the record key prefix + "{" + id + "}" (key_of's form).
  void arg_key(std::string_view prefix, std::string_view id) {
    put_count('$', prefix.size() + id.size() + 2);
    out_.append(prefix);
    out_ += '{';
    out_.append(id);
    out_ += "}\r\n";
  }

  std::string_view text() const { return out_; }

 private:
  // <tag><n>\r\n
  void put_count(char tag, std::size_t n) {
    char digits[24];
    out_ += tag;
    out_.append(digits, std::to_chars(digits, digits + sizeof digits, n).ptr);
    out_ += "\r\n";
  }

  std::string out_;
};

}  // namespace idem::redis::detail
