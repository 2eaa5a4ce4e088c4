// `epsuite ref dispatch` on JSON documents: hand cases of docs/dispatch.md 5.1-5.6 for every layout, an EPLB
// placement in log2phy replica order (docs/eplb.md 8.4), and the error messages of docs/errors.md 10.
#include "harness/ref/ref_dispatch.hpp"

#include <string>

#include <gtest/gtest.h>

namespace eps {
namespace {

Json parse(const char* text) { return Json::parse(text); }

Json run(const Json& input) {
  const Result<Json> out = run_ref_dispatch(input);
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : Json();
}

std::string error_of(const Json& input) {
  const Result<Json> out = run_ref_dispatch(input);
  EXPECT_FALSE(out.ok());
  if (out.ok()) return "";
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  return out.status().message();
}

void expect_prefix(const std::string& message, const std::string& prefix) {
  EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
}

// The README worked example (examples/dispatch_small.json): the running example of docs/dispatch.md 5 with
// T_max = 4 (as in 5.4) and expert_alignment 2 (as in 5.3). Default placement, L = 2: experts 0, 1 on rank 0,
// experts 2, 3 on rank 1.
//   rank 0  t0 [0, 3] w [0.5, 0.25]      dst {0, 1}
//           t1 [1, 0] w [0.75, 0.125]    dst {0}
//           t2 [-1, -1]                  dst {}
//   rank 1  t0 [2, 3] w [0.625, 0.375]   dst {1}
//           t1 [3, 0] w [0.875, 0.0625]  dst {0, 1}
constexpr const char* kExample = R"({
  "num_ranks": 2, "num_experts": 4, "top_k": 2, "max_tokens_per_rank": 4, "expert_alignment": 2,
  "ranks": [
    {"topk_idx": [[0, 3], [1, 0], [-1, -1]], "topk_weights": [[0.5, 0.25], [0.75, 0.125], [0, 0]]},
    {"topk_idx": [[2, 3], [3, 0]], "topk_weights": [[0.625, 0.375], [0.875, 0.0625]]}
  ]
})";

TEST(RefDispatch, ExampleEchoesTheEffectiveConfiguration) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["hidden"], 128);
  EXPECT_EQ(out["dtype"], "bf16");
  EXPECT_EQ(out["num_tokens"], parse("[3, 2]"));
  EXPECT_EQ(out["num_slots"], 4);
  EXPECT_EQ(out["num_local_experts"], 2);
  EXPECT_EQ(out["placement"], parse(R"({"phy2log": [0, 1, 2, 3], "log2phy": [[0], [1], [2], [3]]})"));
}

// docs/dispatch.md 5.1: the table of the running example.
TEST(RefDispatch, ExampleLayout) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["rank_prefix_matrix"], parse("[[2, 1], [3, 3]]"));
  EXPECT_EQ(out["layout"][0], parse(R"({"rank": 0, "num_tokens_per_rank": [2, 1],
      "num_tokens_per_expert": [2, 1, 0, 1], "is_token_in_rank": [[1, 1], [1, 0], [0, 0]]})"));
  EXPECT_EQ(out["layout"][1], parse(R"({"rank": 1, "num_tokens_per_rank": [1, 2],
      "num_tokens_per_expert": [1, 0, 1, 2], "is_token_in_rank": [[0, 1], [1, 1]]})"));
}

