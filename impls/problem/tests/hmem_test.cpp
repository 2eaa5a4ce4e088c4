// Device memory registered with the NIC (docs/devices.md "Memory kinds", libfabric FI_HMEM): a `cpu` device
// that declares its memory FI_HMEM_SYSTEM memory makes the libfabric fabric place its regions in that
// device's memory and register them with fi_mr_regattr and iface FI_HMEM_SYSTEM (libfabric's shm provider
// offers FI_HMEM here). The fabric's puts land bit-exactly, and the direct and proxy transports over it pass
// the dispatch and combine checks against reference/dispatch, as the conformance suite checks them.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/problem/tests/round_trip.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/registry.hpp"

namespace eps::problem {
namespace {

constexpr std::size_t kRegionBytes = 3 * 4096 + 100;

std::unique_ptr<device::Device> system_hmem_device() {
  device::CpuDeviceOptions options;
  options.system_hmem = true;
  return value_or_throw(device::make_cpu_device(options));
}

Result<std::unique_ptr<fabric::Fabric>> libfabric_shm(device::Device* memory_device) {
  fabric::FabricConfig config{MPI_COMM_WORLD, "libfabric:shm", "", mpitest::timeout_seconds(), "", {}};
  config.memory_device = memory_device;
  return fabric::make_plain_fabric(config);
}

// The byte rank `source` writes at `offset`: a pattern no two ranks or offsets share mod 251.
std::byte pattern(int source, std::size_t offset) {
  return static_cast<std::byte>((static_cast<std::size_t>(source) * 97 + offset * 31 + 7) % 251);
}

TEST(HmemFabric, RegionsInSystemHmemReceivePutsBitExactly) {
  std::unique_ptr<device::Device> device = system_hmem_device();
  Result<std::unique_ptr<fabric::Fabric>> made = libfabric_shm(device.get());
  EPS_ASSERT_OK(made.status());
  fabric::Fabric& f = **made;
  EXPECT_EQ(f.memory_registration(), "fi-hmem:system");
  EXPECT_NE(f.describe().find("memory fi-hmem:system"), std::string::npos) << f.describe();
  Result<fabric::Region> send = f.allocate(kRegionBytes);
  Result<fabric::Region> recv = f.allocate(kRegionBytes);
  EPS_ASSERT_OK(send.status());
  EPS_ASSERT_OK(recv.status());
  for (std::byte b : recv->local) ASSERT_EQ(b, std::byte{0}) << "regions start zero-filled";
  const int rank = f.rank();
  const int size = f.size();
  for (std::size_t i = 0; i < kRegionBytes; ++i) send->local[i] = pattern(rank, i);
  const int peer = (rank + 1) % size;
  fabric::PutOp op{peer, send->id, 0, recv->id, 0, kRegionBytes, std::uint32_t{5}, 1};
  const Deadline deadline(mpitest::timeout_seconds());
  Result<bool> posted = false;
  while ((posted = f.try_put(op)).ok() && !*posted) {
    std::vector<fabric::Completion> drain(8);
    EPS_ASSERT_OK(f.poll(drain).status());
  }
  EPS_ASSERT_OK(posted.status());
  EPS_ASSERT_OK(f.quiet(deadline));
  EPS_ASSERT_OK(f.barrier(deadline));
  const int source = (rank + size - 1) % size;
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kRegionBytes; ++i) wrong += recv->local[i] != pattern(source, i) ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "bytes from rank " << source << " differ";
}

TEST(HmemFabric, HostMemoryDevicesAndNoDeviceRegisterAsHost) {
  std::unique_ptr<device::Device> plain = value_or_throw(device::make_cpu_device());
  for (device::Device* memory_device : {plain.get(), static_cast<device::Device*>(nullptr)}) {
    Result<std::unique_ptr<fabric::Fabric>> made = libfabric_shm(memory_device);
    EPS_ASSERT_OK(made.status());
    EXPECT_EQ((*made)->memory_registration(), "none");
  }
}

struct Case {
  const char* transport;
  transport::Layout layout;
  transport::CombineTree tree;
  dispatch::PayloadType dtype;
};

class HmemTransport : public ::testing::TestWithParam<Case> {};

TEST_P(HmemTransport, EveryOutputMatchesTheReference) {
  const Case& c = GetParam();
  std::unique_ptr<device::Device> device = system_hmem_device();
  const ProblemShape shape = default_shape(mpi::size(), "masked:0.6", c.dtype);
  transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  config.device = device.get();
  config.memory = transport::MemoryKind::kDevice;
  fabric::FabricSelection selection;
  selection.fabric = "libfabric:shm";
  EXPECT_EQ(transport::with_region_memory(config, selection).memory_device, device.get());
  Result<std::unique_ptr<transport::Transport>> made =
      transport::make_transport(c.transport, config, selection);
  EPS_ASSERT_OK(made.status());
  transport::Transport& t = **made;
  EXPECT_NE(t.describe().find("memory fi-hmem:system"), std::string::npos) << t.describe();
  EXPECT_EQ(t.staging(), "fi-hmem:system");  // what results carry in the case identity
  const RoundTrip trip = expect_round_trip(t, shape, c.layout, c.tree);
  EXPECT_NE(trip.handle, nullptr);
}

constexpr Case kCases[] = {
    {"direct", transport::Layout::kHtRankMajor, transport::CombineTree::kHtRank, dispatch::PayloadType::kFp8},
    {"direct", transport::Layout::kLl, transport::CombineTree::kLlWeighted, dispatch::PayloadType::kBf16},
    {"proxy", transport::Layout::kHtRankMajor, transport::CombineTree::kHtTwoLevel,
     dispatch::PayloadType::kBf16},
};

INSTANTIATE_TEST_SUITE_P(Transports, HmemTransport, ::testing::ValuesIn(kCases), [](const auto& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.index);
});

}  // namespace
}  // namespace eps::problem
