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
      completions_(64) {}

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

// Headers on the host, payload rows and scales by the row-copy kernel (transport_common.hpp).
Status DirectTransport::pack_dispatch(const DirectHandle& h, const DispatchInput& in) {
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t header = header_bytes(h.kind);
  const int k_max = config_.top_k;
  for (std::size_t i = 0; i < h.send_token.size(); ++i) {
    std::byte* at = send_base() + i * rec;
    const int t = h.send_token[i];
    const std::size_t routing = static_cast<std::size_t>(t) * k_max;
    if (h.kind == Layout::kHtRankMajor) {
      const std::int32_t token = t;
      std::memcpy(at, &token, 4);
      std::memcpy(at + 4, h.topk_idx.data() + routing, 4 * static_cast<std::size_t>(k_max));
      std::memcpy(at + 4 + 4 * k_max, h.topk_weights.data() + routing, 4 * static_cast<std::size_t>(k_max));
    } else {
      const int k = h.send_slot[i];
      const std::int32_t slot[3] = {t, k, h.topk_idx[routing + k]};
      std::memcpy(at, slot, 12);
      std::memcpy(at + 12, &h.topk_weights[routing + k], 4);
    }
  }
  const auto records = static_cast<std::int64_t>(h.send_token.size());
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), send_base() + header, rec, in.x.data(), row_bytes_, row_bytes_,
                                records, h.send_rows));
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), send_base() + header + row_bytes_, rec,
                                reinterpret_cast<const std::byte*>(in.x_scales.data()), scale_bytes,
                                scale_bytes, records, h.send_rows));
  return kernels().synchronize();
}

std::vector<std::vector<Piece>> DirectTransport::dispatch_pieces(const DirectHandle& h) const {
  const std::size_t rec = record_bytes(h.kind);
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  std::vector<std::vector<Piece>> pieces(static_cast<std::size_t>(size_));
  if (h.kind == Layout::kHtRankMajor) {
    for (int q = 0; q < size_; ++q) {
      const int first = h.send_begin[static_cast<std::size_t>(q)];
      const int n = h.send_begin[static_cast<std::size_t>(q) + 1] - first;
      if (n > 0) {
        pieces[static_cast<std::size_t>(q)].push_back(
            {static_cast<std::size_t>(first) * rec, static_cast<std::size_t>(rank_) * t_max * rec, n, 0});
      }
    }
    return pieces;
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
  return pieces;
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
  const int per_put = rows_per_put(record_bytes);
  const std::size_t ints = static_cast<std::size_t>(record_ints());
  const Deadline deadline(config_.timeout_seconds);
  // Data puts, destinations in rotated order so that no rank is everyone's first target.
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    for (const Piece& piece : pieces[static_cast<std::size_t>(q)]) {
      for (int done = 0; done < piece.records; done += per_put) {
        const int n = std::min(per_put, piece.records - done);
        const std::size_t skip = static_cast<std::size_t>(done) * record_bytes;
        EPS_RETURN_IF_ERROR(
            put_data(q, parity, piece.channel, n, record_bytes,
                     static_cast<std::size_t>(parity) * send_bytes_ + piece.local_offset + skip,
                     static_cast<std::size_t>(parity) * recv_parity_bytes_ + piece.remote_offset + skip));
      }
    }
  }
  EPS_RETURN_IF_ERROR(data_puts_done(parity));
  if (signal_->signal_after_local_completion()) EPS_RETURN_IF_ERROR(await_data_completions(parity));
  // Signal records: this rank's tokens per rank, then per-channel record counts for the destination.
  auto* records = reinterpret_cast<std::int32_t*>(signal_send_.local.data()) +
                  static_cast<std::size_t>(parity) * size_ * ints;
  for (int step = 0; step < size_; ++step) {
    const int q = (rank_ + 1 + step) % size_;
    std::int32_t* record = records + static_cast<std::size_t>(q) * ints;
    std::copy(my_tokens_per_rank_.begin(), my_tokens_per_rank_.end(), record);
    std::copy_n(channel_counts_.begin() + static_cast<std::ptrdiff_t>(q) * local(), local(), record + size_);
    EPS_RETURN_IF_ERROR(put_signal(q, parity, (static_cast<std::size_t>(parity) * size_ + q) * ints * 4,
                                   (static_cast<std::size_t>(parity) * size_ + rank_) * ints * 4, ints * 4));
  }
  EPS_RETURN_IF_ERROR(signal_puts_done(parity));
  // Every source's stream: the strategy decides when its data is placed (docs/fabrics.md 6.2).
  int waiting_for = 0;
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        failure = pump();
        if (!failure.ok()) return true;
        while (waiting_for < size_ && signal_->signal_arrived(waiting_for, parity) &&
               signal_->stream_complete(waiting_for, parity, received_record(waiting_for).subspan(size_))) {
          ++waiting_for;
        }
        return waiting_for == size_;
      },
      [&] {
        return fmt::format(
            "rank {}: {} ({})", waiting_for,
            signal_->describe_wait(waiting_for, parity, received_record(waiting_for).subspan(size_)),
            where());
      }));
  std::atomic_thread_fence(std::memory_order_acquire);
  EPS_RETURN_IF_ERROR(failure);
  // What arrived from the other ranks: their records, then their signal record.
  for (int source = 0; source < size_; ++source) {
    if (source == rank_) continue;
    std::int64_t records = 0;
    for (std::int32_t n : received_record(source).subspan(static_cast<std::size_t>(size_))) records += n;
    wire_.received += records * static_cast<std::int64_t>(record_bytes) + static_cast<std::int64_t>(ints) * 4;
  }
  return Status();
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

