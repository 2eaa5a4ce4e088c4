// `epsuite ref route` on JSON documents: docs/routing.md 3.2/3.3/3.4 hand cases and the error messages of
// docs/errors.md 10.
#include "harness/ref/ref_route.hpp"

#include <cmath>

#include <gtest/gtest.h>

#include "reference/numerics/transcendental.hpp"

namespace eps {
namespace {

Json parse(const char* text) { return Json::parse(text); }

std::string error_of(const Json& input) {
  const Result<Json> out = run_ref_route(input);
  EXPECT_FALSE(out.ok());
  if (out.ok()) return "";
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  return out.status().message();
}

// The README worked example (examples/route_ec.json). S = 4, B = 2, E = 4, linear_reverse 1..3:
// k_b = round_half_even(1 + 2·(1 − r_b)): r = 0.25 -> 2.5 -> 2; r = 1 -> 1. c_b = floor(4·k_b/4) = 2, 1.
// Sample 0 (c = 2): e0 takes t0, t1 (1 = 1); e1 t1, t2 (2 ties three times: lower positions);
//   e2 t0, t1 (all 0); e3 t2 (5) then t0 (-inf ties: lowest position). J: t0 {0,2,3} t1 {0,1,2} t2 {1,3}.
// Sample 1 (c = 1): e0 t4 (0.5 ties t5), e1 t5, e2 t4 (1 ties t5, t7), e3 t4 (all 0). J: t4 {0,2,3}, t5 {1}.
constexpr const char* kEcExample = R"({
  "router": {"type": "ec", "k": 2, "schedule": "linear_reverse", "k_min": 1, "k_max": 3},
  "seq_len": 4,
  "mask_ratio": [0.25, 1.0],
  "logits": [[1, 0, 0, "-inf"], [1, 2, 0, "-inf"], [0, 2, 0, 5], [-1, 2, 0, "-inf"],
             [0.5, 0, 1, 0], [0.5, 1, 1, 0], [0, 0, 0, 0], [0.25, 0, 1, 0]]
})";

TEST(RefRoute, HandComputedExpertChoice) {
  const Result<Json> out = run_ref_route(parse(kEcExample));
  ASSERT_TRUE(out.ok()) << out.status().message();
  const Json& tokens = (*out)["tokens"];
  ASSERT_EQ(tokens.size(), 8u);
  const std::vector<std::vector<int>> experts = {{0, 2, 3}, {0, 1, 2}, {1, 3}, {}, {0, 2, 3}, {1}, {}, {}};
  for (std::size_t t = 0; t < 8; ++t) {
    EXPECT_EQ(tokens[t]["experts"].get<std::vector<int>>(), experts[t]) << "token " << t;
    EXPECT_EQ(tokens[t]["gates"].size(), experts[t].size());
  }
  // t0: logits 1, 0, -inf over J -> [1, e^-1, 0] / (1 + e^-1).
  const double e1 = std::exp(-1.0);
  EXPECT_NEAR(tokens[0]["gates"][0].get<double>(), 1.0 / (1.0 + e1), 1e-7);
  EXPECT_NEAR(tokens[0]["gates"][1].get<double>(), e1 / (1.0 + e1), 1e-7);
  EXPECT_EQ(tokens[0]["gates"][2].get<double>(), 0.0);
  // t4: logits 0.5, 1, 0, m = 1 -> [e^-0.5, 1, e^-1] / (e^-0.5 + 1 + e^-1) = 0.307196, 0.506480, 0.186324.
  const double s4 = std::exp(-0.5) + 1.0 + e1;
  EXPECT_NEAR(tokens[4]["gates"][0].get<double>(), std::exp(-0.5) / s4, 1e-7);
  EXPECT_NEAR(tokens[4]["gates"][1].get<double>(), 1.0 / s4, 1e-7);
  EXPECT_NEAR(tokens[4]["gates"][2].get<double>(), e1 / s4, 1e-7);
  EXPECT_EQ(tokens[5]["gates"][0].get<double>(), 1.0);  // 1 / (1 + 1e-20f) rounds to 1 in fp32
  EXPECT_EQ((*out)["k_per_sample"], parse("[2, 1]"));
  EXPECT_EQ((*out)["capacity_per_sample"], parse("[2, 1]"));
  EXPECT_TRUE((*out)["capacity"].is_null());
  EXPECT_EQ((*out)["expert_load"], parse("[3, 3, 3, 3]"));
  EXPECT_EQ((*out)["dropped_tokens"], 3);
  EXPECT_EQ((*out)["drop_ratio"].get<double>(), 0.375);  // 3 of 8 tokens
  EXPECT_EQ((*out)["padding_waste"].get<double>(), 0.0);
  EXPECT_EQ((*out)["compute_cost"], 12);  // 4·2 + 4·1
  EXPECT_EQ((*out)["static_cost"], 16);   // B·S·k = 2·4·2
}

