#include "impls/transport/direct/direct_transport.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/signal/imm_codec.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/direct/direct_transport_impl.hpp"
#include "impls/transport/transport_common.hpp"

namespace eps::transport::direct_detail {

DirectTransport::DirectTransport(const TransportConfig& config, const fabric::FabricSelection& selection,
                                 int rank, int size, std::unique_ptr<fabric::Fabric> fab,
                                 const Capabilities& caps)
    : RoutedTransport(config, caps, rank, size),
      selection_(selection),
      fabric_(std::move(fab)),
      row_bytes_(dispatch::payload_row_bytes(config.dtype, config.hidden)),
      num_scales_(dispatch::payload_num_scales(config.dtype, config.hidden)),
      rank_record_(
          round_up(4 + 8 * static_cast<std::size_t>(config.top_k) + row_bytes_ + 4 * num_scales_, 16)),
      slot_record_(round_up(kSlotHeaderBytes + row_bytes_ + 4 * num_scales_, 16)),
      combine_rows_per_peer_(static_cast<std::size_t>(config.max_tokens_per_rank) *
                             static_cast<std::size_t>(std::min(config.top_k, config.num_experts / size))),
      completions_(64) {
  region_memory_ = fabric_->memory_registration();
}

// Collective, like creation: every rank drives progress until all of its puts completed (providers with
// manual progress complete a put only while its target polls) and then meets the others.
DirectTransport::~DirectTransport() {
  const Deadline deadline(config_.timeout_seconds);
  Status status = fabric_->quiet(deadline);
  if (status.ok()) status = fabric_->barrier(deadline);
  if (!status.ok())
    std::fprintf(stderr, "epsuite: direct transport teardown on rank %d: %s\n", rank_,
                 status.message().c_str());
}

int DirectTransport::rows_per_put(std::size_t row_bytes) const {
  const std::size_t max_bytes = std::min(fabric_->limits().max_put_bytes, kMaxDirectPutBytes);
  return static_cast<int>(std::clamp<std::size_t>(max_bytes / row_bytes, 1, fabric::kMaxImmTokens));
}

// Region sizes follow the slot layout of the header comment; the imm-seq window is checked against the
// most puts one stream can carry (a slot per local expert plus splits of the largest stream).
Status DirectTransport::setup() {
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  const auto ranks = static_cast<std::size_t>(size_);
  const std::size_t combine_row = 2 * static_cast<std::size_t>(config_.hidden);
  recv_parity_bytes_ = std::max({ranks * t_max * rank_record_, ranks * combine_rows_per_peer_ * slot_record_,
                                 ranks * combine_rows_per_peer_ * combine_row, std::size_t{16}});
  send_bytes_ = std::max({t_max * std::min<std::size_t>(config_.top_k, ranks) * rank_record_,
                          t_max * static_cast<std::size_t>(config_.top_k) * slot_record_,
                          ranks * combine_rows_per_peer_ * combine_row, std::size_t{16}});

  const auto puts_for = [](std::size_t records, int per_put) {
    return static_cast<int>((records + static_cast<std::size_t>(per_put) - 1) /
                            static_cast<std::size_t>(per_put));
  };
  const int max_puts = std::max({puts_for(t_max, rows_per_put(rank_record_)),
                                 local() + puts_for(combine_rows_per_peer_, rows_per_put(slot_record_)),
                                 puts_for(combine_rows_per_peer_, rows_per_put(combine_row)), 1});
  const fabric::SignalShape shape{size_, std::max(1, local()), fabric::kMaxImmTokens, max_puts,
                                  fabric::kDefaultSeqBits};
  EPS_ASSIGN_OR_RETURN(signal_, fabric::make_signal_strategy(selection_.signal, fabric_->ordered(),
                                                             selection_.allow_unsafe, shape, rank_));
  const std::size_t record = 4 * static_cast<std::size_t>(record_ints());
  EPS_ASSIGN_OR_RETURN(send_, fabric_->allocate(2 * send_bytes_));
  EPS_ASSIGN_OR_RETURN(recv_, fabric_->allocate(2 * recv_parity_bytes_));
  EPS_ASSIGN_OR_RETURN(signal_send_, fabric_->allocate(2 * ranks * record));
  EPS_ASSIGN_OR_RETURN(signal_recv_, fabric_->allocate(2 * ranks * record));
  return fabric_->barrier(Deadline(config_.timeout_seconds));
}

std::string DirectTransport::where() const {
  return fmt::format("{} transport, rank {}, operation {}, signal {}, fabric {}", name(), rank_, operation_,
                     signal_->name(), fabric_->describe());
}

// Records to destination q are those of keys [q * per_peer, (q + 1) * per_peer).
void DirectTransport::plan_destinations(DirectHandle& h) const {
  const int per_peer = h.kind == Layout::kLl ? local() : 1;
  h.send_begin.assign(static_cast<std::size_t>(size_) + 1, 0);
  for (int q = 0; q <= size_; ++q)
    h.send_begin[static_cast<std::size_t>(q)] = h.key_begin[static_cast<std::size_t>(q * per_peer)];
}

// Records [first, last) of the send order into consecutive records at `dst`: headers on the host, payload
// rows and scales by the row-copy kernel (transport_common.hpp), gathered straight from the caller's rows
// (with in.quantize, quantize_into_records writes the payloads of all records afterwards).
Status DirectTransport::pack_records(const DirectHandle& h, const DispatchInput& in, int first, int last,
                                     std::byte* dst) {
  if (last <= first) return Status();
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t header = header_bytes(h.kind);
  const auto k_max = static_cast<std::size_t>(config_.top_k);
  for (int i = first; i < last; ++i) {
    std::byte* at = dst + static_cast<std::size_t>(i - first) * rec;
    const int t = h.send_token[static_cast<std::size_t>(i)];
    const std::size_t routing = static_cast<std::size_t>(t) * k_max;
    if (h.kind == Layout::kHtRankMajor) {
      const std::int32_t token = t;
      std::memcpy(at, &token, 4);
      std::memcpy(at + 4, h.topk_idx.data() + routing, 4 * k_max);
      std::memcpy(at + 4 + 4 * k_max, h.topk_weights.data() + routing, 4 * k_max);
    } else {
      const int k = h.send_slot[static_cast<std::size_t>(i)];
      const std::int32_t slot[3] = {t, k, h.topk_idx[routing + static_cast<std::size_t>(k)]};
      std::memcpy(at, slot, 12);
      std::memcpy(at + 12, &h.topk_weights[routing + static_cast<std::size_t>(k)], 4);
    }
  }
  if (in.quantize) return Status();
  const auto records = static_cast<std::int64_t>(last - first);
  const std::span<const std::int64_t> rows =
      std::span<const std::int64_t>(h.send_rows)
          .subspan(static_cast<std::size_t>(first), static_cast<std::size_t>(records));
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  EPS_RETURN_IF_ERROR(
      copy_rows(kernels(), dst + header, rec, in.x.data(), row_bytes_, row_bytes_, records, rows));
  return copy_rows(kernels(), dst + header + row_bytes_, rec,
                   reinterpret_cast<const std::byte*>(in.x_scales.data()), scale_bytes, scale_bytes, records,
                   rows);
}

// Built on the first fp8 pack of a handle and kept: the handle's send order is fixed, so cached dispatches
// plan nothing again.
const QuantizePlan& DirectTransport::quantize_plan(const DirectHandle& h) const {
  QuantizePlan& plan = h.quantize_plan;
  if (plan.ready) return plan;
  const auto records = static_cast<int>(h.send_token.size());
  const int self_first = own_stream_in_place() ? h.send_begin[static_cast<std::size_t>(rank_)] : records;
  const int self_last = own_stream_in_place() ? h.send_begin[static_cast<std::size_t>(rank_) + 1] : records;
  const auto area = [&](int i) { return i >= self_first && i < self_last ? 1 : 0; };
  const auto index = [&](int i) { return static_cast<std::int64_t>(area(i) == 1 ? i - self_first : i); };
  std::vector<int> first(static_cast<std::size_t>(h.num_tokens), -1);
  for (int i = 0; i < records; ++i) {
    int& f = first[static_cast<std::size_t>(h.send_token[static_cast<std::size_t>(i)])];
    if (f < 0) {
      f = i;
      plan.quantize_src[static_cast<std::size_t>(area(i))].push_back(
          h.send_rows[static_cast<std::size_t>(i)]);
      plan.quantize_dst[static_cast<std::size_t>(area(i))].push_back(index(i));
      continue;
    }
    const auto pair = static_cast<std::size_t>(area(f) * 2 + area(i));
    plan.copy_src[pair].push_back(index(f));
    plan.copy_dst[pair].push_back(index(i));
  }
  plan.ready = true;
  return plan;
}

// docs/dispatch.md 5.8: the quantizer kernel gathers each token's bf16 row once and writes its codes and,
// after them, its scales into the token's first record; the row-copy kernel copies those bytes (one run of
// codes and scales) into the token's other records. The bytes are those that pack_records would have copied
// from quantized input.
Status DirectTransport::quantize_into_records(const DirectHandle& h, const DispatchInput& in,
                                              const std::array<std::byte*, 2>& area_base) {
  const QuantizePlan& plan = quantize_plan(h);
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t header = header_bytes(h.kind);
  for (std::size_t a = 0; a < 2; ++a) {
    const std::vector<std::int64_t>& src = plan.quantize_src[a];
    if (src.empty()) continue;
    std::byte* payload = area_base[a] + header;
    EPS_RETURN_IF_ERROR(kernels().run(device::Fp8QuantizeArgs{
        reinterpret_cast<const bf16*>(in.x.data()), config_.hidden, src.data(),
        reinterpret_cast<std::uint8_t*>(payload), static_cast<std::int64_t>(rec), payload + row_bytes_,
        static_cast<std::int64_t>(rec), static_cast<std::int64_t>(src.size()), config_.hidden, *in.quantize,
        plan.quantize_dst[a].data()}));
  }
  const std::size_t payload_bytes = row_bytes_ + 4 * static_cast<std::size_t>(num_scales_);
  for (std::size_t pair = 0; pair < 4; ++pair) {
    const std::vector<std::int64_t>& src = plan.copy_src[pair];
    EPS_RETURN_IF_ERROR(copy_rows(kernels(), area_base[pair % 2] + header, rec, area_base[pair / 2] + header,
                                  rec, payload_bytes, static_cast<std::int64_t>(src.size()), src,
                                  plan.copy_dst[pair]));
  }
  return Status();
}

// The records to other ranks go to the send region; this rank's own records straight to its slot in its own
// receive region, which is where a put would have placed them (no fabric op, no signal: exchange()).
Status DirectTransport::pack_dispatch(const DirectHandle& h, const DispatchInput& in) {
  const std::size_t rec = record_bytes(h.kind);
  const auto end = static_cast<int>(h.send_token.size());
  std::byte* const own = recv_base(parity()) + own_slot_offset(h.kind);
  if (!own_stream_in_place()) {
    EPS_RETURN_IF_ERROR(pack_records(h, in, 0, end, send_base()));
  } else {
    const int self_first = h.send_begin[static_cast<std::size_t>(rank_)];
    const int self_last = h.send_begin[static_cast<std::size_t>(rank_) + 1];
    EPS_RETURN_IF_ERROR(pack_records(h, in, 0, self_first, send_base()));
    EPS_RETURN_IF_ERROR(pack_records(h, in, self_first, self_last, own));
    EPS_RETURN_IF_ERROR(
        pack_records(h, in, self_last, end, send_base() + static_cast<std::size_t>(self_last) * rec));
  }
  if (in.quantize) EPS_RETURN_IF_ERROR(quantize_into_records(h, in, {send_base(), own}));
  return kernels().synchronize();
}

void DirectTransport::plan_dispatch_pieces(const DirectHandle& h) {
  const std::size_t rec = record_bytes(h.kind);
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  std::vector<std::vector<Piece>>& pieces = pieces_;
  for (std::vector<Piece>& p : pieces) p.clear();
  pieces.resize(static_cast<std::size_t>(size_));
  if (h.kind == Layout::kHtRankMajor) {
    for (int q = 0; q < size_; ++q) {
      const int first = h.send_begin[static_cast<std::size_t>(q)];
      const int n = h.send_begin[static_cast<std::size_t>(q) + 1] - first;
      if (n > 0) {
        pieces[static_cast<std::size_t>(q)].push_back(
            {static_cast<std::size_t>(first) * rec, static_cast<std::size_t>(rank_) * t_max * rec, n, 0});
      }
    }
    return;
  }
  // LL: the records for q are contiguous in (l, t) order and land contiguously in q's slot for this source;
  // one put per local expert only where the strategy counts per channel (recv-count).
  const std::size_t slot = static_cast<std::size_t>(rank_) * combine_rows_per_peer_ * rec;
  for (int q = 0; q < size_; ++q) {
    const int stream_first = h.send_begin[static_cast<std::size_t>(q)];
    const int stream_records = h.send_begin[static_cast<std::size_t>(q) + 1] - stream_first;
    if (!signal_->per_channel_puts()) {
      if (stream_records > 0) {
        pieces[static_cast<std::size_t>(q)].push_back(
            {static_cast<std::size_t>(stream_first) * rec, slot, stream_records, 0});
      }
      continue;
    }
    for (int l = 0; l < local(); ++l) {
      const std::size_t block = static_cast<std::size_t>(q) * local() + l;
      const int first = h.key_begin[block];
      const int n = h.key_begin[block + 1] - first;
      if (n == 0) continue;
      pieces[static_cast<std::size_t>(q)].push_back(
          {static_cast<std::size_t>(first) * rec, slot + static_cast<std::size_t>(first - stream_first) * rec,
           n, l});
    }
  }
}

std::byte* DirectTransport::recv_base(int parity) const {
  return recv_.local.data() + static_cast<std::size_t>(parity) * recv_parity_bytes_;
}

std::span<const std::int32_t> DirectTransport::received_record(int source) const {
  const int parity = static_cast<int>(operation_ & 1);
  const std::size_t ints = static_cast<std::size_t>(record_ints());
  const auto* base = reinterpret_cast<const std::int32_t*>(signal_recv_.local.data());
  return {base + (static_cast<std::size_t>(parity) * size_ + source) * ints, ints};
}

std::int32_t* DirectTransport::own_signal_record(int parity) const {
  const std::size_t ints = static_cast<std::size_t>(record_ints());
  auto* base = reinterpret_cast<std::int32_t*>(signal_recv_.local.data());
  return base + (static_cast<std::size_t>(parity) * size_ + rank_) * ints;
}

Status DirectTransport::pump() {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(std::size_t n, fabric_->poll(completions_));
    for (std::size_t i = 0; i < n; ++i) {
      const Completion& c = completions_[i];
      if (c.kind == CompletionKind::kLocal) {
        const auto p = static_cast<std::size_t>(c.context & 1);
        ++completed_[p];
        if ((c.context & kSignalBit) == 0) ++data_completed_[p];
        continue;
      }
      const Status status = signal_->on_remote(c.imm);
      if (!status.ok())
        return Status(StatusCode::kCheckFailed, fmt::format("{} ({})", status.message(), where()));
    }
    if (n < completions_.size()) return Status();
  }
}

