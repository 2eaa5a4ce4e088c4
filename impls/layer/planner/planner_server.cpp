// The planner server (planner.hpp): one thread, one poll(2) loop over the listening socket, an eventfd that
// request_stop() writes, and every nonblocking connection. Each connection has its own FrameReader, send
// counter and queue of delayed replies; a bad frame, a protocol violation or a timeout closes only that
// connection, after one log line and without any state change, and the others are served meanwhile.
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <thread>

#include "impls/layer/planner/net.hpp"
#include "impls/layer/planner/planner.hpp"

namespace eps::planner {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::size_t kReadChunk = 64 * 1024;
constexpr int kReadChunksPerWakeup = 16;    // then the other connections get their turn
constexpr int kPollCapMs = 1000;            // a missed wakeup costs at most this much
constexpr std::size_t kMaxLogReason = 300;  // a reason quoting a huge JSON value is cut
// A client that does not read its replies is closed before it can pile up more than this.
constexpr std::size_t kMaxOutgoingBytes = 4 * kMaxFrameBytes;
constexpr int kListenBacklog = 64;

Clock::duration seconds(double value) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(value));
}

struct DelayedReply {
  Clock::time_point due;
  std::uint64_t request = 0;
  bool has_placement = false;  // only a placement can be staged and switched to
  std::string body;
};

struct Connection {
  Connection(Fd socket, std::string peer_address, const PlannerKey& key, Clock::time_point now)
      : fd(std::move(socket)),
        peer(std::move(peer_address)),
        reader(key, Direction::kToPlanner),
        last_activity(now) {}

  Fd fd;
  std::string peer;
  FrameReader reader;
  std::uint64_t sent_counter = 0;
  std::vector<unsigned char> outgoing;
  std::size_t outgoing_sent = 0;
  Clock::time_point last_activity;
  std::optional<Clock::time_point> frame_started;
  std::uint64_t last_request = 0;
  std::set<std::uint64_t> placements_sent;  // awaiting their `staged`
  std::deque<DelayedReply> delayed;         // in due order: every reply has the same delay
  bool closed = false;
};

Status check_options(const PlannerOptions& options) {
  if (!(std::isfinite(options.reply_delay_seconds) && options.reply_delay_seconds >= 0)) {
    return invalid_argument("reply_delay_seconds", "must be a finite number >= 0, got {}",
                            options.reply_delay_seconds);
  }
  if (!(std::isfinite(options.frame_timeout_seconds) && options.frame_timeout_seconds > 0)) {
    return invalid_argument("frame_timeout_seconds", "must be a finite number > 0, got {}",
                            options.frame_timeout_seconds);
  }
  if (!(std::isfinite(options.idle_timeout_seconds) && options.idle_timeout_seconds > 0)) {
    return invalid_argument("idle_timeout_seconds", "must be a finite number > 0, got {}",
                            options.idle_timeout_seconds);
  }
  if (options.max_connections < 1)
    return out_of_range("max_connections", 1, 1 << 20, options.max_connections);
  if (options.port < 0 || options.port > 65535) return out_of_range("port", 0, 65535, options.port);
  return Status();
}

// One listening socket on the first address of `host` that binds.
Result<Fd> listen_on(const std::string& host, int port) {
  const std::string address = format_address(host, port);
  const std::string context = fmt::format("planner: cannot listen on {}", address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status(StatusCode::kEnvironment, fmt::format("{}: getaddrinfo: {}", context, ::gai_strerror(rc)));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);
  Status last = Status(StatusCode::kEnvironment, fmt::format("{}: no address", context));
  for (const addrinfo* a = addresses.get(); a != nullptr; a = a->ai_next) {
    Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (!fd.valid()) {
      last = system_failure(context, "socket", errno);
      continue;
    }
    const int on = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
      last = system_failure(context, "setsockopt(SO_REUSEADDR)", errno);
      continue;
    }
    if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      last = system_failure(context, "bind", errno);
      continue;
    }
    if (::listen(fd.get(), kListenBacklog) != 0) {
      last = system_failure(context, "listen", errno);
      continue;
    }
    return fd;
  }
  return last;
}

Result<int> bound_port(int fd, const std::string& host) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return system_failure(fmt::format("planner: listening on {}", host), "getsockname", errno);
  }
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

}  // namespace

struct PlannerServer::State {
  State(const PlannerOptions& opts, PlannerKey shared_key) : options(opts), key(std::move(shared_key)) {}

  // --- fixed at start
  PlannerOptions options;
  PlannerKey key;
  Fd listener;
  Fd wake;  // eventfd: request_stop() writes it to end the poll
  int port = 0;
  std::atomic<bool> stop{false};
  std::thread thread;

  // --- shared with other threads, under `mutex`
  mutable std::mutex mutex;
  PlannerStats stats;
  std::deque<std::string> log;
  Status serve_status;

