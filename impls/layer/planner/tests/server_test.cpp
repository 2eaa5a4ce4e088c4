// docs/eplb.md 8.6, 8.7 against a live PlannerServer on 127.0.0.1: answers, the staged -> switch handshake,
// the late planner, and every kind of unauthenticated or malformed traffic, which must be rejected without
// a reply or a state change while an authenticated client alongside keeps being served.
#include <netinet/in.h>
#include <sys/socket.h>

#include <random>

#include <gtest/gtest.h>

#include "impls/layer/planner/planner.hpp"
#include "impls/layer/planner/tests/planner_test_util.hpp"

namespace eps::planner {
namespace {

using testing::bodies_from_planner;
using testing::deepseek_placement;
using testing::expect_same_placement;
using testing::frame_of;
using testing::golden_problem;
using testing::golden_request;
using testing::other_key;
using testing::RawSocket;
using testing::shows_test_key;
using testing::test_key;

constexpr double kWaitSeconds = 10;

// A TCP socket bound to 127.0.0.1 on an ephemeral port, not listening yet.
class LoopbackSocket {
 public:
  LoopbackSocket() : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    EXPECT_GE(fd_, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    socklen_t length = sizeof address;
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
  }
  LoopbackSocket(const LoopbackSocket&) = delete;
  LoopbackSocket& operator=(const LoopbackSocket&) = delete;
  ~LoopbackSocket() { ::close(fd_); }
  int fd() const { return fd_; }
  int port() const { return port_; }

