// The chaos decorator (impls/fabric/chaos/chaos_fabric.hpp, docs/fabrics.md 6.3) over an in-process recording
// fabric: what reaches the inner fabric (order, chunks, when the immediate-carrying chunk goes), what the
// caller gets back (every completion once, local only after every chunk, remote after placement), and the
// knobs (empty polls, backpressure, release spread over several calls, quiet flushing). No MPI: the inner
// fabric is one rank putting to itself with synchronous placement.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "impls/fabric/chaos/chaos_fabric.hpp"

namespace eps::fabric {
namespace {

// One rank, ordered, placement at post time; records every put it is handed.
class RecordingFabric final : public Fabric {
 public:
  struct Posted {
    PutOp op;
    std::size_t local_completions_before = 0;  // inner local completions polled before this post
  };
  std::string name() const override { return "recording"; }
  std::string describe() const override { return "recording (in-process)"; }
  bool ordered() const override { return true; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  FabricLimits limits() const override { return FabricLimits{}; }
  Result<Region> allocate(std::size_t bytes) override {
    memory_.emplace_back(bytes, std::byte{0});
    return Region{static_cast<int>(memory_.size()) - 1, memory_.back()};
  }
  Result<Region> adopt(std::span<std::byte> memory) override {
    return invalid_argument("adopt", "the recording fabric owns its memory ({} bytes offered)",
                            memory.size());
  }
  Status validate(const PutOp& op) const override {
    if (op.peer != 0) return out_of_range("put.peer", 0, 0, op.peer);
    if (op.bytes > kMaxPutBytes) return invalid_argument("put.bytes", "too large");
    return Status();
  }
  Result<bool> try_put(const PutOp& op) override {
    EPS_RETURN_IF_ERROR(validate(op));
    if (refuse_) return false;
    std::memmove(memory_[static_cast<std::size_t>(op.remote_region)].data() + op.remote_offset,
                 memory_[static_cast<std::size_t>(op.local_region)].data() + op.local_offset, op.bytes);
    posted_.push_back(Posted{op, polled_locals_});
    pending_.push_back(Completion{CompletionKind::kLocal, op.context, 0});
    if (op.imm) pending_.push_back(Completion{CompletionKind::kRemote, 0, *op.imm});
    return true;
  }
  Status atomic_support() const override { return Status(); }
  Status validate(const AtomicOp& op) const override {
    if (op.peer != 0) return out_of_range("atomic.peer", 0, 0, op.peer);
    if (op.remote_offset % kAtomicBytes != 0) return invalid_argument("atomic.remote_offset", "unaligned");
    return Status();
  }
  // Applies the add at once and records it in the posting sequence (as a put of 8 bytes with the atomic's
  // context and no immediate, plus its value in `atomic_values_`).
  Result<bool> try_atomic_add(const AtomicOp& op) override {
    EPS_RETURN_IF_ERROR(validate(op));
    if (refuse_) return false;
    std::byte* word = memory_[static_cast<std::size_t>(op.remote_region)].data() + op.remote_offset;
    std::uint64_t value = 0;
    std::memcpy(&value, word, sizeof value);
    value += op.value;
    std::memcpy(word, &value, sizeof value);
    posted_.push_back(Posted{
        PutOp{0, -1, 0, op.remote_region, op.remote_offset, kAtomicBytes, {}, op.context}, polled_locals_});
    atomic_values_.push_back(op.value);
    pending_.push_back(Completion{CompletionKind::kLocal, op.context, 0});
    return true;
  }
  Result<std::size_t> poll(std::span<Completion> out) override {
    std::size_t n = 0;
    while (n < out.size() && !pending_.empty()) {
      out[n] = pending_.front();
      if (out[n].kind == CompletionKind::kLocal) ++polled_locals_;
      pending_.erase(pending_.begin());
      ++n;
    }
    return n;
  }
  Status quiet(const Deadline&) override { return Status(); }
  Status flush(const Deadline&) override { return Status(); }
  Status barrier(const Deadline&) override {
    ++barriers_;
    return Status();
  }

  std::vector<std::vector<std::byte>> memory_;
  std::vector<Posted> posted_;  // atomics appear with local_region -1
  std::vector<std::uint64_t> atomic_values_;
  std::vector<Completion> pending_;
  std::size_t polled_locals_ = 0;
  bool refuse_ = false;
  int barriers_ = 0;
};

struct Harness {
  explicit Harness(const std::string& spec, std::size_t bytes = 1 << 20) {
    auto inner_owned = std::make_unique<RecordingFabric>();
    inner = inner_owned.get();
    Result<ChaosOptions> options = parse_chaos(spec);
    EXPECT_TRUE(options.ok()) << options.status().message();
    chaos = make_chaos_fabric(std::move(inner_owned), *options);
    src = *chaos->allocate(bytes);
    dst = *chaos->allocate(bytes);
    for (std::size_t i = 0; i < bytes; ++i) src.local[i] = static_cast<std::byte>(i * 131 + 7);
  }
  // Posts, polling while refused (collecting into `got`).
  void put(std::size_t offset, std::size_t bytes, std::optional<std::uint32_t> imm, std::uint64_t context) {
    for (int attempt = 0; attempt < 10000; ++attempt) {
      Result<bool> r = chaos->try_put(PutOp{0, src.id, offset, dst.id, offset, bytes, imm, context});
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (*r) return;
      poll();
    }
    FAIL() << "never accepted";
  }
  // Posts an atomic add, polling while refused.
  void add(std::size_t offset, std::uint64_t value, std::uint64_t context) {
    for (int attempt = 0; attempt < 10000; ++attempt) {
      Result<bool> r = chaos->try_atomic_add(AtomicOp{0, dst.id, offset, value, context});
      ASSERT_TRUE(r.ok()) << r.status().message();
      if (*r) return;
      poll();
    }
    FAIL() << "never accepted";
  }
  std::uint64_t word(std::size_t offset) const {
    std::uint64_t value = 0;
    std::memcpy(&value, dst.local.data() + offset, sizeof value);
    return value;
  }
  std::size_t poll() {
    std::array<Completion, 8> out;
    Result<std::size_t> n = chaos->poll(out);
    EXPECT_TRUE(n.ok());
    for (std::size_t i = 0; i < *n; ++i) got.push_back(out[i]);
    return *n;
  }
  bool placed(std::size_t offset, std::size_t bytes) const {
    return std::equal(src.local.begin() + static_cast<std::ptrdiff_t>(offset),
                      src.local.begin() + static_cast<std::ptrdiff_t>(offset + bytes),
                      dst.local.begin() + static_cast<std::ptrdiff_t>(offset));
  }
  std::size_t count(CompletionKind kind) const {
    return static_cast<std::size_t>(
        std::count_if(got.begin(), got.end(), [&](const Completion& c) { return c.kind == kind; }));
  }
  void poll_until_complete(std::size_t locals, std::size_t remotes) {
    for (int i = 0;
         i < 100000 && (count(CompletionKind::kLocal) < locals || count(CompletionKind::kRemote) < remotes);
         ++i) {
      poll();
    }
  }

