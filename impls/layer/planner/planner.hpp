// The EPLB planner and its authenticated protocol (docs/eplb.md 8.6, 8.7).
//
// A planner turns the loads the ranks measured into a placement, asynchronously: rank 0 of a run is its only
// client. It is a separate process (`epsuite planner --listen HOST:PORT`) or a thread of rank 0 (an
// in-process `PlannerServer` on 127.0.0.1 and an ephemeral port); both speak the same protocol over TCP.
//
// Frames. Every message is one frame:
//   u32 length (little endian) of what follows, at most kMaxFrameBytes
//   u64 counter (little endian): strictly increasing per connection and direction, the first is 1
//   32-byte HMAC-SHA256 keyed by the shared key over (u8 direction, u64 counter, body)
//   body: one JSON object {"type": "...", ...} (the messages below)
// The direction byte (1 toward the planner, 2 from it) is MACed but not sent, so a frame cannot be reflected
// back to its sender. A receiver rejects a frame with a wrong MAC, a counter not greater than the last one it
// accepted on that connection, a length above the cap or below 40, a malformed body or a message that makes
// no sense in the protocol's state (a `staged` for a plan this connection was never sent, a request id that
// does not increase): it closes the connection, logs one line naming the peer and the reason (never the key
// nor the MAC), and changes no state. The MAC is checked before anything else in the frame is believed, so an
// unauthenticated peer learns nothing but a closed connection. A connection that starts a frame and does
// not finish it within the frame timeout, or that sends nothing for the idle timeout, is closed the same
// way; other connections are served meanwhile.
//
// Key. EPSUITE_EPLB_KEY holds the key as hex (at least 64 hex digits, i.e. 32 bytes) or as `@FILE`, a file
// whose content (trailing whitespace stripped) is that hex. The key is never printed, logged or stored; error
// messages name the variable, not its value. Without a key the planner process refuses to start (exit 2);
// an in-process planner without EPSUITE_EPLB_KEY uses a fresh random key known only to rank 0.
//
// Messages (client = rank 0, planner = server):
//   plan     client -> planner: {"type":"plan","request":N,"policy":NAME,"step":S,"problem":{...}}
//            the docs/eplb.md problem (weight [layers][E], num_replicas, num_groups, num_nodes, num_ranks,
//            optional traffic [layers][R][E], optional current {phy2log, replica_index}, max_move,
//            threshold, cost_local, cost_remote; the schema of `epsuite ref eplb`, eplb_json.hpp), measured
//            over the window that ended after step S. N is in [1, 2^63) and greater than every earlier
//            request on its connection.
//   placement planner -> client: {"type":"placement","request":N,"num_experts":E,"num_ranks":R,
//            "phy2log":[[...]],"replica_index":[[...]],"planner_us":T} or, when the policy refused the
//            problem, {"type":"placement","request":N,"error":"...","planner_us":T}. `planner_us` is the
//            policy's run time in the planner.
//   staged   client -> planner: {"type":"staged","request":N,"step":S}: every rank staged the weights of
//            plan N by the end of step S.
//   switch   planner -> client: {"type":"switch","request":N,"step":S+1}: all ranks switch to plan N before
//            step S + 1. Sent only after the first `staged` for a plan this connection received (a second
//            `staged` for the same plan is rejected).
// The client holds the planner to the same rules: a placement for a request it did not send (or of another
// shape), or a switch it did not ask for, is a protocol error.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"
#include "reference/eplb/placement.hpp"
#include "reference/eplb/policy.hpp"

namespace eps::planner {

inline constexpr std::size_t kMaxFrameBytes = std::size_t{16} << 20;  // docs/eplb.md 8.7 length cap
inline constexpr std::size_t kMinKeyBytes = 32;
inline constexpr std::string_view kKeyVariable = "EPSUITE_EPLB_KEY";

// The shared key. Its bytes are reachable only through `bytes()`; nothing formats it.
class PlannerKey {
 public:
  PlannerKey() = default;
  PlannerKey(const PlannerKey&) = default;
  PlannerKey(PlannerKey&&) = default;
  PlannerKey& operator=(const PlannerKey&) = default;
  PlannerKey& operator=(PlannerKey&&) = default;
  ~PlannerKey();  // wipes the bytes (OPENSSL_cleanse)

