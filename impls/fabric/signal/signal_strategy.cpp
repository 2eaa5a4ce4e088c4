#include "impls/fabric/signal/signal_strategy.hpp"

#include <fmt/format.h>

#include "impls/fabric/signal/imm_codec.hpp"

namespace eps::fabric {
namespace {

// What every strategy shares: the rank, the shape and which (source, parity) signals arrived.
class StrategyBase : public SignalStrategy {
 public:
  StrategyBase(const SignalShape& shape, int rank)
      : shape_(shape), rank_(rank), arrived_(static_cast<std::size_t>(2 * shape.ranks), 0) {}

  Result<std::uint32_t> signal_imm(int /*peer*/, int parity) override {
    return encode_imm({ImmKind::kSignal, parity, rank_, 0});
  }
  bool signal_arrived(int source, int parity) const override { return arrived_[slot(source, parity)] != 0; }
  void retire(int source, int parity) override { arrived_[slot(source, parity)] = 0; }

 protected:
  std::size_t slot(int source, int parity) const { return static_cast<std::size_t>(2 * source + parity); }

  // Decodes and range-checks a received immediate.
  Result<ImmFields> decode(std::uint32_t imm) const {
    EPS_ASSIGN_OR_RETURN(ImmFields f, decode_imm(imm));
    if (f.source >= shape_.ranks) {
      return invalid_argument("imm.source",
                              "{}: rank {} got an immediate {:#010x} from rank {}, beyond the {} ranks",
                              name(), rank_, imm, f.source, shape_.ranks);
    }
    return f;
  }

  Status mark_signal(const ImmFields& f, std::uint32_t imm) {
    std::uint8_t& arrived = arrived_[slot(f.source, f.parity)];
    if (arrived != 0) {
      return invalid_argument("imm", "{}: rank {} got a second signal {:#010x} from rank {} for parity {}",
                              name(), rank_, imm, f.source, f.parity);
    }
    arrived = 1;
    return Status();
  }

  SignalShape shape_;
  int rank_;

 private:
  std::vector<std::uint8_t> arrived_;
};

// fabric-order and sender-barrier: the signal alone completes the stream; they differ on the sender side.
class SignalOnly final : public StrategyBase {
 public:
  SignalOnly(const SignalShape& shape, int rank, bool sender_barrier)
      : StrategyBase(shape, rank), sender_barrier_(sender_barrier) {}
  std::string_view name() const override { return sender_barrier_ ? "sender-barrier" : "fabric-order"; }
  Result<std::optional<std::uint32_t>> data_imm(int, int, int, int) override {
    return std::optional<std::uint32_t>();
  }
  bool signal_after_local_completion() const override { return sender_barrier_; }
  bool last_data_put_may_signal() const override { return !sender_barrier_; }

  Status on_remote(std::uint32_t imm) override {
    EPS_ASSIGN_OR_RETURN(ImmFields f, decode(imm));
    if (f.kind != ImmKind::kSignal) {
      return invalid_argument("imm", "{}: data puts carry no immediate, got {:#010x} from rank {}", name(),
                              imm, f.source);
    }
    return mark_signal(f, imm);
  }
  bool stream_complete(int source, int parity, std::span<const std::int32_t>) const override {
    return signal_arrived(source, parity);
  }
  std::string describe_wait(int source, int parity, std::span<const std::int32_t>) const override {
    return fmt::format("{} signal from rank {} (parity {}) not yet arrived", name(), source, parity);
  }

 private:
  bool sender_barrier_;
};

class ImmSeq final : public StrategyBase {
 public:
  ImmSeq(const SignalShape& shape, int rank)
      : StrategyBase(shape, rank),
        modulus_(std::uint64_t{1} << shape.seq_bits),
        window_(modulus_ / 2),
        next_(static_cast<std::size_t>(shape.ranks), 0),
        prefix_(static_cast<std::size_t>(shape.ranks), 0),
        seen_(static_cast<std::size_t>(shape.ranks)),
        signal_at_(static_cast<std::size_t>(2 * shape.ranks), kNone) {}

