#include "impls/layer/planner/eplb_json.hpp"

#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

namespace eps {
namespace {

using eplb::EplbProblem;
using eplb::Placement;

constexpr std::int64_t kMaxCount = 1 << 24;

// `status` with `path` in front of its message ("problem.current: placement: coverage: ..."); the
// placement functions name fields relative to the placement itself.
Status under(const std::string& path, const Status& status) {
  if (path.empty()) return status;
  return Status(status.code(), fmt::format("{}: {}", path, status.message()));
}

std::string element(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

Result<std::vector<double>> double_row(const Json& row, const std::string& path) {
  if (!row.is_array()) return invalid_argument(path, "expected an array of numbers, got {}", row.type_name());
  std::vector<double> out;
  out.reserve(row.size());
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (!row[i].is_number()) {
      return invalid_argument(element(path, i), "expected a number >= 0, got {}", row[i].dump());
    }
    out.push_back(row[i].get<double>());
  }
  return out;
}

// How errors name the entries of an integer matrix.
struct EntryName {
  std::string_view one;
  std::string_view many;
};
constexpr EntryName kExpertId{"an expert id", "expert ids"};
constexpr EntryName kReplicaIndex{"a replica index", "replica indices"};

// Rows of integers in [0, kMaxCount].
Result<std::vector<std::vector<int>>> int_matrix(const Json& value, const std::string& path, EntryName what) {
  if (!value.is_array())
    return invalid_argument(path, "expected an array of rows, got {}", value.type_name());
  std::vector<std::vector<int>> rows(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& row = value[i];
    if (!row.is_array()) {
      return invalid_argument(element(path, i), "expected an array of {}, got {}", what.many,
                              row.type_name());
    }
    rows[i].reserve(row.size());
    for (std::size_t j = 0; j < row.size(); ++j) {
      if (!row[j].is_number_integer() || row[j].get<std::int64_t>() < 0 ||
          row[j].get<std::int64_t>() > kMaxCount) {
        return invalid_argument(fmt::format("{}[{}][{}]", path, i, j), "expected {}, got {}", what.one,
                                row[j].dump());
      }
      rows[i].push_back(row[j].get<int>());
    }
  }
  return rows;
}

// [R][E] (the same traffic for every layer) or [layers][R][E].
Result<std::vector<std::vector<std::vector<double>>>> traffic_of(const Json& value, std::size_t layers,
                                                                 const std::string& path) {
  const bool per_layer = value.is_array() && !value.empty() && value[0].is_array() && !value[0].empty() &&
                         value[0][0].is_array();
  if (per_layer) {
    std::vector<std::vector<std::vector<double>>> traffic;
    traffic.reserve(value.size());
    for (std::size_t l = 0; l < value.size(); ++l) {
      EPS_ASSIGN_OR_RETURN(auto matrix, json_load_matrix(value[l], element(path, l)));
      traffic.push_back(std::move(matrix));
    }
    return traffic;
  }
  EPS_ASSIGN_OR_RETURN(auto matrix, json_load_matrix(value, path));
  return std::vector<std::vector<std::vector<double>>>(layers, matrix);
}

Status read_scalars(const JsonFields& in, EplbProblem& p) {
  EPS_ASSIGN_OR_RETURN(std::int64_t replicas, in.integer("num_replicas", 1, kMaxCount));
  EPS_ASSIGN_OR_RETURN(std::int64_t ranks, in.integer("num_ranks", 1, kMaxCount));
  EPS_ASSIGN_OR_RETURN(std::int64_t groups, in.integer("num_groups", 1, kMaxCount, 1));
  EPS_ASSIGN_OR_RETURN(std::int64_t nodes, in.integer("num_nodes", 1, kMaxCount, 1));
  EPS_ASSIGN_OR_RETURN(std::int64_t max_move, in.integer("max_move", 0, kMaxCount, p.max_move));
  EPS_ASSIGN_OR_RETURN(p.threshold,
                       in.number("threshold", 0.0, std::numeric_limits<double>::max(), p.threshold));
  EPS_ASSIGN_OR_RETURN(p.cost_local, in.number("cost_local", 0.0, 1e300, p.cost_local));
  EPS_ASSIGN_OR_RETURN(p.cost_remote, in.number("cost_remote", 0.0, 1e300, p.cost_remote));
  p.num_replicas = static_cast<int>(replicas);
  p.num_ranks = static_cast<int>(ranks);
  p.num_groups = static_cast<int>(groups);
  p.num_nodes = static_cast<int>(nodes);
  p.max_move = static_cast<int>(max_move);
  return Status();
}

// `current`: phy2log rows (replicas in slot order) or the {phy2log, replica_index} object.
Result<Placement> read_current(const Json& value, const std::string& path, int num_experts, int num_ranks) {
  if (value.is_object()) return read_placement_rows(value, path, num_experts, num_ranks);
  EPS_ASSIGN_OR_RETURN(auto rows, int_matrix(value, path, kExpertId));
  auto placement = eplb::placement_from_phy2log(rows, num_experts, num_ranks);
  if (!placement.ok()) return under(path, placement.status());
  return placement;
}

}  // namespace

Result<std::vector<std::vector<double>>> json_load_matrix(const Json& value, const std::string& path) {
  if (!value.is_array())
    return invalid_argument(path, "expected an array of rows, got {}", value.type_name());
  std::vector<std::vector<double>> rows;
  rows.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    EPS_ASSIGN_OR_RETURN(std::vector<double> row, double_row(value[i], element(path, i)));
    rows.push_back(std::move(row));
  }
  return rows;
}