  // From EPSUITE_EPLB_KEY (see above). kInvalidArgument naming EPSUITE_EPLB_KEY when it is absent, not hex,
  // shorter than 32 bytes, or names a file that cannot be read.
  static Result<PlannerKey> from_environment();
  // From the text of the variable (hex or @FILE), for tests and the CLI.
  static Result<PlannerKey> from_text(std::string_view text);
  // 32 random bytes (OpenSSL RAND_bytes).
  static Result<PlannerKey> random();
  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;
};

enum class Direction : std::uint8_t { kToPlanner = 1, kFromPlanner = 2 };

// A frame's parts and its encoding (see above). `encode_frame` returns the bytes to write (kInvalidArgument
// when the body does not fit the cap, kEnvironment when OpenSSL fails); `FrameReader` takes bytes as they
// arrive and yields verified bodies in order.
inline constexpr std::size_t kFrameHeaderBytes = 4;            // the length field
inline constexpr std::size_t kMacBytes = 32;                   // HMAC-SHA256
inline constexpr std::size_t kMinFrameLength = 8 + kMacBytes;  // counter and MAC, empty body
Result<std::vector<unsigned char>> encode_frame(const PlannerKey& key, Direction direction,
                                                std::uint64_t counter, std::string_view body);

class FrameReader {
 public:
  FrameReader(const PlannerKey& key, Direction direction) : key_(key), direction_(direction) {}
  // Appends received bytes.
  void append(const unsigned char* data, std::size_t size);
  // The next complete frame's body once it is verified (MAC, counter, length); nullopt while incomplete;
  // kInvalidArgument with the reason ("frame length 99999999 exceeds the 16 MiB cap", "bad MAC", "counter 3
  // does not increase past 5") on a bad frame, after which the reader stays failed.
  Result<std::optional<std::string>> next();
  bool mid_frame() const { return !buffer_.empty(); }  // part of a frame is buffered

 private:
  Result<std::optional<std::string>> fail(Status status);

  const PlannerKey& key_;  // must outlive the reader
  Direction direction_;
  std::vector<unsigned char> buffer_;
  std::uint64_t last_counter_ = 0;
  Status failure_;  // the first bad frame's reason; the reader stays failed after it
};

// The messages (see above).
struct PlanRequest {
  std::uint64_t request = 0;
  std::string policy;
  std::int64_t step = 0;
  eplb::EplbProblem problem;
};
struct PlanReply {
  std::uint64_t request = 0;
  std::optional<eplb::Placement> placement;  // absent when the policy refused: see error
  std::string error;
  double planner_us = 0;
};
struct StagedNotice {
  std::uint64_t request = 0;
  std::int64_t step = 0;
};
struct SwitchNotice {
  std::uint64_t request = 0;
  std::int64_t step = 0;
};

std::string encode_plan_request(const PlanRequest& message);
std::string encode_plan_reply(const PlanReply& message);
std::string encode_staged(const StagedNotice& message);
std::string encode_switch(const SwitchNotice& message);
// Decoders check every field (types, shapes, ranges; a placement is checked with eplb::check_placement)
// and name the first bad one.
Result<PlanRequest> decode_plan_request(std::string_view body);
Result<PlanReply> decode_plan_reply(std::string_view body);
Result<StagedNotice> decode_staged(std::string_view body);
Result<SwitchNotice> decode_switch(std::string_view body);
// The body's "type" ("plan", "placement", "staged", "switch"), or an error for a malformed body.
Result<std::string> message_type(std::string_view body);

// Runs the policy of a request: the placement, or the policy's error as a reply; planner_us measured.
PlanReply answer_plan_request(const PlanRequest& request);

struct PlannerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                       // 0 = an ephemeral port (see PlannerServer::port)
  double reply_delay_seconds = 0;     // answer `plan` only this long after it arrived (tests: a late planner)
  double frame_timeout_seconds = 10;  // a started frame must complete within this
  double idle_timeout_seconds = 600;  // a connection silent this long (both ways) is closed
  int max_connections = 64;           // further connections are closed at once (and counted as rejected)
  // Where each log line goes as well as log_lines(), called on the serving thread; stderr when empty.
  std::function<void(const std::string&)> on_log;
};