  std::string_view name() const override { return "imm-seq"; }
  // The signal's number follows every data put's number, whichever put carries it.
  bool last_data_put_may_signal() const override { return true; }

  Result<std::optional<std::uint32_t>> data_imm(int peer, int parity, int, int) override {
    EPS_ASSIGN_OR_RETURN(std::uint32_t imm, next_imm(ImmKind::kData, peer, parity));
    return std::optional<std::uint32_t>(imm);
  }
  Result<std::uint32_t> signal_imm(int peer, int parity) override {
    return next_imm(ImmKind::kSignal, peer, parity);
  }

  Status on_remote(std::uint32_t imm) override {
    EPS_ASSIGN_OR_RETURN(ImmFields f, decode(imm));
    const auto s = static_cast<std::size_t>(f.source);
    const std::uint64_t offset = (f.payload - prefix_[s] % modulus_) % modulus_;
    if (offset >= window_) {
      return invalid_argument(
          "imm.seq",
          "imm-seq: rank {} got sequence {} from rank {} outside its window [{}, {} + {}) mod "
          "{}: a duplicate or more puts in flight than the window allows",
          rank_, f.payload, f.source, prefix_[s] % modulus_, prefix_[s] % modulus_, window_, modulus_);
    }
    const std::uint64_t at = prefix_[s] + offset;
    if (!mark_seen(s, at % window_)) {
      return invalid_argument("imm.seq", "imm-seq: rank {} got sequence {} from rank {} twice", rank_,
                              f.payload, f.source);
    }
    if (f.kind == ImmKind::kSignal) {
      EPS_RETURN_IF_ERROR(mark_signal(f, imm));
      signal_at_[slot(f.source, f.parity)] = at;
    }
    while (take_seen(s, prefix_[s] % window_)) ++prefix_[s];
    return Status();
  }

  bool stream_complete(int source, int parity, std::span<const std::int32_t>) const override {
    const std::uint64_t at = signal_at_[slot(source, parity)];
    return at != kNone && prefix_[static_cast<std::size_t>(source)] > at;
  }
  void retire(int source, int parity) override {
    StrategyBase::retire(source, parity);
    signal_at_[slot(source, parity)] = kNone;
  }
  std::string describe_wait(int source, int parity, std::span<const std::int32_t>) const override {
    const std::uint64_t at = signal_at_[slot(source, parity)];
    return fmt::format("imm-seq from rank {} (parity {}): contiguous prefix {} (mod {}), signal {}", source,
                       parity, prefix_[static_cast<std::size_t>(source)] % modulus_, modulus_,
                       at == kNone ? std::string("not yet arrived") : fmt::format("at {}", at % modulus_));
  }

 private:
  static constexpr std::uint64_t kNone = ~std::uint64_t{0};

  // The window of a source is one bit per slot, allocated when its first immediate arrives: a rank keeps
  // 2^(seq_bits - 1) / 8 bytes per peer that sends to it (512 KiB at 23 bits), not per rank of the job.
  bool mark_seen(std::size_t source, std::uint64_t window_slot) {
    std::vector<std::uint64_t>& bits = seen_[source];
    if (bits.empty()) bits.assign(static_cast<std::size_t>((window_ + 63) / 64), 0);
    std::uint64_t& word = bits[static_cast<std::size_t>(window_slot / 64)];
    const std::uint64_t mask = std::uint64_t{1} << (window_slot % 64);
    if ((word & mask) != 0) return false;
    word |= mask;
    return true;
  }
  // Clears the slot and says whether it was set.
  bool take_seen(std::size_t source, std::uint64_t window_slot) {
    std::uint64_t& word = seen_[source][static_cast<std::size_t>(window_slot / 64)];
    const std::uint64_t mask = std::uint64_t{1} << (window_slot % 64);
    const bool was_set = (word & mask) != 0;
    word &= ~mask;
    return was_set;
  }

