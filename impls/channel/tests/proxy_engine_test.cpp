// Proxy threads (docs/channel.md 7.1-7.3) against the immediate test fabric: every write reaches the fabric
// once and in FIFO order, the in-flight cap and QUIET hold puts back, backpressure is retried, BARRIER
// counts, quiet counts, an unsupported command stops the engine and releases waiting producers, bad configs
// are refused. ATOMIC commands become fabric atomic adds in FIFO order among the writes, count in flight and
// towards QUIET like them, and add up exactly; a fabric without atomics stops the engine saying so.
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
// An ATOMIC adding `value` to the 64-bit word `word` of the destination's region 0.
Command atomic(std::uint32_t destination, std::uint32_t word, std::uint32_t value) {
  return pack_command({CommandType::kAtomic, 0, 0, destination, value, 0, word * 8u});
}
Command of_type(CommandType type, std::uint32_t destination) {
  return pack_command({type, 0, 0, destination, 0, 0, 0});
}

CommandToPut numbered_puts() {
  return [](const Command& c, int) -> Result<fabric::PutOp> {
    return fabric::PutOp{static_cast<int>(c.destination()), 0, 0, 0, 0, c.bytes(), c.remote_offset(), 0};
  };
}

CommandToAtomic region_zero_atomics() {
  return [](const Command& c, int) -> Result<fabric::AtomicOp> { return atomic_of(c, 0); };
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

TEST(ProxyEngine, AnAtomicWithoutTranslationStopsTheEngineAndReleasesProducers) {
  ImmediateFabric fabric(1);
  ProxyEngineConfig config;
  config.fifo_capacity = 2;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts()).value();
  push(*engine, 0, of_type(CommandType::kAtomic, 0));
  EXPECT_TRUE(eventually([&] { return !engine->status().ok(); }));
  EXPECT_EQ(engine->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      engine->status().message().rfind("proxy: ATOMIC command, but this engine has no atomic translation "
                                       "(ProxyEngine::start without CommandToAtomic; FIFO 0",
                                       0),
      0u)
      << engine->status().message();
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

// Three destinations, each fed by its own producer with writes and atomics interleaved in a fixed pattern,
// the fabric pushing back every third try: per destination the fabric sees the writes and atomics exactly in
// FIFO order, and every word holds the sum of what was sent to it (computed here from the pattern).
TEST(ProxyEngine, AtomicsInterleavedWithWritesKeepFifoOrderAndAddUp) {
  constexpr int kDestinations = 3;
  constexpr std::uint32_t kEach = 1500, kWords = 7;
  ImmediateFabric fabric(kDestinations, 3);
  fabric.record = true;
  ASSERT_TRUE(fabric.allocate(kWords * 8).ok());
  ProxyEngineConfig config;
  config.fifos = kDestinations;
  config.threads = 2;
  config.fifo_capacity = 32;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts(), region_zero_atomics()).value();
  auto is_atomic = [](std::uint32_t i) { return i % 3 != 1; };  // A W A A W A ...
  auto value_of = [](int d, std::uint32_t i) {
    return (i * 2654435761u + static_cast<std::uint32_t>(d)) & 0xFFFFFFu;
  };
  std::vector<std::thread> producers;
  for (int d = 0; d < kDestinations; ++d) {
    producers.emplace_back([&, d] {
      FifoProducer p{engine->fifo(d)};
      for (std::uint32_t i = 0; i < kEach; ++i) {
        const auto dest = static_cast<std::uint32_t>(d);
        const Command c = is_atomic(i) ? atomic(dest, i % kWords, value_of(d, i)) : write(dest, i);
        ASSERT_TRUE(fifo_push_until(p, c, Deadline(30)).ok());
      }
    });
  }
  for (std::thread& t : producers) t.join();
  ASSERT_TRUE(engine->quiet(Deadline(30)).ok()) << engine->status().message();
  ASSERT_TRUE(engine->status().ok()) << engine->status().message();

  // The expected sums, from the pattern alone; every destination's atomics land in the one shared region.
  std::vector<std::uint64_t> expected(kWords, 0);
  std::int64_t atomics = 0;
  for (int d = 0; d < kDestinations; ++d) {
    for (std::uint32_t i = 0; i < kEach; ++i) {
      if (!is_atomic(i)) continue;
      expected[i % kWords] += value_of(d, i);
      ++atomics;
    }
  }
  EXPECT_EQ(fabric.atomics(), atomics);
  EXPECT_EQ(fabric.puts(), kDestinations * static_cast<std::int64_t>(kEach) - atomics);
  EXPECT_EQ(engine->puts_posted(), kDestinations * static_cast<std::int64_t>(kEach));
  for (std::uint32_t w = 0; w < kWords; ++w) EXPECT_EQ(fabric.word(0, w * 8), expected[w]) << "word " << w;

  // Per destination, the kinds in posting order follow the pattern, and the atomics' values too.
  std::vector<std::uint32_t> next(kDestinations, 0);
  for (const auto& [peer, kind] : fabric.recorded_sequence()) {
    std::uint32_t& i = next[static_cast<std::size_t>(peer)];
    ASSERT_EQ(kind, is_atomic(i) ? 'A' : 'P') << "destination " << peer << ", command " << i;
    ++i;
  }
  std::vector<std::uint32_t> nth(kDestinations, 0);
  for (const fabric::AtomicOp& op : fabric.recorded_atomics()) {
    std::uint32_t& i = nth[static_cast<std::size_t>(op.peer)];
    while (!is_atomic(i)) ++i;
    ASSERT_EQ(op.value, value_of(op.peer, i)) << "destination " << op.peer << ", command " << i;
    ASSERT_EQ(op.remote_offset, (i % kWords) * 8u);
    ASSERT_EQ(op.context, static_cast<std::uint64_t>(op.peer));  // the FIFO, set by the engine
    ++i;
  }
  EXPECT_TRUE(engine->stop().ok());
}

