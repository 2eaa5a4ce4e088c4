// `epsuite ref route` input documents (harness/ref/ref_route.hpp, README "epsuite ref route"). Properties: a
// rejected document is bad input naming a field; an accepted one routes deterministically (the same document
// gives the same output twice, docs/routing.md 3) and every token's expert ids lie in [-1, E).
#include "fuzz/fuzz_util.hpp"
#include "harness/ref/ref_route.hpp"

#include <fmt/format.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Json input = eps::fuzz::parse_json(eps::fuzz::text_of(data, size));
  if (input.is_discarded()) return 0;
  const eps::Result<eps::Json> first = eps::run_ref_route(input);
  if (!first.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(first.status()), first.status().message());
    return 0;
  }
  const eps::Result<eps::Json> second = eps::run_ref_route(input);
  // Compared as text: a NaN gate is null in both, and NaN != NaN as a JSON value.
  EPS_FUZZ_CHECK(second.ok() && second->dump() == first->dump(), "the same document routed twice differs");
  const eps::Json& logits = input["logits"];
  const auto num_experts = static_cast<std::int64_t>(logits[0].size());
  const eps::Json& tokens = (*first)["tokens"];
  EPS_FUZZ_CHECK(tokens.size() == logits.size(),
                 fmt::format("{} tokens for {} rows", tokens.size(), logits.size()));
  for (const eps::Json& token : tokens) {
    for (const eps::Json& id : token["experts"]) {
      EPS_FUZZ_CHECK(id.get<std::int64_t>() >= -1 && id.get<std::int64_t>() < num_experts, id.dump());
    }
  }
  (void)first->dump();
  return 0;
}
