// Staging through host memory (transport.hpp "Memory", docs/devices.md): a transport whose device memory the
// host cannot address copies the caller's buffers to host memory and back around every call. A `cpu` device
// that claims to be such a device takes that path here; every output is checked bit-exactly against
// reference/dispatch, as the conformance suite checks the unstaged path.
#include <gtest/gtest.h>

#include <cmath>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/problem/tests/round_trip.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/registry.hpp"

namespace eps::problem {
namespace {

using transport::CombineTree;
using transport::Layout;

struct Case {
  const char* transport;
  Layout layout;
  CombineTree tree;
  dispatch::PayloadType dtype;
};

class Staging : public ::testing::TestWithParam<Case> {};

// A `cpu` device whose memory the transports treat as unaddressable, so that they stage through host memory.
std::unique_ptr<device::Device> make_staged_device() {
  device::CpuDeviceOptions options;
  options.host_accessible = false;
  return value_or_throw(device::make_cpu_device(options));
}

// Transport `name` with its buffers in `staged` memory (mirrored there around every call).
std::unique_ptr<transport::Transport> make_staged_transport(const char* name, const ProblemShape& shape,
                                                            device::Device& staged) {
  transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  config.device = &staged;
  config.memory = transport::MemoryKind::kDevice;
  Result<std::unique_ptr<transport::Transport>> made = transport::make_transport(name, config, {});
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return nullptr;
  EXPECT_EQ((*made)->staging(), "host");
  return mirror_through_device(std::move(made).value(), staged);
}

TEST_P(Staging, EveryOutputMatchesTheReference) {
  const Case& c = GetParam();
  std::unique_ptr<device::Device> staged = make_staged_device();
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", c.dtype);
  std::unique_ptr<transport::Transport> t = make_staged_transport(c.transport, shape, *staged);
  ASSERT_NE(t, nullptr);
  const RoundTrip trip = expect_round_trip(*t, shape, c.layout, c.tree);
  ASSERT_NE(trip.handle, nullptr);
  const int rank = mpi::rank();

  Result<Problem> renewed = Problem::make(shape, "masked:0.6", rank, 41, 0, 777);
  EPS_ASSERT_OK(renewed.status());
  DispatchBuffers cached(c.layout, shape);
  EPS_ASSERT_OK(t->dispatch_cached(*trip.handle, renewed->input(), cached.view()));
  const dispatch::MismatchReport again = check_dispatch(*renewed, rank, cached, trip.rows, true);
  EXPECT_TRUE(again.ok()) << again.to_string();
}

constexpr Case kCases[] = {
    {"mpi", Layout::kHtRankMajor, CombineTree::kHtRank, dispatch::PayloadType::kFp8},
    {"mpi", Layout::kHtExpertMajor, CombineTree::kLlWeighted, dispatch::PayloadType::kBf16},
    {"mpi", Layout::kLl, CombineTree::kLlWeighted, dispatch::PayloadType::kFp8},
    {"direct", Layout::kHtRankMajor, CombineTree::kHtTwoLevel, dispatch::PayloadType::kBf16},
    {"direct", Layout::kLl, CombineTree::kLlWeighted, dispatch::PayloadType::kFp8},
};

INSTANTIATE_TEST_SUITE_P(Transports, Staging, ::testing::ValuesIn(kCases), [](const auto& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.index);
});

// docs/dispatch.md 5.7: handles are independent, staged too. A cached dispatch along a rank-major handle made
// before an LL dispatch stages outputs of the sizes it is given, not those the LL dispatch left behind.
TEST(StagedHandles, CachedDispatchAfterADispatchOfAnotherLayout) {
  std::unique_ptr<device::Device> staged = make_staged_device();
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", dispatch::PayloadType::kBf16);
  std::unique_ptr<transport::Transport> t = make_staged_transport("direct", shape, *staged);
  ASSERT_NE(t, nullptr);
  const RoundTrip ht = expect_round_trip(*t, shape, Layout::kHtRankMajor, CombineTree::kHtRank);
  const RoundTrip ll = expect_round_trip(*t, shape, Layout::kLl, CombineTree::kLlWeighted);
  ASSERT_NE(ht.handle, nullptr);
  ASSERT_NE(ll.handle, nullptr);
  Result<Problem> renewed = Problem::make(shape, "masked:0.6", mpi::rank(), 41, 0, 777);
  EPS_ASSERT_OK(renewed.status());
  DispatchBuffers cached(Layout::kHtRankMajor, shape);
  EPS_ASSERT_OK(t->dispatch_cached(*ht.handle, renewed->input(), cached.view()));
  const dispatch::MismatchReport again = check_dispatch(*renewed, mpi::rank(), cached, ht.rows, true);
  EXPECT_TRUE(again.ok()) << again.to_string();
}

}  // namespace
}  // namespace eps::problem
