// The direct transport's protocol as a class (direct_transport.hpp describes the protocol), shared with the
// `proxy` transport, which runs the same protocol but hands every put to CPU proxy threads through command
// FIFOs (docs/channel.md 7). The hooks below are where the two differ: how a data or signal put is issued,
// how sender-barrier waits for data puts, how completions come back (pump), and how an operation starts and
// ends.
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/transport/direct/direct_transport.hpp"
#include "impls/transport/transport_common.hpp"

namespace eps::transport::direct_detail {

using fabric::Completion;
using fabric::CompletionKind;
using fabric::PutOp;

// Put contexts: bit 0 = parity of the operation, bit 1 = signal put.
inline constexpr std::uint64_t kSignalBit = 2;
inline constexpr std::size_t kMaxDirectPutBytes = std::size_t{4} << 20;
inline constexpr std::size_t kSlotHeaderBytes = 16;  // token, slot, expert, weight (docs/dispatch.md 5.6)

inline std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// A contiguous run of records to one destination slot: send-region offset, receive-region offset (within
// the parity), record count, channel.
struct Piece {
  std::size_t local_offset = 0;
  std::size_t remote_offset = 0;
  int records = 0;
  int channel = 0;
};

// One data put as issued (a piece cut at rows_per_put): channel, records, send- and receive-region offsets
// (parity included).
struct DataPut {
  int channel = 0;
  int tokens = 0;
  std::size_t local_offset = 0;
  std::size_t remote_offset = 0;
};

// What the expert side of a dispatch learns from the signal records (DirectHandle keeps it for combine), and
// where the docs/dispatch.md 5.1 rank prefix matrix goes (null: not wanted, a cached dispatch).
struct DispatchShape {
  std::vector<int> recv_begin;     // rank-major: [R + 1] first row from each source
  std::vector<LlRange> ll_ranges;  // LL: [L * R]
  std::int64_t num_rows = 0;
  std::vector<int>* prefix_matrix = nullptr;
};

// The fused fp8 pack of a handle's records (docs/dispatch.md 5.8): every token is quantized once, into its
// first record in send order, whose codes and scales are then copied into the token's other records. Records
// lie in two areas: 0 = the send region (record i at index i), 1 = this rank's own records [self_first,
// self_last) where own_stream_in_place() writes them into its receive region (index i - self_first).
struct QuantizePlan {
  bool ready = false;
  std::array<std::vector<std::int64_t>, 2> quantize_src;  // [area]: rows of in.x, one per token
  std::array<std::vector<std::int64_t>, 2> quantize_dst;  // [area]: the token's first record there
  std::array<std::vector<std::int64_t>, 4> copy_src;      // [from area * 2 + to area]: first records
  std::array<std::vector<std::int64_t>, 4> copy_dst;      // [from area * 2 + to area]: the other records
};

// RoutedHandle (keys: destination for rank-major, global expert for LL) plus what combine needs.
class DirectHandle final : public RoutedHandle {
 public:
  std::vector<int> send_begin;     // [R + 1] first record to each destination
  std::vector<int> recv_begin;     // expert side, rank-major: [R + 1] first row from each source
  std::vector<LlRange> ll_ranges;  // expert side, LL: [L * R]
  mutable CombineIndex
      combine_index;  // source side: built by the first combine (DirectTransport::combine_index)
  mutable QuantizePlan quantize_plan;  // built by the first fp8 pack (DirectTransport::quantize_plan)
};

class DirectTransport : public RoutedTransport {
 public:
  DirectTransport(const TransportConfig& config, const fabric::FabricSelection& selection, int rank, int size,
                  std::unique_ptr<fabric::Fabric> fab, const Capabilities& caps = direct_capabilities());
  ~DirectTransport() override;
  virtual Status setup();

  std::string_view name() const override { return "direct"; }
  std::string describe() const override {
    return fmt::format("direct (signal {}) over {}", signal_->name(), fabric_->describe());
  }
  std::map<std::string, std::string> identity() const override {
    return {{"fabric", fabric::undecorated_name(*fabric_)},
            {"signal", std::string(signal_->name())},
            {"chaos", selection_.chaos.empty() ? "off" : selection_.chaos}};
  }

