// fit_model and predict (docs/model.md 16.3-16.5) on synthetic results documents whose times follow a known
// line in the busiest rank's bytes, so the fit, the CPU share and the validation error have exact answers.
#include "perf/model/model.hpp"

#include <gtest/gtest.h>

namespace eps::model {
namespace {

constexpr double kAlphaUs = 5.0;
constexpr double kUsPerByte = 0.001;  // 1 GB/s

TrafficShape smoke_shape(int ranks, int tokens) {
  TrafficShape s;
  s.ranks = ranks;
  s.ranks_per_node = ranks;
  s.experts = 24;
  s.top_k = 4;
  s.hidden = 256;
  s.tokens = tokens;
  s.max_tokens = 256;
  s.dtype = dispatch::PayloadType::kFp8;
  return s;
}

double busiest(int ranks, int tokens) {
  return op_traffic(smoke_shape(ranks, tokens)).value().dispatch.busiest_rank_bytes;
}

CaseRecord dispatch_case(int ranks, int tokens, double p50, bool oversubscribed) {
  CaseRecord r;
  CaseResult& c = r.result;
  c.op = "dispatch";
  c.transport = "direct";
  c.mode = "ht-rank-major/ht-rank";
  c.dtype = "fp8";
  c.sizes = {{"tokens", tokens}, {"ranks", ranks}, {"hidden", 256},
             {"experts", 24},    {"top_k", 4},     {"max_tokens", 256}};
  c.identity = {{"fabric", "shm"}, {"preset", "smoke"}, {"workload", "uniform"}, {"seed", "1"}};
  c.times_us = {p50};
  c.oversubscribed = oversubscribed;
  r.stats.p50 = p50;
  return r;
}

ModelSource source(const std::string& path, int ranks, bool validate_only) {
  ModelSource s;
  s.path = path;
  s.validate_only = validate_only;
  s.document.header.platform = {{"cpu_model", "test cpu"}, {"fingerprint", path}};
  s.document.header.config = {{"preset_resolved", {{"ranks_per_node", ranks}}}};
  const bool over = ranks > 2;
  if (over) s.document.header.oversubscribed = {{"ranks", ranks}, {"cpus", 2}, {"proxy_threads", 0}};
  for (int tokens : {64, 128, 256}) {
    const double share = over ? ranks / 2.0 : 1.0;
    s.document.cases.push_back(
        dispatch_case(ranks, tokens, share * (kAlphaUs + kUsPerByte * busiest(ranks, tokens)), over));
  }
  return s;
}

TEST(Model, FitsTheLineAndValidatesWithTheCpuShare) {
  const std::vector<ModelSource> sources = {source("fit.json", 2, false), source("four.json", 4, true)};
  const Result<Model> m = fit_model(sources, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_EQ(m->ops.size(), 1u);
  ASSERT_FALSE(m->ops[0].cost.withheld) << m->ops[0].cost.reason;
  EXPECT_NEAR(m->ops[0].cost.ranges[0].intercept, kAlphaUs, 1e-6);
  EXPECT_NEAR(m->ops[0].cost.ranges[0].slope, kUsPerByte, 1e-12);
  EXPECT_EQ(m->ops[0].fit_ranks, 2);
  ASSERT_EQ(m->validation.size(), 6u);
  for (const Validation& v : m->validation) {
    EXPECT_EQ(v.role, v.ranks == 2 ? "fit" : "validation");
    EXPECT_DOUBLE_EQ(v.cpu_share, v.ranks == 4 ? 2.0 : 1.0);
    EXPECT_NEAR(v.error, 0.0, 1e-9) << v.ranks << " ranks, " << v.tokens << " tokens";
  }
}

TEST(Model, PredictionsSkipWhatCannotRunWithTheReason) {
  const Result<Model> m = fit_model({source("fit.json", 2, false)}, {});
  ASSERT_TRUE(m.ok());
  PredictOptions o;
  o.preset = "smoke";
  o.ep_sizes = {2, 5, 8, 24};
  o.ranks_per_node = 8;
  o.cpus_per_node = 2;
  o.tokens = 128;
  const Result<std::vector<Prediction>> p = predict(*m, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p->size(), 4u);
  EXPECT_FALSE((*p)[0].skipped);
  EXPECT_NEAR((*p)[0].time_us, kAlphaUs + kUsPerByte * busiest(2, 128), 1e-6);
  ASSERT_TRUE((*p)[1].skipped);  // 24 experts over 5 ranks
  EXPECT_NE((*p)[1].skipped->find("cannot be split evenly over 5"), std::string::npos) << *(*p)[1].skipped;
  EXPECT_FALSE((*p)[2].skipped);
  EXPECT_DOUBLE_EQ((*p)[2].cpu_share, 4.0);  // 8 ranks on 2 CPUs
  EXPECT_NEAR((*p)[2].time_us, 4.0 * (kAlphaUs + kUsPerByte * busiest(8, 128)), 1e-6);
  ASSERT_TRUE((*p)[3].skipped);  // three nodes of 8 and no inter-node link
  EXPECT_NE((*p)[3].skipped->find("no inter-node link"), std::string::npos) << *(*p)[3].skipped;
}

TEST(Model, MixedPlatformsAreRefusedUnlessAllowed) {
  std::vector<ModelSource> sources = {source("fit.json", 2, false), source("other.json", 4, true)};
  sources[1].document.header.platform["cpu_model"] = "another cpu";
  const Result<Model> refused = fit_model(sources, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("--allow-mixed"), std::string::npos);
  EXPECT_NE(refused.status().message().find("other.json"), std::string::npos);
  EXPECT_TRUE(fit_model(sources, {.allow_mixed = true}).ok());
}

TEST(Model, PlatformKeyIgnoresRankCountHostsAndTags) {
  const Json two = {{"cpu_model", "x"},
                    {"ranks", {{{"device", "cpu: x"}, {"nic", "none"}, {"host", "a"}}}},
                    {"hostnames", {"a"}},
                    {"tags", {{"run", "1"}}},
                    {"fingerprint", "1111"}};
  Json eight = two;
  eight["ranks"] = Json::array();
  for (int r = 0; r < 8; ++r)
    eight["ranks"].push_back({{"device", "cpu: x"}, {"nic", "none"}, {"host", "b"}});
  eight["hostnames"] = {"b"};
  eight["tags"] = {{"run", "2"}};
  eight["fingerprint"] = "2222";
  EXPECT_EQ(platform_key(two), platform_key(eight));
  Json gpu = two;
  gpu["ranks"][0]["device"] = "cuda: H100 (sm_90)";
  EXPECT_NE(platform_key(two), platform_key(gpu));
}

}  // namespace
}  // namespace eps::model
