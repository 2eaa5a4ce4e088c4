// The command FIFO under adversarial schedules (docs/channel.md 7.3), built twice by ctest: as is and under
// ThreadSanitizer. Every command carries its producer and sequence number in its offsets, so the consumer can
// check that nothing is lost, duplicated or reordered within a producer.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "impls/channel/fifo_host.hpp"

namespace eps::channel {
namespace {

Command numbered(std::uint32_t producer, std::uint32_t sequence, CommandType type = CommandType::kWrite) {
  return pack_command({type, 0, 0, producer, 16, producer, sequence});
}

// Pops until `expected` commands arrived (or the deadline); checks per-producer order; returns the count per
// producer. `pause_every`/`pause` make a slow proxy.
std::vector<std::uint32_t> drain(CommandFifo& fifo, std::uint64_t expected, int producers,
                                 int pause_every = 0, std::chrono::microseconds pause = {}) {
  FifoConsumer consumer(fifo.view());
  std::vector<std::uint32_t> next(static_cast<std::size_t>(producers), 0);
  const Deadline deadline(60);
  std::uint64_t popped = 0;
  while (popped < expected && !deadline.expired()) {
    Command c;
    if (!consumer.try_pop(c)) {
      consumer.publish_tail();
      std::this_thread::yield();
      continue;
    }
    const std::uint32_t p = c.local_offset();
    EXPECT_LT(p, static_cast<std::uint32_t>(producers));
    if (p >= static_cast<std::uint32_t>(producers)) break;
    EXPECT_EQ(c.remote_offset(), next[p]) << "producer " << p << " out of order or lost";
    next[p] = c.remote_offset() + 1;
    ++popped;
    if (popped % 8 == 0) consumer.publish_tail();
    if (pause_every > 0 && popped % static_cast<std::uint64_t>(pause_every) == 0)
      std::this_thread::sleep_for(pause);
  }
  consumer.publish_tail();
  EXPECT_EQ(popped, expected);
  return next;
}

TEST(FifoRace, OneProducerWrapsAroundManyTimes) {
  auto fifo = CommandFifo::create(8).value();
  constexpr std::uint32_t kCommands = 100000;  // 12500 laps of an 8-slot ring
  std::thread producer([&] {
    FifoProducer p{fifo->view()};
    for (std::uint32_t i = 0; i < kCommands; ++i)
      ASSERT_TRUE(fifo_push_until(p, numbered(0, i), Deadline(30)).ok());
  });
  const std::vector<std::uint32_t> got = drain(*fifo, kCommands, 1);
  producer.join();
  EXPECT_EQ(got[0], kCommands);
  EXPECT_EQ(fifo->view().header->head, kCommands);
}

TEST(FifoRace, FullRingWithASlowProxyMakesProducersWaitAndDropsNothing) {
  auto fifo = CommandFifo::create(4).value();
  constexpr int kProducers = 3;
  constexpr std::uint32_t kEach = 400;
  std::vector<std::thread> producers;
  for (int t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      FifoProducer p{fifo->view()};
      for (std::uint32_t i = 0; i < kEach; ++i) {
        ASSERT_TRUE(fifo_push_until(p, numbered(static_cast<std::uint32_t>(t), i), Deadline(30)).ok());
      }
    });
  }
  const std::vector<std::uint32_t> got =
      drain(*fifo, kProducers * kEach, kProducers, 16, std::chrono::microseconds(200));
  for (std::thread& t : producers) t.join();
  for (std::uint32_t n : got) EXPECT_EQ(n, kEach);
}

TEST(FifoRace, ManyProducersRaceForSlots) {
  auto fifo = CommandFifo::create(64).value();
  constexpr int kProducers = 8;
  constexpr std::uint32_t kEach = 20000;
  std::atomic<bool> go{false};
  std::vector<std::thread> producers;
  for (int t = 0; t < kProducers; ++t) {
    producers.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      FifoProducer p{fifo->view()};
      for (std::uint32_t i = 0; i < kEach; ++i) {
        ASSERT_TRUE(fifo_push_until(p, numbered(static_cast<std::uint32_t>(t), i), Deadline(30)).ok());
      }
    });
  }
  go = true;
  const std::vector<std::uint32_t> got = drain(*fifo, kProducers * kEach, kProducers);
  for (std::thread& t : producers) t.join();
  for (std::uint32_t n : got) EXPECT_EQ(n, kEach);
}

