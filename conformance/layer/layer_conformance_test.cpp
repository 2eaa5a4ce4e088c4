// Layer conformance (docs/layer.md 4.4): the distributed MoE layer stack's output on every rank is bit-equal
// to the single-process reference (reference/layer, routing_groups = the ranks' tokens) for every selected
// transport x declared layout x scenario: token choice dropless, with capacity drops, group-limited, with
// every token dropped; expert choice with every capacity schedule over per-sample mask ratios, with tokens no
// expert picks; routing given by workload generators and by a recorded trace (docs/numerics.md 2.3);
// zero-token ranks; fp8 and bf16 dispatch; two layers, each feeding the next. The run's
// --device holds every buffer; --fabric, --signal and --chaos reach fabric transports. ctest also runs this
// suite against a deliberately broken layer (conformance/layer/CMakeLists.txt) and expects it to fail.
#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance/suite.hpp"
#include "impls/layer/distributed_layer.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/registry.hpp"

namespace eps::conformance {
namespace {

using dispatch::PayloadType;
using layer::LayerSpec;
using transport::Layout;

constexpr std::uint64_t kSeed = 0x1A7E'0404;
constexpr int kHidden = 128;  // one fp8 scale group
constexpr int kExperts = 24;  // divides every R ctest uses (1, 2, 3, 4, 6, 8)
constexpr std::int64_t kSeqLen = 16;

routing::TokenChoiceConfig token_choice(routing::CapacityFormula capacity, double cf) {
  routing::TokenChoiceConfig tc;
  tc.k = 4;
  tc.renorm = true;
  tc.capacity = capacity;
  tc.capacity_factor = cf;
  return tc;
}

routing::ExpertChoiceConfig expert_choice(std::string_view schedule, std::int64_t k) {
  routing::ExpertChoiceConfig ec;
  ec.k_schedule.k = k;
  ec.k_schedule.k_min = 1;
  ec.k_schedule.k_max = 6;
  ec.k_schedule.schedule = routing::parse_schedule(schedule).value();
  return ec;
}

// A scenario: the router (or a routing workload), the tokens of each rank (in samples of S).
struct Scenario {
  std::string name;
  routing::RouterConfig router;
  bool zero_token_ranks = false;
  std::int64_t samples_per_rank = 2;
  std::optional<data::WorkloadSpec> workload;
  int workload_top_k = 0;
};

// A recorded routing trace (docs/numerics.md 2.3) made here for `ranks` ranks of 3 samples each, K = 3: ids
// spread over the experts, some slots -1 and every 5th token with no expert at all.
data::WorkloadSpec trace_workload(int ranks) {
  auto trace = std::make_shared<data::RoutingTrace>();
  trace->num_experts = kExperts;
  trace->top_k = 3;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::int32_t> ids;
    for (int t = 0; t < 3 * kSeqLen; ++t) {
      const int first = (7 * t + 5 * r) % kExperts;
      const bool none = t % 5 == 4;
      ids.push_back(none ? -1 : first);
      ids.push_back(none || t % 3 == 0 ? -1 : (first + 1 + t % 11) % kExperts);
      ids.push_back(none ? -1 : (first + 13) % kExperts);
    }
    trace->ranks.push_back(std::move(ids));
  }
  data::WorkloadSpec spec;
  spec.pattern = data::WorkloadPattern::kTrace;
  spec.trace_path = "in-memory";
  spec.trace = std::move(trace);
  return spec;
}

Scenario routed(std::string name, routing::RouterConfig router, bool zero_token_ranks = false,
                std::int64_t samples_per_rank = 2) {
  Scenario s;
  s.name = std::move(name);
  s.router = std::move(router);
  s.zero_token_ranks = zero_token_ranks;
  s.samples_per_rank = samples_per_rank;
  return s;
}

// Routing given by a workload with K slots per token (the router is not used).
Scenario given(std::string name, data::WorkloadSpec workload, int top_k, bool zero_token_ranks,
               std::int64_t samples_per_rank) {
  Scenario s = routed(std::move(name), token_choice(routing::CapacityFormula::kDropless, 1.0),
                      zero_token_ranks, samples_per_rank);
  s.workload = std::move(workload);
  s.workload_top_k = top_k;
  return s;
}

std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  out.push_back(routed("tc_dropless", token_choice(routing::CapacityFormula::kDropless, 1.0)));
  routing::TokenChoiceConfig drops = token_choice(routing::CapacityFormula::kMegatron, 0.5);
  drops.drop = routing::DropPriority::kProbs;
  out.push_back(routed("tc_capacity_drops", drops));
  routing::TokenChoiceConfig grouped = token_choice(routing::CapacityFormula::kGshard, 1.0);
  grouped.score = routing::ScoreFunction::kSigmoid;
  grouped.groups = 4;
  grouped.topk_groups = 2;
  out.push_back(routed("tc_group_limited", grouped));
  // gshard C = K·floor(cf·ceil(T_r/E)) = 4·floor(0.5·1) = 0 for T_r = 16 <= E: every assignment dropped.
  out.push_back(routed("tc_all_dropped", token_choice(routing::CapacityFormula::kGshard, 0.5), false, 1));
  for (const char* schedule : {"static", "linear", "linear_reverse", "cosine", "cosine_reverse", "bell",
                               "bell_gaussian:0.2", "bell_gaussian_reverse:0.2"}) {
    out.push_back(routed(fmt::format("ec_{}", schedule), expert_choice(schedule, 3)));
  }
  // k = 1 over 24 experts: c_b = max(floor(16/24), 1) = 1, so most tokens are picked by no expert.
  out.push_back(routed("ec_unpicked_tokens", expert_choice("static", 1)));
  out.push_back(routed("ec_zero_token_ranks", expert_choice("linear_reverse", 3), true));
  out.push_back(routed("tc_zero_token_ranks", token_choice(routing::CapacityFormula::kMegatron, 1.0), true));
  out.push_back(given("workload_zipf", data::parse_workload("zipf:1.2").value(), 4, false, 2));
  out.push_back(given("workload_masked", data::parse_workload("masked:0.6").value(), 4, true, 2));
  out.push_back(given("workload_trace", trace_workload(mpi::size()), 3, false, 3));
  return out;
}