// Atomics count in flight like writes: with completions held, at most max_in_flight of them are posted, and
// a QUIET after them holds the later writes until their completions arrive.
TEST(ProxyEngine, AtomicsCountInFlightAndHoldQuiet) {
  ImmediateFabric fabric(1);
  ASSERT_TRUE(fabric.allocate(8).ok());
  fabric.hold();
  ProxyEngineConfig config;
  config.max_in_flight = 8;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts(), region_zero_atomics()).value();
  for (std::uint32_t i = 0; i < 3; ++i) push(*engine, 0, write(0, i));
  for (std::uint32_t i = 0; i < 10; ++i) push(*engine, 0, atomic(0, 0, i + 1));
  push(*engine, 0, of_type(CommandType::kQuiet, 0));
  push(*engine, 0, write(0, 3));
  EXPECT_TRUE(eventually([&] { return fabric.puts() + fabric.atomics() == 8; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(fabric.puts(), 3);
  EXPECT_EQ(fabric.atomics(), 5);
  EXPECT_EQ(engine->quiet(Deadline(0.05)).code(), StatusCode::kEnvironment);
  fabric.release();
  EXPECT_TRUE(engine->quiet(Deadline(10)).ok()) << engine->status().message();
  EXPECT_EQ(fabric.atomics(), 10);
  EXPECT_EQ(fabric.puts(), 4);
  EXPECT_EQ(fabric.word(0, 0), 55u);  // 1 + 2 + ... + 10
}

// ProxyEngine::quiet racing with producers that keep pushing atomics (and QUIET commands): each quiet that
// returns covers every command pushed before it began, so the counter already holds at least that many adds.
TEST(ProxyEngine, QuietRacingWithAtomicsCoversEveryEarlierAdd) {
  constexpr int kProducers = 3;
  constexpr std::uint32_t kEach = 3000;
  ImmediateFabric fabric(1, 4);
  ASSERT_TRUE(fabric.allocate(8).ok());
  ProxyEngineConfig config;
  config.fifo_capacity = 64;
  auto engine = ProxyEngine::start(config, fabric, numbered_puts(), region_zero_atomics()).value();
  std::atomic<std::uint64_t> pushed{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      FifoProducer p{engine->fifo(0)};
      for (std::uint32_t i = 0; i < kEach; ++i) {
        const Command c = i % 100 == 99 ? of_type(CommandType::kQuiet, 0) : atomic(0, 0, 1);
        ASSERT_TRUE(fifo_push_until(p, c, Deadline(30)).ok());
        if (c.type() == CommandType::kAtomic) pushed.fetch_add(1);
      }
      (void)t;
    });
  }
  int checks = 0;
  std::thread checker([&] {
    while (!done.load()) {
      const std::uint64_t before = pushed.load();
      ASSERT_TRUE(engine->quiet(Deadline(30)).ok()) << engine->status().message();
      const std::uint64_t seen = fabric.word(0, 0);
      ASSERT_GE(seen, before) << "quiet returned before earlier atomics were applied";
      ++checks;
    }
  });
  for (std::thread& t : producers) t.join();
  done.store(true);
  checker.join();
  ASSERT_TRUE(engine->quiet(Deadline(30)).ok());
  const std::uint64_t adds = kProducers * (kEach - kEach / 100);
  EXPECT_EQ(pushed.load(), adds);
  EXPECT_EQ(fabric.word(0, 0), adds);
  EXPECT_GT(checks, 0);
}

// A fabric without remote atomics: the first ATOMIC stops the engine with kUnavailable naming the fabric
// and its reason, and the writes before it were posted.
TEST(ProxyEngine, AnAtomicOnAFabricWithoutAtomicsStopsWithTheReason) {
  ImmediateFabric fabric(1, 0, /*atomics=*/false);
  ASSERT_TRUE(fabric.allocate(8).ok());
  auto engine = ProxyEngine::start({}, fabric, numbered_puts(), region_zero_atomics()).value();
  push(*engine, 0, write(0, 0));
  push(*engine, 0, atomic(0, 0, 5));
  EXPECT_TRUE(eventually([&] { return !engine->status().ok(); }));
  EXPECT_EQ(engine->status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(
      engine->status().message().rfind(
          "proxy: ATOMIC command: no remote atomics on immediate: made without atomics (test) (FIFO 0", 0),
      0u)
      << engine->status().message();
  EXPECT_EQ(fabric.puts(), 1);
  EXPECT_EQ(fabric.word(0, 0), 0u);
}

// The fabric's argument checks reach the engine's error: an ATOMIC whose remote offset is not a multiple
// of 8.
TEST(ProxyEngine, AnUnalignedAtomicStopsTheEngineNamingTheField) {
  ImmediateFabric fabric(1);
  ASSERT_TRUE(fabric.allocate(64).ok());
  auto engine = ProxyEngine::start({}, fabric, numbered_puts(), region_zero_atomics()).value();
  push(*engine, 0, pack_command({CommandType::kAtomic, 0, 0, 0, 1, 0, 12}));
  EXPECT_TRUE(eventually([&] { return !engine->status().ok(); }));
  EXPECT_EQ(engine->status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(engine->status().message().find("atomic.remote_offset"), std::string::npos)
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
