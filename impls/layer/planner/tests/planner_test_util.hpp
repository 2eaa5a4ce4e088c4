// Helpers of the planner tests: a recognisable key, the docs/eplb.md 8.2 golden problem, and a raw TCP
// socket for speaking to a live PlannerServer without the client's checks (attacks, bad frames).
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "impls/layer/planner/planner.hpp"

namespace eps::planner::testing {

// 64 hex digits that are easy to spot in any output (they must never appear there).
inline constexpr std::string_view kTestKeyHex =
    "0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210";
inline constexpr std::string_view kOtherKeyHex =
    "1111111111111111111111111111111111111111111111111111111111111111";

inline PlannerKey test_key() { return PlannerKey::from_text(kTestKeyHex).value(); }
inline PlannerKey other_key() { return PlannerKey::from_text(kOtherKeyHex).value(); }

// True when `text` shows the test key, as hex (either case, or a 16-digit piece of it) or as raw bytes.
inline bool shows_test_key(std::string text) {
  const std::string raw(reinterpret_cast<const char*>(test_key().bytes().data()), test_key().bytes().size());
  if (text.find(raw.substr(0, 8)) != std::string::npos) return true;
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (std::size_t i = 0; i + 16 <= kTestKeyHex.size(); i += 8) {
    if (text.find(kTestKeyHex.substr(i, 16)) != std::string::npos) return true;
  }
  return false;
}

// docs/eplb.md 8.2 golden vector: 2 layers, 12 experts, P = 16, 4 groups, 2 nodes, 8 ranks.
inline eplb::EplbProblem golden_problem() {
  eplb::EplbProblem problem;
  problem.weight = {{90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
                    {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  problem.num_replicas = 16;
  problem.num_groups = 4;
  problem.num_nodes = 2;
  problem.num_ranks = 8;
  return problem;
}

inline PlanRequest golden_request(std::uint64_t request) {
  return {request, "deepseek", static_cast<std::int64_t>(10 * request), golden_problem()};
}

inline void expect_same_placement(const eplb::Placement& actual, const eplb::Placement& expected) {
  EXPECT_EQ(actual.num_layers, expected.num_layers);
  EXPECT_EQ(actual.num_slots, expected.num_slots);
  EXPECT_EQ(actual.num_experts, expected.num_experts);
  EXPECT_EQ(actual.num_ranks, expected.num_ranks);
  EXPECT_EQ(actual.max_replicas, expected.max_replicas);
  EXPECT_EQ(actual.phy2log, expected.phy2log);
  EXPECT_EQ(actual.log2phy, expected.log2phy);
  EXPECT_EQ(actual.logcnt, expected.logcnt);
}

// The placement the deepseek policy gives for `problem`, computed here with the reference.
inline eplb::Placement deepseek_placement(const eplb::EplbProblem& problem) {
  return eplb::find_eplb_policy("deepseek").value()->plan(problem).value().placement;
}

inline std::vector<unsigned char> frame_of(const PlannerKey& key, Direction direction, std::uint64_t counter,
                                           std::string_view body) {
  return encode_frame(key, direction, counter, body).value();
}

// A blocking TCP connection to 127.0.0.1:port.
class RawSocket {
 public:
  explicit RawSocket(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    EXPECT_GE(fd_, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;
  ~RawSocket() { close(); }

  void send(const std::vector<unsigned char>& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << "send failed";
      sent += static_cast<std::size_t>(n);
    }
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  struct Received {
    std::vector<unsigned char> bytes;
    bool closed = false;  // the peer closed (or reset) the connection within the time
  };
  // Reads until the peer closes the connection or `seconds` pass.
  Received read_until_closed(double seconds) {
    Received out;
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < until) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      unsigned char chunk[4096];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        out.closed = true;  // 0: orderly close; < 0: reset, also a close
        return out;
      }
      out.bytes.insert(out.bytes.end(), chunk, chunk + n);
    }
    return out;
  }

 private:
  int fd_;
};

// The bodies of every complete frame in `bytes`, read as the client reads them.
inline std::vector<std::string> bodies_from_planner(const std::vector<unsigned char>& bytes) {
  const PlannerKey key = test_key();
  FrameReader reader(key, Direction::kFromPlanner);
  reader.append(bytes.data(), bytes.size());
  std::vector<std::string> bodies;
  for (;;) {
    auto next = reader.next();
    EXPECT_TRUE(next.ok()) << next.status().message();
    if (!next.ok() || !next->has_value()) return bodies;
    bodies.push_back(**next);
  }
}

}  // namespace eps::planner::testing
