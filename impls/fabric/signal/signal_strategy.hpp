// Signal strategies (docs/fabrics.md 6.2): how a receiver learns that a stream of puts has fully arrived.
//
// Model. A transport operation (one dispatch or combine) sends, from every source rank to every target
// rank, one *stream*: zero or more data puts followed by exactly one signal put. The signal put writes a
// small record (per-channel token counts, a channel being a local expert or 0) into the target's signal
// memory and carries an immediate; where last_data_put_may_signal() and the target already knows the counts,
// the stream's last data put carries the signal's immediate instead and no record is sent. Operations
// alternate two buffer sets by `parity`; the strategies keep per-(source, parity) state, so a sender one
// operation ahead never disturbs the current one.
// Contract: once `stream_complete(source, parity, record)` is true, every byte of every data put of that
// stream is placed in the target's memory (docs/fabrics.md 6.2: observing a signal implies every earlier put
// of the same (source, channel) is placed).
//
// Strategies (immediates: impls/fabric/signal/imm_codec.hpp):
// - fabric-order: data puts carry no immediate; the signal's arrival completes the stream. Correct only
//   on ordered fabrics (fabric.hpp `ordered()`): creation refuses it on an unordered fabric unless
//   `allow_unsafe` (the negative control of docs/fabrics.md 6.3, which must then be caught failing).
// - imm-seq: every put of a (source -> target) pair carries the next sequence number mod 2^seq_bits; the
//   receiver keeps a window of W = 2^(seq_bits - 1) slots beyond its contiguous prefix and advances the
//   prefix only over contiguous sequence numbers; the stream is complete when the prefix has passed the
//   signal's number. A number outside the window, or seen twice, is an error (never silently accepted).
//   At most two operations' puts of one pair are ever in flight (a sender starts operation n+1 only after
//   its receives of operation n, which the target sent after finishing n-1), so creation requires
//   W > 2 x (max_puts_per_stream + 1).
// - recv-count: every data put carries (channel, tokens) in its immediate; the receiver counts tokens per
//   (source, parity, channel) and holds the signal until each channel's count equals the record's.
// - sender-barrier: data puts carry no immediate; the sender posts the signal only after the local
//   completions of all of the stream's data puts (which imply placement, fabric.hpp), so the signal's
//   arrival completes the stream on any fabric.
// Every immediate carries the source in 6 bits, so every strategy needs R <= 64 (checked at creation).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reference/common/status.hpp"

namespace eps::fabric {

inline constexpr int kDefaultSeqBits = 16;

struct SignalShape {
  int ranks = 1;                   // R
  int channels = 1;                // channels per stream (local experts for LL dispatch), in [1, 1024]
  int max_tokens_per_put = 1;      // rows one data put may carry
  int max_puts_per_stream = 1;     // data puts one stream may carry in one operation
  int seq_bits = kDefaultSeqBits;  // imm-seq: in [2, 23]
};

// The names --signal accepts: "auto", "fabric-order", "imm-seq", "recv-count", "sender-barrier".
const std::vector<std::string>& signal_strategy_names();

class SignalStrategy {
 public:
  virtual ~SignalStrategy() = default;
  virtual std::string_view name() const = 0;

  // Sender side. The immediate of the next data put of `tokens` rows on `channel` to `peer` (nullopt:
  // none), and of the stream's signal put. Calls must follow the issue order of the puts.
  virtual Result<std::optional<std::uint32_t>> data_imm(int peer, int parity, int channel, int tokens) = 0;
  virtual Result<std::uint32_t> signal_imm(int peer, int parity) = 0;
  // sender-barrier: the signal may only be posted after the stream's data puts completed locally.
  virtual bool signal_after_local_completion() const { return false; }
  // recv-count: every data put must carry rows of one channel only (its immediate names the channel);
  // the other strategies let a transport put a stream's rows of several channels at once.
  virtual bool per_channel_puts() const { return false; }
  // fabric-order and imm-seq: the stream's last data put may carry the signal itself (its immediate from
  // signal_imm, not data_imm; no signal record put) where the receiver knows the stream's counts without a
  // record. Their signal means "every earlier put of the stream is placed", and a put's immediate arrives
  // only after its own bytes are placed (docs/fabrics.md 6.1, 6.2). Not sender-barrier (its signal waits for
  // the data puts' local completions) nor recv-count (its signal waits for the counts of the record).
  virtual bool last_data_put_may_signal() const { return false; }

  // Receiver side: every remote completion of the fabric goes through on_remote (kInvalidArgument for a
  // malformed, out-of-window or duplicate immediate, naming the source and values).
  virtual Status on_remote(std::uint32_t imm) = 0;
  virtual bool signal_arrived(int source, int parity) const = 0;
  // `channel_tokens`: the record's per-channel token counts (read only once signal_arrived is true).
  virtual bool stream_complete(int source, int parity,
                               std::span<const std::int32_t> channel_tokens) const = 0;
  // Forgets (source, parity) after the operation consumed the stream.
  virtual void retire(int source, int parity) = 0;
  // What a timed-out wait on (source, parity) observed (docs/errors.md 10): counters expected versus seen.
  virtual std::string describe_wait(int source, int parity,
                                    std::span<const std::int32_t> channel_tokens) const = 0;
};

// Creates strategy `name` for this rank. "auto" picks fabric-order on ordered fabrics, imm-seq otherwise.
// kInvalidArgument (field "--signal") for an unknown name, fabric-order on an unordered fabric without
// allow_unsafe, or a shape beyond the strategy's encoding limits (ranks > 64, channels > 1024, tokens per put
// > 8191 for recv-count, a window too small for imm-seq), each naming the limit.
Result<std::unique_ptr<SignalStrategy>> make_signal_strategy(std::string_view name, bool fabric_ordered,
                                                             bool allow_unsafe, const SignalShape& shape,
                                                             int rank);

}  // namespace eps::fabric
