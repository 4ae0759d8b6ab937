#pragma once
// Control-plane errors: an errno and one sentence a user can act on. The data plane never uses
// these: it counts (DESIGN.md, Contracts 6).

#include <cerrno>
#include <string>
#include <utility>
#include <variant>

namespace txbatch {

struct Error {
  int err = EINVAL;     // errno-style cause
  std::string message;  // one sentence naming the problem and the valid choices
};

// The value of a control-plane step, or why it failed. g++ 12 has no std::expected.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  const T& operator*() const { return value(); }
  const T* operator->() const { return &value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const { return error_; }

 private:
  Error error_;
  bool ok_ = true;
};

inline Error MakeError(int err, std::string message) { return Error{err, std::move(message)}; }

}  // namespace txbatch
