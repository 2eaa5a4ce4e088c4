// A fabric for the proxy engine's tests and benchmarks: every put "completes" as soon as it is polled, so
// what is measured or checked is the command channel alone. Single process: puts go nowhere (their bytes are
// not moved); a put with an immediate yields a remote completion carrying it. Options make it push back every
// `refuse_every` try and hold completions back until `release()`, to exercise the engine's retry and
// in-flight cap.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <utility>
#include <vector>

#include "impls/fabric/fabric.hpp"

namespace eps::channel::testing {

class ImmediateFabric final : public fabric::Fabric {
 public:
  explicit ImmediateFabric(int size = 1, int refuse_every = 0, bool atomics = true)
      : size_(size), refuse_every_(refuse_every), atomics_(atomics) {}

  std::string name() const override { return "immediate"; }
  std::string describe() const override { return "immediate (test fabric: every put completes at once)"; }
  bool ordered() const override { return true; }
  int rank() const override { return 0; }
  int size() const override { return size_; }
  fabric::FabricLimits limits() const override { return {fabric::kMaxPutBytes, 1 << 30}; }
  Result<fabric::Region> allocate(std::size_t bytes) override;
  Result<fabric::Region> adopt(std::span<std::byte> memory) override;
  Status validate(const fabric::PutOp& op) const override;
  Result<bool> try_put(const fabric::PutOp& op) override;
  // Atomics are applied at once to the fabric's own 64-bit words (allocate()'s regions stand for every
  // peer's; the test reads them with word()), unless the fabric was made without atomics.
  Status atomic_support() const override;
  Status validate(const fabric::AtomicOp& op) const override;
  Result<bool> try_atomic_add(const fabric::AtomicOp& op) override;
  Result<std::size_t> poll(std::span<fabric::Completion> out) override;
  Status quiet(const Deadline& deadline) override;
  Status flush(const Deadline&) override { return Status(); }
  Status barrier(const Deadline&) override { return Status(); }

  // Completions are held back from now until release().
  void hold() { holding_ = true; }
  void release() { holding_ = false; }
  std::int64_t puts() const { return puts_.load(); }
  // The puts in posting order (only with record = true).
  std::vector<fabric::PutOp> recorded() const;
  std::int64_t atomics() const { return atomics_posted_.load(); }
  // The atomics in posting order (only with record = true).
  std::vector<fabric::AtomicOp> recorded_atomics() const;
  // (peer, 'P' for a put or 'A' for an atomic) of every posted operation in posting order (record = true).
  std::vector<std::pair<int, char>> recorded_sequence() const;
  // The 64-bit word at `offset` of region `region` (what the atomics added up to).
  std::uint64_t word(int region, std::size_t offset) const;
  bool record = false;

 private:
  int size_;
  int refuse_every_;
  bool atomics_;
  std::atomic<std::int64_t> atomics_posted_{0};
  std::vector<fabric::AtomicOp> atomic_log_;
  std::vector<std::pair<int, char>> sequence_;
  std::atomic<bool> holding_{false};
  std::atomic<std::int64_t> puts_{0};
  std::int64_t tries_ = 0;
  std::deque<fabric::Completion> ready_;
  std::vector<fabric::PutOp> log_;
  std::vector<std::vector<std::byte>> regions_;
  mutable std::mutex mutex_;
};

}  // namespace eps::channel::testing
