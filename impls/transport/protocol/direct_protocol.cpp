// The direct protocol (direct_protocol.hpp), read top-down: a dispatch (fresh or cached) and a combine, the
// exchange every operation runs, then the parity bookkeeping. Region geometry is in slots.hpp, the kernels in
// the data path (data_path.hpp), how a put is issued in the put path (put_path.hpp).
#include "impls/transport/protocol/direct_protocol.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/signal/imm_codec.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/transport/protocol/slots.hpp"

namespace eps::transport {
namespace {

// RoutedHandle plus what the expert side learned (for combine and cached dispatches) and two plans built on
// first use and kept, since a handle's send order never changes.
class DirectHandle final : public RoutedHandle {
 public:
  std::vector<int> recv_begin;         // expert side, rank-major: [R + 1] first row from each source
  std::vector<LlRange> ll_ranges;      // expert side, LL: [L * R]
  mutable CombineIndex combine_index;  // source side: by the first combine
  mutable QuantizePlan quantize_plan;  // by the first fp8 pack
};

// What the expert side of a dispatch learns from the signal records.
struct ReceivedShape {
  std::vector<int> recv_begin;
  std::vector<LlRange> ll_ranges;
  std::int64_t num_rows = 0;
};

// One operation's streams: what this rank puts to every destination, and what it knows of what it receives.
// The protocol keeps one and resets it per operation (reset_streams), so its storage is reused, not
// reallocated, call after call.
struct Streams {
  std::size_t record_bytes = 0;
  std::vector<std::vector<Piece>> pieces;     // [R]: the data puts to each destination
  std::vector<std::int32_t> tokens_per_rank;  // [R]: the first entries of every signal record this rank sends
  std::vector<std::int32_t> channel_counts;   // [R * L]: records per (destination, channel)
  // [R * L]: records per (source, channel) where the handle tells them (combine, cached dispatch); empty
  // where only the signal records do (a fresh dispatch).
  std::vector<std::int32_t> expected_counts;
  std::vector<std::optional<DataPut>> carriers;  // [R]: a stream's held last data put (exchange)
};

class DirectProtocol final : public Protocol {
 public:
  DirectProtocol(std::string_view name, const TransportConfig& config,
                 const fabric::FabricSelection& selection, std::unique_ptr<fabric::Fabric> fabric,
                 DataPath& data_path);
  ~DirectProtocol() override;
  // Collective: the signal strategy, the regions, a barrier, then the put path.
  Status open(const PutPathFactory& make_put_path);

  std::string_view name() const override { return name_; }
  std::string describe() const override;
  std::map<std::string, std::string> identity() const override;
  std::string region_memory() const override { return fabric_->memory_registration(); }
  WireBytes wire_bytes() const override { return wire_; }
  std::unique_ptr<RoutedHandle> make_handle() const override { return std::make_unique<DirectHandle>(); }
  bool fuses_quantize() const override { return true; }  // DataPath::quantize_into_records
  Status dispatch(RoutedHandle& handle, const DispatchInput& input, const DispatchOutput& output) override;
  Status dispatch_cached(const RoutedHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) override;
  Status combine(const RoutedHandle& handle, const CombineInput& input, const CombineOutput& output) override;

 private:
  // ---- dispatch
  Status run_dispatch(const DirectHandle& h, const DispatchInput& in, const DispatchOutput& out, bool cached,
                      ReceivedShape& shape, std::vector<int>* prefix_matrix);
  Status pack_dispatch(const DirectHandle& h, const DispatchInput& in);
  const QuantizePlan& quantize_plan(const DirectHandle& h) const;
  void plan_dispatch_streams(const DirectHandle& h, Streams& s) const;
  void expect_cached_dispatch(const DirectHandle& h, Streams& s) const;
  Status unpack_rank_major(const Streams& s, const DispatchOutput& out, ReceivedShape& shape);
  Status unpack_ll(const Streams& s, const DispatchOutput& out, ReceivedShape& shape);
  std::vector<int> received_prefix_matrix() const;
  // ---- combine
  Status pack_combine(const DirectHandle& h, const CombineInput& in, Streams& s);
  Status pack_combine_rows(const DirectHandle& h, const CombineInput& in, int source, std::byte* dst,
                           std::int64_t& rows);
  void expect_combine(const DirectHandle& h, Streams& s) const;
  const CombineIndex& combine_index(const DirectHandle& h) const;
  // ---- the exchange of every operation
  Streams& reset_streams(std::size_t record_bytes);
  Status exchange(Streams& s);
  Status put_stream(int peer, int parity, const std::vector<Piece>& pieces, std::size_t record_bytes,
                    std::optional<DataPut>* held);
  Status put_signals(const Streams& s, int parity);
  Status await_streams(const Streams& s, int parity, const Deadline& deadline);
  void count_received(const Streams& s);
  void count_sent(int peer, std::size_t bytes);
  bool signal_on_last_data_put(const Streams& s, std::int64_t records) const;
  std::span<const std::int32_t> incoming_counts(const Streams& s, int source) const;
  // ---- parity and regions
  Status begin_operation() { return put_path_->begin(parity()); }
  Status finish_operation();
  int parity() const { return static_cast<int>(operation_ & 1); }
  std::byte* send_base() const {
    return send_.local.data() + static_cast<std::size_t>(parity()) * slots_.send_parity_bytes();
  }
  std::byte* recv_base() const {
    return recv_.local.data() + static_cast<std::size_t>(parity()) * slots_.recv_parity_bytes();
  }
  std::span<const std::int32_t> received_record(int source) const;
  Status fetch_signal_record(int source, const std::int32_t* record);
  bool own_stream_in_place() const { return selection_.chaos.empty(); }
  std::string where() const;
  Status on_immediate(std::uint32_t imm);

