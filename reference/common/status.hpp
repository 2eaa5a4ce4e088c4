// The one error model of epsuite (ARCHITECTURE.md, house style rule 3; SPEC 10).
//
// Functions at API boundaries return `Status` or `Result<T>`. A `Status` carries a `StatusCode` that maps
// one-to-one onto the process exit codes of SPEC 10, and a message that names the offending field and
// its allowed range ("router.k: must be in [1, 64], got 0"). At the CLI edge a failed status is thrown
// once as `eps::Error` and turned into that exit code.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace eps {

// Values are the SPEC 10 exit codes.
enum class StatusCode : int {
  kOk = 0,
  kCheckFailed = 1,      // conformance failure or regression
  kInvalidArgument = 2,  // usage or configuration error, bad input data
  kEnvironment = 3,      // missing device/provider, peer failure, timeout
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  int exit_code() const { return static_cast<int>(code_); }
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
  Result(T value) : data_(std::move(value)) {}         // NOLINT: implicit by design, like absl::StatusOr
  Result(Status status) : data_(std::move(status)) {}  // NOLINT
  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
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
