// A fabric for the proxy engine's tests and benchmarks: every put "completes" as soon as it is polled, so
// what is measured or checked is the command channel alone. Single process: puts go nowhere (their bytes are
// not moved); a put with an immediate yields a remote completion carrying it. Options make it push back every
// `refuse_every` try and hold completions back until `release()`, to exercise the engine's retry and
// in-flight cap.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <vector>

#include "impls/fabric/fabric.hpp"

namespace eps::channel::testing {

class ImmediateFabric final : public fabric::Fabric {
 public:
  explicit ImmediateFabric(int size = 1, int refuse_every = 0) : size_(size), refuse_every_(refuse_every) {}

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
  bool record = false;

 private:
  int size_;
  int refuse_every_;
  std::atomic<bool> holding_{false};
  std::atomic<std::int64_t> puts_{0};
  std::int64_t tries_ = 0;
  std::deque<fabric::Completion> ready_;
  std::vector<fabric::PutOp> log_;
  std::vector<std::vector<std::byte>> regions_;
  mutable std::mutex mutex_;
};

}  // namespace eps::channel::testing