// docs/dispatch.md 5.2: rank 0 receives (0,t0), (0,t1), (1,t1) with local indices [0, -1], [1, 0], [-1, 0]
// and counts [3, 1]; rank 1 receives (0,t0), (1,t0), (1,t1) with [-1, 1], [0, 1], [1, -1] and counts [1, 3].
// Both counts are rounded up to multiples of 2.
TEST(RefDispatch, ExampleRankMajor) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["ht_rank_major"][0], parse(R"({"rank": 0, "num_recv_tokens_per_expert": [4, 2], "rows": [
      {"src_rank": 0, "src_token": 0, "recv_topk_idx": [0, -1], "recv_topk_weights": [0.5, 0]},
      {"src_rank": 0, "src_token": 1, "recv_topk_idx": [1, 0], "recv_topk_weights": [0.75, 0.125]},
      {"src_rank": 1, "src_token": 1, "recv_topk_idx": [-1, 0], "recv_topk_weights": [0, 0.0625]}]})"));
  EXPECT_EQ(out["ht_rank_major"][1], parse(R"({"rank": 1, "num_recv_tokens_per_expert": [2, 4], "rows": [
      {"src_rank": 0, "src_token": 0, "recv_topk_idx": [-1, 1], "recv_topk_weights": [0, 0.25]},
      {"src_rank": 1, "src_token": 0, "recv_topk_idx": [0, 1], "recv_topk_weights": [0.625, 0.375]},
      {"src_rank": 1, "src_token": 1, "recv_topk_idx": [1, -1], "recv_topk_weights": [0.875, 0]}]})"));
}

// docs/dispatch.md 5.3, alignment 2. Rank 1 is the diagram of 5.3:
//   [l0: (1,t0)] [pad]   [l1: (0,t0)] [l1: (1,t0)] [l1: (1,t1)] [pad]
// Rank 0: expert 0 gets (0,t0) k0, (0,t1) k1, (1,t1) k1, pad; expert 1 gets (0,t1) k0, pad.
TEST(RefDispatch, ExampleExpertMajor) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["ht_expert_major"][0], parse(R"({"rank": 0, "num_rows": 6, "experts": [
      {"local_expert": 0, "slot": 0, "expert": 0, "count": 3, "segment_begin": 0, "segment_length": 4, "rows": [
        {"src_rank": 0, "src_token": 0, "k": 0, "weight": 0.5},
        {"src_rank": 0, "src_token": 1, "k": 1, "weight": 0.125},
        {"src_rank": 1, "src_token": 1, "k": 1, "weight": 0.0625}, {"padding": true}]},
      {"local_expert": 1, "slot": 1, "expert": 1, "count": 1, "segment_begin": 4, "segment_length": 2, "rows": [
        {"src_rank": 0, "src_token": 1, "k": 0, "weight": 0.75}, {"padding": true}]}]})"));
  EXPECT_EQ(out["ht_expert_major"][1], parse(R"({"rank": 1, "num_rows": 6, "experts": [
      {"local_expert": 0, "slot": 2, "expert": 2, "count": 1, "segment_begin": 0, "segment_length": 2, "rows": [
        {"src_rank": 1, "src_token": 0, "k": 0, "weight": 0.625}, {"padding": true}]},
      {"local_expert": 1, "slot": 3, "expert": 3, "count": 3, "segment_begin": 2, "segment_length": 4, "rows": [
        {"src_rank": 0, "src_token": 0, "k": 1, "weight": 0.25},
        {"src_rank": 1, "src_token": 0, "k": 1, "weight": 0.375},
        {"src_rank": 1, "src_token": 1, "k": 0, "weight": 0.875}, {"padding": true}]}]})"));
}

// docs/dispatch.md 5.4 (T_max = 4, C = 8). Rank 1 is the table of 5.4: expert 2 count 1, ranges (0,0), (0,1),
// src_info [0]; expert 3 count 3, ranges (0,1), (1,2), src_info [0, 0, 1]. Rank 0: expert 0 gets r0 t0, t1
// and r1 t1; expert 1 gets r0 t1.
TEST(RefDispatch, ExampleLowLatency) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["ll"][0], parse(R"({"rank": 0, "capacity": 8, "experts": [
      {"local_expert": 0, "slot": 0, "expert": 0, "packed_recv_count": 3, "layout_range": [[0, 2], [2, 1]],
       "rows": [{"src_rank": 0, "src_token": 0, "k": 0, "weight": 0.5, "src_info": 0},
                {"src_rank": 0, "src_token": 1, "k": 1, "weight": 0.125, "src_info": 1},
                {"src_rank": 1, "src_token": 1, "k": 1, "weight": 0.0625, "src_info": 1}]},
      {"local_expert": 1, "slot": 1, "expert": 1, "packed_recv_count": 1, "layout_range": [[0, 1], [1, 0]],
       "rows": [{"src_rank": 0, "src_token": 1, "k": 0, "weight": 0.75, "src_info": 1}]}]})"));
  EXPECT_EQ(out["ll"][1], parse(R"({"rank": 1, "capacity": 8, "experts": [
      {"local_expert": 0, "slot": 2, "expert": 2, "packed_recv_count": 1, "layout_range": [[0, 0], [0, 1]],
       "rows": [{"src_rank": 1, "src_token": 0, "k": 0, "weight": 0.625, "src_info": 0}]},
      {"local_expert": 1, "slot": 3, "expert": 3, "packed_recv_count": 3, "layout_range": [[0, 1], [1, 2]],
       "rows": [{"src_rank": 0, "src_token": 0, "k": 1, "weight": 0.25, "src_info": 0},
                {"src_rank": 1, "src_token": 0, "k": 1, "weight": 0.375, "src_info": 0},
                {"src_rank": 1, "src_token": 1, "k": 0, "weight": 0.875, "src_info": 1}]}]})"));
}