Status DirectTransport::unpack_payloads(Layout kind, std::span<const std::int64_t> records,
                                        std::span<const std::int64_t> rows, const DispatchOutput& out) const {
  const std::size_t rec = record_bytes(kind);
  const std::byte* first = recv_base(static_cast<int>(operation_ & 1)) + header_bytes(kind);
  const auto n = static_cast<std::int64_t>(records.size());
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  EPS_RETURN_IF_ERROR(
      copy_rows(kernels(), out.recv_x.data(), row_bytes_, first, rec, row_bytes_, n, records, rows));
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), reinterpret_cast<std::byte*>(out.recv_x_scales.data()),
                                scale_bytes, first + row_bytes_, rec, scale_bytes, n, records, rows));
  return kernels().synchronize();
}

Status DirectTransport::unpack_rank_major(DirectHandle& h, const DispatchOutput& out) const {
  const auto t_max = static_cast<std::size_t>(config_.max_tokens_per_rank);
  const std::byte* base = recv_base(static_cast<int>(operation_ & 1));
  const int k_max = config_.top_k;
  h.recv_begin.assign(static_cast<std::size_t>(size_) + 1, 0);
  std::vector<std::int64_t> records;
  std::size_t row = 0;
  for (int s = 0; s < size_; ++s) {
    const int n = received_record(s)[static_cast<std::size_t>(size_)];
    const std::size_t slot = static_cast<std::size_t>(s) * t_max;
    for (int i = 0; i < n; ++i, ++row) {
      const std::byte* at = base + (slot + static_cast<std::size_t>(i)) * rank_record_;
      std::int32_t idx[dispatch::kMaxTopK];
      float weights[dispatch::kMaxTopK];
      std::memcpy(idx, at + 4, 4 * static_cast<std::size_t>(k_max));
      std::memcpy(weights, at + 4 + 4 * k_max, 4 * static_cast<std::size_t>(k_max));
      localize_routing(config_, size_, rank_, idx, weights, out.recv_topk_idx.data() + row * k_max,
                       out.recv_topk_weights.data() + row * k_max);
      records.push_back(static_cast<std::int64_t>(slot) + i);
    }
    h.recv_begin[static_cast<std::size_t>(s) + 1] = static_cast<int>(row);
  }
  h.num_rows = static_cast<std::int64_t>(row);
  count_rank_major(config_, size_, h.num_rows, out);
  return unpack_payloads(Layout::kHtRankMajor, records, {}, out);
}

