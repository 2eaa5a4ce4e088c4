#include "reference/dispatch/node_layout.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace eps {

Result<NodeLayout> NodeLayout::uniform(int ranks, int ranks_per_node) {
  if (ranks_per_node < 1 || ranks_per_node > ranks)
    return out_of_range("ranks_per_node", 1, ranks, ranks_per_node);
  if (ranks % ranks_per_node != 0) {
    return invalid_argument("ranks_per_node", "must divide the rank count {}, got {}", ranks, ranks_per_node);
  }
  std::vector<int> group(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) group[static_cast<std::size_t>(r)] = r / ranks_per_node;
  return from_groups(group);
}

NodeLayout NodeLayout::from_groups(std::span<const int> group) {
  NodeLayout layout;
  std::vector<int> labels;  // labels[n] = the group label of node n, in order of first (lowest) rank
  for (int label : group) {
    auto it = std::find(labels.begin(), labels.end(), label);
    if (it == labels.end()) {
      labels.push_back(label);
      layout.node_sizes.push_back(0);
      it = labels.end() - 1;
    }
    const int node = static_cast<int>(it - labels.begin());
    layout.node_of.push_back(node);
    ++layout.node_sizes[static_cast<std::size_t>(node)];
  }
  return layout;
}

int NodeLayout::ranks_per_node() const {
  for (int size : node_sizes) {
    if (size != node_sizes.front()) return 0;
  }
  return node_sizes.empty() ? 0 : node_sizes.front();
}

int NodeLayout::local_index(int rank) const {
  const int node = node_of[static_cast<std::size_t>(rank)];
  return static_cast<int>(std::count(node_of.begin(), node_of.begin() + rank, node));
}

std::string NodeLayout::sizes_text() const { return fmt::format("{}", fmt::join(node_sizes, ", ")); }

Status NodeLayout::check(int ranks, std::string_view field) const {
  if (this->ranks() != ranks) {
    return invalid_argument(field, "must place the {} ranks of the run, got a layout of {}", ranks,
                            this->ranks());
  }
  const NodeLayout renumbered = from_groups(node_of);
  if (renumbered.node_of != node_of || renumbered.node_sizes != node_sizes) {
    return invalid_argument(field,
                            "nodes must be numbered by their lowest rank with their sizes listed, got "
                            "node_of [{}] and sizes [{}]",
                            fmt::join(node_of, ", "), sizes_text());
  }
  return Status::ok_status();
}

}  // namespace eps
