#include "impls/channel/tests/immediate_fabric.hpp"

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
  if (record) log_.push_back(op);
  puts_.fetch_add(1);
  return true;
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