TEST(RefRoute, HandComputedTokenChoiceWithDrops) {
  // sigmoid, K 2, megatron cf 0.5: C = ceil(2·2/4 · 0.5) = 1. t0 picks [0, 1], t1 picks [0, 2].
  // Position priority: first choices t0 -> e0 kept, t1 -> e0 dropped; second choices t0 -> e1, t1 -> e2.
  const Result<Json> out = run_ref_route(parse(R"({
    "router": {"type": "tc", "score": "sigmoid", "k": 2, "capacity": "megatron", "cf": 0.5},
    "logits": [[2, 1, 0, -1], [2, 0, 1, -1]]
  })"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  const Json& tokens = (*out)["tokens"];
  EXPECT_EQ(tokens[0]["experts"], parse("[0, 1]"));
  EXPECT_EQ(tokens[1]["experts"], parse("[-1, 2]"));
  // Gates are σ(logit) (no renorm), printed as the shortest decimal of the fp32 value.
  const float s2 = 1.0f / (1.0f + portable_exp(-2.0f));
  const float s1 = 1.0f / (1.0f + portable_exp(-1.0f));
  EXPECT_EQ(static_cast<float>(tokens[0]["gates"][0].get<double>()), s2);
  EXPECT_EQ(static_cast<float>(tokens[0]["gates"][1].get<double>()), s1);
  EXPECT_EQ(tokens[1]["gates"][0].get<double>(), 0.0);
  EXPECT_EQ(static_cast<float>(tokens[1]["gates"][1].get<double>()), s1);
  EXPECT_NEAR(tokens[0]["gates"][0].get<double>(), 0.8807970779778823, 1e-7);
  EXPECT_EQ((*out)["capacity"], 1);
  EXPECT_EQ((*out)["expert_load"], parse("[1, 1, 1, 0]"));
  EXPECT_EQ((*out)["dropped_tokens"], 0);
  EXPECT_EQ((*out)["dropped_assignments"], 1);
  EXPECT_EQ((*out)["drop_ratio"].get<double>(), 0.25);     // 1 of 4
  EXPECT_EQ((*out)["padding_waste"].get<double>(), 0.25);  // (4·1 − 3) / 4
  EXPECT_EQ((*out)["k_per_sample"], parse("[2]"));
  EXPECT_EQ((*out)["capacity_per_sample"], parse("[]"));
}

TEST(RefRoute, DefaultsAndGaussianSigmaField) {
  // tc defaults: softmax, no renorm, dropless. Two equal logits -> p = 0.5 each, K 1 picks expert 0.
  Result<Json> out = run_ref_route(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[3, 3]]})"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)["tokens"][0]["experts"], parse("[0]"));
  EXPECT_EQ((*out)["tokens"][0]["gates"], parse("[0.5]"));
  EXPECT_TRUE((*out)["capacity"].is_null());
  EXPECT_TRUE((*out)["padding_waste"].is_null());
  // bell_gaussian with the sigma field; r = 0.5 is the bell's top: k = k_max = 2 -> c = floor(2·2/2) = 2.
  out = run_ref_route(parse(R"({
    "router": {"type": "ec", "k": 1, "schedule": "bell_gaussian", "sigma": 0.22, "k_min": 1, "k_max": 2},
    "mask_ratio": [0.5], "logits": [[0, 1], [1, 0]]})"));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)["k_per_sample"], parse("[2]"));
  EXPECT_EQ((*out)["capacity_per_sample"], parse("[2]"));
}