 private:
  int fd_;
  int port_ = 0;
};

std::unique_ptr<PlannerServer> start_server(PlannerOptions options = {}) {
  options.frame_timeout_seconds = 0.5;
  options.idle_timeout_seconds = 60;
  auto server = PlannerServer::start(options, test_key());
  EXPECT_TRUE(server.ok()) << server.status().message();
  return std::move(server).value();
}

std::unique_ptr<PlannerClient> connect_client(const PlannerServer& server) {
  auto client = PlannerClient::connect("127.0.0.1", server.port(), test_key(), kWaitSeconds);
  EXPECT_TRUE(client.ok()) << client.status().message();
  return std::move(client).value();
}

// Sends plan `request` and checks that the answer is the reference placement.
void expect_planned(PlannerClient& client, std::uint64_t request) {
  ASSERT_TRUE(client.send_plan(golden_request(request)).ok());
  auto reply = client.receive(Deadline(kWaitSeconds));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  ASSERT_TRUE(reply->placement.has_value());
  EXPECT_EQ(reply->placement->request, request);
  ASSERT_TRUE(reply->placement->placement.has_value()) << reply->placement->error;
  expect_same_placement(*reply->placement->placement, deepseek_placement(golden_problem()));
}

void wait_for_rejections(const PlannerServer& server, std::int64_t count) {
  const Status waited = wait_until(
      Deadline(kWaitSeconds), [&] { return server.stats().rejected >= count; },
      [&] { return "rejected count " + std::to_string(count); });
  ASSERT_TRUE(waited.ok()) << waited.message();
}

std::string plan_body(std::uint64_t request) { return encode_plan_request(golden_request(request)); }

std::vector<unsigned char> head(std::vector<unsigned char> bytes, std::size_t n) {
  bytes.resize(n);
  return bytes;
}

struct Attack {
  std::string name;
  std::vector<unsigned char> bytes;
  std::string reason;  // a piece of the log line
  bool close_after_sending = false;
};

std::vector<Attack> attacks() {
  const PlannerKey key = test_key();
  std::vector<Attack> out;
  auto no_key = frame_of(key, Direction::kToPlanner, 1, plan_body(1));
  std::fill(no_key.begin() + 12, no_key.begin() + 44, 0);  // a sender without the key has no MAC to give
  out.push_back({"zero MAC", no_key, "bad MAC"});
  out.push_back({"wrong key", frame_of(other_key(), Direction::kToPlanner, 1, plan_body(1)), "bad MAC"});
  auto tampered = frame_of(key, Direction::kToPlanner, 1, plan_body(1));
  tampered[tampered.size() - 20] ^= 0x04;
  out.push_back({"tampered body", tampered, "bad MAC"});
  out.push_back({"reflected frame", frame_of(key, Direction::kFromPlanner, 1, plan_body(1)), "bad MAC"});
  const std::uint32_t oversize = kMaxFrameBytes + 1;
  out.push_back({"oversize length",
                 {static_cast<unsigned char>(oversize), static_cast<unsigned char>(oversize >> 8),
                  static_cast<unsigned char>(oversize >> 16), static_cast<unsigned char>(oversize >> 24)},
                 "exceeds the 16 MiB cap"});
  out.push_back({"truncated then closed", head(frame_of(key, Direction::kToPlanner, 1, plan_body(1)), 60),
                 "closed mid-frame", true});
  std::mt19937 random(7);
  std::vector<unsigned char> noise(200);
  for (auto& b : noise) b = static_cast<unsigned char>(random());
  out.push_back({"random bytes", noise, ""});
  out.push_back({"stalled frame", head(frame_of(key, Direction::kToPlanner, 1, plan_body(1)), 10),
                 "not completed within 0.5 s"});
  out.push_back(
      {"malformed body", frame_of(key, Direction::kToPlanner, 1, "{\"type\": \"plan\""), "not valid JSON"});
  out.push_back({"staged for an unknown request",
                 frame_of(key, Direction::kToPlanner, 1, encode_staged({4, 10})), "holds no placement"});
  return out;
}

TEST(PlannerServer, AnswersPlansAndSwitchesAfterStaged) {
  auto server = start_server();
  auto client = connect_client(*server);
  expect_planned(*client, 1);
  ASSERT_TRUE(client->send_staged({1, 41}).ok());
  auto reply = client->receive(Deadline(kWaitSeconds));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  ASSERT_TRUE(reply->switch_notice.has_value());
  EXPECT_EQ(reply->switch_notice->request, 1u);
  EXPECT_EQ(reply->switch_notice->step, 42);
  const PlannerStats stats = server->stats();
  EXPECT_EQ(stats.connections, 1);
  EXPECT_EQ(stats.plans, 1);
  EXPECT_EQ(stats.switches, 1);
  EXPECT_EQ(stats.rejected, 0);
}

// Each attack on its own connection: no reply, the connection closed, one log line naming the peer and the
// reason, no plan or switch counted. An authenticated client connected before keeps its answers; no
// output shows the key.
TEST(PlannerServer, RejectsUnauthenticatedAndMalformedTrafficAndKeepsServing) {
  ::testing::internal::CaptureStderr();  // the server logs to stderr by default
  auto server = start_server();
  auto client = connect_client(*server);
  expect_planned(*client, 1);
  std::int64_t rejected = 0;
  for (const Attack& attack : attacks()) {
    SCOPED_TRACE(attack.name);
    RawSocket attacker(server->port());
    attacker.send(attack.bytes);
    if (attack.close_after_sending) {
      attacker.close();
    } else {
      const RawSocket::Received received = attacker.read_until_closed(kWaitSeconds);
      EXPECT_TRUE(received.closed);
      EXPECT_TRUE(received.bytes.empty()) << received.bytes.size() << " bytes came back";
    }
    wait_for_rejections(*server, ++rejected);
    const std::vector<std::string> log = server->log_lines();
    ASSERT_EQ(log.size(), static_cast<std::size_t>(rejected));
    EXPECT_EQ(log.back().rfind("planner: closed 127.0.0.1:", 0), 0u) << log.back();
    EXPECT_NE(log.back().find(attack.reason), std::string::npos) << log.back();
    EXPECT_EQ(server->stats().plans, 1);
    EXPECT_EQ(server->stats().switches, 0);
  }
  expect_planned(*client, 2);
  ASSERT_TRUE(client->send_staged({2, 7}).ok());
  auto reply = client->receive(Deadline(kWaitSeconds));
  ASSERT_TRUE(reply.ok()) << reply.status().message();
  ASSERT_TRUE(reply->switch_notice.has_value());
  EXPECT_EQ(reply->switch_notice->step, 8);
  const PlannerStats stats = server->stats();
  EXPECT_EQ(stats.plans, 2);
  EXPECT_EQ(stats.switches, 1);
  EXPECT_EQ(stats.rejected, rejected);
  const std::vector<std::string> log = server->log_lines();
  server.reset();
  const std::string stderr_text = ::testing::internal::GetCapturedStderr();
  for (const std::string& line : log) {
    EXPECT_FALSE(shows_test_key(line)) << line;
    EXPECT_NE(stderr_text.find(line), std::string::npos) << "not on stderr: " << line;
  }
  EXPECT_FALSE(shows_test_key(stderr_text));
}

// A replayed frame on the connection that sent it: the first copy is answered, the second closes the
// connection.
TEST(PlannerServer, RejectsAReplayedFrame) {
  auto server = start_server();
  RawSocket socket(server->port());
  auto frame = frame_of(test_key(), Direction::kToPlanner, 1, plan_body(1));
  socket.send(frame);
  socket.send(frame);
  const RawSocket::Received received = socket.read_until_closed(kWaitSeconds);
  EXPECT_TRUE(received.closed);
  const std::vector<std::string> bodies = bodies_from_planner(received.bytes);
  ASSERT_EQ(bodies.size(), 1u);
  EXPECT_EQ(message_type(bodies[0]).value(), "placement");
  wait_for_rejections(*server, 1);
  EXPECT_NE(server->log_lines().back().find("counter 1 does not increase past 1"), std::string::npos);
  EXPECT_EQ(server->stats().plans, 1);
}

// A switch is given once per placement the connection received: a second `staged` for it is rejected, and
// so is a request id that does not increase.
TEST(PlannerServer, RejectsProtocolViolationsOfAnAuthenticatedPeer) {
  auto server = start_server();
  const PlannerKey key = test_key();
  {
    RawSocket socket(server->port());
    socket.send(frame_of(key, Direction::kToPlanner, 1, plan_body(5)));
    socket.send(frame_of(key, Direction::kToPlanner, 2, encode_staged({5, 1})));
    socket.send(frame_of(key, Direction::kToPlanner, 3, encode_staged({5, 1})));
    const RawSocket::Received received = socket.read_until_closed(kWaitSeconds);
    EXPECT_TRUE(received.closed);
    EXPECT_EQ(bodies_from_planner(received.bytes).size(), 2u);  // the placement and one switch
    wait_for_rejections(*server, 1);
    EXPECT_NE(server->log_lines().back().find("staged for request 5"), std::string::npos);
  }
  {
    RawSocket socket(server->port());
    socket.send(frame_of(key, Direction::kToPlanner, 1, plan_body(5)));
    socket.send(frame_of(key, Direction::kToPlanner, 2, plan_body(5)));
    const RawSocket::Received received = socket.read_until_closed(kWaitSeconds);
    EXPECT_TRUE(received.closed);
    EXPECT_EQ(bodies_from_planner(received.bytes).size(), 1u);
    wait_for_rejections(*server, 2);
    EXPECT_NE(server->log_lines().back().find("request 5 does not increase past 5"), std::string::npos);
  }
  EXPECT_EQ(server->stats().switches, 1);
}

// The client refuses to send a `staged` for a placement it never received.
TEST(PlannerClient, RefusesStagedForAnUnknownRequest) {
  auto server = start_server();
  auto client = connect_client(*server);
  const Status staged = client->send_staged({9, 1});
  EXPECT_EQ(staged.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(server->stats().rejected, 0);
}

// A late planner: the reply is not there right after the request, arrives after the delay, and two
// connections waiting at once are both answered after one delay (the server serves while it waits).
TEST(PlannerServer, ReplyDelay) {
  PlannerOptions options;
  options.reply_delay_seconds = 1.0;
  auto server = start_server(options);
  auto first = connect_client(*server);
  auto second = connect_client(*server);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(first->send_plan(golden_request(1)).ok());
  ASSERT_TRUE(second->send_plan(golden_request(1)).ok());
  auto early = first->poll();
  ASSERT_TRUE(early.ok()) << early.status().message();
  EXPECT_FALSE(early->has_value());
  for (PlannerClient* client : {first.get(), second.get()}) {
    auto reply = client->receive(Deadline(kWaitSeconds));
    ASSERT_TRUE(reply.ok()) << reply.status().message();
    ASSERT_TRUE(reply->placement.has_value());
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    EXPECT_GE(elapsed.count(), 0.95);
    EXPECT_LT(elapsed.count(), 1.9);
  }
  EXPECT_EQ(server->stats().plans, 2);
}

TEST(PlannerServer, RefusesConnectionsBeyondTheLimit) {
  PlannerOptions options;
  options.max_connections = 1;
  auto server = start_server(options);
  auto client = connect_client(*server);
  RawSocket extra(server->port());
  const RawSocket::Received received = extra.read_until_closed(kWaitSeconds);
  EXPECT_TRUE(received.closed);
  wait_for_rejections(*server, 1);
  EXPECT_NE(server->log_lines().back().find("max_connections (1) reached"), std::string::npos);
  expect_planned(*client, 1);
}

TEST(PlannerClient, TimesOutAndFailsToConnectWithMessages) {
  auto server = start_server();
  auto client = connect_client(*server);
  const auto timed_out = client->receive(Deadline(0.2));
  ASSERT_FALSE(timed_out.ok());
  EXPECT_EQ(timed_out.status().code(), StatusCode::kEnvironment);
  EXPECT_EQ(timed_out.status().message(),
            "timed out after 0.200 s waiting for the planner at 127.0.0.1:" + std::to_string(server->port()));
  // A port nobody listens on: bound but not listening, so connecting is refused.
  LoopbackSocket unheard;
  const int port = unheard.port();
  const auto refused = PlannerClient::connect("127.0.0.1", port, test_key(), 2.0);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kEnvironment);
  EXPECT_EQ(refused.status().message().rfind(
                "cannot connect to the planner at 127.0.0.1:" + std::to_string(port), 0),
            0u)
      << refused.status().message();
}

// A fake planner: a listening socket that answers with a frame the client must not accept.
class FakePlanner {
 public:
  FakePlanner() { EXPECT_EQ(::listen(listener_.fd(), 1), 0); }
  ~FakePlanner() {
    if (peer_ >= 0) ::close(peer_);
  }
  int port() const { return listener_.port(); }
  void accept_and_send(const std::vector<unsigned char>& bytes) {
    peer_ = ::accept(listener_.fd(), nullptr, nullptr);
    ASSERT_GE(peer_, 0);
    ASSERT_EQ(::send(peer_, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }

 private:
  LoopbackSocket listener_;
  int peer_ = -1;
};

std::string client_error_from(const std::vector<unsigned char>& bytes) {
  FakePlanner fake;
  auto client = PlannerClient::connect("127.0.0.1", fake.port(), test_key(), kWaitSeconds);
  EXPECT_TRUE(client.ok());
  if (!client.ok()) return "";
  fake.accept_and_send(bytes);
  auto reply = (*client)->receive(Deadline(kWaitSeconds));
  EXPECT_FALSE(reply.ok());
  if (reply.ok()) return "";
  EXPECT_EQ(reply.status().code(), StatusCode::kEnvironment);
  // Once failed, the client stays failed.
  EXPECT_EQ((*client)->send_staged({1, 1}).message(), reply.status().message());
  return reply.status().message();
}

// The client holds a planner to the protocol: an unauthenticated frame, a switch nobody asked for, a
// placement for no request.
TEST(PlannerClient, RejectsRepliesItDidNotAskFor) {
  const PlannerKey key = test_key();
  EXPECT_NE(client_error_from(frame_of(other_key(), Direction::kFromPlanner, 1, encode_switch({1, 2})))
                .find("bad MAC"),
            std::string::npos);
  EXPECT_NE(client_error_from(frame_of(key, Direction::kFromPlanner, 1, encode_switch({3, 2})))
                .find("sent a switch for request 3, which was not staged"),
            std::string::npos);
  EXPECT_NE(client_error_from(frame_of(key, Direction::kFromPlanner, 1,
                                       encode_plan_reply(answer_plan_request(golden_request(4)))))
                .find("sent a placement for request 4, which is not awaiting one"),
            std::string::npos);
  EXPECT_NE(client_error_from(frame_of(key, Direction::kToPlanner, 1, encode_switch({3, 2}))).find("bad MAC"),
            std::string::npos);
}

}  // namespace
}  // namespace eps::planner
