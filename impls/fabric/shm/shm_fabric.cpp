#include "impls/fabric/shm/shm_fabric.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_base.hpp"
#include "impls/fabric/shm/shm_ring.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric::shm {
namespace {

std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

template <typename... Args>
Status environment(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kEnvironment, "shm: " + fmt::format(format, std::forward<Args>(args)...));
}

// One mapping of a shared-memory segment, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, std::size_t bytes) : addr_(static_cast<std::byte*>(addr)), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept { *this = std::move(other); }
  Mapping& operator=(Mapping&& other) noexcept {
    std::swap(addr_, other.addr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~Mapping() {
    if (addr_ != nullptr) munmap(addr_, bytes_);
  }
  std::byte* data() const { return addr_; }

 private:
  std::byte* addr_ = nullptr;
  std::size_t bytes_ = 0;
};

// mmap needs a non-zero length: empty regions still get one page.
std::size_t mapped_bytes(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return std::max(page, (bytes + page - 1) / page * page);
}

Result<Mapping> map_fd(int fd, const std::string& name, std::size_t bytes) {
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (addr == MAP_FAILED)
    return environment("mmap of {} ({} bytes) failed: {}", name, bytes, errno_text(error));
  return Mapping(addr, bytes);
}

Result<Mapping> create_segment(const std::string& name, std::size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by a crashed job whose rank 0 had the same pid: it is nobody's any more.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return environment("shm_open({}) failed: {}", name, errno_text(errno));
  const std::size_t length = mapped_bytes(bytes);
  // Reserve the pages now: a full /dev/shm must fail here, not with SIGBUS on a later put.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(length)); error != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return environment("cannot reserve {} bytes for {} in /dev/shm: {}", length, name, errno_text(error));
  }
  Result<Mapping> mapping = map_fd(fd, name, length);
  if (!mapping.ok()) shm_unlink(name.c_str());
  return mapping;
}

Result<Mapping> open_segment(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return environment("shm_open({}) of a peer's segment failed: {}", name, errno_text(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return environment("fstat of {} failed: {}", name, errno_text(error));
  }
  return map_fd(fd, name, static_cast<std::size_t>(info.st_size));
}

// "a (ranks 0, 1), b (ranks 2, 3)".
std::string host_summary(const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<int>> ranks;
  for (std::size_t r = 0; r < hosts.size(); ++r) ranks[hosts[r]].push_back(static_cast<int>(r));
  std::vector<std::string> parts;
  for (const auto& [host, list] : ranks)
    parts.push_back(fmt::format("{} (ranks {})", host, fmt::join(list, ", ")));
  return fmt::format("{}", fmt::join(parts, ", "));
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

 private:
  Status agree(const Status& local, std::string_view what) const;
  // Collective: creates this rank's segment `kind` of `bytes`, maps every rank's, unlinks this rank's.
  Result<std::vector<Mapping>> map_all(const std::string& kind, std::size_t bytes) const;
  std::string segment_name(const std::string& kind, int rank) const {
    return fmt::format("/eps-shm-{}-{}-{}", tag_, kind, rank);
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

// Every rank fails when one does, so that no rank waits for a peer that gave up.
Status ShmFabric::agree(const Status& local, std::string_view what) const {
  EPS_ASSIGN_OR_RETURN(std::vector<int> codes,
                       mpi::allgather_int(static_cast<int>(local.code()), comm(), deadline()));
  if (!local.ok()) return local;
  for (std::size_t r = 0; r < codes.size(); ++r) {
    if (codes[r] != 0) {
      return Status(static_cast<StatusCode>(codes[r]),
                    fmt::format("shm: {} failed on rank {} (see its message)", what, r));
    }
  }
  return Status();
}

Result<std::vector<Mapping>> ShmFabric::map_all(const std::string& kind, std::size_t bytes) const {
  std::vector<Mapping> mappings(static_cast<std::size_t>(size()));
  const std::string mine = segment_name(kind, rank());
  Result<Mapping> created = create_segment(mine, bytes);
  EPS_RETURN_IF_ERROR(agree(created.status(), fmt::format("creating segment {}", kind)));
  mappings[static_cast<std::size_t>(rank())] = std::move(created).value();
  Status opened;
  for (int r = 0; r < size() && opened.ok(); ++r) {
    if (r == rank()) continue;
    Result<Mapping> peer = open_segment(segment_name(kind, r));
    if (peer.ok()) mappings[static_cast<std::size_t>(r)] = std::move(peer).value();
    opened = peer.status();
  }
  const Status all_mapped = agree(opened, fmt::format("mapping the peers' segments {}", kind));
  shm_unlink(mine.c_str());  // every rank got past its own mapping attempt: the name is no longer needed
  EPS_RETURN_IF_ERROR(all_mapped);
  return mappings;
}

Status ShmFabric::init() {
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, mpi::all_hosts(comm(), deadline()));
  for (const std::string& host : hosts) {
    if (host != hosts.front()) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("shm: ranks span several hosts ({}); shm needs every rank on one host",
                                host_summary(hosts)));
    }
  }
  static std::atomic<int> serial{0};
  EPS_ASSIGN_OR_RETURN(std::vector<int> pids,
                       mpi::allgather_int(static_cast<int>(getpid()), comm(), deadline()));
  EPS_ASSIGN_OR_RETURN(std::vector<int> serials, mpi::allgather_int(serial++, comm(), deadline()));
  tag_ = fmt::format("{}-{}", pids.front(), serials.front());
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