  // --- the serving thread's own
  std::vector<std::unique_ptr<Connection>> connections;
  Clock::time_point listener_paused_until{};
  std::vector<unsigned char> read_buffer = std::vector<unsigned char>(kReadChunk);

  void serve();
  void serve_once();
  std::vector<pollfd> poll_set(Clock::time_point now) const;
  Clock::time_point next_deadline(Clock::time_point now) const;
  void drain_wake();
  void accept_connections();
  void admit(Fd fd, std::string peer);
  void read_from(Connection& c);
  void on_bytes(Connection& c, const unsigned char* data, std::size_t size);
  void on_message(Connection& c, const std::string& body);
  void on_plan(Connection& c, const std::string& body);
  void on_staged(Connection& c, const std::string& body);
  void release_due_replies(Connection& c, Clock::time_point now);
  void enforce_timeouts(Connection& c, Clock::time_point now);
  bool queue_frame(Connection& c, const std::string& body);
  void flush(Connection& c);
  void reject(Connection& c, std::string_view reason);
  void close_quietly(Connection& c);
  void add_log(std::string line);
  template <typename Update>
  void count(Update update) {
    std::lock_guard<std::mutex> lock(mutex);
    update(stats);
  }
};

void PlannerServer::State::serve() {
  while (!stop.load()) {
    serve_once();
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!serve_status.ok()) break;
    }
    std::erase_if(connections, [](const std::unique_ptr<Connection>& c) { return c->closed; });
  }
  connections.clear();  // closes every socket
  listener.reset();
}

std::vector<pollfd> PlannerServer::State::poll_set(Clock::time_point now) const {
  std::vector<pollfd> fds;
  fds.reserve(connections.size() + 2);
  fds.push_back({wake.get(), POLLIN, 0});
  // A paused listener (out of descriptors) is left out rather than polled in a busy loop.
  fds.push_back({now >= listener_paused_until ? listener.get() : -1, POLLIN, 0});
  for (const auto& c : connections) {
    const bool writing = c->outgoing_sent < c->outgoing.size();
    fds.push_back({c->fd.get(), static_cast<short>(POLLIN | (writing ? POLLOUT : 0)), 0});
  }
  return fds;
}

// The earliest moment something is due without any input: a delayed reply, a frame or idle timeout.
Clock::time_point PlannerServer::State::next_deadline(Clock::time_point now) const {
  Clock::time_point next = now + std::chrono::milliseconds(kPollCapMs);
  for (const auto& c : connections) {
    if (!c->delayed.empty()) next = std::min(next, c->delayed.front().due);
    if (c->frame_started) next = std::min(next, *c->frame_started + seconds(options.frame_timeout_seconds));
    next = std::min(next, c->last_activity + seconds(options.idle_timeout_seconds));
  }
  return next;
}

void PlannerServer::State::serve_once() {
  std::vector<pollfd> fds = poll_set(Clock::now());
  const int timeout = poll_timeout_ms(next_deadline(Clock::now()), kPollCapMs);
  if (::poll(fds.data(), fds.size(), timeout) < 0) {
    if (errno == EINTR) return;
    std::lock_guard<std::mutex> lock(mutex);
    serve_status = system_failure("planner", "poll", errno);
    return;
  }
  if (fds[0].revents != 0) drain_wake();
  // Connections first: the indexes of `fds` name them, and accepting appends to `connections`.
  for (std::size_t i = 0; i < connections.size(); ++i) {
    Connection& c = *connections[i];
    const short events = fds[i + 2].revents;
    if (events & (POLLIN | POLLHUP | POLLERR)) read_from(c);
    if (!c.closed && (events & POLLOUT)) flush(c);
  }
  if (fds[1].revents != 0) accept_connections();
  const Clock::time_point now = Clock::now();
  for (const auto& c : connections) {
    if (!c->closed) release_due_replies(*c, now);
    if (!c->closed) enforce_timeouts(*c, now);
  }
}

void PlannerServer::State::drain_wake() {
  std::uint64_t value = 0;
  // Nonblocking: EAGAIN only means another wakeup drained it first; `stop` is what counts.
  if (::read(wake.get(), &value, sizeof value) < 0 && errno != EAGAIN) {
    std::lock_guard<std::mutex> lock(mutex);
    serve_status = system_failure("planner", "read(eventfd)", errno);
  }
}

void PlannerServer::State::accept_connections() {
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    Fd fd(::accept4(listener.get(), reinterpret_cast<sockaddr*>(&address), &length,
                    SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (fd.valid()) {
      admit(std::move(fd), socket_address_text(reinterpret_cast<const sockaddr*>(&address), length));
      continue;
    }
    const int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) return;
    if (error == EINTR || error == ECONNABORTED || error == EPROTO) continue;  // that peer gave up
    // Out of descriptors or memory: stop accepting for a second instead of spinning on the listener.
    add_log(fmt::format("planner: accept failed: {}; not accepting for 1 s", errno_text(error)));
    listener_paused_until = Clock::now() + std::chrono::seconds(1);
    return;
  }
}

