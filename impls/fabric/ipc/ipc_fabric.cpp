#include "impls/fabric/ipc/ipc_fabric.hpp"

#include <atomic>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device.hpp"
#include "impls/fabric/fabric_base.hpp"
#include "impls/fabric/shm/shm_segment.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric::ipc {
namespace {

using device::Device;
using device::Event;
using device::MappedMemory;

// One source's block of a target's mailbox segment (ipc_fabric.hpp): count, head, then the ring.
constexpr std::size_t kCountOffset = 0;
constexpr std::size_t kHeadOffset = 64;
constexpr std::size_t kRingOffset = 128;
constexpr std::size_t kBlockBytes = kRingOffset + kMailboxEntries * sizeof(std::uint64_t);

std::uint64_t mailbox_entry(std::uint64_t index, std::uint32_t imm) {
  return ((index + 1) & 0xFFFF'FFFFull) << 32 | imm;
}

template <typename... Args>
Status environment(fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kEnvironment, "ipc: " + fmt::format(format, std::forward<Args>(args)...));
}

// A failure of the device, in the fabric's name; kUnavailable stays kUnavailable (an export or a mapping
// the device refuses), anything else is the environment's.
Status device_failure(const Status& status, std::string_view what) {
  return Status(
      status.code() == StatusCode::kUnavailable ? StatusCode::kUnavailable : StatusCode::kEnvironment,
      fmt::format("ipc: {}: {}", what, status.message()));
}

class IpcFabric final : public FabricBase {
 public:
  IpcFabric(MPI_Comm comm, double timeout_seconds, Device* device, std::unique_ptr<Device> own_device)
      : FabricBase(comm, timeout_seconds), own_device_(std::move(own_device)), device_(device) {}
  ~IpcFabric() override;

  // Collective: the one-host check, the fabric's queue and the mailboxes.
  Status init();

  std::span<std::byte> peer_memory(int peer, int region) const override;
  device::Device* region_device() const override { return device_; }
  Status enqueue_wait_for_immediates(device::Queue& queue, int peer, std::uint64_t count,
                                     double timeout_seconds) override;

 protected:
  Result<std::span<std::byte>> create_region(int id, std::size_t bytes, std::byte* memory) override;
  Result<bool> post(const PutOp& op) override;
  Status backend_atomic_support() const override { return Status(); }
  Result<bool> post_atomic(const AtomicOp& op) override;
  Status progress(std::vector<Completion>& sink) override;
  std::string backend_name() const override { return "ipc"; }
  std::string backend_describe() const override {
    return fmt::format(
        "ipc (regions in {} memory, mapped into every rank of the node; ordered: one queue; "
        "mailbox ring {} entries)",
        device_->describe(), kMailboxEntries);
  }
  bool backend_ordered() const override { return true; }
  FabricLimits backend_limits() const override { return FabricLimits{}; }

 private:
  struct RegionMemory {
    device::Buffer local;
    std::vector<std::unique_ptr<MappedMemory>> imports;  // per rank; null for this rank
    std::vector<std::byte*> base;                        // per rank: where this rank addresses it
  };

  Deadline deadline() const { return Deadline(timeout_seconds()); }
  Status agree(const Status& local, std::string_view what) const {
    return shm::agree_on(comm(), "ipc", local, what, deadline());
  }
  // The block of `source` in `target`'s mailbox, as the host sees it and as the device addresses it.
  std::byte* block(int target, int source) const {
    return mailboxes_[static_cast<std::size_t>(target)].data() +
           static_cast<std::size_t>(source) * kBlockBytes;
  }
  std::byte* device_block(int target, int source) const {
    return static_cast<std::byte*>(registered_[static_cast<std::size_t>(target)]->data()) +
           static_cast<std::size_t>(source) * kBlockBytes;
  }
  static std::uint64_t* word(std::byte* at) { return reinterpret_cast<std::uint64_t*>(at); }
  Result<std::unique_ptr<Event>> take_event();
  Status complete_with_event(std::uint64_t context);
  void drain_mailbox(int source, std::vector<Completion>& sink);

