#include "impls/transport/protocol/slots.hpp"

#include <algorithm>

#include "impls/fabric/signal/imm_codec.hpp"

namespace eps::transport {

SlotLayout::SlotLayout(const TransportConfig& config, int rank, int ranks, std::size_t max_put_bytes)
    : rank_(rank),
      ranks_(ranks),
      channels_(config.num_experts / ranks),
      t_max_(static_cast<std::size_t>(config.max_tokens_per_rank)),
      max_put_bytes_(max_put_bytes),
      rank_major_(record_format(Layout::kHtRankMajor, config, 16)),
      ll_(record_format(Layout::kLl, config, 16)),
      combine_row_(2 * static_cast<std::size_t>(config.hidden)),
      combine_rows_per_peer_(t_max_ * static_cast<std::size_t>(std::min(config.top_k, channels_))) {
  const auto peers = static_cast<std::size_t>(ranks);
  recv_parity_bytes_ =
      std::max({peers * t_max_ * rank_major_.stride, peers * combine_rows_per_peer_ * ll_.stride,
                peers * combine_rows_per_peer_ * combine_row_, std::size_t{16}});
  send_parity_bytes_ = std::max({t_max_ * std::min<std::size_t>(config.top_k, peers) * rank_major_.stride,
                                 t_max_ * static_cast<std::size_t>(config.top_k) * ll_.stride,
                                 peers * combine_rows_per_peer_ * combine_row_, std::size_t{16}});
}

std::size_t SlotLayout::dispatch_slot(Layout kind, int source) const {
  const std::size_t per_source = kind == Layout::kLl ? combine_rows_per_peer_ : t_max_;
  return static_cast<std::size_t>(source) * per_source * format(kind).stride;
}

int SlotLayout::rows_per_put(std::size_t record_bytes) const {
  const std::size_t max_bytes = std::min(max_put_bytes_, kMaxDirectPutBytes);
  return static_cast<int>(std::clamp<std::size_t>(max_bytes / record_bytes, 1, fabric::kMaxImmTokens));
}

int SlotLayout::max_puts_per_stream() const {
  const auto puts_for = [](std::size_t records, int per_put) {
    return static_cast<int>((records + static_cast<std::size_t>(per_put) - 1) /
                            static_cast<std::size_t>(per_put));
  };
  return std::max({puts_for(t_max_, rows_per_put(rank_major_.stride)),
                   channels_ + puts_for(combine_rows_per_peer_, rows_per_put(ll_.stride)),
                   puts_for(combine_rows_per_peer_, rows_per_put(combine_row_)), 1});
}

void SlotLayout::plan_dispatch_pieces(const SendPlan& plan, bool per_channel_puts,
                                      std::vector<std::vector<Piece>>& pieces) const {
  const std::size_t rec = format(plan.layout).stride;
  const std::size_t slot = dispatch_slot(plan.layout, rank_);
  pieces.resize(static_cast<std::size_t>(ranks_));
  for (int q = 0; q < ranks_; ++q) {
    std::vector<Piece>& stream = pieces[static_cast<std::size_t>(q)];
    stream.clear();
    const int stream_first = plan.first_to(q);
    if (plan.layout == Layout::kHtRankMajor || !per_channel_puts) {
      if (plan.count_to(q) > 0)
        stream.push_back({static_cast<std::size_t>(stream_first) * rec, slot, plan.count_to(q), 0});
      continue;
    }
    for (int l = 0; l < channels_; ++l) {
      const std::size_t block = static_cast<std::size_t>(q) * channels_ + l;
      const int first = plan.key_begin[block];
      const int n = plan.key_begin[block + 1] - first;
      if (n == 0) continue;
      stream.push_back({static_cast<std::size_t>(first) * rec,
                        slot + static_cast<std::size_t>(first - stream_first) * rec, n, l});
    }
  }
}

}  // namespace eps::transport