 protected:
  std::unique_ptr<RoutedHandle> make_handle() const override { return std::make_unique<DirectHandle>(); }
  bool fuses_quantize() const override { return true; }  // quantize_into_records
  Status run_dispatch(RoutedHandle& handle, const DispatchInput& input,
                      const DispatchOutput& output) override;
  Status run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& input,
                             const DispatchOutput& output) override;
  Status run_combine(const RoutedHandle& handle, const CombineInput& input,
                     const CombineOutput& output) override;

  int local() const { return config_.num_experts / size_; }
  int record_ints() const { return size_ + local(); }
  std::size_t record_bytes(Layout kind) const { return kind == Layout::kLl ? slot_record_ : rank_record_; }
  int rows_per_put(std::size_t row_bytes) const;

  void plan_destinations(DirectHandle& h) const;
  std::size_t header_bytes(Layout kind) const {
    return kind == Layout::kLl ? kSlotHeaderBytes : 4 + 8 * static_cast<std::size_t>(config_.top_k);
  }
  // Where this rank's own stream lands in its receive region (within a parity): its slot as a source.
  std::size_t own_slot_offset(Layout kind) const {
    const std::size_t per_source =
        kind == Layout::kLl ? combine_rows_per_peer_ : static_cast<std::size_t>(config_.max_tokens_per_rank);
    return static_cast<std::size_t>(rank_) * per_source * record_bytes(kind);
  }
  // This rank's own stream (its records to itself, its signal record) is written straight into its receive
  // and signal regions, with no fabric op and no signal, except under the chaos decorator, whose job is to
  // reorder and delay every put, these included (the negative control of docs/fabrics.md 6.3 counts on it).
  bool own_stream_in_place() const { return selection_.chaos.empty(); }
  // This rank's signal record to itself, written in place (it travels through no fabric).
  std::int32_t* own_signal_record(int parity) const;
  // Records [first, last) of the send order at `dst`: headers, and payloads unless in.quantize is set.
  Status pack_records(const DirectHandle& h, const DispatchInput& in, int first, int last, std::byte* dst);
  const QuantizePlan& quantize_plan(const DirectHandle& h) const;
  // The payloads of all records from in.x (bf16, in.quantize set): fp8 codes after each header and their
  // scales right after them, records of area a (QuantizePlan) at area_base[a].
  Status quantize_into_records(const DirectHandle& h, const DispatchInput& in,
                               const std::array<std::byte*, 2>& area_base);
  Status pack_dispatch(const DirectHandle& h, const DispatchInput& in);
  // The data puts of a dispatch into pieces_.
  void plan_dispatch_pieces(const DirectHandle& h);
  Status pack_combine_rows(const DirectHandle& h, const CombineInput& in, int s, std::byte* dst,
                           std::int64_t& rows) const;
  const CombineIndex& combine_index(const DirectHandle& h) const;
  Status exchange_dispatch(const DirectHandle& h, const DispatchInput& in, const DispatchOutput& out,
                           DispatchShape& shape);
  Status unpack_rank_major(const DispatchOutput& out, DispatchShape& shape) const;
  Status unpack_ll(const DispatchOutput& out, DispatchShape& shape) const;
  Status unpack_run(Layout kind, std::size_t first_record, std::size_t first_row, int n,
                    const DispatchOutput& out) const;