  RecordingFabric* inner = nullptr;
  std::unique_ptr<Fabric> chaos;
  Region src, dst;
  std::vector<Completion> got;
};

TEST(ChaosFabric, NameOrderingAndDescribe) {
  Harness h("seed=11,window=4");
  EXPECT_EQ(h.chaos->name(), "chaos(recording)");
  EXPECT_FALSE(h.chaos->ordered());
  EXPECT_EQ(
      h.chaos->describe().rfind(
          "chaos(recording) --chaos seed=11,window=4,split=4096,delay=4,empty=10,backpressure=5 schedule 0x",
          0),
      0u)
      << h.chaos->describe();
  EXPECT_NE(h.chaos->describe().find("recording (in-process)"), std::string::npos);
  EXPECT_TRUE(h.chaos->barrier(Deadline(1.0)).ok());
  EXPECT_EQ(h.inner->barriers_, 1);  // barrier is the inner fabric's
  EXPECT_EQ(h.chaos->validate(PutOp{3, 0, 0, 1, 0, 8, {}, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(h.chaos->try_put(PutOp{3, 0, 0, 1, 0, 8, {}, 0}).ok());
}

// Zero options: a transparent decorator (the overhead baseline): issue order, completions in order.
TEST(ChaosFabric, ZeroOptionsPassThrough) {
  Harness h("seed=1,window=0,split=0,delay=0,empty=0,backpressure=0");
  for (std::uint32_t i = 0; i < 50; ++i) h.put(i * 100, 100, i, i);
  for (std::size_t i = 0; i < h.inner->posted_.size(); ++i) EXPECT_EQ(h.inner->posted_[i].op.imm, i);
  ASSERT_EQ(h.inner->posted_.size(), 50u);
  h.poll_until_complete(50, 50);
  std::vector<std::uint32_t> remote;
  for (const Completion& c : h.got) {
    if (c.kind == CompletionKind::kRemote) remote.push_back(c.imm);
  }
  ASSERT_EQ(remote.size(), 50u);
  EXPECT_TRUE(std::is_sorted(remote.begin(), remote.end()));
}

// Window: held puts overtake later ones (also a small put issued right after a big one), each put reaches
// the inner fabric exactly once, and every completion comes back once.
TEST(ChaosFabric, WindowReordersAndLosesNothing) {
  Harness h("seed=5,window=8,split=0,delay=0,empty=0,backpressure=0");
  constexpr std::uint32_t kPuts = 200;
  for (std::uint32_t i = 0; i < kPuts; ++i) {
    const std::size_t bytes = i % 2 == 0 ? 4000 : 8;  // big, then small
    h.put(i * 4096, bytes, i, 1000 + i);
  }
  h.poll_until_complete(kPuts, kPuts);
  ASSERT_EQ(h.inner->posted_.size(), kPuts);
  int small_overtakes_big = 0, inversions = 0;
  for (std::size_t k = 1; k < h.inner->posted_.size(); ++k) {
    const std::uint32_t before = *h.inner->posted_[k - 1].op.imm, after = *h.inner->posted_[k].op.imm;
    inversions += after < before;
    small_overtakes_big += after % 2 == 0 && before == after + 1;
  }
  EXPECT_GT(inversions, 10);
  EXPECT_GT(small_overtakes_big, 0);
  std::multiset<std::uint64_t> locals;
  std::multiset<std::uint32_t> remotes;
  for (const Completion& c : h.got) {
    if (c.kind == CompletionKind::kLocal) locals.insert(c.context);
    if (c.kind == CompletionKind::kRemote) remotes.insert(c.imm);
  }
  for (std::uint32_t i = 0; i < kPuts; ++i) {
    EXPECT_EQ(locals.count(1000 + i), 1u) << i;
    EXPECT_EQ(remotes.count(i), 1u) << i;
    EXPECT_TRUE(h.placed(i * 4096, i % 2 == 0 ? 4000 : 8)) << i;
  }
  EXPECT_EQ(h.got.size(), 2 * kPuts);
}

// Split: a 10000-byte put with split 4096 becomes 3 chunks covering exactly its bytes; the chunk with the
// immediate goes to the inner fabric only after the other chunks' inner local completions were polled,
// and the caller's local completion comes after all three.
TEST(ChaosFabric, SplitWithholdsTheImmediateChunk) {
  Harness h("seed=9,window=2,split=4096,delay=2,empty=0,backpressure=0");
  constexpr std::size_t kBytes = 10000;
  h.put(0, kBytes, 42u, 7);
  h.poll_until_complete(1, 1);
  ASSERT_EQ(h.inner->posted_.size(), 3u);
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  const RecordingFabric::Posted* imm_chunk = nullptr;
  for (const auto& p : h.inner->posted_) {
    pieces.emplace_back(p.op.remote_offset, p.op.bytes);
    EXPECT_EQ(p.op.remote_offset, p.op.local_offset);
    if (p.op.imm) {
      EXPECT_EQ(imm_chunk, nullptr) << "two chunks carry the immediate";
      imm_chunk = &p;
    }
  }
  std::sort(pieces.begin(), pieces.end());
  const std::vector<std::pair<std::size_t, std::size_t>> expected = {{0, 4096}, {4096, 4096}, {8192, 1808}};
  EXPECT_EQ(pieces, expected);
  ASSERT_NE(imm_chunk, nullptr);
  EXPECT_EQ(*imm_chunk->op.imm, 42u);
  EXPECT_EQ(imm_chunk->local_completions_before, 2u) << "immediate chunk posted before the others completed";
  EXPECT_EQ(h.count(CompletionKind::kLocal), 1u);
  EXPECT_EQ(h.got.size(), 2u);
  EXPECT_TRUE(h.placed(0, kBytes));
}

// Held puts are released over several later polls, not all at the next one.
TEST(ChaosFabric, ReleaseIsSpreadOverSeveralPolls) {
  Harness h("seed=3,window=64,split=0,delay=0,empty=0,backpressure=0");
  for (std::uint32_t i = 0; i < 64; ++i) h.put(i * 8, 8, i, i);
  EXPECT_EQ(h.inner->posted_.size(), 0u) << "a window of 64 holds 64 puts";
  std::vector<std::size_t> released;
  while (h.inner->posted_.size() < 64 && released.size() < 100) {
    const std::size_t before = h.inner->posted_.size();
    h.poll();
    released.push_back(h.inner->posted_.size() - before);
  }
  EXPECT_GE(released.size(), 3u);
  EXPECT_LT(released.front(), 64u);
  for (std::size_t r : released) EXPECT_GE(r, 1u) << "a poll released nothing while puts were held";
}

// quiet flushes the held puts: afterwards every put is placed, and its completions still reach poll.
TEST(ChaosFabric, QuietFlushesHeldPuts) {
  Harness h("seed=4,window=32,split=64,delay=8,empty=50,backpressure=0");
  for (std::uint32_t i = 0; i < 20; ++i) h.put(i * 1000, 1000, i, i);
  EXPECT_FALSE(h.placed(0, 20 * 1000));
  ASSERT_TRUE(h.chaos->quiet(Deadline(5.0)).ok());
  EXPECT_TRUE(h.placed(0, 20 * 1000));
  h.poll_until_complete(20, 20);
  EXPECT_EQ(h.count(CompletionKind::kLocal), 20u);
  EXPECT_EQ(h.count(CompletionKind::kRemote), 20u);
}

// empty=P: about P per cent of polls return nothing although completions are ready; backpressure=P: about
// P per cent of try_put calls are refused. 1000 draws: binomial sd ~ 16, bounds at > 5 sd.
TEST(ChaosFabric, EmptyPollsAndBackpressureRates) {
  Harness h("seed=6,window=0,split=0,delay=0,empty=50,backpressure=30");
  int refused = 0;
  for (int i = 0; i < 1000; ++i) {
    Result<bool> r = h.chaos->try_put(PutOp{0, h.src.id, 0, h.dst.id, 0, 8, {}, 0});
    ASSERT_TRUE(r.ok());
    refused += !*r;
  }
  EXPECT_GT(refused, 220);
  EXPECT_LT(refused, 380);
  int empty = 0;
  for (int i = 0; i < 1000 && h.got.size() < 1000u - refused; ++i) empty += h.poll() == 0;
  EXPECT_GT(empty, 5);
  EXPECT_EQ(h.got.size(), 1000u - static_cast<std::size_t>(refused));
}

// Same seed and calls: same schedule id and completion order; another seed: another schedule.
TEST(ChaosFabric, ReplayBySeed) {
  auto run = [](const std::string& spec) {
    Harness h(spec);
    for (std::uint32_t i = 0; i < 60; ++i) h.put(i * 9000, 1 + i * 131, i, i);
    h.poll_until_complete(60, 60);
    const std::string d = h.chaos->describe();
    std::vector<std::uint64_t> order;
    for (const Completion& c : h.got)
      order.push_back(c.kind == CompletionKind::kLocal ? c.context : 1000 + c.imm);
    return std::make_pair(d.substr(d.find("schedule")), order);
  };
  const auto a = run("seed=21"), b = run("seed=21"), c = run("seed=22");
  EXPECT_EQ(a, b);
  EXPECT_NE(a.first, c.first);
  EXPECT_NE(a.second, c.second);
}

// Inner backpressure: refused chunks stay held and go out once the inner fabric accepts again.
TEST(ChaosFabric, InnerBackpressureKeepsPutsHeld) {
  Harness h("seed=8,window=2,split=0,delay=0,empty=0,backpressure=0");
  h.inner->refuse_ = true;
  int accepted = 0;
  for (std::uint32_t i = 0; i < 10; ++i) {
    Result<bool> r = h.chaos->try_put(PutOp{0, h.src.id, i * 8, h.dst.id, i * 8, 8, i, i});
    ASSERT_TRUE(r.ok());
    accepted += *r;
  }
  EXPECT_EQ(accepted, 2) << "the window holds 2 puts, then the caller sees backpressure";
  EXPECT_TRUE(h.inner->posted_.empty());
  h.inner->refuse_ = false;
  h.poll_until_complete(2, 2);
  EXPECT_EQ(h.inner->posted_.size(), 2u);
  EXPECT_TRUE(h.placed(0, 16));
}

// Atomics through the decorator (split 64, so any 8-byte op could in principle be cut): every caller atomic
// reaches the inner fabric as exactly one whole 8-byte add with its value, the words hold the sums of what
// was sent (computed here), each atomic gets one local completion with its context, and the window lets
// atomics and puts overtake each other.
TEST(ChaosFabric, AtomicsAreHeldAndReorderedButNeverSplit) {
  Harness h("seed=12,window=8,split=64,delay=3,empty=20,backpressure=10");
  constexpr std::uint32_t kOps = 300, kWords = 5;
  std::vector<std::uint64_t> expected(kWords, 0);
  std::uint32_t atomics = 0;
  for (std::uint32_t i = 0; i < kOps; ++i) {
    if (i % 3 == 0) {
      h.put(4096 + i * 8, 8, {}, 5000 + i);  // puts outside the counters
      continue;
    }
    const std::uint64_t value = 0x1'0000'0001ull * (i + 1);
    expected[i % kWords] += value;
    h.add((i % kWords) * 8, value, 5000 + i);
    ++atomics;
  }
  ASSERT_TRUE(h.chaos->quiet(Deadline(5.0)).ok());
  h.poll_until_complete(kOps, 0);
  for (std::uint32_t w = 0; w < kWords; ++w) EXPECT_EQ(h.word(w * 8), expected[w]) << "word " << w;
  ASSERT_EQ(h.inner->atomic_values_.size(), atomics) << "an atomic was split or duplicated";
  std::multiset<std::uint64_t> inner_values(h.inner->atomic_values_.begin(), h.inner->atomic_values_.end());
  for (std::uint32_t i = 0; i < kOps; ++i) {
    if (i % 3 != 0) {
      EXPECT_EQ(inner_values.count(0x1'0000'0001ull * (i + 1)), 1u) << "atomic " << i;
    }
  }
  std::map<std::uint64_t, int> locals;
  for (const Completion& c : h.got) {
    if (c.kind == CompletionKind::kLocal) ++locals[c.context];
  }
  for (std::uint32_t i = 0; i < kOps; ++i) EXPECT_EQ(locals[5000 + i], 1) << "operation " << i;
  // Posting order at the inner fabric versus issue order (the context numbers the caller's issue order).
  std::set<std::uint64_t> inner_contexts;
  int inversions = 0;
  std::uint64_t last = 0;
  for (const auto& p : h.inner->posted_) {
    EXPECT_EQ(p.op.bytes, 8u);
    inversions += p.op.context < last;
    last = p.op.context;
    inner_contexts.insert(p.op.context);
  }
  EXPECT_EQ(inner_contexts.size(), kOps);
  EXPECT_GT(inversions, 0) << "chaos never reordered atomics and puts";
}

// The decorator's atomic support and argument checks are the inner fabric's: validate and try_atomic_add
// refuse an unaligned word with the inner's message.
TEST(ChaosFabric, AtomicSupportIsTheInnerFabrics) {
  Harness h("seed=1");
  EXPECT_TRUE(h.chaos->atomic_support().ok());
  const Status unaligned = h.chaos->validate(AtomicOp{0, h.dst.id, 4, 1, 0});
  EXPECT_EQ(unaligned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unaligned.message().find("atomic.remote_offset"), std::string::npos) << unaligned.message();
  EXPECT_EQ(h.chaos->try_atomic_add(AtomicOp{0, h.dst.id, 4, 1, 0}).status().message(), unaligned.message());
}

}  // namespace
}  // namespace eps::fabric
