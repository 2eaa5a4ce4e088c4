// Transport conformance (SPEC 5.1-5.5 bit-exact against reference/dispatch, SPEC 5.7 robustness), for
// every registered transport selected by --transport x declared contract (layout and combine tree) x
// dtype x workload. Every rank checks its own outputs; the MPI-aware runner re-raises other ranks'
// failures on rank 0. Non-power-of-two R and R = 1 come from the rank counts ctest runs (1, 2, 3, 4, 8).
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "conformance/mpi_gtest.hpp"
#include "conformance/transport/problem.hpp"
#include "impls/transport/registry.hpp"

namespace eps::conformance {
namespace {

using dispatch::PayloadType;
using transport::CombineTree;
using transport::Layout;

// A layout and the combine tree that follows it (transport.hpp).
struct Contract {
  Layout layout;
  CombineTree tree;
};

constexpr Contract kContracts[] = {{Layout::kHtRankMajor, CombineTree::kHtRank},
                                   {Layout::kHtRankMajor, CombineTree::kHtTwoLevel},
                                   {Layout::kHtExpertMajor, CombineTree::kLlWeighted},
                                   {Layout::kLl, CombineTree::kLlWeighted}};
constexpr PayloadType kDtypes[] = {PayloadType::kBf16, PayloadType::kFp8};
// SPEC 2.3 generators and SPEC 5.7 scenarios: masked:0.6 gives tokens with all slots -1 (0.6^4 = 13%).
const char* const kWorkloads[] = {"uniform", "zipf:1.2",   "hot:0,0.5",       "all-to-one",
                                  "spread",  "masked:0.6", "zero-token-ranks"};
constexpr std::uint64_t kSeed = 0x7A45'0517;

struct Case {
  std::string transport;
  Contract contract;
  PayloadType dtype;
  std::string workload;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  std::string name =
      fmt::format("{}_{}_{}_{}_{}", info.param.transport, transport::layout_name(info.param.contract.layout),
                  transport::tree_name(info.param.contract.tree), transport::dtype_name(info.param.dtype),
                  info.param.workload);
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

// Evaluated when GoogleTest registers the tests (after --transport is parsed).
std::vector<Case> cases(bool every_workload) {
  std::vector<Case> out;
  for (const std::string& t : selected_transports()) {
    for (const Contract& c : kContracts) {
      for (PayloadType d : kDtypes) {
        if (!every_workload) {
          out.push_back({t, c, d, "uniform"});
          continue;
        }
        for (const char* w : kWorkloads) out.push_back({t, c, d, w});
      }
    }
  }
  return out;
}

// With the run's --fabric/--signal/--chaos (fabric transports); the others ignore them.
Result<std::unique_ptr<transport::Transport>> make(const std::string& name, const ProblemShape& shape) {
  transport::TransportConfig config = transport_config(shape, timeout_seconds());
  apply_fabric_selection(config);
  return transport::make_transport(name, config);
}

// A transport whose fabric cannot run here (kEnvironment at creation) is skipped, not failed.
#define EPS_MAKE_OR_SKIP(made)                                                       \
  EPS_SKIP_UNLESS((made).ok() || (made).status().code() != StatusCode::kEnvironment, \
                  (made).status().message());                                        \
  EPS_ASSERT_OK((made).status())

// Skips (or fails under --strict) a case whose contract the transport does not declare.
#define EPS_SKIP_UNLESS_DECLARED(caps, c)                                                                \
  EPS_SKIP_UNLESS((caps).supports((c).contract.layout),                                                  \
                  fmt::format("{} declares no {} dispatch", (c).transport,                               \
                              transport::layout_name((c).contract.layout)));                             \
  EPS_SKIP_UNLESS(                                                                                       \
      (caps).supports((c).contract.tree),                                                                \
      fmt::format("{} declares no {} combine", (c).transport, transport::tree_name((c).contract.tree))); \
  EPS_SKIP_UNLESS((caps).supports((c).dtype), fmt::format("{} declares no {} payloads", (c).transport,   \
                                                          transport::dtype_name((c).dtype)))

void expect_ok(const dispatch::CompareReport& report, std::string_view what) {
  EXPECT_TRUE(report.ok()) << what << ": " << report.to_string();
}

// One dispatch + combine, kept for checking after later rounds ran.
struct Round {
  Problem problem;
  DispatchBuffers buffers;
  std::unique_ptr<transport::DispatchHandle> handle;
  std::vector<bf16> expert_y;
  std::vector<bf16> out;
  std::vector<float> combined_weights;
};

Result<Round> start_round(transport::Transport& t, const Case& c, const ProblemShape& shape, int step) {
  EPS_ASSIGN_OR_RETURN(Problem problem,
                       Problem::make(shape, c.workload, mpi::rank(), kSeed, step, kSeed + 1000 + step));
  Round round{std::move(problem), DispatchBuffers(c.contract.layout, shape), nullptr, {}, {}, {}};
  EPS_ASSIGN_OR_RETURN(round.handle,
                       t.dispatch(c.contract.layout, round.problem.input(), round.buffers.view()));
  return round;
}

Status finish_round(transport::Transport& t, const Case& c, Round& round) {
  const ProblemShape& shape = round.problem.shape();
  const int tokens = round.problem.plan().num_tokens(mpi::rank());
  round.expert_y = expert_outputs(shape, mpi::rank(), round.buffers, round.handle->num_recv_rows());
  round.out.assign(static_cast<std::size_t>(tokens) * shape.hidden, bf16::from_bits(0x7fc1));  // NaN
  round.combined_weights.assign(static_cast<std::size_t>(tokens) * shape.top_k, std::nanf("1"));
  transport::CombineInput in{c.contract.tree, round.expert_y, {}, {}};
  if (c.contract.tree != CombineTree::kLlWeighted) {
    in.bias0 = round.problem.bias0();
    in.bias1 = round.problem.bias1();
  }
  return t.combine(*round.handle, in, {round.out, round.combined_weights});
}

void check_round(const Case& c, const Round& round, std::string_view label, bool ll_ordered) {
  const int rank = mpi::rank();
  expect_ok(check_layout(round.problem, rank, round.handle->layout()),
            fmt::format("{}: layout (SPEC 5.1)", label));
  expect_ok(check_dispatch(round.problem, rank, round.buffers, round.handle->num_recv_rows(), ll_ordered),
            fmt::format("{}: {} dispatch", label, transport::layout_name(c.contract.layout)));
  Result<dispatch::CompareReport> combined =
      check_combine(round.problem, rank, c.contract.tree, c.contract.tree != CombineTree::kLlWeighted,
                    round.out, round.combined_weights);
  ASSERT_TRUE(combined.ok()) << combined.status().message();
  expect_ok(*combined,
            fmt::format("{}: {} combine (SPEC 5.5)", label, transport::tree_name(c.contract.tree)));
}

class TransportContract : public testing::TestWithParam<Case> {};

// SPEC 5.1-5.5 on one workload; then a cached dispatch with new payloads (SPEC 5.2: bit-equal to fresh).
TEST_P(TransportContract, DispatchCombineAndCachedDispatch) {
  const Case& c = GetParam();
  const ProblemShape shape = default_shape(mpi::size(), c.workload, c.dtype);
  Result<std::unique_ptr<transport::Transport>> made = make(c.transport, shape);
  EPS_MAKE_OR_SKIP(made);
  transport::Transport& t = **made;
  EPS_SKIP_UNLESS_DECLARED(t.capabilities(), c);
  const bool ordered = t.capabilities().ll_ordered;

  Result<Round> round = start_round(t, c, shape, 0);
  EPS_ASSERT_OK(round.status());
  EPS_ASSERT_OK(finish_round(t, c, *round));
  check_round(c, *round, "fresh on " + t.describe(), ordered);

  EPS_SKIP_UNLESS(t.capabilities().cached_dispatch, c.transport + " declares no cached dispatch");
  Result<Problem> renewed = Problem::make(shape, c.workload, mpi::rank(), kSeed, 0, kSeed + 777);
  EPS_ASSERT_OK(renewed.status());
  DispatchBuffers cached(c.contract.layout, shape);
  EPS_ASSERT_OK(t.dispatch_cached(*round->handle, renewed->input(), cached.view()));
  expect_ok(check_dispatch(*renewed, mpi::rank(), cached, round->handle->num_recv_rows(), ordered),
            "cached dispatch with new payloads on " + t.describe());
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportContract, testing::ValuesIn(cases(true)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportContract);

class TransportRobustness : public testing::TestWithParam<Case> {};

// SPEC 5.7: 64 back-to-back dispatch -> combine rounds without a barrier, each with its own routing and
// payloads, all verified afterwards; then dispatch A, dispatch B, combine A, combine B.
TEST_P(TransportRobustness, BackToBackRoundsAndInterleaving) {
  const Case& c = GetParam();
  ProblemShape shape = default_shape(mpi::size(), c.workload, c.dtype);
  shape.max_tokens = 16;
  shape.alignment = 4;  // expert-major padding and aligned counts (SPEC 5.2 / 5.3)
  Result<std::unique_ptr<transport::Transport>> made = make(c.transport, shape);
  EPS_MAKE_OR_SKIP(made);
  transport::Transport& t = **made;
  EPS_SKIP_UNLESS_DECLARED(t.capabilities(), c);
  const bool ordered = t.capabilities().ll_ordered;

  constexpr int kRounds = 64;
  std::vector<Round> rounds;
  for (int step = 0; step < kRounds; ++step) {
    Result<Round> round = start_round(t, c, shape, step);
    EPS_ASSERT_OK(round.status());
    EPS_ASSERT_OK(finish_round(t, c, *round));
    rounds.push_back(std::move(round).value());
  }
  for (int step = 0; step < kRounds; ++step)
    check_round(c, rounds[step], fmt::format("round {} on {}", step, t.describe()), ordered);

  Result<Round> a = start_round(t, c, shape, kRounds);
  EPS_ASSERT_OK(a.status());
  Result<Round> b = start_round(t, c, shape, kRounds + 1);
  EPS_ASSERT_OK(b.status());
  EPS_ASSERT_OK(finish_round(t, c, *a));
  EPS_ASSERT_OK(finish_round(t, c, *b));
  check_round(c, *a, "interleaved A", ordered);
  check_round(c, *b, "interleaved B", ordered);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportRobustness, testing::ValuesIn(cases(false)), case_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportRobustness);

class TransportInput : public testing::TestWithParam<std::string> {};

// SPEC 5.4: T_r > T_max is an input error, never a silent overflow. Every rank passes too many tokens, so
// every rank fails alike before any communication.
TEST_P(TransportInput, RejectsMoreTokensThanTmax) {
  const ProblemShape shape = default_shape(mpi::size(), "uniform", PayloadType::kBf16);
  Result<std::unique_ptr<transport::Transport>> made = make(GetParam(), shape);
  EPS_MAKE_OR_SKIP(made);
  const int tokens = shape.max_tokens + 1;
  std::vector<std::byte> x(static_cast<std::size_t>(tokens) * 2 * shape.hidden);
  std::vector<int> idx(static_cast<std::size_t>(tokens) * shape.top_k, -1);
  std::vector<float> weights(idx.size(), 0.0f);
  DispatchBuffers buffers(Layout::kLl, shape);
  const Result<std::unique_ptr<transport::DispatchHandle>> handle =
      (*made)->dispatch(Layout::kLl, {tokens, x, {}, idx, weights}, buffers.view());
  ASSERT_FALSE(handle.ok());
  EXPECT_EQ(handle.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(handle.status().message().find("num_tokens: must be in [0, 64]"), std::string::npos)
      << handle.status().message();
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportInput, testing::ValuesIn(selected_transports()),
                         [](const testing::TestParamInfo<std::string>& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportInput);

// SPEC 6.3 negative control: fabric-order signalling trusts put order, which the chaos fabric does not keep,
// so 64 LL rounds over the selected fabric wrapped in chaos must produce wrong results that the checks
// catch. If they all pass, the chaos fabric has lost its teeth and this test fails.
TEST(NegativeControl, FabricOrderOnTheChaosFabricIsCaught) {
  bool direct_selected = false;
  for (const std::string& t : selected_transports()) direct_selected = direct_selected || t == "direct";
  EPS_SKIP_UNLESS(direct_selected, "the direct transport is not selected");
  EPS_SKIP_UNLESS(mpi::size() >= 2, "reordering between ranks needs at least two ranks");
  const Case c{"direct", {Layout::kLl, CombineTree::kLlWeighted}, PayloadType::kBf16, "uniform"};
  ProblemShape shape = default_shape(mpi::size(), c.workload, c.dtype);
  shape.max_tokens = 16;
  transport::TransportConfig config = transport_config(shape, timeout_seconds());
  apply_fabric_selection(config);
  config.signal = "fabric-order";
  config.chaos = "seed=1";
  config.allow_unsafe = true;
  Result<std::unique_ptr<transport::Transport>> made = transport::make_transport("direct", config);
  EPS_MAKE_OR_SKIP(made);
  std::unique_ptr<transport::Transport> t = std::move(made).value();
  const std::string described = t->describe();
  int wrong_rounds = 0;
  for (int step = 0; step < 64; ++step) {
    Result<Round> round = start_round(*t, c, shape, step);
    EPS_ASSERT_OK(round.status());
    EPS_ASSERT_OK(finish_round(*t, c, *round));
    const bool dispatch_ok =
        check_dispatch(round->problem, mpi::rank(), round->buffers, round->handle->num_recv_rows(), true)
            .ok();
    Result<dispatch::CompareReport> combined = check_combine(round->problem, mpi::rank(), c.contract.tree,
                                                             false, round->out, round->combined_weights);
    EPS_ASSERT_OK(combined.status());
    if (!dispatch_ok || !combined->ok()) ++wrong_rounds;
  }
  t.reset();  // teardown is collective: peers still completing late puts need this rank's progress
  Result<std::vector<int>> all = mpi::allgather_int(wrong_rounds, MPI_COMM_WORLD, test_deadline());
  EPS_ASSERT_OK(all.status());
  int total = 0;
  for (int n : *all) total += n;
  EXPECT_GT(total, 0) << "fabric-order over " << described
                      << " passed 64 rounds on every rank: the chaos fabric no longer reorders puts";
  if (mpi::is_root())
    std::printf("# negative control: %d wrong rounds over all ranks (expected > 0)\n", total);
}

}  // namespace
}  // namespace eps::conformance
