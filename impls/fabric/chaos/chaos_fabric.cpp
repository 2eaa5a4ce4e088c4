#include "impls/fabric/chaos/chaos_fabric.hpp"

#include <charconv>
#include <cstddef>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "reference/data/philox.hpp"

namespace eps::fabric {
namespace {

constexpr int kMaxWindow = 1024;
constexpr std::size_t kMinSplit = 64;
constexpr int kMaxDelay = 1024;
constexpr int kMaxPercent = 90;
// Counter word 3 of every chaos draw: keeps chaos decisions apart from any other Philox stream.
constexpr std::uint32_t kChaosStream = 0xC4A0'5000u;

Status chaos_error(std::string message) {
  return Status(StatusCode::kInvalidArgument, "--chaos: " + message);
}

Result<long long> parse_integer(std::string_view key, std::string_view text) {
  long long value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return chaos_error(fmt::format("{} must be an integer, got '{}'", key, text));
  }
  return value;
}

Result<long long> parse_bounded(std::string_view key, std::string_view text, long long lo, long long hi) {
  EPS_ASSIGN_OR_RETURN(long long value, parse_integer(key, text));
  if (value < lo || value > hi)
    return chaos_error(fmt::format("{} must be in [{}, {}], got {}", key, lo, hi, value));
  return value;
}

Result<std::uint64_t> parse_seed(std::string_view text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) {
    return chaos_error(fmt::format("seed must be an integer in [0, {}], got '{}'",
                                   std::numeric_limits<std::uint64_t>::max(), text));
  }
  return value;
}

Status apply_key(ChaosOptions& options, std::string_view key, std::string_view value) {
  if (key == "seed") {
    EPS_ASSIGN_OR_RETURN(options.seed, parse_seed(value));
  } else if (key == "window") {
    EPS_ASSIGN_OR_RETURN(long long v, parse_bounded(key, value, 0, kMaxWindow));
    options.window = static_cast<int>(v);
  } else if (key == "split") {
    EPS_ASSIGN_OR_RETURN(long long v, parse_integer(key, value));
    if (v != 0 && (v < static_cast<long long>(kMinSplit) || v > static_cast<long long>(kMaxPutBytes))) {
      return chaos_error(fmt::format("split must be 0 or in [{}, {}], got {}", kMinSplit, kMaxPutBytes, v));
    }
    options.split = static_cast<std::size_t>(v);
  } else if (key == "delay") {
    EPS_ASSIGN_OR_RETURN(long long v, parse_bounded(key, value, 0, kMaxDelay));
    options.delay = static_cast<int>(v);
  } else if (key == "empty") {
    EPS_ASSIGN_OR_RETURN(long long v, parse_bounded(key, value, 0, kMaxPercent));
    options.empty = static_cast<int>(v);
  } else if (key == "backpressure") {
    EPS_ASSIGN_OR_RETURN(long long v, parse_bounded(key, value, 0, kMaxPercent));
    options.backpressure = static_cast<int>(v);
  } else {
    return chaos_error(
        fmt::format("unknown key '{}'; keys: seed, window, split, delay, empty, backpressure", key));
  }
  return Status();
}

// What a decision was about: part of the schedule hash, so equal draws for different purposes differ.
enum class Decision : std::uint32_t {
  kBackpressure = 1,
  kImmChunk,
  kPick,
  kPollRelease,
  kDelay,
  kShuffle,
  kEmpty
};

// The decorator. Puts become chunks (one per put unless split), held in `pool_` and issued to the inner
// fabric in random picks; completions pass through `delayed_` (due at a poll tick) into `ready_`.
class ChaosFabric final : public Fabric {
 public:
  ChaosFabric(std::unique_ptr<Fabric> inner, const ChaosOptions& options)
      : inner_(std::move(inner)), options_(options) {}

  std::string name() const override { return fmt::format("chaos({})", inner_->name()); }
  std::string memory_registration() const override { return inner_->memory_registration(); }
  std::string describe() const override {
    std::uint64_t schedule = 0, decisions = 0;
    {
      const std::lock_guard<std::mutex> lock(schedule_mutex_);
      schedule = schedule_;
      decisions = decisions_;
    }
    return fmt::format("chaos({}) --chaos {} schedule {:#018x} after {} decisions; over {}", inner_->name(),
                       options_.to_string(), schedule, decisions, inner_->describe());
  }
  bool ordered() const override { return false; }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  FabricLimits limits() const override { return inner_->limits(); }

