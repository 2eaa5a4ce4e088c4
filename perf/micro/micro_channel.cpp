// The command FIFO (docs/channel.md 7.3) against two yardsticks on the same 16-byte command and the same
// 1024-slot capacity, in one run: boost::lockfree::spsc_queue (single producer only) and a mutex-guarded
// ring. Each iteration moves kCommands commands from `producers` threads to the benchmark thread, which pops
// them as a proxy does (the FIFO publishes its tail every 32 pops); `items_per_second` is commands per
// second. Every wait yields the core (these host threads share the cores; on a GPU the producers are warps
// that just spin).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <boost/lockfree/spsc_queue.hpp>

#include "impls/channel/fifo_host.hpp"
#include "impls/channel/proxy_engine.hpp"
#include "impls/channel/tests/immediate_fabric.hpp"

namespace eps::channel {
namespace {

constexpr std::uint32_t kCapacity = 1024;
constexpr std::int64_t kCommands = 1 << 20;

Command command_of(std::int64_t i) {
  return pack_command({CommandType::kWrite, 0, 0, 1, 4096, static_cast<std::uint64_t>(i) & 0xFFFFFFFFu, 0});
}

// Runs `produce(thread, count)` on `producers` threads (kCommands in all) and `consume(total)` here, per
// iteration.
template <typename Produce, typename Consume>
void transfer(benchmark::State& state, int producers, Produce produce, Consume consume) {
  for (auto _ : state) {
    std::vector<std::thread> threads;
    for (int t = 0; t < producers; ++t) threads.emplace_back([&, t] { produce(t, kCommands / producers); });
    consume(kCommands);
    for (std::thread& t : threads) t.join();
  }
  state.SetItemsProcessed(state.iterations() * kCommands);
}

void BM_CommandFifo(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  std::unique_ptr<CommandFifo> fifo = CommandFifo::create(kCapacity).value();
  FifoConsumer consumer(fifo->view());
  transfer(
      state, producers,
      [&](int, std::int64_t count) {
        FifoProducer p{fifo->view()};
        for (std::int64_t i = 0; i < count; ++i) {
          fifo_push(p, command_of(i), [] {
            std::this_thread::yield();  // host threads share cores here; warps would just spin
            return true;
          });
        }
      },
      [&](std::int64_t total) {
        std::int64_t popped = 0;
        std::uint64_t sum = 0;
        while (popped < total) {
          Command c;
          if (consumer.try_pop(c)) {
            sum += c.local_offset();
            if (++popped % 32 == 0) consumer.publish_tail();
          } else {
            consumer.publish_tail();
            std::this_thread::yield();
          }
        }
        consumer.publish_tail();
        benchmark::DoNotOptimize(sum);
      });
}
BENCHMARK(BM_CommandFifo)->Arg(1)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_BoostSpscQueue(benchmark::State& state) {
  boost::lockfree::spsc_queue<Command, boost::lockfree::capacity<kCapacity>> queue;
  transfer(
      state, 1,
      [&](int, std::int64_t count) {
        for (std::int64_t i = 0; i < count; ++i) {
          const Command c = command_of(i);
          while (!queue.push(c)) std::this_thread::yield();
        }
      },
      [&](std::int64_t total) {
        std::int64_t popped = 0;
        std::uint64_t sum = 0;
        Command c;
        while (popped < total) {
          if (queue.pop(c)) {
            sum += c.local_offset();
            ++popped;
          } else {
            std::this_thread::yield();
          }
        }
        benchmark::DoNotOptimize(sum);
      });
}
BENCHMARK(BM_BoostSpscQueue)->UseRealTime()->Unit(benchmark::kMillisecond);

// A ring guarded by one mutex, producers waiting on a condition variable when it is full.
class MutexQueue {
 public:
  void push(const Command& c) {
    std::unique_lock lock(mutex_);
    not_full_.wait(lock, [&] { return count_ < kCapacity; });
    ring_[(first_ + count_) % kCapacity] = c;
    ++count_;
  }
  bool try_pop(Command& c) {
    {
      std::lock_guard lock(mutex_);
      if (count_ == 0) return false;
      c = ring_[first_];
      first_ = (first_ + 1) % kCapacity;
      --count_;
    }
    not_full_.notify_one();
    return true;
  }

 private:
  std::mutex mutex_;
  std::condition_variable not_full_;
  std::vector<Command> ring_ = std::vector<Command>(kCapacity);
  std::uint32_t first_ = 0;
  std::uint32_t count_ = 0;
};

void BM_MutexQueue(benchmark::State& state) {
  const int producers = static_cast<int>(state.range(0));
  MutexQueue queue;
  transfer(
      state, producers,
      [&](int, std::int64_t count) {
        for (std::int64_t i = 0; i < count; ++i) queue.push(command_of(i));
      },
      [&](std::int64_t total) {
        std::int64_t popped = 0;
        std::uint64_t sum = 0;
        Command c;
        while (popped < total) {
          if (queue.try_pop(c)) {
            sum += c.local_offset();
            ++popped;
          } else {
            std::this_thread::yield();
          }
        }
        benchmark::DoNotOptimize(sum);
      });
}
BENCHMARK(BM_MutexQueue)->Arg(1)->Arg(4)->UseRealTime()->Unit(benchmark::kMillisecond);

// Proxy posting rate (docs/channel.md 7): one proxy thread drains one FIFO into a fabric whose puts complete
// at once, the benchmark thread producing; items_per_second = commands posted per second by that proxy
// thread.
void BM_ProxyPosting(benchmark::State& state) {
  testing::ImmediateFabric fabric(1);
  ProxyEngineConfig config;
  config.threads = 1;
  config.fifo_capacity = kCapacity;
  config.max_in_flight = 1024;
  std::unique_ptr<ProxyEngine> engine =
      ProxyEngine::start(config, fabric, [](const Command& c, int) -> Result<fabric::PutOp> {
        return fabric::PutOp{0, 0, c.local_offset(), 0, c.remote_offset(), c.bytes(), std::nullopt, 0};
      }).value();
  FifoProducer producer{engine->fifo(0)};
  for (auto _ : state) {
    for (std::int64_t i = 0; i < kCommands; ++i) {
      fifo_push(producer, command_of(i), [] {
        std::this_thread::yield();
        return true;
      });
    }
    if (!engine->quiet(Deadline(60)).ok()) state.SkipWithError("proxy quiet failed");
  }
  state.SetItemsProcessed(state.iterations() * kCommands);
}
BENCHMARK(BM_ProxyPosting)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps::channel
