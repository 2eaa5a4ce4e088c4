// `epsuite ref layer` input documents (harness/ref/ref_layer.hpp, README "epsuite ref layer"). Every document
// goes through parse_layer_config; a rejected one must be bad input naming a field. Accepted documents small
// enough to compute in a few milliseconds also run the layer: the output has one row of H bf16 values (4 hex
// digits each) per token in `out` and `routed`, and the same document gives the same output twice
// (docs/layer.md 4.3 is deterministic). Larger ones are valid but only parsed: libFuzzer's -timeout would
// otherwise report a 65536-wide layer as a hang.
#include <fmt/format.h>

#include "fuzz/fuzz_util.hpp"
#include "harness/ref/ref_layer.hpp"

namespace {

// An upper bound of the layer's multiply-adds: every token on every routed expert plus the shared ones.
double work_bound(const eps::MoeLayerConfig& c) {
  const double tokens = static_cast<double>(c.num_tokens());
  return tokens * c.num_experts * c.hidden * c.ffn + tokens * c.num_shared * c.shared_ffn * c.hidden +
         static_cast<double>(c.num_experts) * c.hidden;
}

constexpr double kMaxWork = 1 << 21;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const eps::Json input = eps::fuzz::parse_json(eps::fuzz::text_of(data, size));
  if (input.is_discarded()) return 0;
  const eps::Result<eps::MoeLayerConfig> config = eps::parse_layer_config(input);
  if (!config.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(config.status()), config.status().message());
    return 0;
  }
  if (work_bound(*config) > kMaxWork) return 0;
  const eps::Result<eps::Json> first = eps::run_ref_layer(input);
  if (!first.ok()) {
    // Some checks belong to the run (e.g. mask ratios against the router's schedule): still bad input.
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(first.status()), first.status().message());
    return 0;
  }
  const eps::Result<eps::Json> second = eps::run_ref_layer(input);
  EPS_FUZZ_CHECK(second.ok() && second->dump() == first->dump(), "the same document gave two outputs");
  const auto tokens = static_cast<std::size_t>(config->num_tokens());
  const auto row_chars = static_cast<std::size_t>(4 * config->hidden);
  for (const char* key : {"out", "routed"}) {
    const eps::Json& rows = (*first)[key];
    EPS_FUZZ_CHECK(rows.size() == tokens, fmt::format("{}: {} rows for {} tokens", key, rows.size(), tokens));
    for (const eps::Json& row : rows) {
      EPS_FUZZ_CHECK(row.get<std::string>().size() == row_chars, fmt::format("{}: row {}", key, row.dump()));
    }
  }
  return 0;
}
