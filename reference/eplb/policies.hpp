// The registered policy objects (internal to eps_ref_eplb; use find_eplb_policy). Their rules are
// documented in policy.hpp.
#pragma once

#include "reference/eplb/policy.hpp"

namespace eps::eplb {

const EplbPolicy& deepseek_policy();
const EplbPolicy& greedy_policy();
const EplbPolicy& static_policy();
const EplbPolicy& mindie_a2a_policy();
const EplbPolicy& mindie_ag_policy();
const EplbPolicy& mindie_ex_policy();

}  // namespace eps::eplb