  std::string name_;
  TransportConfig config_;
  fabric::FabricSelection selection_;
  std::unique_ptr<fabric::Fabric> fabric_;
  DataPath& data_path_;
  int rank_;
  int size_;
  SlotLayout slots_;
  std::unique_ptr<fabric::SignalStrategy> signal_;
  fabric::Region send_, recv_, signal_send_, signal_recv_;
  std::unique_ptr<PutPath> put_path_;
  Streams streams_;             // the current operation's (reset_streams)
  ReceivedShape cached_shape_;  // scratch of cached dispatches, which re-derive their handle's shape
  std::uint64_t operation_ = 0;
  WireBytes wire_;
  // GPU-resident (DataPath::resident): signal records on their way to the device, and read back from it.
  std::vector<std::int32_t> signal_scratch_;
  std::vector<std::int32_t> received_;  // [R, signal_record_ints]
  std::vector<bool> received_read_;     // [R]: received_ holds source's record of this operation
};

DirectProtocol::DirectProtocol(std::string_view name, const TransportConfig& config,
                               const fabric::FabricSelection& selection,
                               std::unique_ptr<fabric::Fabric> fabric, DataPath& data_path)
    : name_(name),
      config_(config),
      selection_(selection),
      fabric_(std::move(fabric)),
      data_path_(data_path),
      rank_(fabric_->rank()),
      size_(fabric_->size()),
      slots_(config, rank_, size_, fabric_->limits().max_put_bytes) {}

// Collective, like creation: the put path stops first (a proxy's threads), then every rank drives progress
// until all of its puts completed (providers with manual progress complete a put only while its target
// polls) and meets the others.
DirectProtocol::~DirectProtocol() {
  put_path_.reset();
  const Deadline deadline(config_.timeout_seconds);
  Status status = fabric_->quiet(deadline);
  if (status.ok()) status = fabric_->barrier(deadline);
  if (!status.ok()) {
    std::fprintf(stderr, "epsuite: %s transport teardown on rank %d: %s\n", name_.c_str(), rank_,
                 status.message().c_str());
  }
}

// The imm-seq window is checked against the most puts one stream can carry (slots.hpp). The put path comes
// after the barrier: from then on a proxy's threads may be the only ones calling the fabric.
Status DirectProtocol::open(const PutPathFactory& make_put_path) {
  if (data_path_.resident() && fabric_->region_device() != &data_path_.device()) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} on device {}: its memory is not host-addressable, and the transport runs "
                              "GPU-resident (docs/devices.md 12.9) only over a fabric whose regions are that "
                              "device's memory (ipc, or auto on one node); fabric {} keeps them elsewhere",
                              name_, data_path_.device().properties().backend, fabric_->name()));
  }
  const fabric::SignalShape shape{size_, std::max(1, slots_.channels()), fabric::kMaxImmTokens,
                                  slots_.max_puts_per_stream(), fabric::kDefaultSeqBits};
  EPS_ASSIGN_OR_RETURN(signal_, fabric::make_signal_strategy(selection_.signal, fabric_->ordered(),
                                                             selection_.allow_unsafe, shape, rank_));
  const std::size_t signal_bytes = 2 * static_cast<std::size_t>(size_) * slots_.signal_record_bytes();
  EPS_ASSIGN_OR_RETURN(send_, fabric_->allocate(2 * slots_.send_parity_bytes()));
  EPS_ASSIGN_OR_RETURN(recv_, fabric_->allocate(2 * slots_.recv_parity_bytes()));
  EPS_ASSIGN_OR_RETURN(signal_send_, fabric_->allocate(signal_bytes));
  EPS_ASSIGN_OR_RETURN(signal_recv_, fabric_->allocate(signal_bytes));
  EPS_RETURN_IF_ERROR(fabric_->barrier(Deadline(config_.timeout_seconds)));
  const PutContext context{.fabric = *fabric_,
                           .signal = *signal_,
                           .send = send_,
                           .recv = recv_,
                           .signal_send = signal_send_,
                           .signal_recv = signal_recv_,
                           .rank = rank_,
                           .ranks = size_,
                           .channels = slots_.channels(),
                           .timeout_seconds = config_.timeout_seconds,
                           .device = data_path_.device(),
                           .where = [this] { return where(); },
                           .on_immediate = [this](std::uint32_t imm) { return on_immediate(imm); }};
  EPS_ASSIGN_OR_RETURN(put_path_, make_put_path(context));
  return Status();
}