TEST(RefRoute, BadFieldsAreNamed) {
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 2, "schedule": "linear", "k_min": 3, "k_max": 2},
                             "mask_ratio": [0], "logits": [[0, 1, 2, 3]]})")),
            "router.k_min: must be <= router.k_max, got 3 > 2");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 5}, "logits": [[0, 1, 2, 3]]})")),
            "router.k: must be in [1, 4], got 5");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 0}, "logits": [[0, 1, 2, 3]]})")),
            "router.k: must be in [1, 4], got 0");
  EXPECT_EQ(error_of(parse(R"({"router": {"k": 1}, "logits": [[0, 1]]})")),
            "router.type: required string is missing");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "moe", "k": 1}, "logits": [[0, 1]]})")),
            "router.type: must be one of {tc, ec, ec-softmax}, got \"moe\"");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1, "cf": 1.25}, "logits": [[0, 1]]})")),
            "router.cf: only used with capacity megatron or gshard");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1, "capacity": "gshard", "cf": 0},
                             "logits": [[0, 1]]})")),
            "router.cf: must be in (0, 1e6], got 0");
  EXPECT_TRUE(
      error_of(parse(R"({"router": {"type": "tc", "k": 1, "capcity": "gshard"}, "logits": [[0, 1]]})"))
          .starts_with("router.capcity: unknown field for router type tc (known: type, k, score"));
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1, "groups": 3}, "logits": [[0, 1, 2, 3]]})")),
            "router.groups: must divide E = 4, got 3");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1, "groups": 2, "topk_groups": 3},
                             "logits": [[0, 1, 2, 3]]})")),
            "router.topk_groups: must be in [1, 2], got 3");
  EXPECT_EQ(
      error_of(parse(R"({"router": {"type": "tc", "k": 1, "bias": [0, 1]}, "logits": [[0, 1, 2, 3]]})")),
      "router.bias: expected E = 4 values, got 2");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 1, "fscale": [1, 1]}, "logits": [[0, 1]]})")),
            "router.fscale: expected E + 1 = 3 values, got 2");
  EXPECT_TRUE(error_of(parse(R"({"router": {"type": "ec-softmax", "k": 1, "gate": "sigmoid"},
                             "logits": [[0, 1]]})"))
                  .starts_with("router.gate: unknown field for router type ec-softmax"));
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 1, "schedule": "bell_gaussian:0.2", "sigma": 0.2,
                             "k_min": 1, "k_max": 2}, "mask_ratio": [0], "logits": [[0, 1]]})")),
            "router.sigma: given twice (also as the \":sigma\" suffix of router.schedule)");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 1, "k_min": 1}, "logits": [[0, 1]]})")),
            "router.k_min: only used with a non-static schedule");
}

TEST(RefRoute, BadInputDataIsNamed) {
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[0, 1, 2], [0, 1]]})")),
            "logits[1]: expected 3 values, got 2");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[0, 1, "nan"]]})")),
            "logits[0][2]: NaN is not allowed (docs/numerics.md 1.3)");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[0, "inf"]]})")),
            "logits[0][1]: +inf is not allowed (only -inf, docs/numerics.md 1.3)");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": []})")),
            "logits: expected a non-empty array of rows [T][E] (T >= 1)");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[]]})")),
            "logits[0]: expected a non-empty array of E expert logits (E >= 1)");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "seq_len": 2, "logits": [[0], [1], [2]]})")),
            "seq_len: T = 3 tokens is not a multiple of seq_len 2");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 1, "schedule": "cosine", "k_min": 1, "k_max": 2},
                             "seq_len": 1, "logits": [[0, 1], [1, 0]]})")),
            "mask_ratio: required (B = 2 values in [0, 1]) for schedule \"cosine\"");
  EXPECT_EQ(error_of(parse(R"({"router": {"type": "ec", "k": 1, "schedule": "cosine", "k_min": 1, "k_max": 2},
                             "seq_len": 1, "mask_ratio": [0, 1.5], "logits": [[0, 1], [1, 0]]})")),
            "mask_ratio[1]: must be in [0, 1], got 1.5");
  EXPECT_TRUE(error_of(parse(R"({"router": {"type": "tc", "k": 1}, "logits": [[0]], "seqlen": 1})"))
                  .starts_with("seqlen: unknown field for the route input"));
  EXPECT_EQ(error_of(parse(R"({"logits": [[0]]})")), "router: required field is missing");
}

}  // namespace
}  // namespace eps