  Result<Region> allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  Result<Region> adopt(std::span<std::byte> memory) override { return inner_->adopt(memory); }
  Status validate(const PutOp& op) const override { return inner_->validate(op); }
  Result<bool> try_put(const PutOp& op) override;
  Status atomic_support() const override { return inner_->atomic_support(); }
  Status validate(const AtomicOp& op) const override { return inner_->validate(op); }
  Result<bool> try_atomic_add(const AtomicOp& op) override;
  Result<std::size_t> poll(std::span<Completion> out) override;
  Status quiet(const Deadline& deadline) override;
  Status flush(const Deadline& deadline) override;
  Status barrier(const Deadline& deadline) override { return inner_->barrier(deadline); }
  // The regions are the inner fabric's; peer_memory and the stream-ordered wait stay unavailable: writes
  // that bypass the decorator could not be perturbed (docs/fabrics.md 6.5).
  device::Device* region_device() const override { return inner_->region_device(); }

 private:
  Status release_until(const Deadline& deadline, const std::function<bool()>& done,
                       const std::function<std::string()>& describe_wait);
  // What the pool holds: a chunk of a put, or a whole atomic (an 8-byte add is never split).
  using Held = std::variant<PutOp, AtomicOp>;
  // A caller's put or atomic in flight. Its chunks carry the put's id as inner context.
  struct Put {
    std::uint64_t context = 0;
    int pending = 0;                 // chunks issued or pooled without an inner local completion
    std::optional<PutOp> imm_chunk;  // withheld until every other chunk completed locally
  };
  struct Delayed {
    Completion completion;
    std::uint64_t due = 0;  // poll tick
  };

  std::uint32_t decide(Decision what, std::uint32_t bound);
  bool percent(Decision what, int per_cent) {
    return per_cent > 0 && decide(what, 100) < static_cast<std::uint32_t>(per_cent);
  }
  void hold(const PutOp& op, std::uint64_t id);
  void hold(const AtomicOp& op, std::uint64_t id);
  // The window and backpressure of try_put and try_atomic_add around `hold_it` (which pools the op).
  Result<bool> admit(const std::function<void()>& hold_it);
  Result<bool> issue(const Held& held);
  Result<bool> release(std::size_t count);  // false: the inner fabric pushed back
  Status drain_inner();
  void on_inner_local(std::uint64_t id);
  void delay(const Completion& completion);
  void make_due();

  std::unique_ptr<Fabric> inner_;
  ChaosOptions options_;
  // decide() runs on the thread that drives the fabric (a proxy thread), describe() on any thread
  // (ci/sanitize --tsan found the unguarded read); a leaf lock, never held while calling out.
  mutable std::mutex schedule_mutex_;
  std::uint64_t decisions_ = 0;
  std::uint64_t schedule_ = 0xcbf2'9ce4'8422'2325ull;  // FNV-1a offset basis
  std::uint64_t next_id_ = 0;
  std::uint64_t tick_ = 0;
  std::vector<Held> pool_;
  std::unordered_map<std::uint64_t, Put> puts_;
  std::vector<Delayed> delayed_;
  std::vector<Completion> ready_;  // released, in delivery order (front first)
  std::size_t ready_head_ = 0;
  std::vector<Completion> scratch_ = std::vector<Completion>(64);
};

// Draw number `decisions_` of (seed, rank): one Philox block per decision, folded into the schedule id.
std::uint32_t ChaosFabric::decide(Decision what, std::uint32_t bound) {
  const std::lock_guard<std::mutex> lock(schedule_mutex_);
  const data::PhiloxKey key{
      {static_cast<std::uint32_t>(options_.seed), static_cast<std::uint32_t>(options_.seed >> 32)}};
  const data::PhiloxCounter counter{{static_cast<std::uint32_t>(decisions_),
                                     static_cast<std::uint32_t>(decisions_ >> 32),
                                     static_cast<std::uint32_t>(inner_->rank()), kChaosStream}};
  const std::uint32_t value = bound <= 1 ? 0 : data::philox4x32_10(counter, key).v[0] % bound;
  ++decisions_;
  const std::uint64_t record = (static_cast<std::uint64_t>(what) << 32) | value;
  for (int byte = 0; byte < 8; ++byte) {
    schedule_ = (schedule_ ^ ((record >> (8 * byte)) & 0xff)) * 0x100'0000'01b3ull;  // FNV-1a 64
  }
  return value;
}