std::string DirectProtocol::describe() const {
  const std::string detail = put_path_ ? put_path_->detail() : std::string();
  return fmt::format("{} ({}signal {}) over {}", name_, detail.empty() ? "" : detail + ", ", signal_->name(),
                     fabric_->describe());
}

std::map<std::string, std::string> DirectProtocol::identity() const {
  return {{"fabric", fabric::undecorated_name(*fabric_)},
          {"signal", std::string(signal_->name())},
          {"chaos", selection_.chaos.empty() ? "off" : selection_.chaos}};
}

std::string DirectProtocol::where() const {
  return fmt::format("{} transport, rank {}, operation {}, signal {}, fabric {}", name_, rank_, operation_,
                     signal_->name(), fabric_->describe());
}

Status DirectProtocol::on_immediate(std::uint32_t imm) {
  const Status status = signal_->on_remote(imm);
  if (status.ok()) return status;
  return Status(StatusCode::kCheckFailed, fmt::format("{} ({})", status.message(), where()));
}

// ---- dispatch ------------------------------------------------------------------------------------------

Status DirectProtocol::dispatch(RoutedHandle& handle, const DispatchInput& in, const DispatchOutput& out) {
  auto& h = static_cast<DirectHandle&>(handle);
  ReceivedShape shape;
  EPS_RETURN_IF_ERROR(run_dispatch(h, in, out, false, shape, &h.layout_info.rank_prefix_matrix));
  h.recv_begin = std::move(shape.recv_begin);
  h.ll_ranges = std::move(shape.ll_ranges);
  h.num_rows = shape.num_rows;
  return Status();
}

// The handle stays const for the caller: the shape is re-derived, identically, into scratch.
Status DirectProtocol::dispatch_cached(const RoutedHandle& handle, const DispatchInput& in,
                                       const DispatchOutput& out) {
  return run_dispatch(static_cast<const DirectHandle&>(handle), in, out, true, cached_shape_, nullptr);
}

// One dispatch: pack every record (this rank's own in place), exchange the streams, unpack what arrived in
// canonical order; `shape` receives what the expert side learned, `prefix_matrix` (where wanted) the
// docs/dispatch.md 5.1 rank prefix matrix from the signal records. A cached dispatch knows every count from
// its handle (docs/fabrics.md 6.2: its streams' last data puts may carry the signals).
Status DirectProtocol::run_dispatch(const DirectHandle& h, const DispatchInput& in, const DispatchOutput& out,
                                    bool cached, ReceivedShape& shape, std::vector<int>* prefix_matrix) {
  EPS_RETURN_IF_ERROR(begin_operation());
  EPS_RETURN_IF_ERROR(pack_dispatch(h, in));
  Streams& streams = reset_streams(slots_.format(h.sends.layout).stride);
  plan_dispatch_streams(h, streams);
  if (cached) expect_cached_dispatch(h, streams);
  EPS_RETURN_IF_ERROR(exchange(streams));
  EPS_RETURN_IF_ERROR(h.sends.layout == Layout::kLl ? unpack_ll(streams, out, shape)
                                                    : unpack_rank_major(streams, out, shape));
  if (prefix_matrix != nullptr) *prefix_matrix = received_prefix_matrix();
  return finish_operation();
}