// The mask ratio of global sample b: spread over [0, 1] with both ends, the same on every rank.
float mask_ratio_of(std::int64_t b) { return static_cast<float>((b * 7) % 11) / 10.0f; }

LayerSpec make_spec(const Scenario& s, Layout layout, PayloadType dtype, int ranks) {
  LayerSpec spec;
  spec.seed = kSeed;
  spec.num_layers = 2;
  spec.hidden = kHidden;
  spec.ffn = 64;
  spec.num_experts = kExperts;
  spec.num_shared = 1;
  spec.shared_ffn = 48;
  spec.seq_len = kSeqLen;
  spec.router = s.router;
  for (int r = 0; r < ranks; ++r) {
    // Zero-token ranks: every rank r with r % 3 == 1 holds nothing, the others up to 3 samples.
    const std::int64_t samples = s.zero_token_ranks ? (r % 3 == 1 ? 0 : 1 + r % 3) : s.samples_per_rank;
    spec.rank_tokens.push_back(samples * kSeqLen);
  }
  if (s.zero_token_ranks && spec.num_tokens() == 0) spec.rank_tokens[0] = kSeqLen;
  for (std::int64_t b = 0; b < spec.num_tokens() / kSeqLen; ++b) spec.mask_ratio.push_back(mask_ratio_of(b));
  spec.dtype = dtype;
  spec.layout = layout;
  spec.routing_workload = s.workload;
  spec.routing_top_k = s.workload_top_k;
  return spec;
}

struct Case {
  std::string transport;
  Layout layout;
  PayloadType dtype;
  Scenario scenario;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.transport << " " << transport::layout_name(c.layout) << " " << transport::dtype_name(c.dtype)
      << " " << c.scenario.name;
}

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name =
      fmt::format("{}_{}_{}_{}", info.param.transport, transport::layout_name(info.param.layout),
                  transport::dtype_name(info.param.dtype), info.param.scenario.name);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

bool declares(const std::string& name, Layout layout, PayloadType dtype) {
  const transport::Capabilities caps = transport::transport_registry().find(name)->capabilities();
  return caps.supports(layout) && caps.supports(layer::layer_tree(layout)) && caps.supports(dtype);
}

// Every scenario in bf16 on every layout; fp8 on the first scenarios of each router kind.
std::vector<Case> cases() {
  std::vector<Case> out;
  for (const std::string& t : selected_transports()) {
    for (Layout layout : {Layout::kHtRankMajor, Layout::kHtExpertMajor, Layout::kLl}) {
      for (const Scenario& s : scenarios()) {
        for (PayloadType dtype : {PayloadType::kBf16, PayloadType::kFp8}) {
          const bool fp8_scenario = s.name == "tc_capacity_drops" || s.name == "ec_linear_reverse" ||
                                    s.name == "ec_zero_token_ranks" || s.name == "workload_trace";
          if (dtype == PayloadType::kFp8 && !fp8_scenario) continue;
          if (declares(t, layout, dtype)) out.push_back({t, layout, dtype, s});
        }
      }
    }
  }
  return out;
}

