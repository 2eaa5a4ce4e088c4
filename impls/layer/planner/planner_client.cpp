// Rank 0's side of the planner protocol (planner.hpp): a blocking connect with a timeout, then a nonblocking
// socket; sends wait for room at most the connect timeout, replies are polled or awaited until a deadline.
// The client holds the planner to the protocol too: a reply it did not ask for ends the connection.
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <map>
#include <set>

#include "impls/layer/planner/net.hpp"
#include "impls/layer/planner/planner.hpp"

namespace eps::planner {
namespace {

constexpr std::size_t kReadChunk = 64 * 1024;

// The shape a placement must have to answer a request.
struct PlanShape {
  int layers = 0;
  int slots = 0;
  int experts = 0;
  int ranks = 0;
  bool operator==(const PlanShape&) const = default;
};

PlanShape shape_of(const eplb::EplbProblem& problem) {
  return {static_cast<int>(problem.weight.size()), problem.num_replicas,
          problem.weight.empty() ? 0 : static_cast<int>(problem.weight[0].size()), problem.num_ranks};
}

PlanShape shape_of(const eplb::Placement& placement) {
  return {placement.num_layers, placement.num_slots, placement.num_experts, placement.num_ranks};
}

// Connects one resolved address within `deadline`; the socket stays nonblocking.
Result<Fd> connect_one(const addrinfo& a, const Deadline& deadline, const std::string& context) {
  Fd fd(::socket(a.ai_family, a.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a.ai_protocol));
  if (!fd.valid()) return system_failure(context, "socket", errno);
  if (::connect(fd.get(), a.ai_addr, a.ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) return system_failure(context, "connect", errno);
  for (;;) {
    pollfd p{fd.get(), POLLOUT, 0};
    const int ready = ::poll(&p, 1, poll_timeout_ms(deadline, 1000));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return system_failure(context, "poll", errno);
    if (ready > 0) break;
    if (deadline.expired()) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("{}: timed out after {:.3f} s", context, deadline.budget_seconds()));
    }
  }
  int error = 0;
  socklen_t length = sizeof error;
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
    return system_failure(context, "getsockopt(SO_ERROR)", errno);
  }
  if (error != 0) return system_failure(context, "connect", error);
  return fd;
}

}  // namespace

struct PlannerClient::State {
  State(std::string planner_address, PlannerKey shared_key, Fd socket, double timeout)
      : address(std::move(planner_address)),
        key(std::move(shared_key)),
        fd(std::move(socket)),
        io_timeout_seconds(timeout) {}

  std::string address;  // HOST:PORT, for messages
  PlannerKey key;       // before `reader`, which refers to it
  Fd fd;
  double io_timeout_seconds;
  FrameReader reader{key, Direction::kFromPlanner};
  std::uint64_t sent_counter = 0;
  std::uint64_t last_request = 0;
  std::map<std::uint64_t, PlanShape> awaiting_placement;
  std::set<std::uint64_t> placed;                         // placement received, not staged yet
  std::map<std::uint64_t, std::int64_t> awaiting_switch;  // request -> staged step
  bool peer_closed = false;
  Status failure;  // once set, every call returns it

  Status fail(std::string_view reason);
  Status send_frame(const std::string& body);
  Status read_available();
  Result<std::optional<Reply>> next_reply();
  Result<Reply> interpret(const std::string& body);
  Result<Reply> interpret_placement(const std::string& body);
  Result<Reply> interpret_switch(const std::string& body);
};

Status PlannerClient::State::fail(std::string_view reason) {
  failure = Status(StatusCode::kEnvironment, fmt::format("planner at {}: {}", address, reason));
  fd.reset();
  return failure;
}

Status PlannerClient::State::send_frame(const std::string& body) {
  EPS_ASSIGN_OR_RETURN(const std::vector<unsigned char> frame,
                       encode_frame(key, Direction::kToPlanner, sent_counter + 1, body));
  ++sent_counter;
  const Deadline deadline(io_timeout_seconds);
  std::size_t sent = 0;
  while (sent < frame.size()) {
    const ssize_t n = ::send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n >= 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return fail(fmt::format("send failed: {}", errno_text(errno)));
    if (deadline.expired()) {
      // Part of a frame may be out: the stream cannot be resumed.
      return fail(fmt::format("timed out after {:.3f} s sending a frame", deadline.budget_seconds()));
    }
    pollfd p{fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, poll_timeout_ms(deadline, 1000)) < 0 && errno != EINTR)
      return fail(fmt::format("poll failed: {}", errno_text(errno)));
  }
  return Status();
}