// The records to other ranks go to the send region; this rank's own records straight to its slot in its own
// receive region, which is where a put would have placed them (no put, no signal: exchange()).
Status DirectProtocol::pack_dispatch(const DirectHandle& h, const DispatchInput& in) {
  const SendPlan& plan = h.sends;
  const RecordFormat& f = slots_.format(plan.layout);
  std::byte* const own = recv_base() + slots_.dispatch_slot(plan.layout, rank_);
  if (!own_stream_in_place()) {
    EPS_RETURN_IF_ERROR(data_path_.pack_records(f, plan, in, 0, plan.records(), send_base()));
  } else {
    const int self_first = plan.first_to(rank_);
    const int self_last = plan.first_to(rank_ + 1);
    EPS_RETURN_IF_ERROR(data_path_.pack_records(f, plan, in, 0, self_first, send_base()));
    EPS_RETURN_IF_ERROR(data_path_.pack_records(f, plan, in, self_first, self_last, own));
    EPS_RETURN_IF_ERROR(
        data_path_.pack_records(f, plan, in, self_last, plan.records(),
                                send_base() + static_cast<std::size_t>(self_last) * f.stride));
  }
  if (in.quantize) {
    EPS_RETURN_IF_ERROR(data_path_.quantize_into_records(f, quantize_plan(h), in, {send_base(), own}));
  }
  return data_path_.finish();
}

// Planned on the first fp8 pack of a handle and kept: cached dispatches plan nothing again.
const QuantizePlan& DirectProtocol::quantize_plan(const DirectHandle& h) const {
  if (h.quantize_plan.ready) return h.quantize_plan;
  const int records = h.sends.records();
  const bool in_place = own_stream_in_place();
  h.quantize_plan = plan_fused_quantize(h.sends, in_place ? h.sends.first_to(rank_) : records,
                                        in_place ? h.sends.first_to(rank_ + 1) : records);
  return h.quantize_plan;
}

void DirectProtocol::plan_dispatch_streams(const DirectHandle& h, Streams& s) const {
  const SendPlan& plan = h.sends;
  const int local = slots_.channels();
  const int per_peer = plan.layout == Layout::kLl ? local : 1;
  for (int q = 0; q < size_; ++q) {
    for (int c = 0; c < per_peer; ++c) {
      const std::size_t key = static_cast<std::size_t>(q) * per_peer + c;
      s.channel_counts[static_cast<std::size_t>(q) * local + c] =
          plan.key_begin[key + 1] - plan.key_begin[key];
    }
  }
  s.tokens_per_rank.assign(h.layout_info.num_tokens_per_rank.begin(),
                           h.layout_info.num_tokens_per_rank.end());
  slots_.plan_dispatch_pieces(plan, signal_->per_channel_puts(), s.pieces);
}

// A cached dispatch resends along the handle's routing: source s sends what it sent in the handle's dispatch
// (rank-major: its rows on channel 0; LL: its block of each local expert on that expert's channel).
void DirectProtocol::expect_cached_dispatch(const DirectHandle& h, Streams& s) const {
  const int local = slots_.channels();
  s.expected_counts.assign(static_cast<std::size_t>(size_) * local, 0);
  for (int source = 0; source < size_; ++source) {
    const std::size_t at = static_cast<std::size_t>(source) * local;
    if (h.sends.layout != Layout::kLl) {
      s.expected_counts[at] =
          h.recv_begin[static_cast<std::size_t>(source) + 1] - h.recv_begin[static_cast<std::size_t>(source)];
      continue;
    }
    for (int l = 0; l < local; ++l)
      s.expected_counts[at + l] = h.ll_ranges[static_cast<std::size_t>(l) * size_ + source].count;
  }
}

// Source s's records sit at the start of its slot, in (s, t) order: they become rows recv_begin[s]... .
Status DirectProtocol::unpack_rank_major(const Streams& s, const DispatchOutput& out, ReceivedShape& shape) {
  const RecordFormat& f = slots_.format(Layout::kHtRankMajor);
  shape.recv_begin.assign(static_cast<std::size_t>(size_) + 1, 0);
  std::int64_t row = 0;
  for (int source = 0; source < size_; ++source) {
    const int n = incoming_counts(s, source)[0];
    const std::byte* records = recv_base() + slots_.dispatch_slot(Layout::kHtRankMajor, source);
    EPS_RETURN_IF_ERROR(data_path_.unpack_records(f, records, n, RowTarget{row, {}}, out));
    row += n;
    shape.recv_begin[static_cast<std::size_t>(source) + 1] = static_cast<int>(row);
  }
  shape.num_rows = row;
  count_rank_major(config_, size_, shape.num_rows, out);
  return data_path_.finish();
}