// Posts one put, polling while the fabric pushes back (peers drain our puts only while they poll too).
Status DirectTransport::post(const PutOp& op) {
  Status failure;
  const Status waited = wait_until(
      Deadline(config_.timeout_seconds),
      [&] {
        Result<bool> posted = fabric_->try_put(op);
        if (!posted.ok()) {
          failure = posted.status();
          return true;
        }
        if (*posted) return true;
        failure = pump();
        return !failure.ok();
      },
      [&] {
        return fmt::format("room to post a put of {} bytes to rank {} ({})", op.bytes, op.peer, where());
      });
  EPS_RETURN_IF_ERROR(waited);
  EPS_RETURN_IF_ERROR(failure);
  ++posted_[op.context & 1];
  if (op.peer != rank_) wire_.sent += static_cast<std::int64_t>(op.bytes);
  return Status();
}

Status DirectTransport::put_data(int peer, int parity, int channel, int tokens, std::size_t record_bytes,
                                 std::size_t local_offset, std::size_t remote_offset) {
  EPS_ASSIGN_OR_RETURN(std::optional<std::uint32_t> imm, signal_->data_imm(peer, parity, channel, tokens));
  EPS_RETURN_IF_ERROR(
      post({peer, send_.id, local_offset, recv_.id, remote_offset,
            static_cast<std::size_t>(tokens) * record_bytes, imm, static_cast<std::uint64_t>(parity)}));
  ++data_posted_[parity];
  return Status();
}

