// Proxy threads (docs/channel.md 7.1-7.3) against the immediate test fabric: every write reaches the fabric
// once and in FIFO order, the in-flight cap and QUIET hold puts back, backpressure is retried, BARRIER
// counts, quiet counts, an unsupported command stops the engine and releases waiting producers, bad configs
// are refused.
#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "impls/channel/proxy_engine.hpp"
#include "impls/channel/tests/immediate_fabric.hpp"

namespace eps::channel {
namespace {

using testing::ImmediateFabric;

// A write to `destination` whose remote offset numbers it; the put carries that number as its immediate.
Command write(std::uint32_t destination, std::uint32_t number) {
  return pack_command({CommandType::kWrite, 0, 0, destination, 64, 0, number});
}
Command of_type(CommandType type, std::uint32_t destination) {
  return pack_command({type, 0, 0, destination, 0, 0, 0});
}

CommandToPut numbered_puts() {
  return [](const Command& c, int) -> Result<fabric::PutOp> {
    return fabric::PutOp{static_cast<int>(c.destination()), 0, 0, 0, 0, c.bytes(), c.remote_offset(), 0};
  };
}

void push(ProxyEngine& engine, int fifo, const Command& c) {
  FifoProducer p{engine.fifo(fifo)};
  ASSERT_TRUE(fifo_push_until(p, c, Deadline(10)).ok());
}

// Waits (bounded) until `condition` holds.
template <typename F>
bool eventually(F condition) {
  const Deadline deadline(10);
  while (!condition()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

TEST(ProxyEngine, EveryWriteReachesTheFabricOnceInFifoOrder) {
  ImmediateFabric fabric(6, 3);  // every third try pushed back
  fabric.record = true;
  ProxyEngineConfig config;
  config.fifos = 6;
  config.fifo_capacity = 16;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts()).value();
  EXPECT_EQ(engine->threads(), 4);
  constexpr std::uint32_t kEach = 2000;
  std::vector<std::thread> producers;
  for (int d = 0; d < 6; ++d) {
    producers.emplace_back([&, d] {
      FifoProducer p{engine->fifo(d)};
      for (std::uint32_t i = 0; i < kEach; ++i) {
        ASSERT_TRUE(fifo_push_until(p, write(static_cast<std::uint32_t>(d), i), Deadline(30)).ok());
      }
    });
  }
  for (std::thread& t : producers) t.join();
  ASSERT_TRUE(engine->quiet(Deadline(30)).ok());
  EXPECT_EQ(fabric.puts(), 6 * kEach);
  EXPECT_EQ(engine->puts_posted(), 6 * kEach);
  std::vector<std::uint32_t> next(6, 0);
  for (const fabric::PutOp& op : fabric.recorded()) {
    ASSERT_EQ(*op.imm, next[static_cast<std::size_t>(op.peer)]) << "destination " << op.peer;
    ++next[static_cast<std::size_t>(op.peer)];
  }
  // Remote completions come back in arrival order (the immediate fabric delivers them in posting order).
  const std::vector<std::uint32_t> remote = engine->take_remote();
  EXPECT_EQ(remote.size(), static_cast<std::size_t>(6 * kEach));
  EXPECT_TRUE(engine->stop().ok());
}

// A put the fabric pushes back is retried as made: to_put (which may hand out sequence numbers) runs once per
// command.
TEST(ProxyEngine, BackpressureRetriesThePutWithoutMakingItAgain) {
  ImmediateFabric fabric(1, 2);  // every second try pushed back
  std::atomic<int> made{0};
  fabric.record = true;
  auto engine = ProxyEngine::start({}, fabric, [&made](const Command& c, int) -> Result<fabric::PutOp> {
                  return fabric::PutOp{0, 0, 0, 0, 0, c.bytes(), static_cast<std::uint32_t>(made++), 0};
                }).value();
  for (std::uint32_t i = 0; i < 500; ++i) push(*engine, 0, write(0, i));
  ASSERT_TRUE(engine->quiet(Deadline(10)).ok());
  EXPECT_EQ(made.load(), 500);
  const std::vector<fabric::PutOp> puts = fabric.recorded();
  ASSERT_EQ(puts.size(), 500u);
  for (std::uint32_t i = 0; i < 500; ++i) EXPECT_EQ(*puts[i].imm, i);
}

TEST(ProxyEngine, InFlightCapHoldsPutsUntilCompletions) {
  ImmediateFabric fabric(1);
  fabric.hold();
  ProxyEngineConfig config;
  config.max_in_flight = 8;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts()).value();
  for (std::uint32_t i = 0; i < 100; ++i) push(*engine, 0, write(0, i));
  EXPECT_TRUE(eventually([&] { return fabric.puts() == 8; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fabric.puts(), 8);  // the cap: no ninth put without a completion
  const Status early = engine->quiet(Deadline(0.05));
  EXPECT_EQ(early.code(), StatusCode::kEnvironment);
  EXPECT_EQ(
      early.message().rfind("proxy quiet timed out after 0.05 s: FIFO 0 (destination 0, proxy thread 0): 100 "
                            "commands claimed, ",
                            0),
      0u)
      << early.message();
  fabric.release();
  EXPECT_TRUE(engine->quiet(Deadline(10)).ok());
  EXPECT_EQ(fabric.puts(), 100);
}

TEST(ProxyEngine, QuietHoldsLaterCommandsUntilEarlierPutsCompleted) {
  ImmediateFabric fabric(1);
  fabric.hold();
  auto engine = ProxyEngine::start({}, fabric, numbered_puts()).value();
  for (std::uint32_t i = 0; i < 4; ++i) push(*engine, 0, write(0, i));
  push(*engine, 0, of_type(CommandType::kQuiet, 0));
  for (std::uint32_t i = 4; i < 8; ++i) push(*engine, 0, write(0, i));
  EXPECT_TRUE(eventually([&] { return fabric.puts() == 4; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fabric.puts(), 4);
  fabric.release();
  EXPECT_TRUE(engine->quiet(Deadline(10)).ok());
  EXPECT_EQ(fabric.puts(), 8);
}

TEST(ProxyEngine, BarrierWaitsForEveryFifoOfItsThread) {
  ImmediateFabric fabric(2);
  fabric.hold();
  ProxyEngineConfig config;
  config.fifos = 2;
  config.threads = 1;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts()).value();
  push(*engine, 1, write(1, 0));
  EXPECT_TRUE(eventually([&] { return fabric.puts() == 1; }));
  push(*engine, 0, of_type(CommandType::kBarrier, 0));
  push(*engine, 0, write(0, 0));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(engine->barriers_passed(), 0);  // FIFO 1's put is still in flight
  EXPECT_EQ(fabric.puts(), 1);
  fabric.release();
  EXPECT_TRUE(engine->quiet(Deadline(10)).ok());
  EXPECT_EQ(engine->barriers_passed(), 1);
  EXPECT_EQ(fabric.puts(), 2);
}

TEST(ProxyEngine, AnUnsupportedCommandStopsTheEngineAndReleasesProducers) {
  ImmediateFabric fabric(1);
  ProxyEngineConfig config;
  config.fifo_capacity = 2;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts()).value();
  push(*engine, 0, of_type(CommandType::kAtomic, 0));
  EXPECT_TRUE(eventually([&] { return !engine->status().ok(); }));
  EXPECT_EQ(engine->status().code(), StatusCode::kUnavailable);
  EXPECT_NE(engine->status().message().find("command type 2 is not supported"), std::string::npos);
  FifoProducer p{engine->fifo(0)};
  Status last;
  for (int i = 0; i < 4 && last.ok(); ++i) last = fifo_push_until(p, write(0, 0), Deadline(10));
  EXPECT_EQ(last.code(), StatusCode::kUnavailable);  // closed: no producer waits for a dead proxy
  EXPECT_EQ(engine->quiet(Deadline(1)).code(), StatusCode::kUnavailable);
}

TEST(ProxyEngine, ABadPutStopsTheEngineWithItsReason) {
  ImmediateFabric fabric(1);
  auto engine = ProxyEngine::start({}, fabric, [](const Command&, int) -> Result<fabric::PutOp> {
                  return invalid_argument("local_offset", "beyond the region");
                }).value();
  push(*engine, 0, write(0, 0));
  EXPECT_TRUE(eventually([&] { return !engine->status().ok(); }));
  EXPECT_EQ(engine->status().message().rfind("proxy: local_offset: beyond the region (FIFO 0", 0), 0u)
      << engine->status().message();
}

TEST(ProxyEngine, ConfigIsChecked) {
  ImmediateFabric fabric(1);
  ProxyEngineConfig config;
  config.threads = 0;
  EXPECT_EQ(ProxyEngine::start(config, fabric, numbered_puts()).status().message(),
            "proxy-threads: must be in [1, 64], got 0");
  config = {};
  config.fifo_capacity = 3;
  EXPECT_EQ(ProxyEngine::start(config, fabric, numbered_puts()).status().message(),
            "capacity: must be a power of two in [2, 16777216], got 3");
}

}  // namespace
}  // namespace eps::channel