// Source s's records sit contiguously in its slot, local expert l's block after those of experts < l; each
// (l, s) block lands contiguously at packed row l * capacity + begin.
Status DirectProtocol::unpack_ll(const Streams& s, const DispatchOutput& out, ReceivedShape& shape) {
  const RecordFormat& f = slots_.format(Layout::kLl);
  const int local = slots_.channels();
  const std::int64_t capacity = static_cast<std::int64_t>(size_) * config_.max_tokens_per_rank;
  shape.ll_ranges.assign(static_cast<std::size_t>(local) * size_, LlRange{0, 0});
  shape.num_rows = 0;
  std::vector<std::size_t> consumed(static_cast<std::size_t>(size_), 0);  // records of each source so far
  for (int l = 0; l < local; ++l) {
    int begin = 0;
    for (int source = 0; source < size_; ++source) {
      const int n = incoming_counts(s, source)[static_cast<std::size_t>(l)];
      std::size_t& start = consumed[static_cast<std::size_t>(source)];
      const std::byte* records = recv_base() + slots_.dispatch_slot(Layout::kLl, source) + start * f.stride;
      start += static_cast<std::size_t>(n);
      EPS_RETURN_IF_ERROR(data_path_.unpack_records(f, records, n, RowTarget{l * capacity + begin, {}}, out));
      const LlRange range{begin, n};
      shape.ll_ranges[static_cast<std::size_t>(l) * size_ + source] = range;
      out.layout_range[static_cast<std::size_t>(l) * size_ + source] = range;
      begin += n;
    }
    out.packed_recv_count[static_cast<std::size_t>(l)] = begin;
    shape.num_rows += begin;
  }
  return data_path_.finish();
}

// Every source's tokens per rank, the first R entries of its signal record.
std::vector<int> DirectProtocol::received_prefix_matrix() const {
  std::vector<int> all(static_cast<std::size_t>(size_) * size_);
  for (int s = 0; s < size_; ++s) {
    const std::span<const std::int32_t> record = received_record(s);
    std::copy_n(record.begin(), size_, all.begin() + static_cast<std::ptrdiff_t>(s) * size_);
  }
  return rank_prefix_matrix(size_, all);
}

// ---- combine -------------------------------------------------------------------------------------------

// Expert side: each source's rows go back in the order the source sent them; source side: the tree reduces
// straight from the receive region.
Status DirectProtocol::combine(const RoutedHandle& handle, const CombineInput& in, const CombineOutput& out) {
  const auto& h = static_cast<const DirectHandle&>(handle);
  EPS_RETURN_IF_ERROR(begin_operation());
  Streams& streams = reset_streams(slots_.combine_row_bytes());
  EPS_RETURN_IF_ERROR(pack_combine(h, in, streams));
  expect_combine(h, streams);
  EPS_RETURN_IF_ERROR(exchange(streams));
  const auto* rows = reinterpret_cast<const bf16*>(recv_base());
  EPS_RETURN_IF_ERROR(
      data_path_.reduce(in.tree, h.sends, combine_index(h), rows, in.bias0, in.bias1, out.out));
  return finish_operation();
}

// Every source's rows into the send region, one piece each (this rank's own rows straight into its slot of
// its own receive region), all on channel 0.
Status DirectProtocol::pack_combine(const DirectHandle& h, const CombineInput& in, Streams& s) {
  const std::size_t row = slots_.combine_row_bytes();
  const std::size_t slot = slots_.combine_slot(rank_);
  std::int64_t packed = 0;
  for (int source = 0; source < size_; ++source) {
    std::int64_t n = 0;
    if (source == rank_ && own_stream_in_place()) {
      EPS_RETURN_IF_ERROR(pack_combine_rows(h, in, source, recv_base() + slot, n));
    } else {
      EPS_RETURN_IF_ERROR(
          pack_combine_rows(h, in, source, send_base() + static_cast<std::size_t>(packed) * row, n));
      if (n > 0) {
        s.pieces[static_cast<std::size_t>(source)].push_back(
            {static_cast<std::size_t>(packed) * row, slot, static_cast<int>(n), 0});
      }
      packed += n;
    }
    s.channel_counts[static_cast<std::size_t>(source) * slots_.channels()] = static_cast<int>(n);
  }
  return data_path_.finish();
}

// The rows of in.x that go back to `source`, as contiguous runs (rank-major: the rows it sent, in order; LL:
// its block of every local expert, experts ascending), copied to consecutive rows at `dst`; `rows` counts
// them.
Status DirectProtocol::pack_combine_rows(const DirectHandle& h, const CombineInput& in, int source,
                                         std::byte* dst, std::int64_t& rows) {
  const std::size_t row = slots_.combine_row_bytes();
  const auto* x = reinterpret_cast<const std::byte*>(in.x.data());
  rows = 0;
  auto copy_run = [&](std::int64_t first, std::int64_t count) -> Status {
    if (count == 0) return Status();
    EPS_RETURN_IF_ERROR(data_path_.copy_rows(dst + static_cast<std::size_t>(rows) * row, row,
                                             x + static_cast<std::size_t>(first) * row, row, row, count, {}));
    rows += count;
    return Status();
  };
  if (h.sends.layout == Layout::kHtRankMajor) {
    const int first = h.recv_begin[static_cast<std::size_t>(source)];
    return copy_run(first, h.recv_begin[static_cast<std::size_t>(source) + 1] - first);
  }
  const auto capacity = static_cast<std::int64_t>(size_) * config_.max_tokens_per_rank;
  for (int l = 0; l < slots_.channels(); ++l) {
    const LlRange r = h.ll_ranges[static_cast<std::size_t>(l) * size_ + source];
    EPS_RETURN_IF_ERROR(copy_run(l * capacity + r.begin, r.count));
  }
  return Status();
}