Status DirectTransport::put_signal(int peer, int parity, std::size_t local_offset, std::size_t remote_offset,
                                   std::size_t bytes) {
  EPS_ASSIGN_OR_RETURN(std::uint32_t imm, signal_->signal_imm(peer, parity));
  return post({peer, signal_send_.id, local_offset, signal_recv_.id, remote_offset, bytes, imm,
               kSignalBit | static_cast<std::uint64_t>(parity)});
}

Status DirectTransport::put_data_with_signal(int peer, int parity, const DataPut& put,
                                             std::size_t record_bytes) {
  EPS_ASSIGN_OR_RETURN(std::uint32_t imm, signal_->signal_imm(peer, parity));
  return post({peer, send_.id, put.local_offset, recv_.id, put.remote_offset,
               static_cast<std::size_t>(put.tokens) * record_bytes, imm,
               kSignalBit | static_cast<std::uint64_t>(parity)});
}

Status DirectTransport::await_data_completions(int parity) {
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      Deadline(config_.timeout_seconds),
      [&] {
        failure = pump();
        return !failure.ok() || data_completed_[parity] == data_posted_[parity];
      },
      [&] {
        return fmt::format("local completions of {} data puts, {} seen ({})", data_posted_[parity],
                           data_completed_[parity], where());
      }));
  return failure;
}