Status DirectTransport::unpack_ll(DirectHandle& h, const DispatchOutput& out) const {
  const std::size_t capacity =
      static_cast<std::size_t>(size_) * static_cast<std::size_t>(config_.max_tokens_per_rank);
  const std::byte* base = recv_base(static_cast<int>(operation_ & 1));
  h.ll_ranges.assign(static_cast<std::size_t>(local()) * size_, LlRange{0, 0});
  h.num_rows = 0;
  std::vector<std::int64_t> records;
  std::vector<std::int64_t> rows;
  // Source s's records sit contiguously in its slot, local expert l's block after those of experts < l.
  std::vector<std::size_t> block_start(static_cast<std::size_t>(size_), 0);
  for (int l = 0; l < local(); ++l) {
    int begin = 0;
    for (int s = 0; s < size_; ++s) {
      const int n = received_record(s)[static_cast<std::size_t>(size_ + l)];
      std::size_t& start = block_start[static_cast<std::size_t>(s)];
      const std::size_t first = static_cast<std::size_t>(s) * combine_rows_per_peer_ + start;
      start += static_cast<std::size_t>(n);
      for (int i = 0; i < n; ++i) {
        const std::size_t row = static_cast<std::size_t>(l) * capacity + static_cast<std::size_t>(begin + i);
        std::int32_t token = 0;
        std::memcpy(&token, base + (first + static_cast<std::size_t>(i)) * slot_record_, 4);
        out.src_info[row] = token;
        records.push_back(static_cast<std::int64_t>(first) + i);
        rows.push_back(static_cast<std::int64_t>(row));
      }
      const LlRange range{begin, n};
      h.ll_ranges[static_cast<std::size_t>(l) * size_ + s] = range;
      out.layout_range[static_cast<std::size_t>(l) * size_ + s] = range;
      begin += n;
    }
    out.packed_recv_count[static_cast<std::size_t>(l)] = begin;
    h.num_rows += begin;
  }
  return unpack_payloads(Layout::kLl, records, rows, out);
}

Status DirectTransport::exchange_dispatch(DirectHandle& h, const DispatchInput& in, const DispatchOutput& out,
                                          bool fresh) {
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
  EPS_RETURN_IF_ERROR(exchange(dispatch_pieces(h), record_bytes(h.kind)));
  EPS_RETURN_IF_ERROR(h.kind == Layout::kLl ? unpack_ll(h, out) : unpack_rank_major(h, out));
  if (fresh) {
    std::vector<int> all(static_cast<std::size_t>(size_) * size_);
    for (int s = 0; s < size_; ++s) {
      const std::span<const std::int32_t> record = received_record(s);
      std::copy_n(record.begin(), size_, all.begin() + static_cast<std::ptrdiff_t>(s) * size_);
    }
    h.layout_info.rank_prefix_matrix = rank_prefix_matrix(size_, all);
  }
  return finish_operation();
}

Status DirectTransport::run_dispatch(RoutedHandle& handle, const DispatchInput& in,
                                     const DispatchOutput& out) {
  auto& h = static_cast<DirectHandle&>(handle);
  plan_destinations(h);
  return exchange_dispatch(h, in, out, true);
}

Status DirectTransport::run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& in,
                                            const DispatchOutput& out) {
  // The handle stays const for the caller; the counts are re-derived identically.
  DirectHandle copy = static_cast<const DirectHandle&>(handle);
  return exchange_dispatch(copy, in, out, false);
}