// What a server did, for tests and its log.
struct PlannerStats {
  std::int64_t connections = 0;
  std::int64_t plans = 0;     // plan requests answered
  std::int64_t switches = 0;  // switch notices sent
  std::int64_t rejected = 0;  // frames or connections rejected (bad MAC, counter, length, body, timeout)
};

// A planner on a TCP socket, served by one thread. `start` binds and listens (kEnvironment naming the
// address when that fails) and returns once it accepts connections.
class PlannerServer {
 public:
  static Result<std::unique_ptr<PlannerServer>> start(const PlannerOptions& options, PlannerKey key);
  ~PlannerServer();  // stops and joins the thread
  int port() const;
  PlannerStats stats() const;
  // Each rejection's log line ("planner: closed 127.0.0.1:5555: bad MAC"), oldest first; the last
  // kMaxLogLines only, so that a flood of bad connections cannot grow memory.
  static constexpr std::size_t kMaxLogLines = 1000;
  std::vector<std::string> log_lines() const;
  // Asks the serving thread to stop. Async-signal-safe (an atomic store and a write(2)), so the CLI calls it
  // from its SIGINT/SIGTERM handler.
  void request_stop();
  // Blocks until the serving thread has stopped (after request_stop, or after a failure of its own); call
  // it from one thread only.
  void wait();
  // Why the serving thread stopped: OK after request_stop, kEnvironment naming the failed call otherwise.
  Status serve_status() const;

 private:
  struct State;
  explicit PlannerServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Rank 0's side of one connection.
class PlannerClient {
 public:
  // Connects within `timeout_seconds` (kEnvironment naming HOST:PORT when it cannot); each later send
  // waits at most that long for room in the socket.
  static Result<std::unique_ptr<PlannerClient>> connect(const std::string& host, int port, PlannerKey key,
                                                        double timeout_seconds);
  ~PlannerClient();
  // kInvalidArgument, before anything is sent, for a request id that does not increase or a problem that
  // fails eplb::validate_problem ("problem.<field>: ...").
  Status send_plan(const PlanRequest& message);
  // kInvalidArgument unless a placement for that request was received and not staged yet.
  Status send_staged(const StagedNotice& message);
  // Without waiting: the next reply if one has fully arrived, else nullopt. A bad frame from the planner,
  // a closed connection, a malformed reply or one the client did not ask for is kEnvironment, and the
  // client stays failed (every later call returns that error).
  struct Reply {
    std::optional<PlanReply> placement;
    std::optional<SwitchNotice> switch_notice;
  };
  Result<std::optional<Reply>> poll();
  // Waits for the next reply until `deadline` (kEnvironment "timed out after ... waiting for the planner").
  Result<Reply> receive(const Deadline& deadline);

 private:
  struct State;
  explicit PlannerClient(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// "HOST:PORT" or "[IPV6]:PORT" -> host, port in [min_port, 65535] (errors name `field`); a listening
// address may use min_port 0 (an ephemeral port).
Result<std::pair<std::string, int>> parse_address(std::string_view field, std::string_view text,
                                                  int min_port = 1);
// "HOST:PORT", with brackets around an IPv6 host.
std::string format_address(const std::string& host, int port);

}  // namespace eps::planner