  Result<std::uint32_t> next_imm(ImmKind kind, int peer, int parity) {
    const std::uint64_t seq = next_[static_cast<std::size_t>(peer)]++ % modulus_;
    return encode_imm({kind, parity, rank_, static_cast<std::uint32_t>(seq)});
  }

  std::uint64_t modulus_;
  std::uint64_t window_;
  std::vector<std::uint64_t> next_;               // per peer: sequence numbers sent (absolute)
  std::vector<std::uint64_t> prefix_;             // per source: contiguous numbers received (absolute)
  std::vector<std::vector<std::uint64_t>> seen_;  // per source: window slots beyond the prefix, one bit each
  std::vector<std::uint64_t> signal_at_;          // per (source, parity): absolute number of the signal
};

class RecvCount final : public StrategyBase {
 public:
  RecvCount(const SignalShape& shape, int rank)
      : StrategyBase(shape, rank), counted_(static_cast<std::size_t>(2 * shape.ranks * shape.channels), 0) {}

  std::string_view name() const override { return "recv-count"; }
  bool per_channel_puts() const override { return true; }

  Result<std::optional<std::uint32_t>> data_imm(int, int parity, int channel, int tokens) override {
    if (channel >= shape_.channels) return out_of_range("imm.channel", 0, shape_.channels - 1, channel);
    EPS_ASSIGN_OR_RETURN(std::uint32_t payload, encode_count_payload(channel, tokens));
    EPS_ASSIGN_OR_RETURN(std::uint32_t imm, encode_imm({ImmKind::kData, parity, rank_, payload}));
    return std::optional<std::uint32_t>(imm);
  }

  Status on_remote(std::uint32_t imm) override {
    EPS_ASSIGN_OR_RETURN(ImmFields f, decode(imm));
    if (f.kind == ImmKind::kSignal) return mark_signal(f, imm);
    const int channel = payload_channel(f.payload);
    if (channel >= shape_.channels) {
      return invalid_argument("imm.channel",
                              "recv-count: rank {} got channel {} from rank {}, beyond {} channels", rank_,
                              channel, f.source, shape_.channels);
    }
    counted_[index(f.source, f.parity, channel)] += payload_tokens(f.payload);
    return Status();
  }

  bool stream_complete(int source, int parity, std::span<const std::int32_t> tokens) const override {
    if (!signal_arrived(source, parity)) return false;
    for (int c = 0; c < shape_.channels; ++c) {
      if (counted_[index(source, parity, c)] !=
          static_cast<std::int64_t>(tokens[static_cast<std::size_t>(c)])) {
        return false;
      }
    }
    return true;
  }
  void retire(int source, int parity) override {
    StrategyBase::retire(source, parity);
    for (int c = 0; c < shape_.channels; ++c) counted_[index(source, parity, c)] = 0;
  }
  std::string describe_wait(int source, int parity, std::span<const std::int32_t> tokens) const override {
    if (!signal_arrived(source, parity)) {
      return fmt::format("recv-count signal from rank {} (parity {}) not yet arrived", source, parity);
    }
    for (int c = 0; c < shape_.channels; ++c) {
      const std::int64_t seen = counted_[index(source, parity, c)];
      if (seen != tokens[static_cast<std::size_t>(c)]) {
        return fmt::format("recv-count from rank {} (parity {}), channel {}: tokens expected {}, observed {}",
                           source, parity, c, tokens[static_cast<std::size_t>(c)], seen);
      }
    }
    return fmt::format("recv-count from rank {} (parity {}) complete", source, parity);
  }

