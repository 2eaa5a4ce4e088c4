#include "impls/channel/tests/immediate_fabric.hpp"

#include <cstring>

namespace eps::channel::testing {

Result<fabric::Region> ImmediateFabric::allocate(std::size_t bytes) {
  std::lock_guard lock(mutex_);
  regions_.emplace_back(bytes);
  return fabric::Region{static_cast<int>(regions_.size()) - 1, regions_.back()};
}

Result<fabric::Region> ImmediateFabric::adopt(std::span<std::byte>) {
  return invalid_argument("memory", "the immediate test fabric only allocates");
}

Status ImmediateFabric::validate(const fabric::PutOp& op) const {
  if (op.peer < 0 || op.peer >= size_) return out_of_range("peer", 0, size_ - 1, op.peer);
  return Status();
}

Result<bool> ImmediateFabric::try_put(const fabric::PutOp& op) {
  EPS_RETURN_IF_ERROR(validate(op));
  std::lock_guard lock(mutex_);
  if (refuse_every_ > 0 && ++tries_ % refuse_every_ == 0) return false;
  ready_.push_back({fabric::CompletionKind::kLocal, op.context, 0});
  if (op.imm) ready_.push_back({fabric::CompletionKind::kRemote, 0, *op.imm});
  if (record) {
    log_.push_back(op);
    sequence_.emplace_back(op.peer, 'P');
  }
  puts_.fetch_add(1);
  return true;
}

Status ImmediateFabric::atomic_support() const {
  if (!atomics_) return fabric::no_remote_atomics(name(), "made without atomics (test)");
  return Status();
}

Status ImmediateFabric::validate(const fabric::AtomicOp& op) const {
  EPS_RETURN_IF_ERROR(atomic_support());
  if (op.peer < 0 || op.peer >= size_) return out_of_range("atomic.peer", 0, size_ - 1, op.peer);
  std::lock_guard lock(mutex_);
  if (op.remote_region < 0 || op.remote_region >= static_cast<int>(regions_.size())) {
    return invalid_argument("atomic.remote_region", "must name an allocated region in [0, {}), got {}",
                            regions_.size(), op.remote_region);
  }
  const std::size_t bytes = regions_[static_cast<std::size_t>(op.remote_region)].size();
  if (op.remote_offset % fabric::kAtomicBytes != 0 || op.remote_offset + fabric::kAtomicBytes > bytes) {
    return invalid_argument("atomic.remote_offset",
                            "must be a multiple of 8 with the word in [0, {}), got {}", bytes,
                            op.remote_offset);
  }
  return Status();
}

Result<bool> ImmediateFabric::try_atomic_add(const fabric::AtomicOp& op) {
  EPS_RETURN_IF_ERROR(validate(op));
  std::lock_guard lock(mutex_);
  if (refuse_every_ > 0 && ++tries_ % refuse_every_ == 0) return false;
  std::byte* at = regions_[static_cast<std::size_t>(op.remote_region)].data() + op.remote_offset;
  std::uint64_t word = 0;
  std::memcpy(&word, at, sizeof word);
  word += op.value;
  std::memcpy(at, &word, sizeof word);
  ready_.push_back({fabric::CompletionKind::kLocal, op.context, 0});
  if (record) {
    atomic_log_.push_back(op);
    sequence_.emplace_back(op.peer, 'A');
  }
  atomics_posted_.fetch_add(1);
  return true;
}

std::uint64_t ImmediateFabric::word(int region, std::size_t offset) const {
  std::lock_guard lock(mutex_);
  std::uint64_t word = 0;
  std::memcpy(&word, regions_[static_cast<std::size_t>(region)].data() + offset, sizeof word);
  return word;
}

std::vector<std::pair<int, char>> ImmediateFabric::recorded_sequence() const {
  std::lock_guard lock(mutex_);
  return sequence_;
}

std::vector<fabric::AtomicOp> ImmediateFabric::recorded_atomics() const {
  std::lock_guard lock(mutex_);
  return atomic_log_;
}

Result<std::size_t> ImmediateFabric::poll(std::span<fabric::Completion> out) {
  std::lock_guard lock(mutex_);
  if (holding_) return std::size_t{0};
  std::size_t n = 0;
  while (n < out.size() && !ready_.empty()) {
    out[n++] = ready_.front();
    ready_.pop_front();
  }
  return n;
}

Status ImmediateFabric::quiet(const Deadline&) { return Status(); }

std::vector<fabric::PutOp> ImmediateFabric::recorded() const {
  std::lock_guard lock(mutex_);
  return log_;
}

}  // namespace eps::channel::testing
