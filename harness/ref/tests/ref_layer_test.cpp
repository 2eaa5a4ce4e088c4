// `epsuite ref layer`: JSON in, JSON out (README schema), checked against the layer and expert libraries
// called directly, plus the error messages for bad fields (docs/errors.md 10: field and allowed range).
#include "harness/ref/ref_layer.hpp"

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "reference/data/values.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/layer/moe_layer.hpp"

namespace eps {
namespace {

Json base_input() {
  return Json::parse(R"({
    "seed": 5, "hidden": 16, "ffn": 8, "num_experts": 4, "shared_experts": 1, "shared_ffn": 12,
    "seq_len": 8, "num_samples": 2, "router": {"type": "ec", "k": 1}
  })");
}

std::vector<bf16> decode_row(const std::string& hex) {
  std::vector<bf16> row;
  for (std::size_t i = 0; i + 4 <= hex.size(); i += 4) {
    row.push_back(
        bf16::from_bits(static_cast<std::uint16_t>(std::strtoul(hex.substr(i, 4).c_str(), nullptr, 16))));
  }
  return row;
}

std::string error_of(const Json& input) {
  auto r = run_ref_layer(input);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(RefLayer, DefaultsAndOutputShape) {
  auto r = run_ref_layer(base_input());
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Json& doc = *r;
  EXPECT_EQ(doc["kernel"], "scalar");
  EXPECT_EQ(doc["combine"], "ll-weighted");
  EXPECT_EQ(doc["logits"], "generated");
  EXPECT_EQ(doc["num_tokens"], 16);
  ASSERT_EQ(doc["out"].size(), 16u);
  for (const Json& row : doc["out"]) EXPECT_EQ(row.get<std::string>().size(), 64u);
  // EC, c_b = max(floor(8 * 1 / 4), 1) = 2: 4 experts x 2 tokens x 2 samples = 16 expert rows.
  EXPECT_EQ(doc["expert_rows"], 16);
  EXPECT_EQ(doc["shared_rows"], 16);
  EXPECT_EQ(doc["routing"]["expert_load"], Json::parse("[4, 4, 4, 4]"));
}

// A token no expert picked: out = bf16(0 + shared_0(x)), recomputed from the expert library with the
// docs/numerics.md 2.2 payload of (seed 5, rank 0, token t).
TEST(RefLayer, DroppedTokenOutputIsSharedExpertOnly) {
  auto r = run_ref_layer(base_input());
  ASSERT_TRUE(r.ok());
  auto w = generate_expert_weights(5, 0, ExpertRole::kShared, 0, {16, 12});
  ASSERT_TRUE(w.ok());
  auto shared = Expert::create(std::move(w).value(), ExpertKernelKind::kScalar);
  ASSERT_TRUE(shared.ok());
  int dropped = 0;
  for (int t = 0; t < 16; ++t) {
    if (!(*r)["routing"]["tokens"][t]["experts"].empty()) continue;
    ++dropped;
    std::vector<bf16> x(16), y(16);
    for (int h = 0; h < 16; ++h) x[h] = data::payload_value(5, 0, t, h);
    ASSERT_TRUE(shared->forward(x, ExpertOutputs{y}).ok());
    const std::vector<bf16> out = decode_row((*r)["out"][t]);
    const std::vector<bf16> routed = decode_row((*r)["routed"][t]);
    for (int h = 0; h < 16; ++h) {
      EXPECT_EQ(routed[h].bits, 0);
      EXPECT_EQ(out[h].bits, bf16::from_float(0.0f + y[h].to_float()).bits) << "token " << t;
    }
  }
  EXPECT_GT(dropped, 0);
  EXPECT_EQ((*r)["routing"]["dropped_tokens"], dropped);
}

// Every option reaches the library: TC router, gate logits, ht-rank with an explicit placement and the
// vectorized kernel give the bits of run_moe_layer on the same configuration.
TEST(RefLayer, OptionsReachTheLibrary) {
  Json in = base_input();
  in["router"] = Json::parse(R"({"type": "tc", "k": 2, "renorm": true})");
  in["logits"] = "gate";
  in["combine"] = "ht-rank";
  in["num_ranks"] = 2;
  in["expert_rank"] = Json::parse("[1, 0, 0, 1]");
  in["kernel"] = "vectorized";
  auto r = run_ref_layer(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)["kernel"], "vectorized");
  EXPECT_EQ((*r)["combine"], "ht-rank");
  EXPECT_EQ((*r)["expert_rank"], Json::parse("[1, 0, 0, 1]"));

  MoeLayerConfig c;
  c.seed = 5;
  c.hidden = 16;
  c.ffn = 8;
  c.num_experts = 4;
  c.num_shared = 1;
  c.shared_ffn = 12;
  c.seq_len = 8;
  c.num_samples = 2;
  routing::TokenChoiceConfig tc;
  tc.k = 2;
  tc.renorm = true;
  c.router = tc;
  c.logits = LogitsSource::kGate;
  c.combine = CombineTree::kHtRank;
  c.num_ranks = 2;
  c.expert_rank = {1, 0, 0, 1};
  c.kernel = ExpertKernelKind::kVectorized;
  auto lib = run_moe_layer(c);
  ASSERT_TRUE(lib.ok());
  for (int t = 0; t < 16; ++t) {
    const std::vector<bf16> out = decode_row((*r)["out"][t]);
    for (int h = 0; h < 16; ++h) ASSERT_EQ(out[h].bits, lib->out[t * 16 + h].bits);
  }
  EXPECT_EQ((*r)["routing"]["compute_cost"], lib->routing.compute_cost);
}

TEST(RefLayer, BadFieldsNameTheField) {
  Json in = base_input();
  in.erase("router");
  EXPECT_EQ(error_of(in), "router: required field is missing");
  in = base_input();
  in["hidden"] = 0;
  EXPECT_EQ(error_of(in), "hidden: must be in [1, 65536], got 0");
  in = base_input();
  in["router"]["k"] = 5;
  EXPECT_EQ(error_of(in), "router.k: must be in [1, 4], got 5");
  in = base_input();
  in["num_ranks"] = 2;
  EXPECT_EQ(error_of(in), "num_ranks: only allowed with combine \"ht-rank\"");
  in = base_input();
  in["kernel"] = "fast";
  EXPECT_EQ(error_of(in), "kernel: must be one of {scalar, vectorized}, got \"fast\"");
  in = base_input();
  in["combine"] = "ht-rank";
  in["num_ranks"] = 3;
  EXPECT_EQ(error_of(in), "num_ranks: must divide num_experts = 4 for the default placement, got 3");
  in = base_input();
  in["shared_experts"] = 0;
  EXPECT_EQ(error_of(in), "shared_ffn: only allowed with shared_experts >= 1");
  in = base_input();
  in["hiden"] = 16;
  EXPECT_NE(error_of(in).find("hiden: unknown field"), std::string::npos);
}

}  // namespace
}  // namespace eps