bool selected_by_name(const std::string& name) {
  return transport_named(name) || device_named() ||
         (transport::transport_registry().find(name)->uses_fabric && fabric_named());
}

class LayerConformance : public testing::TestWithParam<Case> {};

TEST_P(LayerConformance, StackOutputIsBitEqualToTheReference) {
  const Case& c = GetParam();
  const int rank = mpi::rank();
  const LayerSpec spec = make_spec(c.scenario, c.layout, c.dtype, mpi::size());
  Result<device::Device*> device = selected_device();
  if (!device.ok()) {
    EPS_SKIP_UNAVAILABLE(device_named(), device.status().message());
  }
  const transport::TransportConfig config =
      layer::layer_transport_config(spec, MPI_COMM_WORLD, *device, mpitest::timeout_seconds());
  Result<std::unique_ptr<transport::Transport>> made =
      transport::make_transport(c.transport, config, fabric_selection());
  if (!made.ok() && made.status().code() == StatusCode::kUnavailable) {
    EPS_SKIP_UNAVAILABLE(selected_by_name(c.transport), made.status().message());
  }
  EPS_ASSERT_OK(made.status());
  Result<std::unique_ptr<layer::DistributedLayer>> stack =
      layer::DistributedLayer::create(spec, **made, **device, rank);
  EPS_ASSERT_OK(stack.status());
  Result<std::vector<layer::StepRecord>> records = (*stack)->run();
  EPS_ASSERT_OK(records.status());
  ASSERT_EQ(records->size(), 2u);
  Result<std::vector<bf16>> out = (*stack)->output();
  EPS_ASSERT_OK(out.status());
  Result<std::vector<bf16>> want = layer::reference_stack_output(spec);
  EPS_ASSERT_OK(want.status());
  ASSERT_EQ(out->size(), static_cast<std::size_t>(spec.rank_tokens[rank] * kHidden));
  const layer::OutputMismatches differences = layer::compare_with_reference(spec, rank, *out, *want);
  EXPECT_EQ(differences.count, 0) << differences.first << "; " << (*made)->describe()
                                  << ", R = " << mpi::size();
  if (c.scenario.name == "tc_all_dropped") {
    for (const layer::StepRecord& r : *records) {
      EXPECT_EQ(r.dropped_tokens, spec.rank_tokens[rank]);
      EXPECT_EQ(r.expert_rows, 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, LayerConformance, testing::ValuesIn(cases()), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LayerConformance);

// Bad specifications are refused with the field named, before anything is exchanged.
TEST(LayerSpecification, ErrorsNameTheField) {
  const Scenario s = routed("ec", expert_choice("static", 3));
  LayerSpec spec = make_spec(s, Layout::kLl, PayloadType::kBf16, 2);
  spec.num_layers = 0;
  EXPECT_EQ(layer::validate_layer_spec(spec).message(), "layers: must be in [1, 1024], got 0");
  spec = make_spec(s, Layout::kLl, PayloadType::kBf16, 2);
  spec.rank_tokens = {16, 8};
  EXPECT_EQ(layer::validate_layer_spec(spec).message(),
            "rank_tokens[1]: 8 tokens is not a multiple of seq_len 16 (nor 0)");
  spec = make_spec(s, Layout::kLl, PayloadType::kBf16, 5);
  EXPECT_EQ(layer::validate_layer_spec(spec).message(),
            "num_experts: must be a positive multiple of the rank count 5, got 24");
  routing::ExpertChoiceConfig batch = expert_choice("static", 3);
  batch.scope = routing::CapacityScope::kBatch;
  spec = make_spec(routed("ec", batch), Layout::kLl, PayloadType::kBf16, 2);
  EXPECT_TRUE(
      layer::validate_layer_spec(spec).message().starts_with("router.scope: expert-choice batch scope"));
  spec = make_spec(routed("ec", batch), Layout::kLl, PayloadType::kBf16, 1);
  EXPECT_TRUE(layer::validate_layer_spec(spec).ok());
}

}  // namespace
}  // namespace eps::conformance
