// Where a source finds the returned rows of its tokens, in the order the combine trees of
// docs/dispatch.md 5.5 read them: the index arrays of the data path's reductions (data_path.hpp). Host
// vectors of row numbers; built from a SendPlan's records and the row each record came back to.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace eps::transport {

// - ll: slot_rows [T, K] = the returned row of (t, k), or -1 for a masked slot;
// - ht: token t's records are [token_begin[t], token_begin[t + 1]) in ascending expert-side rank, record j's
//   row is record_rows[j] and its rank's node (ht-two-level, docs/dispatch.md 5.5.1) record_nodes[j].
// `ready` says it was built (a backend that keeps one per handle builds it on the first combine).
struct CombineIndex {
  bool ready = false;
  std::vector<std::int64_t> slot_rows;
  std::vector<std::int64_t> token_begin;
  std::vector<std::int64_t> record_rows;
  std::vector<std::int32_t> record_nodes;
};

// The ll index of records (record_token[i], record_slot[i]) whose rows are record_rows[i].
CombineIndex ll_combine_index(int top_k, int num_tokens, std::span<const int> record_token,
                              std::span<const int> record_slot, std::span<const std::int64_t> record_rows);
// The ht index of records grouped by expert-side rank q ascending (peer_begin [R + 1]), record i of token
// record_token[i] with row record_rows[i]; rank q's node is node_of[q] (NodeLayout::node_of [R]; empty =
// one rank per node, node q).
CombineIndex ht_combine_index(int num_ranks, std::span<const int> node_of, int num_tokens,
                              std::span<const int> peer_begin, std::span<const int> record_token,
                              std::span<const std::int64_t> record_rows);

}  // namespace eps::transport
