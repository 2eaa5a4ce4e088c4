// GPU-resident `direct` (docs/devices.md 12.9) on the `cpu-isolated` device, whose device memory faults on
// any host access (12.5): the transport's calls read and write the caller's device buffers and the ipc
// fabric's device regions with kernels and device copies only. Every output is checked bit-exactly against
// reference/dispatch (round_trip.hpp), and the device's copy ledger (12.7), read around the transport's own
// calls, shows that only index bytes cross between host and device there, while the staged path (`mpi`, which
// stages on purpose) copies every token byte. A fabric whose regions are host memory is unavailable, not
// silently staged.
#include <gtest/gtest.h>

#include <memory>
#include <string>

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

std::unique_ptr<device::Device> make_isolated_device() {
  device::CpuDeviceOptions options;
  options.isolated = true;
  return value_or_throw(device::make_cpu_device(options));
}

// Forwards to `inner` and adds the device's host<->device copies made inside each call to `ledger`, so that
// the device mirror's own copies (the test's buffers in and out) are not counted.
class LedgerProbe final : public transport::Transport {
 public:
  LedgerProbe(std::unique_ptr<transport::Transport> inner, device::Device& device, device::CopyLedger& ledger)
      : inner_(std::move(inner)), device_(device), ledger_(ledger) {}

  std::string_view name() const override { return inner_->name(); }
  const transport::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const transport::TransportConfig& config() const override { return inner_->config(); }
  std::string_view staging() const override { return inner_->staging(); }
  transport::WireBytes wire_bytes() const override { return inner_->wire_bytes(); }

  Result<std::unique_ptr<transport::DispatchHandle>> dispatch(Layout layout,
                                                              const transport::DispatchInput& in,
                                                              const transport::DispatchOutput& out) override {
    const device::CopyLedger before = device_.copy_ledger();
    auto made = inner_->dispatch(layout, in, out);
    count(before);
    return made;
  }
  Status dispatch_cached(const transport::DispatchHandle& handle, const transport::DispatchInput& in,
                         const transport::DispatchOutput& out) override {
    const device::CopyLedger before = device_.copy_ledger();
    const Status status = inner_->dispatch_cached(handle, in, out);
    count(before);
    return status;
  }
  Status combine(const transport::DispatchHandle& handle, const transport::CombineInput& in,
                 const transport::CombineOutput& out) override {
    const device::CopyLedger before = device_.copy_ledger();
    const Status status = inner_->combine(handle, in, out);
    count(before);
    return status;
  }

 private:
  void count(const device::CopyLedger& before) {
    const device::CopyLedger after = device_.copy_ledger();
    ledger_.host_to_device_copies += after.host_to_device_copies - before.host_to_device_copies;
    ledger_.host_to_device_bytes += after.host_to_device_bytes - before.host_to_device_bytes;
    ledger_.device_to_host_copies += after.device_to_host_copies - before.device_to_host_copies;
    ledger_.device_to_host_bytes += after.device_to_host_bytes - before.device_to_host_bytes;
  }

  std::unique_ptr<transport::Transport> inner_;
  device::Device& device_;
  device::CopyLedger& ledger_;
};

struct Case {
  const char* transport;
  const char* fabric;
  Layout layout;
  CombineTree tree;
  dispatch::PayloadType dtype;
  const char* staging;  // the results' `staging` the transport must report
};

class Resident : public ::testing::TestWithParam<Case> {};

