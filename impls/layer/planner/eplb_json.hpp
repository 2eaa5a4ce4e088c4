// The JSON form of an EPLB problem and of a placement's rows (docs/eplb.md 8), shared by `epsuite ref eplb`
// (harness/ref/ref_eplb.cpp) and the planner's `plan` and `placement` messages (messages.cpp), so that both
// read one schema with the same error messages.
//
// Problem members: weight [layers][E] (numbers), num_replicas, num_ranks, optional num_groups and num_nodes
// (default 1), max_move, threshold, cost_local, cost_remote, traffic ([R][E] for every layer, or
// [layers][R][E]) and current: either phy2log rows [layers][P] (replicas numbered in ascending slot order)
// or an object {"phy2log": [layers][P], "replica_index": [layers][P]}.
#pragma once

#include <string>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"
#include "reference/eplb/placement.hpp"
#include "reference/eplb/policy.hpp"

namespace eps {

// The names of the problem members above, for JsonFields::only_known.
const std::vector<std::string>& eplb_problem_fields();

// Reads the problem members of `fields`; errors carry its path ("problem.weight[1][3]: ..."). Types and
// ranges are checked here, the shape rules are eplb::validate_problem's (a policy runs it; the planner's
// decoder runs it too).
Result<eplb::EplbProblem> read_eplb_problem(const JsonFields& fields);

// A [rows][columns] matrix of loads (any JSON numbers; eplb::validate_problem checks finite >= 0), as
// `weight` is read.
Result<std::vector<std::vector<double>>> json_load_matrix(const Json& value, const std::string& path);

// The inverse of read_eplb_problem: every scalar, traffic as [layers][R][E] when present, current as the
// object form.
Json eplb_problem_json(const eplb::EplbProblem& problem);

// A placement from the members "phy2log" and "replica_index" ([layers][P] each) of `object`, whose field
// path is `path` ("" for a document root); eplb::make_placement checks it.
Result<eplb::Placement> read_placement_rows(const Json& object, const std::string& path, int num_experts,
                                            int num_ranks);

// {"phy2log": ..., "replica_index": ...}, the members read_placement_rows reads.
Json placement_rows_json(const eplb::Placement& placement);

}  // namespace eps