// docs/dispatch.md 5.6 with bf16, H = 128 (256-byte rows): every rank receives and sends 3 HT rows, one of
// them across the boundary, and 4 LL selections, one across; combine mirrors dispatch.
TEST(RefDispatch, ExampleByteAccount) {
  const Json out = run(parse(kExample));
  EXPECT_EQ(out["row_bytes"], parse(R"({"ht_dispatch": 256, "ll_dispatch": 256, "combine": 256})"));
  const Json ht =
      parse(R"({"recv": {"algo": 768, "physical": 256}, "send": {"algo": 768, "physical": 256}})");
  const Json ll =
      parse(R"({"recv": {"algo": 1024, "physical": 256}, "send": {"algo": 1024, "physical": 256}})");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(out["bytes"][r]["rank"], r);
    EXPECT_EQ(out["bytes"][r]["ht_dispatch"], ht) << "rank " << r;
    EXPECT_EQ(out["bytes"][r]["ht_combine"], ht) << "rank " << r;
    EXPECT_EQ(out["bytes"][r]["ll_dispatch"], ll) << "rank " << r;
    EXPECT_EQ(out["bytes"][r]["ll_combine"], ll) << "rank " << r;
  }
}

// One rank, fp8 with H = 256: an HT row and an LL message are 256 codes + 4·2 scale bytes = 264, a combine
// row 2H = 512. Token 0 keeps one of its three slots (a masked slot between valid ones), token 1 keeps two.
// Everything stays on rank 0, so nothing is physical. A NaN weight on a masked slot is never read.
TEST(RefDispatch, Fp8SingleRankWithMaskedSlots) {
  const Json out = run(parse(R"({"num_ranks": 1, "num_experts": 4, "top_k": 3, "hidden": 256, "dtype": "fp8",
      "ranks": [{"topk_idx": [[-1, 2, -1], [3, -1, 0]], "topk_weights": [["nan", 1.5, 9], [0.5, "nan", -2]]}]})"));
  EXPECT_EQ(out["max_tokens_per_rank"], 2);  // default: the largest T_r
  EXPECT_EQ(out["row_bytes"], parse(R"({"ht_dispatch": 264, "ll_dispatch": 264, "combine": 512})"));
  EXPECT_EQ(out["ht_rank_major"][0]["rows"], parse(R"([
      {"src_rank": 0, "src_token": 0, "recv_topk_idx": [-1, 2, -1], "recv_topk_weights": [0, 1.5, 0]},
      {"src_rank": 0, "src_token": 1, "recv_topk_idx": [3, -1, 0], "recv_topk_weights": [0.5, 0, -2]}])"));
  EXPECT_EQ(out["ht_rank_major"][0]["num_recv_tokens_per_expert"], parse("[1, 0, 1, 1]"));
  EXPECT_EQ(out["ll"][0]["capacity"], 2);
  EXPECT_EQ(out["ll"][0]["experts"][0]["rows"], parse(R"([{"src_rank": 0, "src_token": 1, "k": 2,
      "weight": -2, "src_info": 1}])"));
  EXPECT_EQ(out["bytes"][0]["ht_dispatch"], parse(R"({"recv": {"algo": 528, "physical": 0},
      "send": {"algo": 528, "physical": 0}})"));
  EXPECT_EQ(out["bytes"][0]["ll_dispatch"]["recv"], parse(R"({"algo": 792, "physical": 0})"));
  EXPECT_EQ(out["bytes"][0]["ll_combine"]["send"], parse(R"({"algo": 1536, "physical": 0})"));
}

