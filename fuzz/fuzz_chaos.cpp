// --chaos specs (impls/fabric/chaos/chaos_fabric.hpp parse_chaos, docs/fabrics.md 6.3). Properties: a
// rejected spec is bad input; an accepted one's --chaos spelling (ChaosOptions::to_string, which every error
// of a chaos run prints for replay) parses back to the same options.
#include "fuzz/fuzz_util.hpp"
#include "impls/fabric/chaos/chaos_fabric.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Result<eps::fabric::ChaosOptions> options =
      eps::fabric::parse_chaos(eps::fuzz::text_of(data, size));
  if (!options.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(options.status()), options.status().message());
    return 0;
  }
  const std::string text = options->to_string();
  const eps::Result<eps::fabric::ChaosOptions> again = eps::fabric::parse_chaos(text);
  EPS_FUZZ_CHECK(again.ok(), text + ": " + again.status().message());
  EPS_FUZZ_CHECK(again->seed == options->seed && again->window == options->window &&
                     again->split == options->split && again->delay == options->delay &&
                     again->empty == options->empty && again->backpressure == options->backpressure,
                 text);
  EPS_FUZZ_CHECK(again->to_string() == text, text);
  return 0;
}