// A combine returns one row per record this rank sent to q in the dispatch, all on channel 0.
void DirectProtocol::expect_combine(const DirectHandle& h, Streams& s) const {
  s.expected_counts.assign(static_cast<std::size_t>(size_) * slots_.channels(), 0);
  for (int q = 0; q < size_; ++q)
    s.expected_counts[static_cast<std::size_t>(q) * slots_.channels()] = h.sends.count_to(q);
}

// Source side: record i sent to q came back to q's slot at position i - first_to(q). Built on the first
// combine of a handle and kept, so repeated combines of one dispatch index nothing again.
const CombineIndex& DirectProtocol::combine_index(const DirectHandle& h) const {
  if (h.combine_index.ready) return h.combine_index;
  const SendPlan& plan = h.sends;
  std::vector<std::int64_t> record_rows(static_cast<std::size_t>(plan.records()));
  for (int q = 0; q < size_; ++q) {
    for (int i = plan.first_to(q); i < plan.first_to(q + 1); ++i) {
      record_rows[static_cast<std::size_t>(i)] =
          static_cast<std::int64_t>(static_cast<std::size_t>(q) * slots_.combine_rows_per_peer()) +
          (i - plan.first_to(q));
    }
  }
  h.combine_index =
      plan.layout == Layout::kLl
          ? ll_combine_index(config_.top_k, plan.num_tokens, plan.record_token, plan.record_slot, record_rows)
          : ht_combine_index(size_, config_.nodes.node_of, plan.num_tokens, plan.destination_begin,
                             plan.record_token, record_rows);
  return h.combine_index;
}

// ---- the exchange --------------------------------------------------------------------------------------

// The streams of a new operation: empty pieces and counts, nothing expected, nothing held.
Streams& DirectProtocol::reset_streams(std::size_t record_bytes) {
  Streams& s = streams_;
  const auto peers = static_cast<std::size_t>(size_);
  s.record_bytes = record_bytes;
  s.pieces.resize(peers);
  for (std::vector<Piece>& stream : s.pieces) stream.clear();
  s.tokens_per_rank.assign(peers, 0);
  s.channel_counts.assign(peers * slots_.channels(), 0);
  s.expected_counts.clear();
  s.carriers.assign(peers, std::nullopt);
  return s;
}

// Puts every stream's data, then its signal, then waits for every source's stream. Destinations go in rotated
// order so that no rank is everyone's first target. This rank's own stream skips the put path where
// own_stream_in_place(): its records were written in place already. Where the receivers know the counts and
// the strategy allows it, the last data put of a stream carries its signal and no record is put
// (docs/fabrics.md 6.2).
Status DirectProtocol::exchange(Streams& s) {
  const int p = parity();
  const Deadline deadline(config_.timeout_seconds);
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    if (q == rank_ && own_stream_in_place()) continue;
    const std::vector<Piece>& stream = s.pieces[static_cast<std::size_t>(q)];
    std::int64_t records = 0;
    for (const Piece& piece : stream) records += piece.records;
    std::optional<DataPut>* carrier =
        signal_on_last_data_put(s, records) ? &s.carriers[static_cast<std::size_t>(q)] : nullptr;
    EPS_RETURN_IF_ERROR(put_stream(q, p, stream, s.record_bytes, carrier));
  }
  EPS_RETURN_IF_ERROR(put_path_->data_puts_done(p));
  if (signal_->signal_after_local_completion()) EPS_RETURN_IF_ERROR(put_path_->await_data_placed(p));
  EPS_RETURN_IF_ERROR(put_signals(s, p));
  EPS_RETURN_IF_ERROR(put_path_->signal_puts_done(p));
  EPS_RETURN_IF_ERROR(await_streams(s, p, deadline));
  count_received(s);
  return Status();
}

