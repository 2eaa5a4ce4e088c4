#include "impls/layer/planner/net.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <system_error>

#include "impls/layer/planner/planner.hpp"

namespace eps::planner {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void Fd::reset() {
  // close(2) is not retried on EINTR (Linux releases the descriptor anyway) and its other errors leave
  // nothing to do: the descriptor is gone either way.
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string errno_text(int error) { return std::generic_category().message(error); }

Status system_failure(std::string_view context, std::string_view call, int error) {
  return Status(StatusCode::kEnvironment, fmt::format("{}: {}: {}", context, call, errno_text(error)));
}

std::string socket_address_text(const sockaddr* address, socklen_t length) {
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (::getnameinfo(address, length, host, sizeof host, service, sizeof service,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return "an unknown peer";
  }
  int port = 0;
  std::from_chars(service, service + std::char_traits<char>::length(service), port);
  return format_address(host, port);
}

Status set_no_delay(int fd) {
  const int on = 1;
  if (::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) != 0) {
    return system_failure("planner", "setsockopt(TCP_NODELAY)", errno);
  }
  return Status();
}

int poll_timeout_ms(std::chrono::steady_clock::time_point until, int cap_ms) {
  const std::chrono::duration<double, std::milli> left = until - std::chrono::steady_clock::now();
  if (left.count() <= 0) return 0;
  const double rounded = std::ceil(left.count());
  return rounded >= cap_ms ? cap_ms : static_cast<int>(rounded);
}

int poll_timeout_ms(const Deadline& deadline, int cap_ms) {
  const double left_ms = std::ceil(deadline.remaining_seconds() * 1000.0);
  return left_ms >= cap_ms ? cap_ms : static_cast<int>(left_ms);
}

std::string format_address(const std::string& host, int port) {
  const bool ipv6 = host.find(':') != std::string::npos;
  return ipv6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

Result<std::pair<std::string, int>> parse_address(std::string_view field, std::string_view text,
                                                  int min_port) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return invalid_argument(field, "expected HOST:PORT, got \"{}\"", text);
  }
  std::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) return invalid_argument(field, "expected HOST:PORT with a host, got \"{}\"", text);
  if (host.find_first_of("[]") != std::string_view::npos) {  // only one pair, around an IPv6 address
    return invalid_argument(field, "expected HOST:PORT or [IPV6]:PORT, got \"{}\"", text);
  }
  const std::string_view port_text = text.substr(colon + 1);
  int port = -1;
  const auto [end, error] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || error != std::errc() || end != port_text.data() + port_text.size()) {
    return invalid_argument(field, "expected HOST:PORT with a numeric port, got \"{}\"", text);
  }
  if (port < min_port || port > 65535)
    return out_of_range(fmt::format("{} port", field), min_port, 65535, port);
  return std::pair<std::string, int>(std::string(host), port);
}

}  // namespace eps::planner
