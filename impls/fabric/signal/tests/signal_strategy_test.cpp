// docs/fabrics.md 6.2 signal strategies driven without a fabric: the test plays the fabric, delivering a
// sender's immediates to a receiver in adversarial orders, and checks that a stream completes exactly when
// every one of its puts has arrived (never earlier), across sequence-number wrap.
#include "impls/fabric/signal/signal_strategy.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "impls/fabric/signal/imm_codec.hpp"

// Every byte this test binary allocates through operator new, so that a test can bound what a strategy keeps.
namespace {
std::atomic<std::size_t> g_new_bytes{0};
}  // namespace

void* operator new(std::size_t bytes) {
  g_new_bytes += bytes;
  if (void* p = std::malloc(bytes == 0 ? 1 : bytes)) return p;
  throw std::bad_alloc();
}
// GCC, seeing these inlined after a new-expression, takes the free() for a mismatch; they are a pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace eps::fabric {
namespace {

std::unique_ptr<SignalStrategy> make(std::string_view name, const SignalShape& shape, int rank,
                                     bool ordered = false) {
  Result<std::unique_ptr<SignalStrategy>> s = make_signal_strategy(name, ordered, false, shape, rank);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

struct Put {
  std::uint32_t imm = 0;
  bool signal = false;
};

// One operation's stream from `sender` to its peer 1: `data` data puts on `channels`, then the signal.
std::vector<Put> stream(SignalStrategy& sender, int parity, int data, int channels,
                        std::vector<std::int32_t>& record) {
  std::vector<Put> puts;
  record.assign(static_cast<std::size_t>(channels), 0);
  for (int i = 0; i < data; ++i) {
    const int channel = i % channels;
    const int tokens = 1 + i % 3;
    record[static_cast<std::size_t>(channel)] += tokens;
    Result<std::optional<std::uint32_t>> imm = sender.data_imm(1, parity, channel, tokens);
    EXPECT_TRUE(imm.ok()) << imm.status().message();
    if (imm.ok() && imm->has_value()) puts.push_back({**imm, false});
  }
  Result<std::uint32_t> signal = sender.signal_imm(1, parity);
  EXPECT_TRUE(signal.ok());
  puts.push_back({*signal, true});
  return puts;
}

// Two operations in flight at once (the most the protocol allows), their immediates shuffled together;
// after each delivery the receiver must call the stream complete iff all of its puts were delivered (and,
// for imm-seq, whose signal covers every earlier put of the pair, also all puts of the earlier operation).
void run_shuffled(std::string_view name, int seq_bits, int operations, int max_puts) {
  const bool cumulative = name == "imm-seq";
  const SignalShape shape{2, 3, 8, max_puts, seq_bits};
  auto sender = make(name, shape, 0);
  auto receiver = make(name, shape, 1);
  ASSERT_TRUE(sender && receiver);
  std::mt19937 rng(1234);
  std::vector<std::vector<Put>> ops(static_cast<std::size_t>(operations));
  std::vector<std::vector<std::int32_t>> records(static_cast<std::size_t>(operations));
  for (int op = 0; op < operations; ++op) {
    const int data = static_cast<int>(rng() % static_cast<unsigned>(max_puts + 1));
    ops[static_cast<std::size_t>(op)] =
        stream(*sender, op & 1, data, shape.channels, records[static_cast<std::size_t>(op)]);
  }
  for (int op = 0; op < operations; op += 2) {
    // Deliver operations op and op + 1 interleaved; op + 1 may finish first.
    struct Tagged {
      int op;
      Put put;
    };
    std::vector<Tagged> pending;
    std::vector<int> left(2, 0);
    for (int j = 0; j < 2 && op + j < operations; ++j) {
      for (const Put& p : ops[static_cast<std::size_t>(op + j)]) pending.push_back({op + j, p});
      left[static_cast<std::size_t>(j)] = static_cast<int>(ops[static_cast<std::size_t>(op + j)].size());
    }
    std::shuffle(pending.begin(), pending.end(), rng);
    for (const Tagged& t : pending) {
      ASSERT_TRUE(receiver->on_remote(t.put.imm).ok()) << "op " << t.op;
      --left[static_cast<std::size_t>(t.op - op)];
      for (int j = 0; j < 2 && op + j < operations; ++j) {
        const bool complete =
            receiver->stream_complete(0, (op + j) & 1, records[static_cast<std::size_t>(op + j)]);
        const bool delivered =
            left[static_cast<std::size_t>(j)] == 0 && (!cumulative || j == 0 || left[0] == 0);
        ASSERT_EQ(complete, delivered) << name << " op " << op + j;
      }
    }
    for (int j = 0; j < 2 && op + j < operations; ++j) receiver->retire(0, (op + j) & 1);
  }
}

TEST(ImmSeq, CompletesExactlyWhenEveryPutArrivedAcrossSequenceWrap) {
  // seq_bits 5: 32 numbers, window 16 > 2 x (6 + 1); 16 x window = 256 operations wrap the numbers many
  // times.
  run_shuffled("imm-seq", 5, 16 * 16, 6);
}

TEST(ImmSeq, WindowsOfSeveralWordsWrapAcrossWordBoundaries) {
  // seq_bits 8: window 128 slots (two 64-bit words of the received bitmap) > 2 x (40 + 1); 300 operations
  // of up to 41 puts wrap the 256 numbers many times, so held numbers straddle the word boundaries.
  run_shuffled("imm-seq", 8, 300, 40);
}

TEST(ImmSeq, WidestNumbersAtSixtyFourRanksOnlyCostTheSendingPeers) {
  // 23 bits and 64 ranks: a window of 2^22 slots per peer. The receiver keeps one only for peers that
  // send (fuzz/regressions/fuzz_imm: a byte per slot for every rank once took 256 MiB at setup).
  const SignalShape shape{64, 1, 8, 2, 23};
  const std::size_t before_setup = g_new_bytes;
  auto receiver = make("imm-seq", shape, 5);
  ASSERT_TRUE(receiver);
  EXPECT_LT(g_new_bytes - before_setup, std::size_t{64} << 10) << "bytes allocated by the setup";
  const std::size_t before_two_peers = g_new_bytes;
  for (const int source : {0, 63}) {
    ASSERT_TRUE(receiver->on_remote(*encode_imm({ImmKind::kData, 0, source, 1})).ok());   // held
    EXPECT_FALSE(receiver->on_remote(*encode_imm({ImmKind::kData, 0, source, 1})).ok());  // twice
    ASSERT_TRUE(receiver->on_remote(*encode_imm({ImmKind::kData, 0, source, 0})).ok());
    ASSERT_TRUE(receiver->on_remote(*encode_imm({ImmKind::kSignal, 0, source, 2})).ok());
    EXPECT_TRUE(receiver->stream_complete(source, 0, {}));
    // One beyond the window of 2^22 numbers past the prefix 3.
    EXPECT_FALSE(receiver->on_remote(*encode_imm({ImmKind::kData, 0, source, 3 + (1u << 22)})).ok());
  }
  // Two windows of 2^22 bits (512 KiB each) and the error messages.
  EXPECT_LT(g_new_bytes - before_two_peers, std::size_t{1100} << 10) << "bytes allocated for two peers";
}

TEST(RecvCount, CompletesExactlyWhenEveryTokenArrived) { run_shuffled("recv-count", 16, 200, 6); }

TEST(ImmSeq, DuplicateAndOutOfWindowNumbersAreErrors) {
  const SignalShape shape{2, 1, 8, 2, 4};  // window 8
  auto sender = make("imm-seq", shape, 0);
  auto receiver = make("imm-seq", shape, 1);
  const std::uint32_t first = **sender->data_imm(1, 0, 0, 1);
  ASSERT_TRUE(receiver->on_remote(first).ok());
  const std::uint32_t second = **sender->data_imm(1, 0, 0, 1);
  const std::uint32_t third = **sender->data_imm(1, 0, 0, 1);
  ASSERT_TRUE(receiver->on_remote(third).ok());  // out of order, inside the window
  const Status again = receiver->on_remote(third);
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("twice"), std::string::npos) << again.message();
  ASSERT_TRUE(receiver->on_remote(second).ok());
  // prefix is now 3; number 3 + 8 = 11 is one beyond the window.
  const Status beyond = receiver->on_remote(*encode_imm({ImmKind::kData, 0, 0, 11}));
  EXPECT_FALSE(beyond.ok());
  EXPECT_NE(beyond.message().find("outside its window"), std::string::npos) << beyond.message();
  // An old number (behind the prefix) is also outside the window: a duplicate of an already retired put.
  EXPECT_FALSE(receiver->on_remote(first).ok());
}

TEST(SignalOnly, FabricOrderTrustsTheSignalAloneSenderBarrierWaitsOnTheSender) {
  const SignalShape shape{2, 1, 8, 4};
  auto order = make("fabric-order", shape, 1, /*ordered=*/true);
  auto barrier = make("sender-barrier", shape, 1);
  for (SignalStrategy* s : {order.get(), barrier.get()}) {
    EXPECT_FALSE((*s->data_imm(0, 0, 0, 3)).has_value()) << s->name();
    EXPECT_FALSE(s->stream_complete(0, 1, {}));
    ASSERT_TRUE(s->on_remote(*encode_imm({ImmKind::kSignal, 1, 0, 0})).ok());
    EXPECT_TRUE(s->stream_complete(0, 1, {}));
    EXPECT_FALSE(s->stream_complete(0, 0, {}));  // the other parity is untouched
    EXPECT_FALSE(s->on_remote(*encode_imm({ImmKind::kSignal, 1, 0, 0})).ok()) << "second signal";
    s->retire(0, 1);
    EXPECT_FALSE(s->stream_complete(0, 1, {}));
  }
  EXPECT_FALSE(order->signal_after_local_completion());
  EXPECT_TRUE(barrier->signal_after_local_completion());
}

// docs/fabrics.md 6.2: the last data put of a stream may carry the signal only where the signal alone means
// "every earlier put of the stream is placed" and may leave with the data.
TEST(LastDataPutMaySignal, OnlyFabricOrderAndImmSeq) {
  const SignalShape shape{2, 2, 8, 4};
  EXPECT_TRUE(make("fabric-order", shape, 0, /*ordered=*/true)->last_data_put_may_signal());
  EXPECT_TRUE(make("imm-seq", shape, 0)->last_data_put_may_signal());
  EXPECT_FALSE(make("sender-barrier", shape, 0)->last_data_put_may_signal());
  EXPECT_FALSE(make("recv-count", shape, 0)->last_data_put_may_signal());
}

// imm-seq with the signal's number on the stream's last data put: the signal arriving first (the put's
// bytes placed) still waits for every earlier data put of the stream.
TEST(ImmSeq, ASignalOnTheLastDataPutWaitsForTheEarlierOnes) {
  const SignalShape shape{2, 1, 8, 4};
  auto sender = make("imm-seq", shape, 0);
  auto receiver = make("imm-seq", shape, 1);
  const std::uint32_t first = **sender->data_imm(1, 0, 0, 2);
  const std::uint32_t second = **sender->data_imm(1, 0, 0, 2);
  const std::uint32_t last_with_signal = *sender->signal_imm(1, 0);
  ASSERT_TRUE(receiver->on_remote(last_with_signal).ok());
  EXPECT_TRUE(receiver->signal_arrived(0, 0));
  EXPECT_FALSE(receiver->stream_complete(0, 0, {}));
  ASSERT_TRUE(receiver->on_remote(second).ok());
  EXPECT_FALSE(receiver->stream_complete(0, 0, {}));
  ASSERT_TRUE(receiver->on_remote(first).ok());
  EXPECT_TRUE(receiver->stream_complete(0, 0, {}));
}

TEST(MakeSignalStrategy, RefusesUnsafeAndOutOfRangeSetups) {
  const SignalShape ok{4, 8, 64, 16};
  const auto refused = make_signal_strategy("fabric-order", false, false, ok, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("fabric-order needs an ordered fabric"), std::string::npos);
  EXPECT_TRUE(make_signal_strategy("fabric-order", false, true, ok, 0).ok()) << "--allow-unsafe";
  EXPECT_EQ((*make_signal_strategy("auto", true, false, ok, 0))->name(), "fabric-order");
  EXPECT_EQ((*make_signal_strategy("auto", false, false, ok, 0))->name(), "imm-seq");
  EXPECT_FALSE(make_signal_strategy("carrier-pigeon", true, false, ok, 0).ok());

  SignalShape ranks = ok;
  ranks.ranks = 64;
  EXPECT_TRUE(make_signal_strategy("imm-seq", false, false, ranks, 63).ok());
  ranks.ranks = 65;
  const auto too_many = make_signal_strategy("sender-barrier", false, false, ranks, 0);
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("at most 64 ranks, got 65"), std::string::npos);

  SignalShape channels = ok;
  channels.channels = 1024;
  EXPECT_TRUE(make_signal_strategy("recv-count", false, false, channels, 0).ok());
  channels.channels = 1025;
  EXPECT_FALSE(make_signal_strategy("recv-count", false, false, channels, 0).ok());

  SignalShape tokens = ok;
  tokens.max_tokens_per_put = 8191;
  EXPECT_TRUE(make_signal_strategy("recv-count", false, false, tokens, 0).ok());
  tokens.max_tokens_per_put = 8192;
  EXPECT_FALSE(make_signal_strategy("recv-count", false, false, tokens, 0).ok());

  SignalShape window = ok;  // 16 puts + signal, two operations: 34 in flight
  window.seq_bits = 7;      // window 64
  EXPECT_TRUE(make_signal_strategy("imm-seq", false, false, window, 0).ok());
  window.seq_bits = 6;  // window 32 <= 34
  const auto small = make_signal_strategy("imm-seq", false, false, window, 0);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("imm-seq window 32"), std::string::npos)
      << small.status().message();
}

}  // namespace
}  // namespace eps::fabric