  std::unique_ptr<Device> own_device_;  // declared first: destroyed after everything that uses it
  Device* device_;
  std::vector<RegionMemory> regions_;  // [backend region]
  std::string tag_;
  std::vector<shm::Mapping> mailboxes_;                    // [target]
  std::vector<std::unique_ptr<MappedMemory>> registered_;  // [target]: mailboxes_ registered with device_
  std::vector<std::uint64_t> sent_entries_;                // [target]: mailbox entries written
  std::vector<std::uint64_t> sent_immediates_;             // [target]: caller immediates written
  std::vector<std::uint64_t> consumed_;                    // [source]: entries of this rank's mailbox read
  std::vector<std::unique_ptr<Event>> spare_events_;
  std::deque<std::pair<std::unique_ptr<Event>, std::uint64_t>> pending_;  // events and contexts, in order
  std::unique_ptr<device::Queue> queue_;  // declared last: destroyed first, once its work is done
};

// Teardown runs in step on every rank (each waits, bounded, for the others): a device's memory may not be
// freed while a peer still maps it (CUDA: undefined behaviour), nor unmapped while a peer's copies into it
// may still run.
IpcFabric::~IpcFabric() {
  if (queue_ != nullptr) (void)queue_->synchronize(deadline());
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) (void)mpi::barrier(comm(), deadline());
  for (RegionMemory& region : regions_) region.imports.clear();
  if (!finalized) (void)mpi::barrier(comm(), deadline());
}

Status IpcFabric::init() {
  EPS_RETURN_IF_ERROR(shm::require_one_host(comm(), "ipc", deadline()));
  Result<std::unique_ptr<device::Queue>> queue = device_->create_queue();
  EPS_RETURN_IF_ERROR(agree(queue.ok() ? Status() : device_failure(queue.status(), "a queue of the device"),
                            "making the fabric's queue"));
  queue_ = std::move(queue).value();
  EPS_ASSIGN_OR_RETURN(tag_, shm::segment_tag(comm(), deadline()));
  EPS_ASSIGN_OR_RETURN(mailboxes_,
                       shm::map_all_segments(comm(), "ipc", tag_, "m",
                                             static_cast<std::size_t>(size()) * kBlockBytes, deadline()));
  Status registered;
  for (const shm::Mapping& mailbox : mailboxes_) {
    Result<std::unique_ptr<MappedMemory>> made =
        device_->register_host_memory(mailbox.data(), mailbox.bytes());
    if (!made.ok()) {
      registered = device_failure(made.status(), "registering the mailboxes with the device");
      break;
    }
    registered_.push_back(std::move(made).value());
  }
  EPS_RETURN_IF_ERROR(agree(registered, "registering the mailboxes"));
  const auto ranks = static_cast<std::size_t>(size());
  sent_entries_.assign(ranks, 0);
  sent_immediates_.assign(ranks, 0);
  consumed_.assign(ranks, 0);
  return Status();
}

