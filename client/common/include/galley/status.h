// Status and Result<T>: how every galley library reports failure.
//
// galley returns errors as values across library boundaries instead of
// throwing. A Status is either OK or carries a code and a human-readable
// message; Result<T> holds either a T or a non-OK Status. Both are cheap to
// move and safe to use from any thread (they are plain values).
#ifndef GALLEY_STATUS_H_
#define GALLEY_STATUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace galley {

// Codes travel on the wire (docs/protocol.md): append only, never renumber.
enum class StatusCode : uint16_t {
  kOk = 0,
  kInvalidArgument = 1,    // the request or input is malformed
  kNotFound = 2,           // a dataset, job or file does not exist
  kPermissionDenied = 3,   // outside the allowed roots, or not the owner
  kResourceExhausted = 4,  // over a limit: jobs, shared memory, pixels
  kUnavailable = 5,        // the daemon is not reachable or went away
  kDeadlineExceeded = 6,   // a wait timed out
  kDataLoss = 7,           // a sample could not be read or decoded
  kInternal = 8,           // a bug or an unexpected OS failure
  kEndOfStream = 9,        // the job has delivered all its epochs
  kProtocolError = 10,     // a peer sent a frame that breaks the protocol
  kCancelled = 11,         // the job was closed or the daemon shut down
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status PermissionDenied(std::string m) {
    return {StatusCode::kPermissionDenied, std::move(m)};
  }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }
  static Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status DeadlineExceeded(std::string m) {
    return {StatusCode::kDeadlineExceeded, std::move(m)};
  }
  static Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
  static Status EndOfStream(std::string m) { return {StatusCode::kEndOfStream, std::move(m)}; }
  static Status ProtocolError(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
  static Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: batch_size must be positive", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Holds a T or the Status explaining why there is none. Accessing value() of
// a failed Result is a programming error (checked by assert in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : state_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(state_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(state_); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace galley

// Returns early from the enclosing function if `expr` yields a non-OK Status.
#define GALLEY_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::galley::Status galley_status_ = (expr);        \
    if (!galley_status_.ok()) return galley_status_; \
  } while (0)

#define GALLEY_CONCAT_INNER_(a, b) a##b
#define GALLEY_CONCAT_(a, b) GALLEY_CONCAT_INNER_(a, b)
// `GALLEY_ASSIGN_OR_RETURN(auto x, MakeX());` binds x or returns the error.
// `lhs` is a declaration (`auto x`), which parentheses would break.
#define GALLEY_ASSIGN_OR_RETURN(lhs, expr)                    \
  auto GALLEY_CONCAT_(galley_result_, __LINE__) = (expr);     \
  if (!GALLEY_CONCAT_(galley_result_, __LINE__).ok())         \
    return GALLEY_CONCAT_(galley_result_, __LINE__).status(); \
  lhs = /* NOLINT(bugprone-macro-parentheses): see above */   \
      std::move(GALLEY_CONCAT_(galley_result_, __LINE__)).value()

#endif  // GALLEY_STATUS_H_