// The data puts of the stream to `peer`, each piece cut at rows_per_put; with `held`, the last one is not
// issued but kept there.
Status DirectProtocol::put_stream(int peer, int parity, const std::vector<Piece>& pieces,
                                  std::size_t record_bytes, std::optional<DataPut>* held) {
  const int per_put = slots_.rows_per_put(record_bytes);
  const std::size_t send_parity = static_cast<std::size_t>(parity) * slots_.send_parity_bytes();
  const std::size_t recv_parity = static_cast<std::size_t>(parity) * slots_.recv_parity_bytes();
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    for (int done = 0; done < piece.records; done += per_put) {
      const int n = std::min(per_put, piece.records - done);
      const std::size_t skip = static_cast<std::size_t>(done) * record_bytes;
      const DataPut put{piece.channel, n, send_parity + piece.local_offset + skip,
                        recv_parity + piece.remote_offset + skip};
      if (held != nullptr && i + 1 == pieces.size() && done + n == piece.records) {
        *held = put;
        continue;
      }
      EPS_RETURN_IF_ERROR(put_path_->put_data(peer, parity, put, record_bytes));
      count_sent(peer, static_cast<std::size_t>(n) * record_bytes);
    }
  }
  return Status();
}

// Each peer's held last data put now carries its signal; the other peers get a signal record: this rank's
// tokens per rank, then its per-channel record counts for the destination.
Status DirectProtocol::put_signals(const Streams& s, int parity) {
  const std::size_t record_bytes = slots_.signal_record_bytes();
  const int local = slots_.channels();
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    const std::optional<DataPut>& carrier = s.carriers[static_cast<std::size_t>(q)];
    if (carrier) {
      EPS_RETURN_IF_ERROR(put_path_->put_data_with_signal(q, parity, *carrier, s.record_bytes));
      count_sent(q, static_cast<std::size_t>(carrier->records) * s.record_bytes);
      continue;
    }
    const bool in_place = q == rank_ && own_stream_in_place();
    std::byte* at = in_place ? signal_recv_.local.data() + slots_.signal_offset(parity, rank_)
                             : signal_send_.local.data() + slots_.signal_offset(parity, q);
    std::vector<std::int32_t>& record = signal_scratch_;
    record.resize(static_cast<std::size_t>(slots_.signal_record_ints()));
    std::copy(s.tokens_per_rank.begin(), s.tokens_per_rank.end(), record.begin());
    std::copy_n(s.channel_counts.begin() + static_cast<std::ptrdiff_t>(q) * local, local,
                record.begin() + size_);
    EPS_RETURN_IF_ERROR(data_path_.write_device(at, record.data(), record_bytes));
    if (in_place) {
      EPS_RETURN_IF_ERROR(fetch_signal_record(rank_, record.data()));
      continue;
    }
    EPS_RETURN_IF_ERROR(put_path_->put_signal(q, parity, slots_.signal_offset(parity, q),
                                              slots_.signal_offset(parity, rank_), record_bytes));
    count_sent(q, record_bytes);
  }
  return Status();
}

// Every source's stream: the strategy decides when its data is placed (docs/fabrics.md 6.2).
Status DirectProtocol::await_streams(const Streams& s, int parity, const Deadline& deadline) {
  int waiting_for = 0;
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        failure = put_path_->progress();
        if (!failure.ok()) return true;
        while (waiting_for < size_) {
          if (!(waiting_for == rank_ && own_stream_in_place())) {
            if (!signal_->signal_arrived(waiting_for, parity)) break;
            if (s.expected_counts.empty()) failure = fetch_signal_record(waiting_for, nullptr);
            if (!failure.ok()) return true;
            if (!signal_->stream_complete(waiting_for, parity, incoming_counts(s, waiting_for))) break;
          }
          ++waiting_for;
        }
        return waiting_for == size_;
      },
      [&] {
        return fmt::format("rank {}: {} ({})", waiting_for,
                           signal_->describe_wait(waiting_for, parity, incoming_counts(s, waiting_for)),
                           where());
      }));
  std::atomic_thread_fence(std::memory_order_acquire);
  return failure;
}

// What arrived from the other ranks: their records, then their signal record where they sent one.
void DirectProtocol::count_received(const Streams& s) {
  const auto record = static_cast<std::int64_t>(slots_.signal_record_bytes());
  for (int source = 0; source < size_; ++source) {
    if (source == rank_) continue;
    std::int64_t records = 0;
    for (std::int32_t n : incoming_counts(s, source)) records += n;
    wire_.received += records * static_cast<std::int64_t>(s.record_bytes) +
                      (signal_on_last_data_put(s, records) ? 0 : record);
  }
}

// Bytes put to other ranks (a put to this rank itself, under chaos, crosses no rank boundary).
void DirectProtocol::count_sent(int peer, std::size_t bytes) {
  if (peer != rank_) wire_.sent += static_cast<std::int64_t>(bytes);
}