Status PlannerClient::State::read_available() {
  std::vector<unsigned char> chunk(kReadChunk);
  while (!peer_closed) {
    const ssize_t n = ::recv(fd.get(), chunk.data(), chunk.size(), 0);
    if (n > 0) {
      reader.append(chunk.data(), static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      peer_closed = true;  // what arrived before the close is still delivered
      break;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    return fail(fmt::format("recv failed: {}", errno_text(errno)));
  }
  return Status();
}

Result<std::optional<PlannerClient::Reply>> PlannerClient::State::next_reply() {
  Result<std::optional<std::string>> frame = reader.next();
  if (!frame.ok()) return fail(frame.status().message());
  if (!frame->has_value()) return std::optional<Reply>();
  EPS_ASSIGN_OR_RETURN(Reply reply, interpret(**frame));
  return std::optional<Reply>(std::move(reply));
}

Result<PlannerClient::Reply> PlannerClient::State::interpret(const std::string& body) {
  const Result<std::string> type = message_type(body);
  if (!type.ok()) return fail(type.status().message());
  if (*type == "placement") return interpret_placement(body);
  if (*type == "switch") return interpret_switch(body);
  return fail(fmt::format("a \"{}\" message is never sent by the planner", *type));
}

Result<PlannerClient::Reply> PlannerClient::State::interpret_placement(const std::string& body) {
  Result<PlanReply> reply = decode_plan_reply(body);
  if (!reply.ok()) return fail(reply.status().message());
  const auto asked = awaiting_placement.find(reply->request);
  if (asked == awaiting_placement.end()) {
    return fail(fmt::format("sent a placement for request {}, which is not awaiting one", reply->request));
  }
  if (reply->placement && !(shape_of(*reply->placement) == asked->second)) {
    return fail(
        fmt::format("the placement for request {} does not have the shape of its problem", reply->request));
  }
  awaiting_placement.erase(asked);
  if (reply->placement) placed.insert(reply->request);
  Reply out;
  out.placement = std::move(reply).value();
  return out;
}

Result<PlannerClient::Reply> PlannerClient::State::interpret_switch(const std::string& body) {
  Result<SwitchNotice> notice = decode_switch(body);
  if (!notice.ok()) return fail(notice.status().message());
  const auto staged = awaiting_switch.find(notice->request);
  if (staged == awaiting_switch.end()) {
    return fail(fmt::format("sent a switch for request {}, which was not staged", notice->request));
  }
  if (notice->step != staged->second + 1) {
    return fail(fmt::format("sent switch step {} for request {}, staged at step {}", notice->step,
                            notice->request, staged->second));
  }
  awaiting_switch.erase(staged);
  Reply out;
  out.switch_notice = *notice;
  return out;
}

Result<std::unique_ptr<PlannerClient>> PlannerClient::connect(const std::string& host, int port,
                                                              PlannerKey key, double timeout_seconds) {
  const std::string address = format_address(host, port);
  const std::string context = fmt::format("cannot connect to the planner at {}", address);
  if (key.bytes().size() < kMinKeyBytes) {
    return invalid_argument(kKeyVariable, "must hold at least {} bytes, got {}", kMinKeyBytes,
                            key.bytes().size());
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status(StatusCode::kEnvironment, fmt::format("{}: getaddrinfo: {}", context, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  const Deadline deadline(timeout_seconds);
  Status last(StatusCode::kEnvironment, fmt::format("{}: no address", context));
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    Result<Fd> fd = connect_one(*a, deadline, context);
    if (!fd.ok()) {
      last = fd.status();
      if (deadline.expired()) break;
      continue;
    }
    if (const Status nodelay = set_no_delay(fd->get()); !nodelay.ok()) return nodelay;
    auto state = std::make_unique<State>(address, std::move(key), std::move(fd).value(), timeout_seconds);
    return std::unique_ptr<PlannerClient>(new PlannerClient(std::move(state)));
  }
  return last;
}

PlannerClient::PlannerClient(std::unique_ptr<State> state) : state_(std::move(state)) {}

PlannerClient::~PlannerClient() = default;

Status PlannerClient::send_plan(const PlanRequest& message) {
  State& s = *state_;
  if (!s.failure.ok()) return s.failure;
  if (message.request <= s.last_request) {
    return invalid_argument("request", "must increase past {}, got {}", s.last_request, message.request);
  }
  // A problem the planner would refuse as malformed is reported here, naming its field, instead of as a
  // closed connection.
  const Status valid = eplb::validate_problem(message.problem);
  if (!valid.ok()) return Status(valid.code(), "problem." + valid.message());
  EPS_RETURN_IF_ERROR(s.send_frame(encode_plan_request(message)));
  s.last_request = message.request;
  s.awaiting_placement[message.request] = shape_of(message.problem);
  return Status();
}

Status PlannerClient::send_staged(const StagedNotice& message) {
  State& s = *state_;
  if (!s.failure.ok()) return s.failure;
  if (s.placed.count(message.request) == 0) {
    return invalid_argument("request", "no placement for request {} was received (or it was staged already)",
                            message.request);
  }
  EPS_RETURN_IF_ERROR(s.send_frame(encode_staged(message)));
  s.placed.erase(message.request);
  s.awaiting_switch[message.request] = message.step;
  return Status();
}

Result<std::optional<PlannerClient::Reply>> PlannerClient::poll() {
  State& s = *state_;
  if (!s.failure.ok()) return s.failure;
  EPS_ASSIGN_OR_RETURN(std::optional<Reply> buffered, s.next_reply());
  if (buffered) return buffered;
  EPS_RETURN_IF_ERROR(s.read_available());
  EPS_ASSIGN_OR_RETURN(std::optional<Reply> arrived, s.next_reply());
  if (arrived) return arrived;
  if (s.peer_closed) return s.fail("the planner closed the connection");
  return std::optional<Reply>();
}

Result<PlannerClient::Reply> PlannerClient::receive(const Deadline& deadline) {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(std::optional<Reply> reply, poll());
    if (reply) return std::move(reply).value();
    if (deadline.expired()) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("timed out after {:.3f} s waiting for the planner at {}",
                                deadline.budget_seconds(), state_->address));
    }
    pollfd p{state_->fd.get(), POLLIN, 0};
    if (::poll(&p, 1, poll_timeout_ms(deadline, 1000)) < 0 && errno != EINTR) {
      return state_->fail(fmt::format("poll failed: {}", errno_text(errno)));
    }
  }
}

}  // namespace eps::planner