  // One exchange: puts every piece, then the signals, then waits for every source's stream. Where the
  // receivers know the counts (expected_counts_) and the strategy allows it, the last data put of a stream
  // carries its signal and no signal record is put (docs/fabrics.md 6.2).
  Status exchange(const std::vector<std::vector<Piece>>& pieces, std::size_t record_bytes);
  // The data puts of the stream to `peer`; with `held`, its last one is not posted but kept there.
  Status put_stream_data(int peer, int parity, const std::vector<Piece>& pieces, std::size_t record_bytes,
                         std::optional<DataPut>* held);
  // Each peer's signal: its held last data put with the signal immediate, or its signal record.
  Status put_signals(int parity, std::size_t record_bytes);
  Status await_streams(int parity, const Deadline& deadline);
  void count_received(std::size_t record_bytes);
  // Whether a stream of `records` records carries its signal on its last data put instead of a record.
  bool signal_on_last_data_put(std::int64_t records) const {
    return !expected_counts_.empty() && signal_->last_data_put_may_signal() && records > 0;
  }
  // The per-channel record counts of source's stream this operation: known, or from its signal record.
  std::span<const std::int32_t> incoming_counts(int source) const;
  void expect_counts_of_cached_dispatch(const DirectHandle& h);
  void expect_counts_of_combine(const DirectHandle& h);
  Status post(const PutOp& op);

  // The hooks of the put path (offsets are within the send/receive or signal regions, parity included).
  // A data put of `tokens` records of `record_bytes` each on `channel` to `peer`.
  virtual Status put_data(int peer, int parity, int channel, int tokens, std::size_t record_bytes,
                          std::size_t local_offset, std::size_t remote_offset);
  // The signal record put to `peer`.
  virtual Status put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                            std::size_t bytes);
  // The last data put of the stream to `peer`, carrying the stream's signal immediate (a signal put for the
  // completion counts).
  virtual Status put_data_with_signal(int peer, int parity, const DataPut& put, std::size_t record_bytes);
  // After the data puts of an exchange, and after its signal puts (a path that batches puts issues them
  // here).
  virtual Status data_puts_done(int parity) { return Status(); }
  virtual Status signal_puts_done(int parity) { return Status(); }
  // sender-barrier: the data puts of this parity are placed before any signal put is issued.
  virtual Status await_data_completions(int parity);
  // Drives progress: local completions counted, received immediates handed to the signal strategy.
  virtual Status pump();
  virtual Status begin_operation();
  Status finish_operation();
  // The end of an operation: every put it issued is placed at its target.
  virtual Status quiet_puts();
  int parity() const { return static_cast<int>(operation_ & 1); }
  std::byte* send_base() const {
    return send_.local.data() + static_cast<std::size_t>(parity()) * send_bytes_;
  }
  std::span<const std::int32_t> received_record(int source) const;
  std::byte* recv_base(int parity) const;
  std::string where() const;

  fabric::FabricSelection selection_;
  std::unique_ptr<fabric::Fabric> fabric_;
  std::unique_ptr<fabric::SignalStrategy> signal_;
  std::size_t row_bytes_;
  int num_scales_;
  std::size_t rank_record_;
  std::size_t slot_record_;
  std::size_t combine_rows_per_peer_;
  std::size_t recv_parity_bytes_ = 0;
  fabric::Region send_, recv_, signal_send_, signal_recv_;
  std::vector<std::int32_t> my_tokens_per_rank_;  // this operation's first R record entries
  std::vector<std::int32_t> channel_counts_;      // [R * L]: records per (destination, channel)
  // [R * L]: records per (source, channel) this operation receives where the handle tells them (combine,
  // cached dispatch); empty where only the signal records do (a fresh dispatch).
  std::vector<std::int32_t> expected_counts_;
  std::vector<std::optional<DataPut>> signal_carriers_;  // [R]: the held last data put to each peer
  std::uint64_t operation_ = 0;
  std::size_t send_bytes_ = 0;
  // Per parity: puts posted and locally completed (all, and data puts only, for sender-barrier).
  std::int64_t posted_[2] = {0, 0};
  std::int64_t completed_[2] = {0, 0};
  std::int64_t data_posted_[2] = {0, 0};
  std::int64_t data_completed_[2] = {0, 0};
  std::vector<Completion> completions_;
  std::vector<std::vector<Piece>> pieces_;  // [R]: the data puts of the current exchange (capacity kept)
  DispatchShape cached_shape_;              // scratch of cached dispatches
  mutable std::vector<std::size_t> block_start_;  // unpack_ll: records consumed per source
};

}  // namespace eps::transport::direct_detail
