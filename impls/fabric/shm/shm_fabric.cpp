#include "impls/fabric/shm/shm_fabric.hpp"

#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_base.hpp"
#include "impls/fabric/shm/shm_ring.hpp"
#include "impls/fabric/shm/shm_segment.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric::shm {
namespace {

template <typename... Args>
Status environment(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kEnvironment, "shm: " + fmt::format(format, std::forward<Args>(args)...));
}

class ShmFabric final : public FabricBase {
 public:
  ShmFabric(MPI_Comm comm, double timeout_seconds) : FabricBase(comm, timeout_seconds) {}

  // Collective: the one-host check, the job tag and the control segments (completion rings).
  Status init();

 protected:
  Result<std::span<std::byte>> create_region(int id, std::size_t bytes, std::byte* memory) override;
  Result<bool> post(const PutOp& op) override;
  Status backend_atomic_support() const override { return Status(); }
  Result<bool> post_atomic(const AtomicOp& op) override;
  Status progress(std::vector<Completion>& sink) override;
  std::string backend_name() const override { return "shm"; }
  std::string backend_describe() const override {
    return fmt::format("shm (POSIX shared memory, ordered, ring {} entries)", kRingEntries);
  }
  bool backend_ordered() const override { return true; }
  FabricLimits backend_limits() const override { return FabricLimits{}; }

 public:
  // The peer's mapped segment of caller region `region` (docs/fabrics.md 6.5); empty for a bad index.
  std::span<std::byte> peer_memory(int peer, int region) const override {
    const int index = region_index(region);
    if (peer < 0 || peer >= size() || region < 0 || index >= static_cast<int>(regions_.size())) return {};
    return {regions_[static_cast<std::size_t>(index)][static_cast<std::size_t>(peer)].data(),
            region_bytes(index, peer)};
  }

 private:
  // Collective: creates this rank's segment `kind` of `bytes`, maps every rank's (shm_segment.hpp).
  Result<std::vector<Mapping>> map_all(const std::string& kind, std::size_t bytes) const {
    return map_all_segments(comm(), "shm", tag_, kind, bytes, deadline());
  }
  // The ring that `source` fills and `target` drains, in target's control segment.
  ShmRing ring(int target, int source) const {
    return ShmRing(control_[static_cast<std::size_t>(target)].data() +
                       static_cast<std::size_t>(source) * ShmRing::bytes(kRingEntries),
                   kRingEntries);
  }
  Deadline deadline() const { return Deadline(timeout_seconds()); }

  std::string tag_;
  std::vector<Mapping> control_;               // [rank]
  std::vector<std::vector<Mapping>> regions_;  // [backend region][rank]
  std::vector<Completion> local_done_;         // local completions for the next progress()
};

Status ShmFabric::init() {
  EPS_RETURN_IF_ERROR(require_one_host(comm(), "shm", deadline()));
  EPS_ASSIGN_OR_RETURN(tag_, segment_tag(comm(), deadline()));
  EPS_ASSIGN_OR_RETURN(control_,
                       map_all("c", static_cast<std::size_t>(size()) * ShmRing::bytes(kRingEntries)));
  return Status();
}

Result<std::span<std::byte>> ShmFabric::create_region(int id, std::size_t bytes, std::byte* memory) {
  if (memory != nullptr) {
    return invalid_argument("adopt",
                            "shm writes only into the segments it maps itself; it cannot register "
                            "other memory");
  }
  if (id != static_cast<int>(regions_.size())) {
    return Status(StatusCode::kEnvironment, fmt::format("shm: region {} created out of order", id));
  }
  EPS_ASSIGN_OR_RETURN(std::vector<Mapping> mappings, map_all(fmt::format("r{}", id), bytes));
  const std::span<std::byte> local(mappings[static_cast<std::size_t>(rank())].data(), bytes);
  regions_.push_back(std::move(mappings));
  return local;
}

Result<bool> ShmFabric::post(const PutOp& op) {
  ShmRing target_ring = ring(op.peer, rank());
  if (op.imm && !target_ring.has_space()) return false;
  if (op.bytes > 0) {
    const auto& region = regions_[static_cast<std::size_t>(op.remote_region)];
    std::byte* dst = region[static_cast<std::size_t>(op.peer)].data() + op.remote_offset;
    const std::byte* src =
        regions_[static_cast<std::size_t>(op.local_region)][static_cast<std::size_t>(rank())].data() +
        op.local_offset;
    std::memmove(dst, src, op.bytes);  // a put to self may overlap its source
  }
  // The release store in push publishes the bytes above together with the immediate.
  if (op.imm && !target_ring.push(*op.imm)) {
    return environment("completion ring to rank {} filled although it had room (two producers?)", op.peer);
  }
  local_done_.push_back(Completion{CompletionKind::kLocal, op.context, 0});
  return true;
}

// The add is a CPU atomic on the peer's mapped segment, done inside try_atomic_add like a put's memmove, so
// it is applied before its local completion is even queued. Puts are placed at post time too, so an atomic
// follows this rank's earlier puts in program order; the release half of the read-modify-write publishes
// their bytes to a target that reads the word with an acquire load (load_atomic_u64), hence ordered().
// Atomics from different ranks meet in the same lock-free 64-bit read-modify-write on shared memory.
Result<bool> ShmFabric::post_atomic(const AtomicOp& op) {
  std::byte* word =
      regions_[static_cast<std::size_t>(op.remote_region)][static_cast<std::size_t>(op.peer)].data() +
      op.remote_offset;
  std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(word))
      .fetch_add(op.value, std::memory_order_acq_rel);
  local_done_.push_back(Completion{CompletionKind::kLocal, op.context, 0});
  return true;
}

Status ShmFabric::progress(std::vector<Completion>& sink) {
  sink.insert(sink.end(), local_done_.begin(), local_done_.end());
  local_done_.clear();
  for (int source = 0; source < size(); ++source) {
    ring(rank(), source).pop_all([&sink](std::uint32_t imm) {
      sink.push_back(Completion{CompletionKind::kRemote, 0, imm});
    });
  }
  return Status();
}

}  // namespace

Result<std::unique_ptr<Fabric>> make_shm_fabric(const FabricConfig& config) {
  EPS_ASSIGN_OR_RETURN(MPI_Comm comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto fabric = std::make_unique<ShmFabric>(comm, config.timeout_seconds);
  EPS_RETURN_IF_ERROR(fabric->init());
  EPS_RETURN_IF_ERROR(fabric->start());
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace eps::fabric::shm

void eps_register_fabric_shm(eps::fabric::FabricRegistry& registry) {
  registry.add(eps::fabric::FabricEntry{"shm",
                                        {},
                                        "POSIX shared memory between the ranks of one host (ordered)",
                                        eps::fabric::shm::make_shm_fabric});
}
