// docs/presets.md 11 presets as data, and the refusals of resolve_preset (exit 2 with the reason).
#include "perf/bench/presets.hpp"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace eps {
namespace {

const Preset& preset(std::string_view name) {
  Result<const Preset*> p = find_preset(name);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return **p;
}

std::vector<std::int64_t> sweep_of(const Preset& p) {
  Result<TokenSweep> s = parse_token_sweep(p.tokens_sweep, "sweep", 0, 1 << 20);
  EXPECT_TRUE(s.ok());
  return s->values;
}

TEST(Presets, TheSixPresetsOfSpec11) {
  EXPECT_EQ(preset_names(),
            (std::vector<std::string>{"ht-deepseek-v3", "ll-deepseek-v3", "pplx-v2lite", "ec-dlm-owt",
                                      "ec-dlm-8b", "smoke", "ec-dlm-owt-smoke", "ec-dlm-8b-smoke"}));
}

TEST(Presets, DeepSeekV3MatchesSpec11) {
  const Preset& ht = preset("ht-deepseek-v3");  // 4096 tokens/rank, H 7168, K 8, E 256, fp8 / bf16
  EXPECT_EQ(ht.mode, "ht");
  EXPECT_EQ(ht.tokens_per_rank, 4096);
  EXPECT_EQ(ht.hidden, 7168);
  EXPECT_EQ(ht.topk, 8);
  EXPECT_EQ(ht.experts, 256);
  EXPECT_EQ(ht.router, "tc-sigmoid-grouped");
  EXPECT_EQ(ht.topk_groups_cap, 4);  // topk_groups = min(nodes, 4)
  EXPECT_EQ(ht.dispatch_dtype, "fp8");
  EXPECT_EQ(ht.combine_dtype, "bf16");

  const Preset& ll = preset("ll-deepseek-v3");  // 128 tokens/rank, sweep 1..256
  EXPECT_EQ(ll.mode, "ll");
  EXPECT_EQ(ll.tokens_per_rank, 128);
  EXPECT_EQ(sweep_of(ll), (std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_EQ(ll.hidden, 7168);
  EXPECT_EQ(ll.topk, 8);
  EXPECT_EQ(ll.experts, 256);
  EXPECT_EQ(ll.dispatch_dtype, "fp8");
}

TEST(Presets, PplxV2LiteMatchesSpec11) {
  const Preset& p = preset("pplx-v2lite");  // 64 experts, K 6, H 2048, 1..128 tokens
  EXPECT_EQ(p.experts, 64);
  EXPECT_EQ(p.topk, 6);
  EXPECT_EQ(p.hidden, 2048);
  EXPECT_EQ(sweep_of(p).front(), 1);
  EXPECT_EQ(sweep_of(p).back(), 128);
}

TEST(Presets, EcDlmMatchSpec11) {
  const Preset& owt = preset("ec-dlm-owt");  // 16 layers, H 512, F 384, E 512, 2 shared (768), S 512
  EXPECT_EQ(owt.layers, 16);
  EXPECT_EQ(owt.hidden, 512);
  EXPECT_EQ(owt.ffn, 384);
  EXPECT_EQ(owt.experts, 512);
  EXPECT_EQ(owt.shared_experts, 2);
  EXPECT_EQ(owt.shared_ffn, 768);
  EXPECT_EQ(owt.seq_len, 512);
  EXPECT_EQ(owt.router, "ec");
  EXPECT_EQ(owt.topk, 20);                      // k 20 static ...
  EXPECT_EQ(owt.k_schedule, "linear_reverse");  // ... or linear_reverse 8..32
  EXPECT_EQ(owt.k_min, 8);
  EXPECT_EQ(owt.k_max, 32);

  const Preset& b8 = preset("ec-dlm-8b");  // H 2048, F 1280, E 64, 2 shared (2560), S 2048
  EXPECT_EQ(b8.hidden, 2048);
  EXPECT_EQ(b8.ffn, 1280);
  EXPECT_EQ(b8.experts, 64);
  EXPECT_EQ(b8.shared_experts, 2);
  EXPECT_EQ(b8.shared_ffn, 2560);
  EXPECT_EQ(b8.seq_len, 2048);
  EXPECT_EQ(b8.topk, 8);  // static 8 versus linear_reverse 2..14
  EXPECT_EQ(b8.k_schedule, "linear_reverse");
  EXPECT_EQ(b8.k_min, 2);
  EXPECT_EQ(b8.k_max, 14);
}

TEST(Presets, SmokeIsSmallAndRunsAtEveryCtestRankCount) {
  const Preset& s = preset("smoke");
  EXPECT_GE(s.hidden, 256);
  EXPECT_LE(s.hidden, 1024);
  EXPECT_EQ(s.hidden % 128, 0);  // fp8 groups (docs/numerics.md 1.2)
  EXPECT_EQ(s.topk, 4);
  EXPECT_GE(s.experts, 16);
  EXPECT_LE(s.experts, 32);
  for (int ranks : {1, 2, 3, 4, 6, 8}) {  // docs/dispatch.md 5.7 non-power-of-two R included
    Result<ResolvedPreset> r = resolve_preset("smoke", ranks, ranks, {});
    EXPECT_TRUE(r.ok()) << ranks << ": " << r.status().message();
  }
  for (std::int64_t t : sweep_of(s)) {
    EXPECT_GE(t, 64);
    EXPECT_LE(t, 256);
  }
}

TEST(Presets, UnknownNameListsTheValidNames) {
  Result<ResolvedPreset> r = resolve_preset("tiny", 4, 4, {});
  EXPECT_EQ(r.status().exit_code(), 2);
  EXPECT_EQ(
      r.status().message(),
      "--preset: unknown preset 'tiny'; valid: ht-deepseek-v3, ll-deepseek-v3, pplx-v2lite, ec-dlm-owt, "
      "ec-dlm-8b, smoke, ec-dlm-owt-smoke, ec-dlm-8b-smoke");
}

TEST(Presets, RankCountThatDoesNotDivideTheExpertsIsRefused) {
  Result<ResolvedPreset> r = resolve_preset("ll-deepseek-v3", 3, 3, {});
  EXPECT_EQ(r.status().exit_code(), 2);
  // 256 = 3 * 85 + 1.
  EXPECT_EQ(
      r.status().message(),
      "--preset ll-deepseek-v3: 256 experts cannot be split evenly over 3 ranks (E % R = 1); use a rank "
      "count that divides 256");
  EXPECT_EQ(
      resolve_preset("smoke", 5, 5, {}).status().message(),
      "--preset smoke: 24 experts cannot be split evenly over 5 ranks (E % R = 4); use a rank count that "
      "divides 24");
}

TEST(Presets, RanksPerNodeMustDivideTheRankCount) {
  EXPECT_EQ(resolve_preset("smoke", 4, 3, {}).status().message(),
            "--ranks-per-node: must divide the rank count 4, got 3");
  EXPECT_EQ(resolve_preset("smoke", 4, 5, {}).status().message(),
            "--ranks-per-node: must be in [1, 4], got 5");
}

// The preset flags resolved from their EPSUITE_* twins (`env`: name -> value).
Result<ResolvedPreset> resolve_with(const std::map<std::string, std::string>& env, const NodeLayout& real) {
  Params params(preset_param_specs());
  const Status s = params.resolve([&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
  if (!s.ok()) return s;
  return resolve_preset_flags(params, real);
}

// SPEC 14.2: nodes of different sizes are taken as they are; --ranks-per-node emulates uniform nodes and is
// refused over a real uneven layout, naming the flag and the sizes found.
TEST(Presets, UnevenNodesAreTakenAndTheOverrideIsRefusedOverThem) {
  const NodeLayout uneven = NodeLayout::from_groups(std::vector<int>{0, 1, 1});  // 1 + 2 ranks
  Result<ResolvedPreset> r = resolve_with({{"EPSUITE_PRESET", "smoke"}}, uneven);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->nodes, 2);
  EXPECT_EQ(r->ranks_per_node, 0);
  EXPECT_EQ(r->layout.node_sizes, (std::vector<int>{1, 2}));
  Result<ResolvedPreset> grouped =
      resolve_with({{"EPSUITE_PRESET", "smoke"}}, NodeLayout::from_groups(std::vector<int>{0, 1, 1, 1}));
  ASSERT_TRUE(grouped.ok()) << grouped.status().message();
  EXPECT_EQ(grouped->topk_groups, 2);  // group-limited routing: min(2 real nodes, cap 4)
  EXPECT_NE(preset_header_block(*grouped).find("2 node(s) of 1, 3 ranks"), std::string::npos);
  EXPECT_EQ(preset_to_json(*grouped)["node_sizes"], Json({1, 3}));
  Result<ResolvedPreset> overridden = resolve_with({{"EPSUITE_RANKS_PER_NODE", "2"}}, uneven);
  EXPECT_EQ(overridden.status().exit_code(), 2);
  EXPECT_EQ(
      overridden.status().message(),
      "--ranks-per-node: is an override for uniform layouts only; the nodes of this run hold 1, 2 ranks "
      "(leave it unset: every command takes nodes of different sizes)");
  // Over a uniform real layout the override still emulates nodes.
  Result<ResolvedPreset> emulated =
      resolve_with({{"EPSUITE_RANKS_PER_NODE", "2"}}, value_or_throw(NodeLayout::uniform(4, 4)));
  ASSERT_TRUE(emulated.ok()) << emulated.status().message();
  EXPECT_EQ(emulated->nodes, 2);
}

TEST(Presets, DerivedValues) {
  Result<ResolvedPreset> ht = resolve_preset("ht-deepseek-v3", 16, 2, {});
  ASSERT_TRUE(ht.ok()) << ht.status().message();
  EXPECT_EQ(ht->local_experts, 16);  // 256 / 16
  EXPECT_EQ(ht->nodes, 8);
  EXPECT_EQ(ht->topk_groups, 4);  // min(8 nodes, 4)
  EXPECT_EQ(ht->max_tokens, 4096);
  Result<ResolvedPreset> two_nodes = resolve_preset("ht-deepseek-v3", 8, 4, {});
  ASSERT_TRUE(two_nodes.ok());
  EXPECT_EQ(two_nodes->topk_groups, 2);  // min(2 nodes, 4)
  Result<ResolvedPreset> pplx = resolve_preset("pplx-v2lite", 4, 4, {});
  ASSERT_TRUE(pplx.ok());
  EXPECT_EQ(pplx->topk_groups, 1);  // not grouped
}

TEST(Presets, TokenOverride) {
  Result<TokenSweep> sweep = parse_token_sweep("64,192", "--tokens", 0, 65536);
  ASSERT_TRUE(sweep.ok());
  Result<ResolvedPreset> r = resolve_preset("smoke", 4, 4, *sweep);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->tokens.values, (std::vector<std::int64_t>{64, 192}));
  EXPECT_EQ(r->max_tokens, 192);
  Result<TokenSweep> odd = parse_token_sweep("100", "--tokens", 0, 65536);
  EXPECT_EQ(resolve_preset("smoke", 4, 4, *odd).status().message(),
            "--tokens: 100 is not a multiple of the sequence length S = 64 of preset smoke");
  // Token choice presets take any count, zero-token ranks included (docs/numerics.md 2.3).
  Result<TokenSweep> zero = parse_token_sweep("0,3", "--tokens", 0, 65536);
  EXPECT_TRUE(resolve_preset("pplx-v2lite", 4, 4, *zero).ok());
}

TEST(Presets, EchoFormats) {
  Result<ResolvedPreset> r = resolve_preset("smoke", 4, 2, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(
      preset_header_block(*r),
      "#  workload         smoke (all): every shape of the suite scaled down for a 2-core machine with 4 "
      "ranks\n"
      "#  shapes           tokens/rank 128 (sweep 64,128,256), H 256, K 4, E 24 (L 6 on 4 ranks, 2 node(s))\n"
      "#  experts          F 128, shared 1 x F 256, S 64, layers 2\n"
      "#  routing          tc-sigmoid-grouped (groups 4, topk_groups 2), k schedule linear_reverse 2..6\n"
      "#  dtypes           dispatch fp8, combine bf16\n");
  const Json j = preset_to_json(*r);
  EXPECT_EQ(j.at("experts"), 24);
  EXPECT_EQ(j.at("local_experts"), 6);
  EXPECT_EQ(j.at("topk_groups"), 2);
  EXPECT_EQ(j.at("tokens"), Json::parse("[64,128,256]"));
}

}  // namespace
}  // namespace eps