const std::vector<std::string>& eplb_problem_fields() {
  static const std::vector<std::string> kFields = {"weight",      "num_replicas", "num_ranks", "num_groups",
                                                   "num_nodes",   "max_move",     "threshold", "cost_local",
                                                   "cost_remote", "traffic",      "current"};
  return kFields;
}

Result<EplbProblem> read_eplb_problem(const JsonFields& in) {
  EplbProblem p;
  EPS_ASSIGN_OR_RETURN(const Json* weight, in.member("weight"));
  EPS_ASSIGN_OR_RETURN(p.weight, json_load_matrix(*weight, in.field("weight")));
  EPS_RETURN_IF_ERROR(read_scalars(in, p));
  if (in.has("traffic")) {
    EPS_ASSIGN_OR_RETURN(const Json* traffic, in.member("traffic"));
    EPS_ASSIGN_OR_RETURN(p.traffic, traffic_of(*traffic, p.weight.size(), in.field("traffic")));
  }
  if (in.has("current")) {
    EPS_ASSIGN_OR_RETURN(const Json* current, in.member("current"));
    const int experts = p.weight.empty() ? 0 : static_cast<int>(p.weight[0].size());
    EPS_ASSIGN_OR_RETURN(p.current, read_current(*current, in.field("current"), experts, p.num_ranks));
  }
  return p;
}

Json eplb_problem_json(const EplbProblem& problem) {
  Json out = {{"weight", problem.weight},          {"num_replicas", problem.num_replicas},
              {"num_ranks", problem.num_ranks},    {"num_groups", problem.num_groups},
              {"num_nodes", problem.num_nodes},    {"max_move", problem.max_move},
              {"threshold", problem.threshold},    {"cost_local", problem.cost_local},
              {"cost_remote", problem.cost_remote}};
  if (!problem.traffic.empty()) out["traffic"] = problem.traffic;
  if (problem.current) out["current"] = placement_rows_json(*problem.current);
  return out;
}

Result<Placement> read_placement_rows(const Json& object, const std::string& path, int num_experts,
                                      int num_ranks) {
  const JsonFields fields(object, path);
  EPS_RETURN_IF_ERROR(fields.expect_object());
  EPS_ASSIGN_OR_RETURN(const Json* phy2log_json, fields.member("phy2log"));
  EPS_ASSIGN_OR_RETURN(const Json* replica_json, fields.member("replica_index"));
  EPS_ASSIGN_OR_RETURN(auto phy2log, int_matrix(*phy2log_json, fields.field("phy2log"), kExpertId));
  EPS_ASSIGN_OR_RETURN(auto replica_index,
                       int_matrix(*replica_json, fields.field("replica_index"), kReplicaIndex));
  // A replica index is below the slot count; checked here because make_placement sizes log2phy by the
  // largest one.
  for (std::size_t l = 0; l < replica_index.size(); ++l) {
    for (std::size_t s = 0; s < replica_index[l].size(); ++s) {
      if (replica_index[l][s] >= static_cast<int>(replica_index[l].size())) {
        return invalid_argument(fmt::format("{}[{}][{}]", fields.field("replica_index"), l, s),
                                "must be below the {} slots of the layer, got {}", replica_index[l].size(),
                                replica_index[l][s]);
      }
    }
  }
  auto placement = eplb::make_placement(phy2log, replica_index, num_experts, num_ranks);
  if (!placement.ok()) return under(path, placement.status());
  return placement;
}

Json placement_rows_json(const Placement& placement) {
  return Json{{"phy2log", eplb::phy2log_rows(placement)},
              {"replica_index", eplb::replica_index_rows(placement)}};
}

}  // namespace eps