 private:
  std::size_t index(int source, int parity, int channel) const {
    return (static_cast<std::size_t>(source) * 2 + static_cast<std::size_t>(parity)) *
               static_cast<std::size_t>(shape_.channels) +
           static_cast<std::size_t>(channel);
  }
  std::vector<std::int64_t> counted_;
};

Status check_shape(std::string_view name, const SignalShape& shape) {
  if (shape.ranks < 1 || shape.ranks > kMaxImmSources) {
    return invalid_argument("--signal", "{} encodes the source rank in {} bits: at most {} ranks, got {}",
                            name, kImmSourceBits, kMaxImmSources, shape.ranks);
  }
  if (shape.channels < 1 || shape.max_tokens_per_put < 1 || shape.max_puts_per_stream < 1) {
    return invalid_argument("--signal", "channels, tokens per put and puts per stream must be >= 1");
  }
  if (name == "recv-count") {
    if (shape.channels > kMaxImmChannels) {
      return invalid_argument("--signal",
                              "recv-count encodes the channel (local expert) in {} bits: at most {} "
                              "local experts, got {}",
                              kImmChannelBits, kMaxImmChannels, shape.channels);
    }
    if (shape.max_tokens_per_put > kMaxImmTokens) {
      return invalid_argument("--signal", "recv-count encodes tokens per put in {} bits: at most {}, got {}",
                              kImmTokenBits, kMaxImmTokens, shape.max_tokens_per_put);
    }
  }
  if (name == "imm-seq") {
    if (shape.seq_bits < 2 || shape.seq_bits > kImmPayloadBits) {
      return invalid_argument("--signal", "imm-seq sequence bits must be in [2, {}], got {}", kImmPayloadBits,
                              shape.seq_bits);
    }
    const std::int64_t window = std::int64_t{1} << (shape.seq_bits - 1);
    const std::int64_t in_flight = 2 * (static_cast<std::int64_t>(shape.max_puts_per_stream) + 1);
    if (window <= in_flight) {
      return invalid_argument("--signal",
                              "imm-seq window {} (2^{} sequence numbers / 2) must exceed the {} puts "
                              "a stream may have in flight (2 operations x {} puts)",
                              window, shape.seq_bits, in_flight, shape.max_puts_per_stream + 1);
    }
  }
  return Status();
}

}  // namespace

const std::vector<std::string>& signal_strategy_names() {
  static const std::vector<std::string> names = {"auto", "fabric-order", "imm-seq", "recv-count",
                                                 "sender-barrier"};
  return names;
}

Result<std::unique_ptr<SignalStrategy>> make_signal_strategy(std::string_view name, bool fabric_ordered,
                                                             bool allow_unsafe, const SignalShape& shape,
                                                             int rank) {
  const std::string_view chosen = name == "auto" ? (fabric_ordered ? "fabric-order" : "imm-seq") : name;
  if (chosen == "fabric-order" && !fabric_ordered && !allow_unsafe) {
    return invalid_argument(
        "--signal",
        "fabric-order needs an ordered fabric; this fabric does not keep put order "
        "(use imm-seq, recv-count or sender-barrier, or pass --allow-unsafe to run it anyway)");
  }
  if (chosen != "fabric-order" && chosen != "imm-seq" && chosen != "recv-count" &&
      chosen != "sender-barrier") {
    return invalid_argument("--signal",
                            "unknown strategy '{}'; allowed: auto, fabric-order, imm-seq, recv-count, "
                            "sender-barrier",
                            name);
  }
  EPS_RETURN_IF_ERROR(check_shape(chosen, shape));
  if (rank < 0 || rank >= shape.ranks) return out_of_range("rank", 0, shape.ranks - 1, rank);
  if (chosen == "imm-seq") return std::unique_ptr<SignalStrategy>(std::make_unique<ImmSeq>(shape, rank));
  if (chosen == "recv-count")
    return std::unique_ptr<SignalStrategy>(std::make_unique<RecvCount>(shape, rank));
  return std::unique_ptr<SignalStrategy>(
      std::make_unique<SignalOnly>(shape, rank, chosen == "sender-barrier"));
}

}  // namespace eps::fabric
