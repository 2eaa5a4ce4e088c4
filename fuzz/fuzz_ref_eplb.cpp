// `epsuite ref eplb` input documents (harness/ref/ref_eplb.cpp, README "epsuite ref eplb"), read by the same
// eplb_json.hpp schema as the planner's `plan` message. Properties: a rejected document is bad input naming a
// field; an accepted problem written back by eplb_problem_json reads to the same problem; an accepted plan's
// placement is consistent (docs/eplb.md 8.1): every phy2log entry an expert, every expert with logcnt >= 1
// replicas, log2phy pointing at slots that hold that expert, and P divisible by R.
#include <algorithm>

#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "harness/ref/ref_tool.hpp"
#include "impls/layer/planner/eplb_json.hpp"

namespace {

const eps::RefTool& eplb_tool() {
  for (const eps::RefTool& tool : eps::ref_tools()) {
    if (tool.name == "eplb") return tool;
  }
  std::abort();
}

void check_problem_round_trip(const eps::Json& input) {
  const eps::Result<eps::eplb::EplbProblem> problem = eps::read_eplb_problem(eps::JsonFields(input, ""));
  if (!problem.ok()) return;
  const eps::Json written = eps::eplb_problem_json(*problem);
  const eps::Result<eps::eplb::EplbProblem> reread = eps::read_eplb_problem(eps::JsonFields(written, ""));
  EPS_FUZZ_CHECK(reread.ok(), "eplb_problem_json output rejected: " + reread.status().message());
  EPS_FUZZ_CHECK(eps::eplb_problem_json(*reread).dump() == written.dump(), written.dump());
}

void check_placement(const eps::Json& out, const eps::Json& input) {
  const eps::Json& phy2log = out["phy2log"];
  const eps::Json& log2phy = out["log2phy"];
  const eps::Json& logcnt = out["logcnt"];
  const std::size_t layers = phy2log.size();
  EPS_FUZZ_CHECK(layers == input["weight"].size() && log2phy.size() == layers && logcnt.size() == layers,
                 fmt::format("{} layers for {} weight rows", layers, input["weight"].size()));
  const auto ranks = input["num_ranks"].get<std::int64_t>();
  for (std::size_t l = 0; l < layers; ++l) {
    const auto experts = static_cast<std::int64_t>(input["weight"][l].size());
    const auto slots = static_cast<std::int64_t>(phy2log[l].size());
    EPS_FUZZ_CHECK(slots % ranks == 0 && slots >= experts,
                   fmt::format("layer {}: P = {}, R = {}", l, slots, ranks));
    std::vector<std::int64_t> count(static_cast<std::size_t>(experts), 0);
    for (const eps::Json& e : phy2log[l]) {
      const auto id = e.get<std::int64_t>();
      EPS_FUZZ_CHECK(id >= 0 && id < experts, fmt::format("layer {}: phy2log entry {}", l, id));
      ++count[static_cast<std::size_t>(id)];
    }
    for (std::int64_t e = 0; e < experts; ++e) {
      const auto n = logcnt[l][e].get<std::int64_t>();
      EPS_FUZZ_CHECK(n >= 1 && n == count[static_cast<std::size_t>(e)],
                     fmt::format("layer {} expert {}: logcnt {} but {} slots", l, e, n, count[e]));
      for (std::int64_t j = 0; j < n; ++j) {
        const auto slot = log2phy[l][e][j].get<std::int64_t>();
        EPS_FUZZ_CHECK(slot >= 0 && slot < slots && phy2log[l][slot].get<std::int64_t>() == e,
                       fmt::format("layer {} expert {} replica {}: slot {}", l, e, j, slot));
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Json input = eps::fuzz::parse_json(eps::fuzz::text_of(data, size));
  if (input.is_discarded()) return 0;
  if (input.is_object()) check_problem_round_trip(input);
  const eps::Result<eps::Json> out = eplb_tool().run(input);
  if (!out.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(out.status()), out.status().message());
    return 0;
  }
  check_placement(*out, input);
  return 0;
}