// A round trip, then a cached dispatch; `ledger` gets the transport's own host<->device copies. Returns the
// token bytes those calls moved (what a staged path copies at least once): the payload rows sent and
// received, the expert outputs returned and the combined rows.
std::uint64_t run_calls(const Case& c, device::Device& device, device::CopyLedger& ledger) {
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", c.dtype);
  transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  config.device = &device;
  config.memory = transport::MemoryKind::kDevice;
  fabric::FabricSelection selection;
  selection.fabric = c.fabric;
  Result<std::unique_ptr<transport::Transport>> made =
      transport::make_transport(c.transport, config, selection);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return 0;
  EXPECT_EQ((*made)->staging(), c.staging);
  std::unique_ptr<transport::Transport> t =
      mirror_through_device(std::make_unique<LedgerProbe>(std::move(made).value(), device, ledger), device);
  const RoundTrip trip = expect_round_trip(*t, shape, c.layout, c.tree);
  EXPECT_NE(trip.handle, nullptr);
  if (trip.handle == nullptr) return 0;
  const int rank = mpi::rank();
  Result<Problem> renewed = Problem::make(shape, "masked:0.6", rank, 41, 0, 777);
  EXPECT_TRUE(renewed.ok());
  if (!renewed.ok()) return 0;
  DispatchBuffers cached(c.layout, shape);
  const Status status = t->dispatch_cached(*trip.handle, renewed->input(), cached.view());
  EXPECT_TRUE(status.ok()) << status.message();
  const dispatch::MismatchReport again = check_dispatch(*renewed, rank, cached, trip.rows, true);
  EXPECT_TRUE(again.ok()) << again.to_string();
  const auto tokens = static_cast<std::uint64_t>(renewed->plan().num_tokens(rank));
  const auto rows = static_cast<std::uint64_t>(trip.rows);
  const std::uint64_t row = dispatch::payload_row_bytes(c.dtype, shape.hidden);
  const std::uint64_t bf16_row = 2 * static_cast<std::uint64_t>(shape.hidden);
  return 2 * (tokens * row + rows * row) + rows * bf16_row + tokens * bf16_row;
}

TEST_P(Resident, OutputsMatchTheReferenceAndOnlyIndexBytesCross) {
  const Case& c = GetParam();
  std::unique_ptr<device::Device> device = make_isolated_device();
  device::CopyLedger ledger;
  const std::uint64_t token_bytes = run_calls(c, *device, ledger);
  ASSERT_GT(token_bytes, 0u) << "this rank moves no token data: the check below would prove nothing";
  // Per rank: the index bytes (routing, row lists, headers, counts) stay far below the token bytes; a path
  // that copied the token data through host memory would reach them.
  EXPECT_LT(ledger.bytes() * 4, token_bytes) << "host<->device bytes " << ledger.bytes() << " in "
                                             << ledger.copies() << " copies; token bytes " << token_bytes;
}

// The staged baseline on the same device: every token byte crosses (the ledger's nonzero side).
TEST(ResidentBaseline, StagedMpiCopiesEveryTokenByte) {
  std::unique_ptr<device::Device> device = make_isolated_device();
  device::CopyLedger ledger;
  const Case c{"mpi", "auto", Layout::kHtRankMajor, CombineTree::kHtRank, dispatch::PayloadType::kBf16,
               "host"};
  const std::uint64_t token_bytes = run_calls(c, *device, ledger);
  EXPECT_GE(ledger.bytes(), token_bytes) << ledger.copies() << " copies";
}

// No silent staging: a fabric whose regions are host memory cannot carry GPU-resident direct.
TEST(ResidentRefusal, HostRegionFabricIsUnavailableNamingTheFabric) {
  std::unique_ptr<device::Device> device = make_isolated_device();
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", dispatch::PayloadType::kBf16);
  transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  config.device = device.get();
  config.memory = transport::MemoryKind::kDevice;
  fabric::FabricSelection selection;
  selection.fabric = "shm";
  Result<std::unique_ptr<transport::Transport>> made = transport::make_transport("direct", config, selection);
  ASSERT_FALSE(made.ok());
  EXPECT_EQ(made.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(made.status().message().find("fabric shm"), std::string::npos) << made.status().message();
  EXPECT_NE(made.status().message().find("cpu-isolated"), std::string::npos) << made.status().message();
}

constexpr Case kCases[] = {
    {"direct", "ipc", Layout::kHtRankMajor, CombineTree::kHtTwoLevel, dispatch::PayloadType::kBf16, "none"},
    {"direct", "ipc", Layout::kHtRankMajor, CombineTree::kHtRank, dispatch::PayloadType::kFp8, "none"},
    {"direct", "auto", Layout::kLl, CombineTree::kLlWeighted, dispatch::PayloadType::kFp8, "none"},
    {"direct", "ipc", Layout::kLl, CombineTree::kLlWeighted, dispatch::PayloadType::kBf16, "none"},
};

INSTANTIATE_TEST_SUITE_P(Transports, Resident, ::testing::ValuesIn(kCases), [](const auto& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.index);
});

}  // namespace
}  // namespace eps::problem
