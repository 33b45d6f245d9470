// Status and StatusOr: how idem reports failures of the environment (a store that
// cannot be reached, a corrupt file, an invalid configuration).
//
// Outcomes of processing (a duplicate, a stale version, an invalid transition) are
// never Status errors: they are Decisions with a Reason (see decision.hpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace idem {

// Canonical codes. The comment on each says who may retry what.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input or configuration is wrong; do not retry
  kNotFound,            // the named thing does not exist
  kFailedPrecondition,  // the system is not in a state for this call (e.g. a lease
                        // held by another owner); retry only after the state changes
  kAborted,             // a concurrent change won (compare-and-set lost); retry the
                        // whole read-modify-write
  kResourceExhausted,   // a configured limit was reached; retry later
  kUnavailable,         // the store cannot be reached right now; retry with backoff
  kDataLoss,            // stored data is corrupt or of an unknown format; do not retry
  kInternal,            // a bug or an unexpected answer; do not retry blindly
  kUnimplemented,       // this store or source cannot do this at all; do not retry
};

// Returns the canonical name of a code, e.g. "UNAVAILABLE".
std::string_view status_code_name(StatusCode code);

// A cheap success value or a code with a message. Thread-compatible.
// A default-constructed Status is OK; ok_status() says so by name.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  // Returns true iff this is a success. The one question: a Status does not convert
  // to bool.
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "OK" or "UNAVAILABLE: <message>".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status ok_status() { return {}; }
inline Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status data_loss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status internal_error(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }

namespace detail {
// Prints "idem: StatusOr::value() on an error: <status>" to stderr and aborts.
[[noreturn]] void die_on_bad_value_access(const Status& status);
// The shared OK Status that StatusOr::status() refers to when it holds a value.
const Status& ok_status_ref();
// What an OK Status put into a StatusOr becomes: kInternal naming the mistake.
Status ok_put_into_status_or();
}  // namespace detail

// Either a value or a non-OK Status. Like a Status, it does not convert to bool:
// ok() is the question (a StatusOr<bool> read as a bool would be a trap).
// REQUIRES: value(), * and -> only when ok(). Calling them on an error does not throw:
// it prints the status to stderr and aborts the process (a bug in the caller, found
// loudly). value_or(v) is the checked alternative. status() of a value is OK.
template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  // An OK `status` (a caller's bug: there is no value) becomes kInternal, in every
  // build.
  StatusOr(Status status)  // NOLINT: implicit by design
      : v_(status.ok() ? detail::ok_put_into_status_or() : std::move(status)) {}

  // A StatusOr of a type that converts to T (e.g. shared_ptr<Derived> to
  // shared_ptr<Base>): its value converted, or its error.
  template <class U, std::enable_if_t<!std::is_same_v<U, T> && std::is_convertible_v<U&&, T>, int> = 0>
  StatusOr(StatusOr<U>&& other)  // NOLINT: implicit by design
      : v_(other.ok() ? std::variant<T, Status>(std::in_place_index<0>, std::move(other).value())
                      : std::variant<T, Status>(std::in_place_index<1>, other.status())) {}

  bool ok() const { return std::holds_alternative<T>(v_); }

  const Status& status() const { return ok() ? detail::ok_status_ref() : *std::get_if<Status>(&v_); }

  T& value() & {
    check_value();
    return *std::get_if<T>(&v_);
  }
  const T& value() const& {
    check_value();
    return *std::get_if<T>(&v_);
  }
  T&& value() && {
    check_value();
    return std::move(*std::get_if<T>(&v_));
  }

  // Returns the value when ok(), else `fallback`.
  template <class U>
  T value_or(U&& fallback) const& {
    return ok() ? *std::get_if<T>(&v_) : static_cast<T>(std::forward<U>(fallback));
  }
  template <class U>
  T value_or(U&& fallback) && {
    return ok() ? std::move(*std::get_if<T>(&v_)) : static_cast<T>(std::forward<U>(fallback));
  }

  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  void check_value() const {
    if (!ok()) detail::die_on_bad_value_access(*std::get_if<Status>(&v_));
  }

  std::variant<T, Status> v_;
};

}  // namespace idem