Status DirectTransport::exchange(const std::vector<std::vector<Piece>>& pieces, std::size_t record_bytes) {
  const int parity = static_cast<int>(operation_ & 1);
  const Deadline deadline(config_.timeout_seconds);
  // Data puts, destinations in rotated order so that no rank is everyone's first target. This rank's own
  // stream skips the fabric where own_stream_in_place(): its records were written in place already.
  signal_carriers_.assign(static_cast<std::size_t>(size_), std::nullopt);
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    if (q == rank_ && own_stream_in_place()) continue;
    const std::vector<Piece>& stream = pieces[static_cast<std::size_t>(q)];
    std::int64_t records = 0;
    for (const Piece& piece : stream) records += piece.records;
    std::optional<DataPut>* carrier =
        signal_on_last_data_put(records) ? &signal_carriers_[static_cast<std::size_t>(q)] : nullptr;
    EPS_RETURN_IF_ERROR(put_stream_data(q, parity, stream, record_bytes, carrier));
  }
  EPS_RETURN_IF_ERROR(data_puts_done(parity));
  if (signal_->signal_after_local_completion()) EPS_RETURN_IF_ERROR(await_data_completions(parity));
  EPS_RETURN_IF_ERROR(put_signals(parity, record_bytes));
  EPS_RETURN_IF_ERROR(signal_puts_done(parity));
  EPS_RETURN_IF_ERROR(await_streams(parity, deadline));
  count_received(record_bytes);
  return Status();
}

