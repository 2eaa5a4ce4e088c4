// docs/eplb.md 8.7: the planner's JSON messages, their decoders' errors, and the plan -> placement answer.
#include <gtest/gtest.h>

#include "impls/layer/planner/eplb_json.hpp"
#include "impls/layer/planner/planner.hpp"
#include "impls/layer/planner/tests/planner_test_util.hpp"

namespace eps::planner {
namespace {

using testing::deepseek_placement;
using testing::expect_same_placement;
using testing::golden_problem;
using testing::golden_request;

std::string decode_error(std::string_view body) {
  auto decoded = decode_plan_request(body);
  EXPECT_FALSE(decoded.ok());
  if (decoded.ok()) return "";
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  return decoded.status().message();
}

Json golden_json() { return Json::parse(encode_plan_request(golden_request(3))); }

TEST(PlannerMessages, PlanRequestRoundTripsEveryField) {
  PlanRequest request = golden_request(7);
  request.policy = "mindie-a2a";
  request.step = 123456789012;
  request.problem.max_move = 3;
  request.problem.threshold = 0.1;
  request.problem.cost_local = 0.5;
  request.problem.cost_remote = 7.25;
  request.problem.traffic.assign(2, std::vector<std::vector<double>>(8, std::vector<double>(12, 0.0)));
  request.problem.traffic[1][7][11] = 1.0 / 3.0;  // not exact in decimal: must survive the text form
  request.problem.weight[0][0] = 0.1;
  request.problem.current = deepseek_placement(golden_problem());
  const PlanRequest decoded = decode_plan_request(encode_plan_request(request)).value();
  EXPECT_EQ(decoded.request, 7u);
  EXPECT_EQ(decoded.policy, "mindie-a2a");
  EXPECT_EQ(decoded.step, 123456789012);
  const eplb::EplbProblem& p = decoded.problem;
  EXPECT_EQ(p.weight, request.problem.weight);
  EXPECT_EQ(p.traffic, request.problem.traffic);
  EXPECT_EQ(p.num_replicas, 16);
  EXPECT_EQ(p.num_groups, 4);
  EXPECT_EQ(p.num_nodes, 2);
  EXPECT_EQ(p.num_ranks, 8);
  EXPECT_EQ(p.max_move, 3);
  EXPECT_EQ(p.threshold, 0.1);
  EXPECT_EQ(p.cost_local, 0.5);
  EXPECT_EQ(p.cost_remote, 7.25);
  ASSERT_TRUE(p.current.has_value());
  expect_same_placement(*p.current, *request.problem.current);
}

TEST(PlannerMessages, NoticesRoundTrip) {
  const StagedNotice staged = decode_staged(encode_staged({5, 40})).value();
  EXPECT_EQ(staged.request, 5u);
  EXPECT_EQ(staged.step, 40);
  const SwitchNotice notice = decode_switch(encode_switch({5, 41})).value();
  EXPECT_EQ(notice.request, 5u);
  EXPECT_EQ(notice.step, 41);
  EXPECT_EQ(message_type(encode_staged({5, 40})).value(), "staged");
  EXPECT_FALSE(decode_switch(encode_staged({5, 40})).ok());  // the type must match
}

// The protocol carries exactly the placement the reference computes (both sides use the reference here:
// what is under test is the protocol, not the policy).
TEST(PlannerMessages, PlanAnswerIsTheReferencePlacement) {
  const PlanReply reply = answer_plan_request(golden_request(1));
  ASSERT_TRUE(reply.placement.has_value()) << reply.error;
  EXPECT_GE(reply.planner_us, 0.0);
  const PlanReply decoded = decode_plan_reply(encode_plan_reply(reply)).value();
  EXPECT_EQ(decoded.request, 1u);
  EXPECT_EQ(decoded.planner_us, reply.planner_us);
  ASSERT_TRUE(decoded.placement.has_value());
  expect_same_placement(*decoded.placement, deepseek_placement(golden_problem()));
  EXPECT_EQ(eplb::phy2log_rows(*decoded.placement),
            (std::vector<std::vector<int>>{{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1},
                                           {7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1}}));
}

TEST(PlannerMessages, PolicyRefusalIsAnErrorReply) {
  PlanRequest request = golden_request(2);
  request.policy = "greedy";  // needs P == E
  const PlanReply reply = answer_plan_request(request);
  EXPECT_FALSE(reply.placement.has_value());
  EXPECT_FALSE(reply.error.empty());
  const PlanReply decoded = decode_plan_reply(encode_plan_reply(reply)).value();
  EXPECT_EQ(decoded.error, reply.error);
  EXPECT_FALSE(decoded.placement.has_value());
}

TEST(PlannerMessages, DecodersNameTheBadField) {
  Json bad = golden_json();
  bad["problem"]["weight"][1][3] = "x";
  EXPECT_EQ(decode_error(bad.dump()), "problem.weight[1][3]: expected a number >= 0, got \"x\"");
  bad = golden_json();
  bad["problem"]["weight"][1][3] = -5;
  EXPECT_EQ(decode_error(bad.dump()), "problem.weight[1][3]: must be a finite number >= 0, got -5");
  bad = golden_json();
  bad["problem"]["num_ranks"] = 5;
  EXPECT_EQ(decode_error(bad.dump()).rfind("problem.num_", 0), 0u);
  bad = golden_json();
  bad["problem"]["surprise"] = 1;
  EXPECT_EQ(decode_error(bad.dump()).rfind("problem.surprise: unknown field for the problem", 0), 0u);
  bad = golden_json();
  bad["request"] = 0;
  EXPECT_EQ(decode_error(bad.dump()), "request: must be in [1, 9223372036854775807], got 0");
  bad = golden_json();
  bad["policy"] = "oracle";
  EXPECT_EQ(decode_error(bad.dump()).rfind("policy: must be one of {", 0), 0u);
  bad = golden_json();
  bad.erase("step");
  EXPECT_EQ(decode_error(bad.dump()), "step: required integer in [0, 9223372036854775806] is missing");
  bad = golden_json();
  bad["type"] = "staged";
  EXPECT_EQ(decode_error(bad.dump()), "type: expected \"plan\", got \"staged\"");
  bad = golden_json();
  bad["problem"]["current"] = {{"phy2log", {{0, 1}}}, {"replica_index", {{0, 99}}}};
  EXPECT_EQ(decode_error(bad.dump()),
            "problem.current.replica_index[0][1]: must be below the 2 slots of the layer, got 99");
  EXPECT_EQ(decode_error("{\"type\": \"plan\", "), "body: not valid JSON (17 bytes)");
  EXPECT_EQ(decode_error("[1, 2]"), "body: expected a JSON object, got array");
  EXPECT_EQ(message_type("{\"type\": 3}").status().message(), "type: expected a string, got 3");
}

TEST(PlannerMessages, ReplyDecoderChecksThePlacement) {
  Json reply = Json::parse(encode_plan_reply(answer_plan_request(golden_request(1))));
  reply["phy2log"][0][0] = 11;  // expert 5 keeps one replica less, expert 11 one more: log2phy breaks
  const auto decoded = decode_plan_reply(reply.dump());
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  reply = Json::parse(encode_plan_reply(answer_plan_request(golden_request(1))));
  reply["error"] = "both";
  EXPECT_EQ(decode_plan_reply(reply.dump())
                .status()
                .message()
                .rfind("num_experts: unknown field for a placement message", 0),
            0u);
}

// `epsuite ref eplb` reads the same problem schema: its array form of `current` is still accepted.
TEST(EplbJson, CurrentAsPhy2logRows) {
  Json problem = eplb_problem_json(golden_problem());
  problem["current"] = eplb::phy2log_rows(deepseek_placement(golden_problem()));
  const eplb::EplbProblem read = read_eplb_problem(JsonFields(problem, "")).value();
  ASSERT_TRUE(read.current.has_value());
  EXPECT_EQ(eplb::phy2log_rows(*read.current), eplb::phy2log_rows(deepseek_placement(golden_problem())));
}

}  // namespace
}  // namespace eps::planner
