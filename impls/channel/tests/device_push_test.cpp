// Device-side producers (docs/channel.md 7.1, 7.3): the fifo_push kernel on the `cpu` device with several
// host threads standing in for warps, racing for the slots of one FIFO while a proxy thread drains it.
#include <gtest/gtest.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/tests/kernel_checks.hpp"

namespace eps::channel {
namespace {

TEST(DevicePush, FourProducerThreadsRaceForOneFifo) {
  device::CpuDeviceOptions options;
  options.threads = 4;
  std::unique_ptr<device::Device> cpu = device::make_cpu_device(options).value();
  EXPECT_TRUE(device::testing::check_fifo_push(*cpu));
}

}  // namespace
}  // namespace eps::channel