Status DirectTransport::put_stream_data(int peer, int parity, const std::vector<Piece>& pieces,
                                        std::size_t record_bytes, std::optional<DataPut>* held) {
  const int per_put = rows_per_put(record_bytes);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const Piece& piece = pieces[i];
    for (int done = 0; done < piece.records; done += per_put) {
      const int n = std::min(per_put, piece.records - done);
      const std::size_t skip = static_cast<std::size_t>(done) * record_bytes;
      const DataPut put{piece.channel, n,
                        static_cast<std::size_t>(parity) * send_bytes_ + piece.local_offset + skip,
                        static_cast<std::size_t>(parity) * recv_parity_bytes_ + piece.remote_offset + skip};
      if (held != nullptr && i + 1 == pieces.size() && done + n == piece.records) {
        *held = put;
        continue;
      }
      EPS_RETURN_IF_ERROR(
          put_data(peer, parity, put.channel, put.tokens, record_bytes, put.local_offset, put.remote_offset));
    }
  }
  return Status();
}

// Each peer's held last data put now carries its signal; the other peers get a signal record: this rank's
// tokens per rank, then per-channel record counts for the destination.
Status DirectTransport::put_signals(int parity, std::size_t record_bytes) {
  const std::size_t ints = static_cast<std::size_t>(record_ints());
  auto* records = reinterpret_cast<std::int32_t*>(signal_send_.local.data()) +
                  static_cast<std::size_t>(parity) * size_ * ints;
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    const std::optional<DataPut>& carrier = signal_carriers_[static_cast<std::size_t>(q)];
    if (carrier) {
      EPS_RETURN_IF_ERROR(put_data_with_signal(q, parity, *carrier, record_bytes));
      continue;
    }
    std::int32_t* record = q == rank_ && own_stream_in_place() ? own_signal_record(parity)
                                                               : records + static_cast<std::size_t>(q) * ints;
    std::copy(my_tokens_per_rank_.begin(), my_tokens_per_rank_.end(), record);
    std::copy_n(channel_counts_.begin() + static_cast<std::ptrdiff_t>(q) * local(), local(), record + size_);
    if (q == rank_ && own_stream_in_place()) continue;
    EPS_RETURN_IF_ERROR(put_signal(q, parity, (static_cast<std::size_t>(parity) * size_ + q) * ints * 4,
                                   (static_cast<std::size_t>(parity) * size_ + rank_) * ints * 4, ints * 4));
  }
  return Status();
}

// Every source's stream: the strategy decides when its data is placed (docs/fabrics.md 6.2).
Status DirectTransport::await_streams(int parity, const Deadline& deadline) {
  int waiting_for = 0;
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        failure = pump();
        if (!failure.ok()) return true;
        while (waiting_for < size_ &&
               ((waiting_for == rank_ && own_stream_in_place()) ||
                (signal_->signal_arrived(waiting_for, parity) &&
                 signal_->stream_complete(waiting_for, parity, incoming_counts(waiting_for))))) {
          ++waiting_for;
        }
        return waiting_for == size_;
      },
      [&] {
        return fmt::format("rank {}: {} ({})", waiting_for,
                           signal_->describe_wait(waiting_for, parity, incoming_counts(waiting_for)),
                           where());
      }));
  std::atomic_thread_fence(std::memory_order_acquire);
  return failure;
}

// What arrived from the other ranks: their records, then their signal record where they sent one.
void DirectTransport::count_received(std::size_t record_bytes) {
  const auto record = static_cast<std::int64_t>(record_ints()) * 4;
  for (int source = 0; source < size_; ++source) {
    if (source == rank_) continue;
    std::int64_t records = 0;
    for (std::int32_t n : incoming_counts(source)) records += n;
    wire_.received +=
        records * static_cast<std::int64_t>(record_bytes) + (signal_on_last_data_put(records) ? 0 : record);
  }
}

std::span<const std::int32_t> DirectTransport::incoming_counts(int source) const {
  if (expected_counts_.empty()) return received_record(source).subspan(static_cast<std::size_t>(size_));
  return std::span<const std::int32_t>(expected_counts_)
      .subspan(static_cast<std::size_t>(source) * local(), static_cast<std::size_t>(local()));
}

// A cached dispatch resends along the handle's routing: source s sends what it sent in the handle's dispatch
// (rank-major: its rows on channel 0; LL: its block of each local expert on that expert's channel).
void DirectTransport::expect_counts_of_cached_dispatch(const DirectHandle& h) {
  expected_counts_.assign(static_cast<std::size_t>(size_) * local(), 0);
  for (int s = 0; s < size_; ++s) {
    const std::size_t at = static_cast<std::size_t>(s) * local();
    if (h.kind != Layout::kLl) {
      expected_counts_[at] =
          h.recv_begin[static_cast<std::size_t>(s) + 1] - h.recv_begin[static_cast<std::size_t>(s)];
      continue;
    }
    for (int l = 0; l < local(); ++l)
      expected_counts_[at + l] = h.ll_ranges[static_cast<std::size_t>(l) * size_ + s].count;
  }
}

// A combine returns one row per record this rank sent to q in the dispatch, all on channel 0.
void DirectTransport::expect_counts_of_combine(const DirectHandle& h) {
  expected_counts_.assign(static_cast<std::size_t>(size_) * local(), 0);
  for (int q = 0; q < size_; ++q) {
    expected_counts_[static_cast<std::size_t>(q) * local()] =
        h.send_begin[static_cast<std::size_t>(q) + 1] - h.send_begin[static_cast<std::size_t>(q)];
  }
}

