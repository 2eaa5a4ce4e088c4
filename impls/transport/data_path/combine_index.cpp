#include "impls/transport/data_path/combine_index.hpp"

namespace eps::transport {

CombineIndex ll_combine_index(int top_k, int num_tokens, std::span<const int> record_token,
                              std::span<const int> record_slot, std::span<const std::int64_t> record_rows) {
  CombineIndex index;
  index.slot_rows.assign(static_cast<std::size_t>(num_tokens) * top_k, -1);
  for (std::size_t i = 0; i < record_rows.size(); ++i) {
    index.slot_rows[static_cast<std::size_t>(record_token[i]) * top_k +
                    static_cast<std::size_t>(record_slot[i])] = record_rows[i];
  }
  index.ready = true;
  return index;
}

// docs/dispatch.md 5.5 ht-rank / ht-two-level: each token's records in ascending expert-side rank (the
// records are grouped by rank, so a stable bucketing by token keeps that order).
CombineIndex ht_combine_index(int num_ranks, std::span<const int> node_of, int num_tokens,
                              std::span<const int> peer_begin, std::span<const int> record_token,
                              std::span<const std::int64_t> record_rows) {
  CombineIndex index;
  index.token_begin.assign(static_cast<std::size_t>(num_tokens) + 1, 0);
  for (int token : record_token) ++index.token_begin[static_cast<std::size_t>(token) + 1];
  for (std::size_t t = 0; t < static_cast<std::size_t>(num_tokens); ++t)
    index.token_begin[t + 1] += index.token_begin[t];
  std::vector<std::int64_t> next(index.token_begin.begin(), index.token_begin.end() - 1);
  index.record_rows.resize(record_token.size());
  index.record_nodes.resize(record_token.size());
  for (int q = 0; q < num_ranks; ++q) {
    const int node = node_of.empty() ? q : node_of[static_cast<std::size_t>(q)];
    for (int i = peer_begin[static_cast<std::size_t>(q)]; i < peer_begin[static_cast<std::size_t>(q) + 1];
         ++i) {
      const std::int64_t at = next[static_cast<std::size_t>(record_token[static_cast<std::size_t>(i)])]++;
      index.record_rows[static_cast<std::size_t>(at)] = record_rows[static_cast<std::size_t>(i)];
      index.record_nodes[static_cast<std::size_t>(at)] = node;
    }
  }
  index.ready = true;
  return index;
}

}  // namespace eps::transport