void PlannerServer::State::admit(Fd fd, std::string peer) {
  if (connections.size() >= static_cast<std::size_t>(options.max_connections)) {
    count([](PlannerStats& s) { ++s.rejected; });
    add_log(fmt::format("planner: refused {}: max_connections ({}) reached", peer, options.max_connections));
    return;  // `fd` closes here
  }
  if (const Status nodelay = set_no_delay(fd.get()); !nodelay.ok()) {
    add_log(fmt::format("planner: {}: {}", peer, nodelay.message()));  // slower, still correct
  }
  connections.push_back(std::make_unique<Connection>(std::move(fd), std::move(peer), key, Clock::now()));
  count([](PlannerStats& s) { ++s.connections; });
}

void PlannerServer::State::read_from(Connection& c) {
  for (int i = 0; i < kReadChunksPerWakeup && !c.closed; ++i) {
    const ssize_t n = ::recv(c.fd.get(), read_buffer.data(), read_buffer.size(), 0);
    if (n > 0) {
      on_bytes(c, read_buffer.data(), static_cast<std::size_t>(n));
      continue;
    }
    if (n == 0) {
      // An orderly close between frames is a normal goodbye; in the middle of one it is a truncated frame.
      if (c.reader.mid_frame()) {
        reject(c, "connection closed mid-frame");
      } else {
        close_quietly(c);
      }
      return;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    if (errno == EINTR) continue;
    // A client that closes with a reply still unread resets the connection: between frames, still a goodbye.
    if (errno == ECONNRESET && !c.reader.mid_frame()) return close_quietly(c);
    reject(c, fmt::format("recv failed: {}", errno_text(errno)));
    return;
  }
}

void PlannerServer::State::on_bytes(Connection& c, const unsigned char* data, std::size_t size) {
  const Clock::time_point now = Clock::now();
  c.last_activity = now;
  c.reader.append(data, size);
  while (!c.closed) {
    Result<std::optional<std::string>> frame = c.reader.next();
    if (!frame.ok()) return reject(c, frame.status().message());
    if (!frame->has_value()) break;
    on_message(c, **frame);
  }
  // The frame timeout runs from the first byte of a frame that is not complete yet.
  if (!c.reader.mid_frame()) {
    c.frame_started.reset();
  } else if (!c.frame_started) {
    c.frame_started = now;
  }
}

void PlannerServer::State::on_message(Connection& c, const std::string& body) {
  const Result<std::string> type = message_type(body);
  if (!type.ok()) return reject(c, type.status().message());
  if (*type == "plan") return on_plan(c, body);
  if (*type == "staged") return on_staged(c, body);
  reject(c, fmt::format("a \"{}\" message is never sent to the planner", *type));
}

void PlannerServer::State::on_plan(Connection& c, const std::string& body) {
  Result<PlanRequest> request = decode_plan_request(body);
  if (!request.ok()) return reject(c, request.status().message());
  if (request->request <= c.last_request) {
    return reject(c, fmt::format("request {} does not increase past {}", request->request, c.last_request));
  }
  c.last_request = request->request;
  const PlanReply reply = answer_plan_request(*request);
  c.delayed.push_back({Clock::now() + seconds(options.reply_delay_seconds), reply.request,
                       reply.placement.has_value(), encode_plan_reply(reply)});
  release_due_replies(c, Clock::now());
}

void PlannerServer::State::on_staged(Connection& c, const std::string& body) {
  const Result<StagedNotice> staged = decode_staged(body);
  if (!staged.ok()) return reject(c, staged.status().message());
  // Only a placement this very connection received can be switched to, and only once.
  if (c.placements_sent.erase(staged->request) == 0) {
    return reject(c, fmt::format("staged for request {}, for which this connection holds no placement",
                                 staged->request));
  }
  if (!queue_frame(c, encode_switch({staged->request, staged->step + 1}))) return;
  count([](PlannerStats& s) { ++s.switches; });
  flush(c);
}

void PlannerServer::State::release_due_replies(Connection& c, Clock::time_point now) {
  while (!c.closed && !c.delayed.empty() && c.delayed.front().due <= now) {
    DelayedReply reply = std::move(c.delayed.front());
    c.delayed.pop_front();
    if (!queue_frame(c, reply.body)) return;
    if (reply.has_placement) c.placements_sent.insert(reply.request);
    count([](PlannerStats& s) { ++s.plans; });
  }
  flush(c);
}

void PlannerServer::State::enforce_timeouts(Connection& c, Clock::time_point now) {
  if (c.frame_started && now - *c.frame_started > seconds(options.frame_timeout_seconds)) {
    return reject(c, fmt::format("frame not completed within {} s", options.frame_timeout_seconds));
  }
  if (now - c.last_activity > seconds(options.idle_timeout_seconds)) {
    reject(c, fmt::format("idle for {} s", options.idle_timeout_seconds));
  }
}

// Appends a frame to the connection's outgoing bytes (flush() writes them). Stats are counted between the
// two, so that whoever reads a reply also sees it counted.
bool PlannerServer::State::queue_frame(Connection& c, const std::string& body) {
  Result<std::vector<unsigned char>> frame =
      encode_frame(key, Direction::kFromPlanner, ++c.sent_counter, body);
  if (!frame.ok()) {
    reject(c, frame.status().message());
    return false;
  }
  if (c.outgoing.size() - c.outgoing_sent + frame->size() > kMaxOutgoingBytes) {
    reject(c, "does not read its replies");
    return false;
  }
  c.outgoing.insert(c.outgoing.end(), frame->begin(), frame->end());
  c.last_activity = Clock::now();
  return true;
}

void PlannerServer::State::flush(Connection& c) {
  while (c.outgoing_sent < c.outgoing.size()) {
    const ssize_t n = ::send(c.fd.get(), c.outgoing.data() + c.outgoing_sent,
                             c.outgoing.size() - c.outgoing_sent, MSG_NOSIGNAL);
    if (n >= 0) {
      c.outgoing_sent += static_cast<std::size_t>(n);
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // poll() reports when it can take more
    if (errno == EINTR) continue;
    // The peer went away (EPIPE, ECONNRESET): not an attack, but the connection is over.
    add_log(fmt::format("planner: closed {}: send failed: {}", c.peer, errno_text(errno)));
    return close_quietly(c);
  }
  c.outgoing.clear();
  c.outgoing_sent = 0;
}

void PlannerServer::State::reject(Connection& c, std::string_view reason) {
  if (c.closed) return;
  // One line per event, whatever a decoder quoted from the body.
  std::string shown(reason.substr(0, kMaxLogReason));
  std::replace_if(
      shown.begin(), shown.end(), [](char ch) { return ch == '\n' || ch == '\r'; }, ' ');
  add_log(fmt::format("planner: closed {}: {}{}", c.peer, shown, shown.size() < reason.size() ? " ..." : ""));
  count([](PlannerStats& s) { ++s.rejected; });
  close_quietly(c);
}

void PlannerServer::State::close_quietly(Connection& c) {
  c.closed = true;
  c.fd.reset();
  c.delayed.clear();
  c.outgoing.clear();
}

void PlannerServer::State::add_log(std::string line) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    log.push_back(line);
    if (log.size() > kMaxLogLines) log.pop_front();
  }
  if (options.on_log) {
    options.on_log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

Result<std::unique_ptr<PlannerServer>> PlannerServer::start(const PlannerOptions& options, PlannerKey key) {
  EPS_RETURN_IF_ERROR(check_options(options));
  if (key.bytes().size() < kMinKeyBytes) {
    return invalid_argument(kKeyVariable, "must hold at least {} bytes, got {}", kMinKeyBytes,
                            key.bytes().size());
  }
  auto state = std::make_unique<State>(options, std::move(key));
  EPS_ASSIGN_OR_RETURN(state->listener, listen_on(options.host, options.port));
  EPS_ASSIGN_OR_RETURN(state->port, bound_port(state->listener.get(), options.host));
  state->wake = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!state->wake.valid()) return system_failure("planner", "eventfd", errno);
  State* serving = state.get();
  state->thread = std::thread([serving] { serving->serve(); });
  return std::unique_ptr<PlannerServer>(new PlannerServer(std::move(state)));
}

PlannerServer::PlannerServer(std::unique_ptr<State> state) : state_(std::move(state)) {}

PlannerServer::~PlannerServer() {
  request_stop();
  wait();
}

int PlannerServer::port() const { return state_->port; }

PlannerStats PlannerServer::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

std::vector<std::string> PlannerServer::log_lines() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return {state_->log.begin(), state_->log.end()};
}

void PlannerServer::request_stop() {
  state_->stop.store(true);
  const std::uint64_t one = 1;
  // Async-signal-safe. Should the write fail (the counter cannot overflow in practice), the loop still sees
  // `stop` within its poll cap, so there is nothing to handle here.
  if (::write(state_->wake.get(), &one, sizeof one) < 0) return;
}

void PlannerServer::wait() {
  if (state_->thread.joinable()) state_->thread.join();
}

Status PlannerServer::serve_status() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->serve_status;
}

}  // namespace eps::planner
