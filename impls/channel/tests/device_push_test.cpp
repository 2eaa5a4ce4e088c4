// Device-side producers (docs/channel.md 7.1, 7.3): the fifo_push kernel on the `cpu` device with several
// host threads standing in for warps, racing for the slots of one FIFO while a proxy thread drains it.
#include <gtest/gtest.h>

#include <thread>

#include "impls/channel/fifo_host.hpp"
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

// A device whose memory the host cannot address (as a GPU's) gets the claim counter in its own memory: the
// producers' atomics never touch the host-visible header, and the FIFO still delivers every command once.
TEST(DevicePush, ProducersOfADeviceTheHostCannotAddressClaimInDeviceMemory) {
  device::CpuDeviceOptions options;
  options.threads = 4;
  options.host_accessible = false;
  std::unique_ptr<device::Device> gpu_like = device::make_cpu_device(options).value();
  std::unique_ptr<CommandFifo> fifo = CommandFifo::create(16, gpu_like.get()).value();
  EXPECT_NE(fifo->view().head, &fifo->view().header->head);
  EXPECT_EQ(fifo->claimed().value(), 0u);
  EXPECT_TRUE(device::testing::check_fifo_push(*gpu_like));

  constexpr std::uint64_t kCommands = 40;
  FifoProducer producer{fifo->view(), 0};
  std::thread proxy([&] {
    FifoConsumer consumer(fifo->view());
    Command c;
    for (std::uint64_t popped = 0; popped < kCommands;) {
      if (consumer.try_pop(c)) {
        ++popped;
      } else {
        consumer.publish_tail();
        std::this_thread::yield();
      }
    }
    consumer.publish_tail();
  });
  const Command command = pack_command({CommandType::kWrite, 1, 0, 0, 64, 0, 0});
  for (std::uint64_t i = 0; i < kCommands; ++i) {
    // On this device the producer's counter is host memory in fact, so a host thread may stand in for
    // the kernel here; on a GPU only kernels push into such a FIFO.
    ASSERT_EQ(fifo_push(producer, command, [] { return true; }), PushOutcome::kPushed);
  }
  proxy.join();
  EXPECT_EQ(fifo->claimed().value(), kCommands);
  EXPECT_EQ(fifo->view().header->head, 0u) << "the host-visible header's counter was used";
  EXPECT_EQ(fifo->view().header->tail, kCommands);
}

}  // namespace
}  // namespace eps::channel