Status DirectTransport::run_combine(const RoutedHandle& handle, const CombineInput& in,
                                    const CombineOutput& out) {
  const auto* h = &static_cast<const DirectHandle&>(handle);
  const std::size_t row = 2 * static_cast<std::size_t>(config_.hidden);
  const std::size_t capacity =
      static_cast<std::size_t>(size_) * static_cast<std::size_t>(config_.max_tokens_per_rank);
  EPS_RETURN_IF_ERROR(begin_operation());
  // Expert side: each source's rows go back in the order the source sent them.
  std::vector<std::vector<Piece>> pieces(static_cast<std::size_t>(size_));
  channel_counts_.assign(static_cast<std::size_t>(size_) * local(), 0);
  std::vector<std::int64_t> packed;  // the row of in.x that goes to each send slot
  for (int s = 0; s < size_; ++s) {
    const std::size_t first = packed.size();
    if (h->kind == Layout::kHtRankMajor) {
      for (int b = h->recv_begin[static_cast<std::size_t>(s)];
           b < h->recv_begin[static_cast<std::size_t>(s) + 1]; ++b)
        packed.push_back(b);
    } else {
      for (int l = 0; l < local(); ++l) {
        const LlRange r = h->ll_ranges[static_cast<std::size_t>(l) * size_ + s];
        const auto src = static_cast<std::int64_t>(static_cast<std::size_t>(l) * capacity) + r.begin;
        for (int i = 0; i < r.count; ++i) packed.push_back(src + i);
      }
    }
    const int n = static_cast<int>(packed.size() - first);
    channel_counts_[static_cast<std::size_t>(s) * local()] = n;
    if (n > 0) {
      pieces[static_cast<std::size_t>(s)].push_back(
          {first * row, static_cast<std::size_t>(rank_) * combine_rows_per_peer_ * row, n, 0});
    }
  }
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), send_base(), row, reinterpret_cast<const std::byte*>(in.x.data()),
                                row, row, static_cast<std::int64_t>(packed.size()), packed));
  EPS_RETURN_IF_ERROR(kernels().synchronize());
  my_tokens_per_rank_.assign(static_cast<std::size_t>(size_), 0);
  EPS_RETURN_IF_ERROR(exchange(pieces, row));
  // Source side: record i sent to q came back to q's slot at position i - send_begin[q].
  const auto* rows = reinterpret_cast<const bf16*>(recv_base(static_cast<int>(operation_ & 1)));
  std::vector<std::int64_t> record_rows(h->send_token.size());
  for (int q = 0; q < size_; ++q) {
    const int begin = h->send_begin[static_cast<std::size_t>(q)];
    for (int i = begin; i < h->send_begin[static_cast<std::size_t>(q) + 1]; ++i) {
      record_rows[static_cast<std::size_t>(i)] =
          static_cast<std::int64_t>(static_cast<std::size_t>(q) * combine_rows_per_peer_) + (i - begin);
    }
  }
  if (in.tree == CombineTree::kLlWeighted) {
    const int k_max = config_.top_k;
    std::vector<std::int64_t> slot_rows(static_cast<std::size_t>(h->num_tokens) * k_max, -1);
    for (std::size_t i = 0; i < record_rows.size(); ++i)
      slot_rows[static_cast<std::size_t>(h->send_token[i]) * k_max + h->send_slot[i]] = record_rows[i];
    EPS_RETURN_IF_ERROR(
        reduce_ll(kernels(), config_, h->num_tokens, h->topk_weights, rows, slot_rows, out.out));
  } else {
    EPS_RETURN_IF_ERROR(reduce_ht(kernels(), config_, size_, h->num_tokens, in.tree, h->send_begin,
                                  h->send_token, rows, record_rows, in.bias0, in.bias1, out.out));
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
  auto transport = std::make_unique<DirectTransport>(config, selection, rank, size, std::move(fab));
  EPS_RETURN_IF_ERROR(transport->setup());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace eps::transport