// An EPLB placement, R = 2, E = 3, P = 4 (2 slots per rank): phy2log [2, 0, 1, 0], so expert 0 lives in
// slots 1 (rank 0, local 1) and 3 (rank 1, local 1). log2phy [[3, 1], [2], [0]] makes slot 3 replica 0
// (docs/eplb.md 8.4: replica j = log2phy[e][j]); assignment (t, k) takes replica (t·2 + k) mod 2.
//   rank 0  t0 [1, 0]: e1 -> slot 2 (1, 0); e0, n = 1 -> replica 1 = slot 1 (0, 1)    dst {0, 1}
//           t1 [0, 2]: e0, n = 2 -> replica 0 = slot 3 (1, 1); e2 -> slot 0 (0, 0)    dst {0, 1}
//   rank 1  t0 [0, -1]: e0, n = 0 -> replica 0 = slot 3 (1, 1)                        dst {1}
constexpr const char* kPlacementCase = R"({
  "num_ranks": 2, "num_experts": 3, "top_k": 2,
  "ranks": [{"topk_idx": [[1, 0], [0, 2]], "topk_weights": [[0.5, 0.25], [2, 4]]},
            {"topk_idx": [[0, -1]], "topk_weights": [[8, 0]]}],
  "placement": {"phy2log": [2, 0, 1, 0], "log2phy": [[3, 1], [2], [0]]}
})";

TEST(RefDispatch, PlacementFollowsLog2phyReplicaOrder) {
  const Json out = run(parse(kPlacementCase));
  EXPECT_EQ(out["num_slots"], 4);
  EXPECT_EQ(out["placement"]["log2phy"], parse("[[3, 1], [2], [0]]"));
  // docs/dispatch.md 5.1 under a placement: num_tokens_per_expert is per physical slot, [P].
  EXPECT_EQ(out["layout"][0]["num_tokens_per_expert"], parse("[1, 1, 1, 1]"));
  EXPECT_EQ(out["layout"][1]["num_tokens_per_expert"], parse("[0, 0, 0, 1]"));
  EXPECT_EQ(out["rank_prefix_matrix"], parse("[[2, 2], [2, 3]]"));
  // recv_topk_idx holds local slot indices (docs/dispatch.md 5.2).
  EXPECT_EQ(out["ht_rank_major"][0], parse(R"({"rank": 0, "num_recv_tokens_per_expert": [1, 1], "rows": [
      {"src_rank": 0, "src_token": 0, "recv_topk_idx": [-1, 1], "recv_topk_weights": [0, 0.25]},
      {"src_rank": 0, "src_token": 1, "recv_topk_idx": [-1, 0], "recv_topk_weights": [0, 4]}]})"));
  EXPECT_EQ(out["ht_rank_major"][1]["num_recv_tokens_per_expert"], parse("[1, 2]"));
  // Slot 3 (rank 1, local 1) holds expert 0 and receives (0, t1) k0 and (1, t0) k0.
  EXPECT_EQ(out["ll"][1]["experts"][1], parse(R"({"local_expert": 1, "slot": 3, "expert": 0,
      "packed_recv_count": 2, "layout_range": [[0, 1], [1, 1]],
      "rows": [{"src_rank": 0, "src_token": 1, "k": 0, "weight": 2, "src_info": 1},
               {"src_rank": 1, "src_token": 0, "k": 0, "weight": 8, "src_info": 0}]})"));
}