Result<std::span<std::byte>> IpcFabric::create_region(int id, std::size_t bytes, std::byte* memory) {
  if (memory != nullptr) {
    return invalid_argument("adopt",
                            "ipc places its regions in device memory it allocates and exports; it cannot "
                            "register other memory");
  }
  if (id != static_cast<int>(regions_.size())) return environment("region {} created out of order", id);
  const std::size_t allocated = std::max<std::size_t>(bytes, 1);
  RegionMemory region;
  region.imports.resize(static_cast<std::size_t>(size()));
  region.base.assign(static_cast<std::size_t>(size()), nullptr);
  std::string handle_bytes;
  Status exported = [&]() -> Status {
    EPS_ASSIGN_OR_RETURN(region.local, device_->allocate(allocated, device::MemoryKind::kDevice));
    EPS_RETURN_IF_ERROR(device_->fill(region.local.data(), 0, allocated));
    EPS_ASSIGN_OR_RETURN(const device::IpcHandle handle,
                         device_->export_memory(region.local.data(), allocated));
    handle_bytes.assign(reinterpret_cast<const char*>(&handle), sizeof handle);
    return Status();
  }();
  if (!exported.ok()) exported = device_failure(exported, fmt::format("exporting region {}", id));
  EPS_RETURN_IF_ERROR(agree(exported, fmt::format("allocating and exporting region {}", id)));
  EPS_ASSIGN_OR_RETURN(const std::vector<std::string> handles,
                       mpi::allgather_string(handle_bytes, comm(), deadline(), "ipc region handles"));
  Status imported;
  for (int r = 0; r < size() && imported.ok(); ++r) {
    if (r == rank()) {
      region.base[static_cast<std::size_t>(r)] = region.local.as<std::byte>();
      continue;
    }
    device::IpcHandle handle;
    std::memcpy(&handle, handles[static_cast<std::size_t>(r)].data(), sizeof handle);
    Result<std::unique_ptr<MappedMemory>> mapped = device_->import_memory(handle);
    if (!mapped.ok()) {
      imported = device_failure(mapped.status(), fmt::format("mapping rank {}'s region {}", r, id));
      break;
    }
    region.base[static_cast<std::size_t>(r)] = static_cast<std::byte*>((*mapped)->data());
    region.imports[static_cast<std::size_t>(r)] = std::move(mapped).value();
  }
  EPS_RETURN_IF_ERROR(agree(imported, fmt::format("mapping the peers' region {}", id)));
  const std::span<std::byte> local(region.local.as<std::byte>(), bytes);
  regions_.push_back(std::move(region));
  return local;
}

Result<std::unique_ptr<Event>> IpcFabric::take_event() {
  if (spare_events_.empty()) return device_->create_event();
  std::unique_ptr<Event> event = std::move(spare_events_.back());
  spare_events_.pop_back();
  return event;
}

// The local completion of everything enqueued so far: an event after it (ipc_fabric.hpp).
Status IpcFabric::complete_with_event(std::uint64_t context) {
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<Event> event, take_event());
  EPS_RETURN_IF_ERROR(queue_->record(*event));
  pending_.emplace_back(std::move(event), context);
  return Status();
}

Result<bool> IpcFabric::post(const PutOp& op) {
  const auto peer = static_cast<std::size_t>(op.peer);
  if (op.imm) {
    const std::uint64_t head = std::atomic_ref<std::uint64_t>(*word(block(op.peer, rank()) + kHeadOffset))
                                   .load(std::memory_order_acquire);
    if (sent_entries_[peer] - head >= kMailboxEntries) return false;
  }
  if (op.bytes > 0) {
    std::byte* dst = regions_[static_cast<std::size_t>(op.remote_region)].base[peer] + op.remote_offset;
    const std::byte* src =
        regions_[static_cast<std::size_t>(op.local_region)].base[static_cast<std::size_t>(rank())] +
        op.local_offset;
    EPS_RETURN_IF_ERROR(queue_->copy(dst, src, op.bytes));
  }
  if (op.imm) {
    // The entry, then (for a caller's immediate) the count: both after the data on the same queue.
    const std::uint64_t index = sent_entries_[peer]++;
    std::byte* target = device_block(op.peer, rank());
    std::byte* slot = target + kRingOffset + (index % kMailboxEntries) * sizeof(std::uint64_t);
    EPS_RETURN_IF_ERROR(queue_->write_value(slot, mailbox_entry(index, *op.imm), device::ValueWidth::k64));
    if (!is_barrier_imm(*op.imm)) {
      EPS_RETURN_IF_ERROR(
          queue_->write_value(target + kCountOffset, ++sent_immediates_[peer], device::ValueWidth::k64));
    }
  }
  EPS_RETURN_IF_ERROR(complete_with_event(op.context));
  return true;
}