// The send region and signal records of this parity were last used two operations ago: wait for those
// puts' local completions (peers are polling by now, so providers with manual progress complete them).
Status DirectTransport::begin_operation() {
  const int p = parity();
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      Deadline(config_.timeout_seconds),
      [&] {
        failure = pump();
        return !failure.ok() || completed_[p] == posted_[p];
      },
      [&] {
        return fmt::format("local completions of the {} puts of operation {}, {} seen ({})", posted_[p],
                           operation_ - 2, completed_[p], where());
      }));
  EPS_RETURN_IF_ERROR(failure);
  posted_[p] = completed_[p] = data_posted_[p] = data_completed_[p] = 0;
  return Status();
}

// Frees the parity's signal state for reuse two operations later, after every put of this operation
// completed (quiet). Handing the puts to the provider (flush) is not enough: providers with manual
// progress (tcp;ofi_rxm) move a put's bytes only while its initiator drives progress, and after returning
// this rank may compute or sit in MPI while a peer waits for them (found on the virtual cluster: a signal
// stuck in a sender that had gone on to an MPI barrier). Every rank waits here or for its receives, both
// of which drive progress, so the wait cannot deadlock.
Status DirectTransport::finish_operation() {
  for (int s = 0; s < size_; ++s) signal_->retire(s, parity());
  ++operation_;
  return quiet_puts();
}

Status DirectTransport::quiet_puts() { return fabric_->quiet(Deadline(config_.timeout_seconds)); }

// Payload rows and scales of `n` consecutive received records, from record `first_record` of this parity's
// receive region, to the caller's consecutive rows from `first_row`: one strided copy, no index list.
Status DirectTransport::unpack_run(Layout kind, std::size_t first_record, std::size_t first_row, int n,
                                   const DispatchOutput& out) const {
  if (n == 0) return Status();
  const std::size_t rec = record_bytes(kind);
  const std::byte* src = recv_base(parity()) + first_record * rec + header_bytes(kind);
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), out.recv_x.data() + first_row * row_bytes_, row_bytes_, src, rec,
                                row_bytes_, n, {}));
  return copy_rows(kernels(),
                   reinterpret_cast<std::byte*>(out.recv_x_scales.data()) + first_row * scale_bytes,
                   scale_bytes, src + row_bytes_, rec, scale_bytes, n, {});
}

// Source s's records sit at the start of its slot, in (s, t) order: they become rows recv_begin[s]... .
Status DirectTransport::unpack_rank_major(const DispatchOutput& out, DispatchShape& shape) const {
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  const std::byte* base = recv_base(parity());
  const auto k_max = static_cast<std::size_t>(config_.top_k);
  shape.recv_begin.assign(static_cast<std::size_t>(size_) + 1, 0);
  std::size_t row = 0;
  for (int s = 0; s < size_; ++s) {
    const int n = incoming_counts(s)[0];
    const std::size_t slot = static_cast<std::size_t>(s) * t_max;
    for (int i = 0; i < n; ++i) {
      const std::byte* at = base + (slot + static_cast<std::size_t>(i)) * rank_record_;
      std::int32_t idx[dispatch::kMaxTopK];
      float weights[dispatch::kMaxTopK];
      std::memcpy(idx, at + 4, 4 * k_max);
      std::memcpy(weights, at + 4 + 4 * k_max, 4 * k_max);
      localize_routing(config_, size_, rank_, idx, weights, out.recv_topk_idx.data() + (row + i) * k_max,
                       out.recv_topk_weights.data() + (row + i) * k_max);
    }
    EPS_RETURN_IF_ERROR(unpack_run(Layout::kHtRankMajor, slot, row, n, out));
    row += static_cast<std::size_t>(n);
    shape.recv_begin[static_cast<std::size_t>(s) + 1] = static_cast<int>(row);
  }
  shape.num_rows = static_cast<std::int64_t>(row);
  count_rank_major(config_, size_, shape.num_rows, out);
  return kernels().synchronize();
}

// Source s's records sit contiguously in its slot, local expert l's block after those of experts < l; each
// (l, s) block lands contiguously at packed row l * capacity + begin.
Status DirectTransport::unpack_ll(const DispatchOutput& out, DispatchShape& shape) const {
  const std::size_t capacity =
      static_cast<std::size_t>(size_) * static_cast<std::size_t>(config_.max_tokens_per_rank);
  const std::byte* base = recv_base(parity());
  shape.ll_ranges.assign(static_cast<std::size_t>(local()) * size_, LlRange{0, 0});
  shape.num_rows = 0;
  block_start_.assign(static_cast<std::size_t>(size_), 0);
  for (int l = 0; l < local(); ++l) {
    int begin = 0;
    for (int s = 0; s < size_; ++s) {
      const int n = incoming_counts(s)[static_cast<std::size_t>(l)];
      std::size_t& start = block_start_[static_cast<std::size_t>(s)];
      const std::size_t first = static_cast<std::size_t>(s) * combine_rows_per_peer_ + start;
      start += static_cast<std::size_t>(n);
      const std::size_t row = static_cast<std::size_t>(l) * capacity + static_cast<std::size_t>(begin);
      for (int i = 0; i < n; ++i) {
        std::int32_t token = 0;
        std::memcpy(&token, base + (first + static_cast<std::size_t>(i)) * slot_record_, 4);
        out.src_info[row + static_cast<std::size_t>(i)] = token;
      }
      EPS_RETURN_IF_ERROR(unpack_run(Layout::kLl, first, row, n, out));
      const LlRange range{begin, n};
      shape.ll_ranges[static_cast<std::size_t>(l) * size_ + s] = range;
      out.layout_range[static_cast<std::size_t>(l) * size_ + s] = range;
      begin += n;
    }
    out.packed_recv_count[static_cast<std::size_t>(l)] = begin;
    shape.num_rows += begin;
  }
  return kernels().synchronize();
}