// Without log2phy the replicas go by ascending slot id, [1, 3]: (0, t1) and (1, t0) then go to slot 1 on
// rank 0, and (0, t0) k1 to slot 3 on rank 1.
TEST(RefDispatch, PlacementWithoutLog2phyUsesAscendingSlots) {
  Json input = parse(kPlacementCase);
  input["placement"].erase("log2phy");
  const Json out = run(input);
  EXPECT_EQ(out["placement"]["log2phy"], parse("[[1, 3], [2], [0]]"));
  EXPECT_EQ(out["ht_rank_major"][0]["rows"], parse(R"([
      {"src_rank": 0, "src_token": 1, "recv_topk_idx": [1, 0], "recv_topk_weights": [2, 4]},
      {"src_rank": 1, "src_token": 0, "recv_topk_idx": [1, -1], "recv_topk_weights": [8, 0]}])"));
}

TEST(RefDispatch, EmptyRanks) {
  const Json out = run(parse(R"({"num_ranks": 2, "num_experts": 2, "top_k": 1,
      "ranks": [{"topk_idx": [], "topk_weights": []}, {"topk_idx": [[1]], "topk_weights": [[1]]}]})"));
  EXPECT_EQ(out["layout"][0]["is_token_in_rank"], parse("[]"));
  EXPECT_EQ(out["rank_prefix_matrix"], parse("[[0, 0], [0, 1]]"));
  EXPECT_EQ(out["ht_rank_major"][0]["rows"], parse("[]"));
  EXPECT_EQ(out["ll"][1]["capacity"], 2);  // C = R·T_max = 2·1
  EXPECT_EQ(out["ll"][1]["experts"][0]["layout_range"], parse("[[0, 0], [0, 1]]"));
}

// Replaces one field of the worked example by `value` (a JSON pointer such as "/ranks/1/topk_idx/1/1").
Json example_with(const std::string& pointer, const Json& value) {
  Json input = parse(kExample);
  input[Json::json_pointer(pointer)] = value;
  return input;
}

// docs/dispatch.md 5: the input errors of DispatchPlan::make, named by their field in the document.
TEST(RefDispatch, PlanErrorsNameTheDocumentField) {
  EXPECT_EQ(error_of(example_with("/ranks/1/topk_idx/1/1", 4)),
            "ranks[1].topk_idx[1][1]: must be in [-1, 3], got 4");
  EXPECT_EQ(
      error_of(example_with("/ranks/0/topk_idx/0", parse("[3, 3]"))),
      "ranks[0].topk_idx[0]: expert 3 appears in slots 0 and 1; the experts of one token must be distinct");
  EXPECT_EQ(error_of(example_with("/ranks/1/topk_weights/0/1", "nan")),
            "ranks[1].topk_weights[0][1]: must not be NaN on a valid slot");
  EXPECT_EQ(error_of(example_with("/max_tokens_per_rank", 2)),
            "ranks[0].topk_idx: has T_0 = 3 rows, must have at most max_tokens_per_rank = 2 "
            "(docs/dispatch.md 5.4)");
  EXPECT_EQ(error_of(example_with("/num_experts", 5)),
            "num_experts: must be a multiple of num_ranks (2), got 5");
  Json fp8 = example_with("/dtype", "fp8");
  fp8["hidden"] = 100;
  EXPECT_EQ(error_of(fp8),
            "hidden: must be a multiple of 128 for fp8 payloads (docs/numerics.md 1.2), got 100");
}

