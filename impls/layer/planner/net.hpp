// Socket plumbing private to the planner (planner_server.cpp, planner_client.cpp): an owned descriptor,
// thread-safe errno text, numeric peer addresses and poll(2) timeouts.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <string>
#include <utility>

#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"

namespace eps::planner {

// Owns one file descriptor and closes it once.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// strerror(3) is not thread-safe; the server thread and a client may run at once.
std::string errno_text(int error);

// "call: text" as a kEnvironment status, e.g. "planner: cannot listen on 127.0.0.1:5000: bind: Address in
// use".
Status system_failure(std::string_view context, std::string_view call, int error);

// The numeric "HOST:PORT" of a socket address ("[::1]:5000" for IPv6), or "an unknown peer".
std::string socket_address_text(const sockaddr* address, socklen_t length);

// TCP_NODELAY: frames are small and latency matters more than segment count.
Status set_no_delay(int fd);

// Milliseconds for poll(2) until `until`, rounded up (so a wait never ends early), at least 0 and at most
// `cap_ms`.
int poll_timeout_ms(std::chrono::steady_clock::time_point until, int cap_ms);
// The same until `deadline` expires.
int poll_timeout_ms(const Deadline& deadline, int cap_ms);

}  // namespace eps::planner
