// `epsuite ref dispatch` input documents (harness/ref/ref_dispatch.hpp, README "epsuite ref dispatch").
// Properties: a rejected document is bad input naming a field; an accepted one gives the same output twice
// and one layout, one set of receive indices per layout and one byte account per rank.
#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "harness/ref/ref_dispatch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Json input = eps::fuzz::parse_json(eps::fuzz::text_of(data, size));
  if (input.is_discarded()) return 0;
  const eps::Result<eps::Json> first = eps::run_ref_dispatch(input);
  if (!first.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(first.status()), first.status().message());
    return 0;
  }
  const eps::Result<eps::Json> second = eps::run_ref_dispatch(input);
  EPS_FUZZ_CHECK(second.ok() && second->dump() == first->dump(), "the same document gave two outputs");
  const std::size_t ranks = input["num_ranks"].get<std::size_t>();
  for (const char* key : {"layout", "ht_rank_major", "ht_expert_major", "ll", "bytes"}) {
    EPS_FUZZ_CHECK((*first)[key].size() == ranks,
                   fmt::format("{}: {} entries for {} ranks", key, (*first)[key].size(), ranks));
  }
  return 0;
}