// A QUIET pushed by one producer after its writes pops after all of them, whatever the other producers do.
TEST(FifoRace, QuietRacingWithWritesPopsAfterItsProducersWrites) {
  auto fifo = CommandFifo::create(16).value();
  constexpr std::uint32_t kWrites = 5000;
  std::thread quieter([&] {
    FifoProducer p{fifo->view()};
    for (std::uint32_t i = 0; i < kWrites; ++i)
      ASSERT_TRUE(fifo_push_until(p, numbered(0, i), Deadline(30)).ok());
    ASSERT_TRUE(fifo_push_until(p, numbered(0, kWrites, CommandType::kQuiet), Deadline(30)).ok());
  });
  std::thread writer([&] {
    FifoProducer p{fifo->view()};
    for (std::uint32_t i = 0; i < kWrites; ++i)
      ASSERT_TRUE(fifo_push_until(p, numbered(1, i), Deadline(30)).ok());
  });
  FifoConsumer consumer(fifo->view());
  std::uint32_t zero_writes_before_quiet = 0;
  bool quiet_seen = false;
  std::uint64_t popped = 0;
  const Deadline deadline(60);
  while (popped < 2 * kWrites + 1 && !deadline.expired()) {
    Command c;
    if (!consumer.try_pop(c)) {
      consumer.publish_tail();
      continue;
    }
    ++popped;
    if (c.type() == CommandType::kQuiet) {
      quiet_seen = true;
      EXPECT_EQ(zero_writes_before_quiet, kWrites);
    } else if (c.local_offset() == 0) {
      EXPECT_FALSE(quiet_seen);
      ++zero_writes_before_quiet;
    }
  }
  consumer.publish_tail();
  quieter.join();
  writer.join();
  EXPECT_TRUE(quiet_seen);
  EXPECT_EQ(popped, 2 * kWrites + 1);
}

// No proxy drains the FIFO: a producer on a full ring waits until its deadline and says what it waited for; a
// closed FIFO ends the wait at once.
TEST(FifoRace, ProducerOnAFullRingWithADeadProxyTimesOutWithADiagnostic) {
  auto fifo = CommandFifo::create(2).value();
  FifoProducer p{fifo->view()};
  ASSERT_TRUE(fifo_push_until(p, numbered(0, 0), Deadline(1)).ok());
  ASSERT_TRUE(fifo_push_until(p, numbered(0, 1), Deadline(1)).ok());
  const auto start = std::chrono::steady_clock::now();
  const Status waited = fifo_push_until(p, numbered(0, 2), Deadline(0.2));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(200));
  EXPECT_EQ(waited.code(), StatusCode::kEnvironment);
  EXPECT_EQ(
      waited.message(),
      "timed out after 0.2 s waiting for a free slot: the proxy stopped draining the FIFO head 3, tail 0, "
      "capacity 2");
  auto closed = CommandFifo::create(2).value();
  FifoProducer q{closed->view()};
  ASSERT_TRUE(fifo_push_until(q, numbered(0, 0), Deadline(1)).ok());
  ASSERT_TRUE(fifo_push_until(q, numbered(0, 1), Deadline(1)).ok());
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    closed->close();
  });
  const Status ended = fifo_push_until(q, numbered(0, 2), Deadline(30));
  closer.join();
  EXPECT_EQ(ended.code(), StatusCode::kUnavailable);
}

TEST(FifoRace, CapacityMustBeAPowerOfTwo) {
  EXPECT_EQ(CommandFifo::create(6).status().message(),
            "capacity: must be a power of two in [2, 16777216], got 6");
  EXPECT_EQ(CommandFifo::create(1).status().message(),
            "capacity: must be a power of two in [2, 16777216], got 1");
}

}  // namespace
}  // namespace eps::channel
