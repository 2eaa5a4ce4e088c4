// Which ranks share a node (SPEC 14.2, docs/dispatch.md 5.5.1): node_of[r] = the node of rank r, nodes
// numbered by their lowest rank (node 0 holds rank 0), ranks inside a node ascending; node_sizes[n] = the
// ranks on node n. Nodes may differ in size and need not hold consecutive ranks: the real layout comes from
// the MPI shared-memory split (impls/runtime mpi::node_layout); tests and single-machine runs emulate one
// with `uniform` (nodes of `ranks_per_node` consecutive ranks) or `from_node_of` (any grouping).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "reference/common/status.hpp"

namespace eps {

struct NodeLayout {
  std::vector<int> node_of;
  std::vector<int> node_sizes;

  // Nodes of `ranks_per_node` consecutive ranks (ranks_per_node in [1, ranks], dividing ranks).
  static Result<NodeLayout> uniform(int ranks, int ranks_per_node);
  // The layout whose rank r sits on the node labelled group[r] (any labels; renumbered by lowest rank).
  static NodeLayout from_groups(std::span<const int> group);

  int ranks() const { return static_cast<int>(node_of.size()); }
  int nodes() const { return static_cast<int>(node_sizes.size()); }
  // The common node size, or 0 when nodes differ in size (or there are none).
  int ranks_per_node() const;
  // Rank r's index among the ranks of its node (0 for its node's lowest rank).
  int local_index(int rank) const;
  // The node sizes as "1, 2" (diagnostics naming the layout found).
  std::string sizes_text() const;
  // OK when the layout covers exactly `ranks` ranks, every node_of in [0, nodes) and numbered as above;
  // kInvalidArgument naming `field` otherwise.
  Status check(int ranks, std::string_view field = "nodes") const;
};

}  // namespace eps
