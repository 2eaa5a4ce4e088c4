// The one error model of epsuite (docs/architecture.md, house style rule 3; docs/errors.md 10).
//
// Functions at API boundaries return `Status` or `Result<T>`. A `Status` carries a `StatusCode` that maps
// one-to-one onto the process exit codes of docs/errors.md 10, and a message that names the offending field
// and its allowed range ("router.k: must be in [1, 64], got 0"). At the CLI edge a failed status is thrown
// once as `eps::Error` and turned into that exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace eps {

// The first four values are the exit codes of docs/errors.md 10; kUnavailable exits 3 like kEnvironment but
// is a different outcome (docs/errors.md 10.1): the hardware, provider or device is absent here, so the
// case is skipped with its reason, whereas a timeout or peer failure (kEnvironment) is an error.
enum class StatusCode : int {
  kOk = 0,
  kCheckFailed = 1,      // conformance failure or regression
  kInvalidArgument = 2,  // usage or configuration error, bad input data
  kEnvironment = 3,      // peer failure, timeout, a failed system or library call
  kUnavailable = 4,      // hardware, provider or device absent (exit code 3)
};

// The process exit code of `code` (docs/errors.md 10).
constexpr int exit_code_of(StatusCode code) {
  return code == StatusCode::kUnavailable ? 3 : static_cast<int>(code);
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  int exit_code() const { return exit_code_of(code_); }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// "field: message" with a fmt-style message; the canonical shape of every bad-input error.
template <typename... Args>
Status invalid_argument(std::string_view field, fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kInvalidArgument,
                fmt::format("{}: {}", field, fmt::format(format, std::forward<Args>(args)...)));
}

// "field: must be in [lo, hi], got v".
template <typename T>
Status out_of_range(std::string_view field, T lo, T hi, T got) {
  return invalid_argument(field, "must be in [{}, {}], got {}", lo, hi, got);
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr
  // A Result made from a Status holds an error; an OK Status here is a programming error, kept visible.
  Result(Status status)  // NOLINT
      : data_(status.ok()
                  ? Status(StatusCode::kEnvironment, "internal error: a Result was made from an OK Status")
                  : std::move(status)) {}
  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  // The value; on an error, throws eps::Error carrying the error's status (never bad_variant_access).
  T& value() & { return *checked(); }
  const T& value() const& { return *checked(); }
  T&& value() && { return std::move(*checked()); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  T* checked() const;
  std::variant<T, Status> data_;
};

// The exception thrown once at the CLI edge (and by value_or_throw) for a failed Status.
class Error : public std::runtime_error {
 public:
  explicit Error(Status status) : std::runtime_error(status.message()), status_(std::move(status)) {}
  const Status& status() const { return status_; }
  int exit_code() const { return status_.exit_code(); }

 private:
  Status status_;
};

template <typename T>
T* Result<T>::checked() const {
  if (!ok()) throw Error(std::get<Status>(data_));
  return const_cast<T*>(&std::get<T>(data_));
}

inline void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status);
}

template <typename T>
T value_or_throw(Result<T> result) {
  if (!result.ok()) throw Error(result.status());
  return std::move(result).value();
}

}  // namespace eps

#define EPS_STATUS_CONCAT_INNER(a, b) a##b
#define EPS_STATUS_CONCAT(a, b) EPS_STATUS_CONCAT_INNER(a, b)

// Return the Status of `expr` from the enclosing function if it failed.
#define EPS_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::eps::Status eps_status_ = (expr);        \
    if (!eps_status_.ok()) return eps_status_; \
  } while (0)

// `EPS_ASSIGN_OR_RETURN(auto x, f());` binds the value of a Result or returns its Status.
#define EPS_ASSIGN_OR_RETURN(lhs, expr) \
  EPS_ASSIGN_OR_RETURN_IMPL(EPS_STATUS_CONCAT(eps_result_, __LINE__), lhs, expr)
#define EPS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