// `shape` receives what the expert side learned (rows per source, LL ranges, rows written): the handle's own
// fields for a fresh dispatch, scratch for a cached one (which re-derives the same values).
Status DirectTransport::exchange_dispatch(const DirectHandle& h, const DispatchInput& in,
                                          const DispatchOutput& out, DispatchShape& shape) {
  EPS_RETURN_IF_ERROR(begin_operation());
  EPS_RETURN_IF_ERROR(pack_dispatch(h, in));
  channel_counts_.assign(static_cast<std::size_t>(size_) * local(), 0);
  const int per_peer = h.kind == Layout::kLl ? local() : 1;
  for (int q = 0; q < size_; ++q) {
    for (int c = 0; c < per_peer; ++c) {
      const std::size_t block = static_cast<std::size_t>(q) * per_peer + c;
      channel_counts_[static_cast<std::size_t>(q) * local() + c] =
          h.key_begin[block + 1] - h.key_begin[block];
    }
  }
  my_tokens_per_rank_.assign(h.layout_info.num_tokens_per_rank.begin(),
                             h.layout_info.num_tokens_per_rank.end());
  plan_dispatch_pieces(h);
  EPS_RETURN_IF_ERROR(exchange(pieces_, record_bytes(h.kind)));
  EPS_RETURN_IF_ERROR(h.kind == Layout::kLl ? unpack_ll(out, shape) : unpack_rank_major(out, shape));
  if (shape.prefix_matrix != nullptr) {
    std::vector<int> all(static_cast<std::size_t>(size_) * size_);
    for (int s = 0; s < size_; ++s) {
      const std::span<const std::int32_t> record = received_record(s);
      std::copy_n(record.begin(), size_, all.begin() + static_cast<std::ptrdiff_t>(s) * size_);
    }
    *shape.prefix_matrix = rank_prefix_matrix(size_, all);
  }
  return finish_operation();
}

Status DirectTransport::run_dispatch(RoutedHandle& handle, const DispatchInput& in,
                                     const DispatchOutput& out) {
  auto& h = static_cast<DirectHandle&>(handle);
  plan_destinations(h);
  DispatchShape shape;
  shape.prefix_matrix = &h.layout_info.rank_prefix_matrix;
  expected_counts_.clear();  // only the signal records tell them
  EPS_RETURN_IF_ERROR(exchange_dispatch(h, in, out, shape));
  h.recv_begin = std::move(shape.recv_begin);
  h.ll_ranges = std::move(shape.ll_ranges);
  h.num_rows = shape.num_rows;
  return Status();
}

Status DirectTransport::run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& in,
                                            const DispatchOutput& out) {
  // The handle stays const for the caller; the shape is re-derived identically into scratch.
  const auto& h = static_cast<const DirectHandle&>(handle);
  cached_shape_.prefix_matrix = nullptr;
  expect_counts_of_cached_dispatch(h);
  return exchange_dispatch(h, in, out, cached_shape_);
}

// Expert side of a combine: the rows of in.x that go back to source s, as contiguous runs (rank-major: the
// rows s sent, in order; LL: s's block of every local expert, experts ascending), copied to the send region
// at `packed` rows (or, for this rank's own rows, straight into its own receive slot). Returns the rows for
// s.
Status DirectTransport::pack_combine_rows(const DirectHandle& h, const CombineInput& in, int s,
                                          std::byte* dst, std::int64_t& rows) const {
  const std::size_t row = 2 * static_cast<std::size_t>(config_.hidden);
  const auto* x = reinterpret_cast<const std::byte*>(in.x.data());
  rows = 0;
  auto copy_run = [&](std::int64_t first, std::int64_t count) -> Status {
    if (count == 0) return Status();
    EPS_RETURN_IF_ERROR(copy_rows(kernels(), dst + static_cast<std::size_t>(rows) * row, row,
                                  x + static_cast<std::size_t>(first) * row, row, row, count, {}));
    rows += count;
    return Status();
  };
  if (h.kind == Layout::kHtRankMajor) {
    const int first = h.recv_begin[static_cast<std::size_t>(s)];
    return copy_run(first, h.recv_begin[static_cast<std::size_t>(s) + 1] - first);
  }
  const auto capacity = static_cast<std::int64_t>(size_) * config_.max_tokens_per_rank;
  for (int l = 0; l < local(); ++l) {
    const LlRange r = h.ll_ranges[static_cast<std::size_t>(l) * size_ + s];
    EPS_RETURN_IF_ERROR(copy_run(l * capacity + r.begin, r.count));
  }
  return Status();
}

