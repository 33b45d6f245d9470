#include "idem/status.hpp"

#include <cstdio>
#include <cstdlib>

namespace idem {

std::string_view status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case StatusCode::kNotFound: return "NOT_FOUND";
    case StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case StatusCode::kAborted: return "ABORTED";
    case StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnavailable: return "UNAVAILABLE";
    case StatusCode::kDataLoss: return "DATA_LOSS";
    case StatusCode::kInternal: return "INTERNAL";
    case StatusCode::kUnimplemented: return "UNIMPLEMENTED";
  }
  return "UNKNOWN";
}

std::string Status::to_string() const {
  if (ok()) return "OK";
  std::string s(status_code_name(code_));
  s += ": ";
  s += message_;
  return s;
}

namespace detail {

const Status& ok_status_ref() {
  static const Status ok;
  return ok;
}

Status ok_put_into_status_or() { return internal_error("a StatusOr was given an OK status and no value"); }

void die_on_bad_value_access(const Status& status) {
  std::fprintf(stderr, "idem: StatusOr::value() on an error: %s\n", status.to_string().c_str());
  std::abort();
}

}  // namespace detail

}  // namespace idem
