// docs/numerics.md 2.3 trace:FILE: JSON and CSV formats, replay round trip, validation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "reference/data/workload.hpp"

namespace eps::data {
namespace {

constexpr std::uint64_t kSeed = 77;

// A file under the system temp directory, removed at scope exit.
class TempFile {
 public:
  TempFile(const std::string& suffix, const std::string& text)
      : path_(fmt::format("/tmp/eps_data_trace_{}_{}{}", ::getpid(), counter_++, suffix)) {
    std::ofstream(path_) << text;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

Routing generate(const WorkloadSpec& spec, RoutingShape shape, int rank, std::int64_t tokens) {
  RoutingRequest request;
  request.seed = kSeed;
  request.rank = rank;
  request.num_tokens = tokens;
  Result<Routing> routing = generate_routing(spec, shape, request);
  EXPECT_TRUE(routing.ok()) << routing.status().message();
  return routing.ok() ? routing.value() : Routing{};
}

// Record masked:0.25 routing (so -1 slots are included) of 3 ranks with 5, 0 and 7 tokens, write it, replay
// it.
void round_trip(const std::string& suffix) {
  const RoutingShape shape{3, 12, 3};
  const WorkloadSpec source = parse_workload("masked:0.25").value();
  const std::vector<std::int64_t> tokens{5, 0, 7};
  std::vector<Routing> recorded;
  for (int r = 0; r < 3; ++r) recorded.push_back(generate(source, shape, r, tokens[r]));
  const RoutingTrace trace = trace_from_routings(12, recorded).value();
  const TempFile file(suffix, suffix == ".json" ? trace_to_json(trace) : trace_to_csv(trace));
  Result<WorkloadSpec> replay = parse_workload("trace:" + file.path());
  ASSERT_TRUE(replay.ok()) << replay.status().message();
  EXPECT_EQ(workload_name(*replay), "trace:" + file.path());
  for (int r = 0; r < 3; ++r) {
    const Routing again = generate(*replay, shape, r, tokens[r]);
    EXPECT_EQ(again.topk_idx, recorded[r].topk_idx) << "rank " << r;
    // Weights and mask come from the same streams, so they match too.
    EXPECT_EQ(again.topk_weights, recorded[r].topk_weights) << "rank " << r;
    EXPECT_EQ(again.is_masked, recorded[r].is_masked) << "rank " << r;
  }
  EXPECT_GT(std::count(recorded[2].topk_idx.begin(), recorded[2].topk_idx.end(), -1), 0);
}

TEST(Trace, JsonRoundTrip) { round_trip(".json"); }
TEST(Trace, CsvRoundTrip) { round_trip(".csv"); }

TEST(Trace, ParseJsonByHand) {
  const RoutingTrace trace =
      parse_trace_json(R"({"num_experts": 4, "top_k": 2, "ranks": [[[0, 1], [3, -1]], [], [[-1, -1]]]})", "t")
          .value();
  EXPECT_EQ(trace.num_experts, 4);
  EXPECT_EQ(trace.top_k, 2);
  ASSERT_EQ(trace.ranks.size(), 3u);
  EXPECT_EQ(trace.ranks[0], (std::vector<std::int32_t>{0, 1, 3, -1}));
  EXPECT_TRUE(trace.ranks[1].empty());
  EXPECT_EQ(trace.ranks[2], (std::vector<std::int32_t>{-1, -1}));
  EXPECT_EQ(trace.num_tokens(0), 2);
  EXPECT_EQ(trace.num_tokens(1), 0);
  EXPECT_EQ(trace.num_tokens(7), 0);
}

TEST(Trace, ParseCsvByHand) {
  const std::string text =
      "rank,token,id0,id1\n"
      "# a comment\n"
      "2,1, 5,-1\n"
      "\n"
      "0,0,1,2\r\n"
      "2,0,7,6\n";
  const RoutingTrace trace = parse_trace_csv(text, "t.csv").value();
  EXPECT_EQ(trace.num_experts, 0);  // not recorded by CSV
  EXPECT_EQ(trace.top_k, 2);
  ASSERT_EQ(trace.ranks.size(), 3u);
  EXPECT_EQ(trace.ranks[0], (std::vector<std::int32_t>{1, 2}));
  EXPECT_TRUE(trace.ranks[1].empty());
  EXPECT_EQ(trace.ranks[2], (std::vector<std::int32_t>{7, 6, 5, -1}));
}

std::string json_error(const std::string& text) {
  Result<RoutingTrace> trace = parse_trace_json(text, "t.json");
  EXPECT_FALSE(trace.ok()) << text;
  return trace.ok() ? "" : trace.status().message();
}

std::string csv_error(const std::string& text) {
  Result<RoutingTrace> trace = parse_trace_csv(text, "t.csv");
  EXPECT_FALSE(trace.ok()) << text;
  return trace.ok() ? "" : trace.status().message();
}

TEST(Trace, BadJson) {
  EXPECT_EQ(json_error(R"({"num_experts": 4, "top_k": 2, "ranks": [[[0, 4]]]})"),
            "t.json: ranks[0][0][1]: must be in [-1, 3], got 4");
  EXPECT_EQ(json_error(R"({"num_experts": 4, "top_k": 2, "ranks": [[[2, 2]]]})"),
            "t.json: ranks[0][0]: expert 2 appears in slots 0 and 1 of one token");
  EXPECT_EQ(json_error(R"({"num_experts": 4, "top_k": 2, "ranks": [[[0, 1, 2]]]})"),
            "t.json: ranks[0][0]: expected an array of top_k = 2 expert ids");
  EXPECT_EQ(json_error(R"({"num_experts": 4, "top_k": 5, "ranks": []})"),
            "t.json: top_k: must be in [1, 4], got 5");
  EXPECT_EQ(json_error(R"({"num_experts": 4, "ranks": []})"), "t.json: top_k: missing");
  EXPECT_EQ(json_error(R"({"num_experts": 4, "top_k": 1, "ranks": [[["a"]]]})"),
            "t.json: ranks[0][0][0]: expected an integer in [-1, 3]");
  EXPECT_EQ(json_error("{"), "t.json: not valid JSON");
  EXPECT_EQ(json_error("[]"), "t.json: expected an object with num_experts, top_k, ranks");
}

TEST(Trace, BadCsv) {
  EXPECT_EQ(csv_error("0,0,1,2\n0,1,3\n"), "t.csv:2: expected 2 expert ids like the first line, got 1");
  EXPECT_EQ(csv_error("0,0,1,1\n"), "t.csv:1: expert 1 appears in slots 0 and 1 of one token");
  EXPECT_EQ(csv_error("0,0,1,2\n0,2,3,4\n"),
            "t.csv: rank 0: tokens must be exactly 0..1 once each, found token 2 at sorted position 1");
  EXPECT_EQ(csv_error("0,0,1,2\n0,0,3,4\n"),
            "t.csv: rank 0: tokens must be exactly 0..1 once each, found token 0 at sorted position 1");
  EXPECT_EQ(csv_error("0,0,x,2\n"), "t.csv:1: field 3 must be an integer, got 'x'");
  EXPECT_EQ(csv_error("0,0,-2,2\n"), "t.csv:1: id0: must be in [-1, 1048575], got -2");
  EXPECT_EQ(csv_error("0,0\n"), "t.csv:1: expected rank,token,id0[,id1...], got 2 fields");
  EXPECT_EQ(csv_error("# only a comment\n"), "t.csv: no token lines (expected rank,token,id0,id1,...)");
}

// Ids >= E of the run are caught against the shape (CSV does not record E; JSON must match it).
TEST(Trace, ValidatedAgainstTheRun) {
  const TempFile csv(".csv", "0,0,1,9\n0,1,2,3\n");
  const WorkloadSpec spec = parse_workload("trace:" + csv.path()).value();
  EXPECT_TRUE(validate_workload(spec, {1, 10, 2}).ok());
  EXPECT_EQ(
      validate_workload(spec, {1, 8, 2}).message(),
      fmt::format("trace:FILE: '{}' rank 0 token 0 slot 1: expert id must be in [-1, 7], got 9", csv.path()));
  EXPECT_EQ(validate_workload(spec, {1, 10, 3}).message(),
            fmt::format("top_k: trace '{}' records top_k 2, the run has 3", csv.path()));
  const TempFile json(".json", R"({"num_experts": 10, "top_k": 2, "ranks": [[[1, 9]]]})");
  const WorkloadSpec json_spec = parse_workload("trace:" + json.path()).value();
  EXPECT_EQ(validate_workload(json_spec, {1, 12, 2}).message(),
            fmt::format("num_experts: trace '{}' records 10 experts, the run has 12", json.path()));
  // Asking for more tokens than the trace holds for the rank, or for a rank it lacks.
  RoutingRequest request;
  request.num_tokens = 2;
  EXPECT_EQ(generate_routing(json_spec, {2, 10, 2}, request).status().message(),
            fmt::format("trace:FILE: rank 0 has 1 tokens in '{}', tokens [0, 2) requested", json.path()));
  request.rank = 1;
  request.num_tokens = 0;
  EXPECT_TRUE(generate_routing(json_spec, {2, 10, 2}, request).ok());  // zero tokens of a missing rank
  request.num_tokens = 1;
  EXPECT_FALSE(generate_routing(json_spec, {2, 10, 2}, request).ok());
}

TEST(Trace, FromRoutingsRejectsMixedTopK) {
  std::vector<Routing> routings(2);
  routings[0].top_k = 2;
  routings[1].top_k = 3;
  EXPECT_EQ(trace_from_routings(8, routings).status().message(),
            "per_rank[1].top_k: must equal rank 0's 2, got 3");
}

}  // namespace
}  // namespace eps::data