TEST(RefDispatch, FieldErrors) {
  EXPECT_EQ(error_of(parse("[]")), "input: expected a JSON object, got array");
  EXPECT_EQ(error_of(example_with("/top_k", 0)), "top_k: must be in [1, 64], got 0");
  EXPECT_EQ(error_of(example_with("/num_ranks", 0)), "num_ranks: must be in [1, 1024], got 0");
  EXPECT_EQ(error_of(example_with("/hidden", 0)), "hidden: must be in [1, 1048576], got 0");
  EXPECT_EQ(error_of(example_with("/expert_alignment", 0)),
            "expert_alignment: must be in [1, 1048576], got 0");
  EXPECT_EQ(error_of(example_with("/dtype", "fp16")), "dtype: must be one of {bf16, fp8}, got \"fp16\"");
  EXPECT_EQ(error_of(example_with("/num_ranks", 3)), "ranks: expected num_ranks = 3 rank objects, got 2");
  EXPECT_EQ(error_of(example_with("/ranks/0/topk_idx/1", parse("[1, 0, 2]"))),
            "ranks[0].topk_idx[1]: expected top_k = 2 entries, got 3");
  EXPECT_EQ(error_of(example_with("/ranks/0/topk_idx/0/0", 1.5)),
            "ranks[0].topk_idx[0][0]: expected an expert id in [-1, 3], got 1.5");
  EXPECT_EQ(error_of(example_with("/ranks/1/topk_weights", parse("[[1, 1]]"))),
            "ranks[1].topk_weights: must have as many rows as topk_idx (2), got 1");
  expect_prefix(error_of(example_with("/ranks/0/topk_weights/2/0", "x")),
                "ranks[0].topk_weights[2][0]: must be a number in [-3.4028234663852886e+38, ");
  expect_prefix(error_of(example_with("/ranks/0/topk_weights/0/0", 1e300)),
                "ranks[0].topk_weights[0][0]: must be a number in [");
  Json missing = parse(kExample);
  missing["ranks"][1].erase("topk_weights");
  EXPECT_EQ(error_of(missing), "ranks[1].topk_weights: required field is missing");
}

TEST(RefDispatch, UnknownFieldsAnywhereAreErrors) {
  expect_prefix(error_of(example_with("/payload", 1)),
                "payload: unknown field for the dispatch input (known: ");
  EXPECT_EQ(error_of(example_with("/ranks/1/weights", 1)),
            "ranks[1].weights: unknown field for a rank (known: topk_idx, topk_weights)");
  EXPECT_EQ(
      error_of(example_with("/placement", parse(R"({"phy2log": [0, 1, 2, 3], "logcnt": [1, 1, 1, 1]})"))),
      "placement.logcnt: unknown field for the placement (known: phy2log, log2phy)");
}

TEST(RefDispatch, PlacementErrors) {
  EXPECT_EQ(error_of(example_with("/placement", parse(R"({"phy2log": [0, 1, 4, 3]})"))),
            "placement.phy2log[2]: must be in [0, 3], got 4");
  EXPECT_EQ(error_of(example_with("/placement", parse(R"({"phy2log": [0, 1, 3, 3]})"))),
            "placement.phy2log: expert 2 has no replica; every expert needs at least one (docs/eplb.md 8.1)");
  EXPECT_EQ(error_of(example_with("/placement", parse(R"({"phy2log": [0, 1, 2, 3, 0, 0],
                                                           "log2phy": [[0, 1, 5], [1], [2], [3]]})"))),
            "placement.log2phy[0][1]: slot 1 holds expert 1 in phy2log, not 0 (docs/eplb.md 8.1)");
  EXPECT_EQ(error_of(example_with("/placement", parse(R"({"phy2log": [0, 1, 2, 3], "log2phy": []})"))),
            "placement.log2phy: must have one row per expert (4), got 0");
}

// The tool builds every rank's layouts: R·P·T_max LL rows, P·(expert_alignment - 1) padding rows, each
// limited to 2^24. R = 64 ranks with P = 4096 slots allow T_max <= 64 and expert_alignment <= 4097.
TEST(RefDispatch, OutputSizeIsBounded) {
  Json input = parse(R"({"num_ranks": 64, "num_experts": 4096, "top_k": 1, "max_tokens_per_rank": 65})");
  input["ranks"] = Json::array();
  for (int r = 0; r < 64; ++r) input["ranks"].push_back(parse(R"({"topk_idx": [], "topk_weights": []})"));
  expect_prefix(error_of(input), "max_tokens_per_rank: must be in [0, 64] for R = 64, P = 4096: ");
  input["max_tokens_per_rank"] = 64;
  input["expert_alignment"] = 4098;
  expect_prefix(error_of(input), "expert_alignment: must be in [1, 4097] for P = 4096: ");
  input["expert_alignment"] = 4097;
  EXPECT_TRUE(run_ref_dispatch(input).ok());
}

}  // namespace
}  // namespace eps
