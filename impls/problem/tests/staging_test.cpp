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

TEST_P(Staging, EveryOutputMatchesTheReference) {
  const Case& c = GetParam();
  device::CpuDeviceOptions options;
  options.host_accessible = false;
  std::unique_ptr<device::Device> staged = value_or_throw(device::make_cpu_device(options));
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", c.dtype);
  transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  config.device = staged.get();
  config.memory = transport::MemoryKind::kDevice;
  Result<std::unique_ptr<transport::Transport>> made = transport::make_transport(c.transport, config, {});
  EPS_ASSERT_OK(made.status());
  ASSERT_EQ((*made)->staging(), "host");
  std::unique_ptr<transport::Transport> t = mirror_through_device(std::move(made).value(), *staged);
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

}  // namespace
}  // namespace eps::problem