// Whether a stream of `records` records carries its signal on its last data put instead of a record.
bool DirectProtocol::signal_on_last_data_put(const Streams& s, std::int64_t records) const {
  return !s.expected_counts.empty() && signal_->last_data_put_may_signal() && records > 0;
}

// The per-channel record counts of source's stream this operation: known, or from its signal record.
std::span<const std::int32_t> DirectProtocol::incoming_counts(const Streams& s, int source) const {
  if (s.expected_counts.empty()) return received_record(source).subspan(static_cast<std::size_t>(size_));
  return std::span<const std::int32_t>(s.expected_counts)
      .subspan(static_cast<std::size_t>(source) * slots_.channels(),
               static_cast<std::size_t>(slots_.channels()));
}

// ---- parity --------------------------------------------------------------------------------------------

// Frees the parity's signal state for reuse two operations later, after every put of this operation
// completed (quiet). Handing the puts to the provider (flush) is not enough: providers with manual progress
// (tcp;ofi_rxm) move a put's bytes only while its initiator drives progress, and after returning this rank
// may compute or sit in MPI while a peer waits for them (found on the virtual cluster: a signal stuck in a
// sender that had gone on to an MPI barrier). Every rank waits here or for its receives, both of which drive
// progress, so the wait cannot deadlock.
Status DirectProtocol::finish_operation() {
  for (int s = 0; s < size_; ++s) signal_->retire(s, parity());
  received_read_.assign(received_read_.size(), false);
  ++operation_;
  return put_path_->quiet();
}

// The region itself where the host addresses it; else the host copy fetch_signal_record made this operation
// (zeros before: only diagnostics ask that early).
std::span<const std::int32_t> DirectProtocol::received_record(int source) const {
  const auto ints = static_cast<std::size_t>(slots_.signal_record_ints());
  if (!data_path_.resident()) {
    const auto* at = signal_recv_.local.data() + slots_.signal_offset(parity(), source);
    return {reinterpret_cast<const std::int32_t*>(at), ints};
  }
  return {received_.data() + static_cast<std::size_t>(source) * ints, ints};
}

// GPU-resident (DataPath::resident): the signal record of `source`, once it arrived, read back to the host
// (index data: counts). `record` (non-null) is this rank's own record, written in place: kept, not read.
Status DirectProtocol::fetch_signal_record(int source, const std::int32_t* record) {
  if (!data_path_.resident()) return Status();
  const auto ints = static_cast<std::size_t>(slots_.signal_record_ints());
  if (received_.size() != static_cast<std::size_t>(size_) * ints) {
    received_.assign(static_cast<std::size_t>(size_) * ints, 0);
    received_read_.assign(static_cast<std::size_t>(size_), false);
  }
  const auto s = static_cast<std::size_t>(source);
  if (received_read_[s]) return Status();
  std::int32_t* copy = received_.data() + s * ints;
  if (record != nullptr) {
    std::copy_n(record, ints, copy);
  } else {
    const auto* at = signal_recv_.local.data() + slots_.signal_offset(parity(), source);
    EPS_RETURN_IF_ERROR(data_path_.read_device(copy, at, ints * sizeof(std::int32_t)));
  }
  received_read_[s] = true;
  return Status();
}

}  // namespace

Capabilities direct_protocol_capabilities() {
  Capabilities c;
  c.layouts = {Layout::kHtRankMajor, Layout::kLl};
  c.combine_trees = {CombineTree::kHtRank, CombineTree::kHtTwoLevel, CombineTree::kLlWeighted};
  c.dtypes = {PayloadType::kBf16, PayloadType::kFp8};
  c.memory = {MemoryKind::kHost, MemoryKind::kDevice};
  c.ll_ordered = true;
  c.cached_dispatch = true;
  c.max_ranks = fabric::kMaxImmSources;
  c.max_experts = dispatch::kMaxExperts;
  c.max_top_k = dispatch::kMaxTopK;
  c.max_hidden = 1 << 16;
  c.max_tokens_per_rank = 1 << 16;
  return c;
}

Result<std::unique_ptr<Protocol>> open_direct_protocol(std::string_view name, const TransportConfig& config,
                                                       const fabric::FabricSelection& selection,
                                                       std::unique_ptr<fabric::Fabric> fabric,
                                                       DataPath& data_path,
                                                       const PutPathFactory& make_put_path) {
  auto protocol = std::make_unique<DirectProtocol>(name, config, selection, std::move(fabric), data_path);
  EPS_RETURN_IF_ERROR(protocol->open(make_put_path));
  return std::unique_ptr<Protocol>(std::move(protocol));
}

}  // namespace eps::transport