// Cuts `op` into chunks of at most options_.split bytes; a random one carries the immediate and is
// withheld (on_inner_local) so that its remote completion still implies the whole put is placed.
void ChaosFabric::hold(const PutOp& op, std::uint64_t id) {
  const std::size_t piece = options_.split == 0 ? op.bytes : options_.split;
  const std::size_t chunks = op.bytes <= piece ? 1 : (op.bytes + piece - 1) / piece;
  const std::size_t imm_index =
      op.imm && chunks > 1 ? decide(Decision::kImmChunk, static_cast<std::uint32_t>(chunks)) : 0;
  Put put{op.context, 0, std::nullopt};
  for (std::size_t c = 0; c < chunks; ++c) {
    PutOp chunk = op;
    chunk.local_offset = op.local_offset + c * piece;
    chunk.remote_offset = op.remote_offset + c * piece;
    chunk.bytes = chunks == 1 ? op.bytes : std::min(piece, op.bytes - c * piece);
    chunk.context = id;
    if (c != imm_index || chunks == 1) {
      if (chunks > 1) chunk.imm.reset();
      pool_.push_back(chunk);
      ++put.pending;
    } else {
      put.imm_chunk = chunk;
    }
  }
  puts_.emplace(id, std::move(put));
}

// An atomic is held and released like a one-chunk put without an immediate: it may overtake or be overtaken
// by anything else in the window, and its local completion is delayed like a put's, but it is never split.
void ChaosFabric::hold(const AtomicOp& op, std::uint64_t id) {
  AtomicOp held = op;
  held.context = id;
  pool_.push_back(held);
  puts_.emplace(id, Put{op.context, 1, std::nullopt});
}

Result<bool> ChaosFabric::issue(const Held& held) {
  if (const auto* put = std::get_if<PutOp>(&held)) return inner_->try_put(*put);
  return inner_->try_atomic_add(std::get<AtomicOp>(held));
}

// Issues `count` chunks picked at random from the pool: a held put can overtake any later one.
Result<bool> ChaosFabric::release(std::size_t count) {
  for (std::size_t i = 0; i < count && !pool_.empty(); ++i) {
    const std::size_t pick = decide(Decision::kPick, static_cast<std::uint32_t>(pool_.size()));
    EPS_ASSIGN_OR_RETURN(bool posted, issue(pool_[pick]));
    if (!posted) return false;
    pool_[pick] = pool_.back();
    pool_.pop_back();
  }
  return true;
}

void ChaosFabric::delay(const Completion& completion) {
  const std::uint64_t wait =
      options_.delay == 0 ? 0 : decide(Decision::kDelay, static_cast<std::uint32_t>(options_.delay) + 1);
  delayed_.push_back(Delayed{completion, tick_ + wait});
}

void ChaosFabric::on_inner_local(std::uint64_t id) {
  auto it = puts_.find(id);
  if (it == puts_.end()) return;
  Put& put = it->second;
  if (--put.pending > 0) return;
  if (put.imm_chunk) {
    pool_.push_back(*put.imm_chunk);
    put.imm_chunk.reset();
    put.pending = 1;
    return;
  }
  delay(Completion{CompletionKind::kLocal, put.context, 0});
  puts_.erase(it);
}

Status ChaosFabric::drain_inner() {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(std::size_t n, inner_->poll(scratch_));
    for (std::size_t i = 0; i < n; ++i) {
      if (scratch_[i].kind == CompletionKind::kLocal) {
        on_inner_local(scratch_[i].context);
      } else {
        delay(scratch_[i]);
      }
    }
    if (n < scratch_.size()) return Status();
  }
}

// Moves the completions due at this tick to the ready queue, shuffled (Fisher-Yates on chaos draws).
void ChaosFabric::make_due() {
  if (ready_head_ == ready_.size()) {
    ready_.clear();
    ready_head_ = 0;
  }
  const std::size_t first = ready_.size();
  std::size_t kept = 0;
  for (const Delayed& d : delayed_) {
    if (d.due <= tick_) {
      ready_.push_back(d.completion);
    } else {
      delayed_[kept++] = d;
    }
  }
  delayed_.resize(kept);
  if (options_.delay == 0) return;  // no delay knob: completions keep their inner order
  for (std::size_t i = ready_.size(); i > first + 1; --i) {
    const std::size_t j = first + decide(Decision::kShuffle, static_cast<std::uint32_t>(i - first));
    std::swap(ready_[i - 1], ready_[j]);
  }
}

Result<bool> ChaosFabric::try_put(const PutOp& op) {
  EPS_RETURN_IF_ERROR(inner_->validate(op));
  return admit([&] { hold(op, next_id_++); });
}

Result<bool> ChaosFabric::try_atomic_add(const AtomicOp& op) {
  EPS_RETURN_IF_ERROR(inner_->validate(op));
  return admit([&] { hold(op, next_id_++); });
}

