// Where the direct protocol's bytes lie (direct_protocol.hpp): the record formats, the sizes of its regions,
// each source's slot in a receive region, the signal records, and the data puts ("pieces") of a dispatch.
//
// A receive region holds two parities, each with one slot per source rank: T_max rank-major records, or
// T_max x min(K, L) LL records in (local expert, token) order, or as many returned combine rows (2H bytes).
// The send region holds two parities of what this rank sends in one operation. A signal record is R + L
// int32: the sender's tokens per rank (the docs/dispatch.md 5.1 rank prefix matrix) and its per-channel
// record counts for the receiver; the signal regions hold one per (parity, peer).
#pragma once

#include <cstddef>
#include <vector>

#include "impls/transport/data_path/records.hpp"
#include "impls/transport/routing/routing.hpp"

namespace eps::transport {

inline constexpr std::size_t kMaxDirectPutBytes = std::size_t{4} << 20;

// A contiguous run of records to one destination slot: send-region offset, receive-region offset (both
// within the parity), record count, channel.
struct Piece {
  std::size_t local_offset = 0;
  std::size_t remote_offset = 0;
  int records = 0;
  int channel = 0;
};

class SlotLayout {
 public:
  // `max_put_bytes`: the fabric's limit on one put.
  SlotLayout(const TransportConfig& config, int rank, int ranks, std::size_t max_put_bytes);

  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  int channels() const { return channels_; }  // L, the local experts
  // Dispatch records (16-byte aligned): rank-major for kHtRankMajor, slot records for kLl.
  const RecordFormat& format(Layout kind) const { return kind == Layout::kLl ? ll_ : rank_major_; }
  std::size_t combine_row_bytes() const { return combine_row_; }
  std::size_t combine_rows_per_peer() const { return combine_rows_per_peer_; }
  std::size_t send_parity_bytes() const { return send_parity_bytes_; }
  std::size_t recv_parity_bytes() const { return recv_parity_bytes_; }
  int signal_record_ints() const { return ranks_ + channels_; }
  std::size_t signal_record_bytes() const { return 4 * static_cast<std::size_t>(signal_record_ints()); }
  // Signal records within a signal region: the one of (parity, peer).
  std::size_t signal_offset(int parity, int peer) const {
    return (static_cast<std::size_t>(parity) * ranks_ + peer) * signal_record_bytes();
  }
  // Within a receive parity: the first byte of `source`'s dispatch records of `kind`, or combine rows.
  std::size_t dispatch_slot(Layout kind, int source) const;
  std::size_t combine_slot(int source) const { return source * combine_rows_per_peer_ * combine_row_; }
  // Records of `record_bytes` one data put carries (below the fabric's limit, 4 MiB and the immediates'
  // token field).
  int rows_per_put(std::size_t record_bytes) const;
  // The most data puts one stream can carry in one operation: a slot per local expert plus splits of the
  // largest stream (the imm-seq window is checked against it).
  int max_puts_per_stream() const;

  // The data puts of a dispatch of `plan` to each destination (pieces[q], offsets within a parity): one run
  // per destination, or one per local expert of an LL dispatch where the strategy counts per channel
  // (`per_channel_puts`, recv-count). The records to q are contiguous in the send order and land
  // contiguously in q's slot for this rank.
  void plan_dispatch_pieces(const SendPlan& plan, bool per_channel_puts,
                            std::vector<std::vector<Piece>>& pieces) const;

 private:
  int rank_;
  int ranks_;
  int channels_;
  std::size_t t_max_;
  std::size_t max_put_bytes_;
  RecordFormat rank_major_, ll_;
  std::size_t combine_row_;
  std::size_t combine_rows_per_peer_;
  std::size_t send_parity_bytes_ = 0;
  std::size_t recv_parity_bytes_ = 0;
};

}  // namespace eps::transport