// Source side: record i sent to q came back to q's slot at position i - send_begin[q]. Built on the first
// combine of a handle and kept, so repeated combines of one dispatch index nothing again.
const CombineIndex& DirectTransport::combine_index(const DirectHandle& h) const {
  if (h.combine_index.ready) return h.combine_index;
  std::vector<std::int64_t> record_rows(h.send_token.size());
  for (int q = 0; q < size_; ++q) {
    const int begin = h.send_begin[static_cast<std::size_t>(q)];
    for (int i = begin; i < h.send_begin[static_cast<std::size_t>(q) + 1]; ++i) {
      record_rows[static_cast<std::size_t>(i)] =
          static_cast<std::int64_t>(static_cast<std::size_t>(q) * combine_rows_per_peer_) + (i - begin);
    }
  }
  if (h.kind == Layout::kLl) {
    h.combine_index = ll_combine_index(config_.top_k, h.num_tokens, h.send_token, h.send_slot, record_rows);
  } else {
    h.combine_index = ht_combine_index(size_, h.num_tokens, h.send_begin, h.send_token, record_rows);
  }
  return h.combine_index;
}

Status DirectTransport::run_combine(const RoutedHandle& handle, const CombineInput& in,
                                    const CombineOutput& out) {
  const auto* h = &static_cast<const DirectHandle&>(handle);
  const std::size_t row = 2 * static_cast<std::size_t>(config_.hidden);
  EPS_RETURN_IF_ERROR(begin_operation());
  // Expert side: each source's rows go back in the order the source sent them.
  for (std::vector<Piece>& p : pieces_) p.clear();
  pieces_.resize(static_cast<std::size_t>(size_));
  channel_counts_.assign(static_cast<std::size_t>(size_) * local(), 0);
  std::int64_t packed = 0;
  for (int s = 0; s < size_; ++s) {
    const std::size_t slot = static_cast<std::size_t>(rank_) * combine_rows_per_peer_ * row;
    std::int64_t n = 0;
    if (s == rank_ && own_stream_in_place()) {
      EPS_RETURN_IF_ERROR(pack_combine_rows(*h, in, s, recv_base(parity()) + slot, n));
    } else {
      EPS_RETURN_IF_ERROR(
          pack_combine_rows(*h, in, s, send_base() + static_cast<std::size_t>(packed) * row, n));
      if (n > 0)
        pieces_[static_cast<std::size_t>(s)].push_back(
            {static_cast<std::size_t>(packed) * row, slot, static_cast<int>(n), 0});
      packed += n;
    }
    channel_counts_[static_cast<std::size_t>(s) * local()] = static_cast<int>(n);
  }
  EPS_RETURN_IF_ERROR(kernels().synchronize());
  my_tokens_per_rank_.assign(static_cast<std::size_t>(size_), 0);
  expect_counts_of_combine(*h);
  EPS_RETURN_IF_ERROR(exchange(pieces_, row));
  const auto* rows = reinterpret_cast<const bf16*>(recv_base(static_cast<int>(operation_ & 1)));
  const CombineIndex& index = combine_index(*h);
  if (in.tree == CombineTree::kLlWeighted) {
    EPS_RETURN_IF_ERROR(reduce_ll(kernels(), config_, h->num_tokens, h->topk_weights, rows, index, out.out));
  } else {
    EPS_RETURN_IF_ERROR(
        reduce_ht(kernels(), config_, h->num_tokens, in.tree, index, rows, in.bias0, in.bias1, out.out));
  }
  return finish_operation();
}

}  // namespace eps::transport::direct_detail

namespace eps::transport {

using direct_detail::DirectTransport;

Capabilities direct_capabilities() {
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

Result<std::unique_ptr<Transport>> make_direct_transport(const TransportConfig& config,
                                                         const fabric::FabricSelection& selection) {
  int size = 0;
  int rank = 0;
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  EPS_RETURN_IF_ERROR(validate_config(config, size, direct_capabilities()));
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Fabric> fab,
                       fabric::make_fabric(selection, config.comm, config.timeout_seconds));
  return make_direct_transport_over(config, selection, std::move(fab));
}

Result<std::unique_ptr<Transport>> make_direct_transport_over(const TransportConfig& config,
                                                              const fabric::FabricSelection& selection,
                                                              std::unique_ptr<fabric::Fabric> fab) {
  EPS_RETURN_IF_ERROR(validate_config(config, fab->size(), direct_capabilities()));
  const int rank = fab->rank();
  const int size = fab->size();
  auto transport = std::make_unique<DirectTransport>(config, selection, rank, size, std::move(fab));
  EPS_RETURN_IF_ERROR(transport->setup());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace eps::transport