Result<bool> IpcFabric::post_atomic(const AtomicOp& op) {
  std::byte* target =
      regions_[static_cast<std::size_t>(op.remote_region)].base[static_cast<std::size_t>(op.peer)] +
      op.remote_offset;
  EPS_RETURN_IF_ERROR(queue_->run(device::AtomicAddArgs{word(target), op.value}));
  EPS_RETURN_IF_ERROR(complete_with_event(op.context));
  return true;
}

void IpcFabric::drain_mailbox(int source, std::vector<Completion>& sink) {
  std::byte* mine = block(rank(), source);
  std::uint64_t& consumed = consumed_[static_cast<std::size_t>(source)];
  const std::uint64_t first = consumed;
  for (;;) {
    std::byte* slot = mine + kRingOffset + (consumed % kMailboxEntries) * sizeof(std::uint64_t);
    const std::uint64_t entry = std::atomic_ref<std::uint64_t>(*word(slot)).load(std::memory_order_acquire);
    if ((entry >> 32) != ((consumed + 1) & 0xFFFF'FFFFull)) break;
    sink.push_back(Completion{CompletionKind::kRemote, 0, static_cast<std::uint32_t>(entry)});
    ++consumed;
  }
  if (consumed != first) {
    std::atomic_ref<std::uint64_t>(*word(mine + kHeadOffset)).store(consumed, std::memory_order_release);
  }
}

Status IpcFabric::progress(std::vector<Completion>& sink) {
  while (!pending_.empty()) {
    EPS_ASSIGN_OR_RETURN(const bool done, pending_.front().first->done());
    if (!done) break;
    sink.push_back(Completion{CompletionKind::kLocal, pending_.front().second, 0});
    spare_events_.push_back(std::move(pending_.front().first));
    pending_.pop_front();
  }
  for (int source = 0; source < size(); ++source) drain_mailbox(source, sink);
  return Status();
}

std::span<std::byte> IpcFabric::peer_memory(int peer, int region) const {
  const int index = region_index(region);
  if (peer < 0 || peer >= size() || region < 0 || index >= static_cast<int>(regions_.size())) return {};
  return {regions_[static_cast<std::size_t>(index)].base[static_cast<std::size_t>(peer)],
          region_bytes(index, peer)};
}

Status IpcFabric::enqueue_wait_for_immediates(device::Queue& queue, int peer, std::uint64_t count,
                                              double timeout_seconds) {
  if (peer < 0 || peer >= size()) return out_of_range("peer", 0, size() - 1, peer);
  return queue.wait_value(device_block(rank(), peer) + kCountOffset, count,
                          device::WaitCondition::kGreaterEqual, device::ValueWidth::k64, timeout_seconds);
}

}  // namespace

Result<std::unique_ptr<Fabric>> make_ipc_fabric(const FabricConfig& config) {
  std::unique_ptr<Device> own_device;
  Device* device = config.memory_device;
  if (device == nullptr) {
    EPS_ASSIGN_OR_RETURN(own_device, device::make_cpu_device());
    device = own_device.get();
  }
  EPS_ASSIGN_OR_RETURN(MPI_Comm comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto fabric = std::make_unique<IpcFabric>(comm, config.timeout_seconds, device, std::move(own_device));
  EPS_RETURN_IF_ERROR(fabric->init());
  EPS_RETURN_IF_ERROR(fabric->start());
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace eps::fabric::ipc

void eps_register_fabric_ipc(eps::fabric::FabricRegistry& registry) {
  registry.add(eps::fabric::FabricEntry{
      "ipc",
      {},
      "device memory exported and mapped between the ranks of one host; puts are device copies (ordered)",
      eps::fabric::ipc::make_ipc_fabric});
}