Result<bool> ChaosFabric::admit(const std::function<void()>& hold_it) {
  if (percent(Decision::kBackpressure, options_.backpressure)) return false;
  if (puts_.size() >= static_cast<std::size_t>(limits().max_outstanding_puts)) {
    EPS_RETURN_IF_ERROR(drain_inner());
    if (puts_.size() >= static_cast<std::size_t>(limits().max_outstanding_puts)) return false;
  }
  // Make room in the window first; if the inner fabric refuses, refuse the caller (nothing posted).
  const auto window = static_cast<std::size_t>(options_.window);
  if (pool_.size() >= window && !pool_.empty()) {
    EPS_ASSIGN_OR_RETURN(bool room, release(pool_.size() - window + (window == 0 ? 0 : 1)));
    if (!room && pool_.size() >= std::max<std::size_t>(window, 1)) return false;
  }
  hold_it();
  if (pool_.size() > window) EPS_RETURN_IF_ERROR(release(pool_.size() - window).status());
  return true;
}

Result<std::size_t> ChaosFabric::poll(std::span<Completion> out) {
  ++tick_;
  EPS_RETURN_IF_ERROR(drain_inner());
  // Spread the release of held chunks over several polls: 1 to about half the pool per call.
  if (!pool_.empty()) {
    const auto half = static_cast<std::uint32_t>((pool_.size() + 1) / 2);
    EPS_RETURN_IF_ERROR(release(1 + decide(Decision::kPollRelease, half)).status());
  }
  make_due();
  if (percent(Decision::kEmpty, options_.empty)) return std::size_t{0};
  std::size_t n = 0;
  while (n < out.size() && ready_head_ < ready_.size()) out[n++] = ready_[ready_head_++];
  return n;
}

// Drains the inner fabric and releases the whole pool (still in random order) until `done`; the caller's
// completions stay queued for later polls.
Status ChaosFabric::release_until(const Deadline& deadline, const std::function<bool()>& done,
                                  const std::function<std::string()>& describe_wait) {
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        failure = drain_inner();
        if (failure.ok()) failure = release(pool_.size()).status();
        return !failure.ok() || done();
      },
      describe_wait));
  return failure;
}

// Until every put has all its inner local completions.
Status ChaosFabric::quiet(const Deadline& deadline) {
  return release_until(
      deadline, [this] { return puts_.empty(); },
      [this] {
        return fmt::format("quiet on {}: {} puts still without a local completion ({} chunks held)",
                           describe(), puts_.size(), pool_.size());
      });
}

// Until nothing is held: the pool is empty and every withheld immediate chunk was released (after its
// put's other chunks completed).
Status ChaosFabric::flush(const Deadline& deadline) {
  const auto withheld = [this] {
    std::size_t n = 0;
    for (const auto& entry : puts_) n += entry.second.imm_chunk ? 1 : 0;
    return n;
  };
  return release_until(
      deadline, [&] { return pool_.empty() && withheld() == 0; },
      [&] {
        return fmt::format("flush on {}: {} chunks held, {} immediates withheld", describe(), pool_.size(),
                           withheld());
      });
}

}  // namespace

std::string ChaosOptions::to_string() const {
  return fmt::format("seed={},window={},split={},delay={},empty={},backpressure={}", seed, window, split,
                     delay, empty, backpressure);
}

bool ChaosOptions::zero() const {
  return window == 0 && split == 0 && delay == 0 && empty == 0 && backpressure == 0;
}

Result<ChaosOptions> parse_chaos(std::string_view spec) {
  ChaosOptions options;
  std::vector<std::string_view> seen;
  std::size_t start = 0;
  while (start <= spec.size() && !spec.empty()) {
    const std::size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string_view pair = spec.substr(start, comma - start);
    const std::size_t equals = pair.find('=');
    if (equals == std::string_view::npos || equals == 0) {
      return chaos_error(
          fmt::format("malformed pair '{}' in '{}' (expected key=value, e.g. seed=1,window=8)", pair, spec));
    }
    const std::string_view key = pair.substr(0, equals);
    for (std::string_view s : seen) {
      if (s == key) return chaos_error(fmt::format("key '{}' given twice", key));
    }
    EPS_RETURN_IF_ERROR(apply_key(options, key, pair.substr(equals + 1)));
    seen.push_back(key);
    start = comma + 1;
  }
  bool has_seed = false;
  for (std::string_view s : seen) has_seed = has_seed || s == "seed";
  if (!has_seed) return chaos_error(fmt::format("seed is required (e.g. seed=1), got '{}'", spec));
  return options;
}

std::unique_ptr<Fabric> make_chaos_fabric(std::unique_ptr<Fabric> inner, const ChaosOptions& options) {
  return std::make_unique<ChaosFabric>(std::move(inner), options);
}

}  // namespace eps::fabric
