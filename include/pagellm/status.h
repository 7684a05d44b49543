// Status and StatusOr: expected failures (bad input, corrupt files, no room) are values.
// Programmer errors abort through CHECK (see pagellm/check.h).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

#include "pagellm/check.h"

namespace pagellm {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // bad request / bad flag value
  kNotFound,            // missing file, key, tensor, route
  kOutOfRange,          // value outside its allowed range
  kDataLoss,            // corrupt or truncated file
  kUnimplemented,       // valid input we do not support (e.g. unknown tensor type)
  kResourceExhausted,   // out of KV blocks, queue full
  kFailedPrecondition,  // state does not allow the operation
  kUnavailable,         // transiently unavailable (loading, shutting down)
  kUnauthenticated,     // bad / missing API key
  kInternal,            // should not happen, but is not worth aborting the process
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message"
  std::string ToString() const;
  // Returns a copy with `prefix + ": "` prepended to the message (adds context while unwinding).
  Status WithContext(const std::string& prefix) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) {
  return {StatusCode::kNotFound, std::move(m)};
}
inline Status OutOfRangeError(std::string m) {
  return {StatusCode::kOutOfRange, std::move(m)};
}
inline Status DataLossError(std::string m) {
  return {StatusCode::kDataLoss, std::move(m)};
}
inline Status UnimplementedError(std::string m) {
  return {StatusCode::kUnimplemented, std::move(m)};
}
inline Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status UnavailableError(std::string m) {
  return {StatusCode::kUnavailable, std::move(m)};
}
inline Status UnauthenticatedError(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
inline Status InternalError(std::string m) {
  return {StatusCode::kInternal, std::move(m)};
}

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(implicit)
    CHECK(!status_.ok()) << "StatusOr constructed from an OK status without a value";
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(implicit)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pagellm

#define PAGELLM_CONCAT_INNER(a, b) a##b
#define PAGELLM_CONCAT(a, b) PAGELLM_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::pagellm::Status _pagellm_status = (expr);        \
    if (!_pagellm_status.ok()) return _pagellm_status; \
  } while (0)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()

// ASSIGN_OR_RETURN(auto x, FunctionReturningStatusOr());
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(PAGELLM_CONCAT(_pagellm_statusor_, __LINE__), lhs, expr)
