#include "impls/fabric/libfabric/libfabric_fabric.hpp"

#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/fabric_base.hpp"
#include "impls/fabric/libfabric/fi_api.hpp"
#include "impls/fabric/libfabric/fi_status.hpp"
#include "impls/fabric/libfabric/hmem.hpp"
#include "impls/fabric/libfabric/provider.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric {
namespace {

constexpr std::size_t kCqBatch = 32;
constexpr int kMaxBatchesPerProgress = 16;  // bounds one progress() call; the caller polls again
constexpr std::size_t kCqSlack = 4096;      // room for remote completions from many initiators
constexpr std::size_t kMaxReceivePool = 256;
constexpr std::size_t kMaxOutstanding = 1 << 16;
constexpr std::size_t kNameBytes = 256;
constexpr std::uint64_t kImmMax = std::numeric_limits<std::uint32_t>::max();
// The requested key of the atomic operand buffer: far above any region id (regions use their id as key).
constexpr std::uint64_t kOperandKey = std::uint64_t{1} << 20;

// Delivery-complete on every put that moves bytes: its local completion is the fabric.hpp kLocal promise
// (placed at the target). A zero-byte put (immediate only) places no bytes, so "its bytes are placed"
// holds at transmit-complete already (its immediate still reaches the target's queue after the earlier
// puts' data on ordered providers). It has to be so: shm 1.17 never completes a zero-length
// delivery-complete write (its segmented-copy path has nothing to copy and never answers), and the stuck
// command then stalls every later command to that peer.
std::uint64_t completion_flag(std::size_t bytes) {
  return bytes > 0 ? FI_DELIVERY_COMPLETE : FI_TRANSMIT_COMPLETE;
}

template <typename T>
void close_fid(T*& object) {
  if (object != nullptr) fi_close(&object->fid);
  object = nullptr;
}

// One operation's context: FI_CONTEXT / FI_CONTEXT2 providers keep scratch state in it until the
// operation completes, so it must stay put; `provider` is first so the CQ's op_context maps back to it.
struct OpSlot {
  fi_context2 provider{};
  std::uint64_t context = 0;
  int peer = -1;  // a put's target rank, for diagnostics
  bool receive = false;
};

// A registered, page-aligned, zero-filled region and every rank's (address, key) for it.
struct MappedRegion {
  MappedRegion() = default;
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion() {
    close_fid(mr);
    if (base != nullptr && mapped > 0 && device_memory.data() == nullptr) munmap(base, mapped);
  }

  std::byte* base = nullptr;
  std::size_t mapped = 0;
  device::Buffer device_memory;  // the region's memory when it lives in FabricConfig::memory_device
  fid_mr* mr = nullptr;
  void* desc = nullptr;
  std::uint64_t key = 0;
  std::vector<std::uint64_t> remote_addr;  // per rank: the region's base, or 0 without FI_MR_VIRT_ADDR
  std::vector<std::uint64_t> remote_key;
};

class LibfabricFabric final : public FabricBase {
 public:
  LibfabricFabric(MPI_Comm comm, const FabricConfig& config, ofi::ProviderSpec spec)
      : FabricBase(comm, config.timeout_seconds),
        name_(config.name),
        iface_(config.iface),
        spec_(std::move(spec)),
        memory_device_(config.memory_device) {}
  ~LibfabricFabric() override;

  Status open();  // collective
  void mark_started() { started_ = true; }
  std::string memory_registration() const override { return plan_.staging(); }
  // Regions the fabric allocates are the device's memory when registered through FI_HMEM (hmem.hpp).
  device::Device* region_device() const override {
    return plan_.kind == ofi::RegistrationKind::kHmem ? memory_device_ : nullptr;
  }

 protected:
  Result<std::span<std::byte>> create_region(int id, std::size_t bytes, std::byte* memory) override;
  Result<bool> post(const PutOp& op) override;
  Status backend_atomic_support() const override { return atomic_support_; }
  Result<bool> post_atomic(const AtomicOp& op) override;
  Status progress(std::vector<Completion>& sink) override;
  std::string backend_name() const override { return name_; }
  std::string backend_describe() const override { return describe_; }
  bool backend_ordered() const override { return ordered_; }
  FabricLimits backend_limits() const override { return limits_; }

 private:
  Status open_local();
  Status open_objects();
  Status bind_interface(const std::string& configured);
  Result<std::string> endpoint_name();
  Status insert_peers(const std::vector<std::string>& names);
  Status agree(const Status& local, std::string_view what);
  Result<std::unique_ptr<MappedRegion>> register_region(int id, std::size_t bytes, std::byte* memory);
  Status place_region(MappedRegion& region, int id, std::size_t bytes);
  Status exchange_region(const Status& local, MappedRegion* region);
  Status post_receive(OpSlot& slot);
  Status open_atomics(const ofi::SelectedProvider& selected);
  Status handle(const fi_cq_data_entry& entry, std::vector<Completion>& sink);
  Status read_error();
  OpSlot* slot_of(const void* context);
  void release(OpSlot* slot) { free_slots_.push_back(static_cast<std::size_t>(slot - slots_.data())); }
  void close_collectively();
  Status progress_until_every_rank_is_quiet(const Deadline& deadline);
  Status environment(std::string message) const {
    return Status(StatusCode::kEnvironment, fmt::format("{} (rank {}): {}", name_, rank(), message));
  }

  std::string name_;
  std::string iface_;  // --iface; empty: FI_TCP_IFACE, else "lo" on one node
  ofi::ProviderSpec spec_;
  device::Device* memory_device_;   // FabricConfig::memory_device
  ofi::RegistrationPlan plan_;      // where regions live and how they are registered (hmem.hpp)
  const ofi::FiApi* fi_ = nullptr;  // libfabric, loaded by open_local
  ofi::InfoPtr info_;
  bool ordered_ = false;
  FabricLimits limits_;
  std::string describe_;
  std::string address_;    // this endpoint's name (fi_getname)
  std::string interface_;  // the bound network interface (binds_interface)
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  fid_ep* ep_ = nullptr;
  std::vector<fi_addr_t> peers_;
  std::vector<std::unique_ptr<MappedRegion>> regions_;
  std::vector<OpSlot> slots_;  // put slots first, then the receive pool; never resized after open()
  std::vector<std::size_t> free_slots_;
  Status atomic_support_ = Status(StatusCode::kUnavailable, "no remote atomics: the fabric is not open");
  std::unique_ptr<MappedRegion> operands_;  // one 8-byte atomic operand per put slot (open_atomics)
  bool started_ = false;  // open() and FabricBase::start() succeeded on every rank: closing is collective
};

LibfabricFabric::~LibfabricFabric() {
  close_collectively();
  // The endpoint first so that nothing is in flight on the registrations and queues closed after it.
  close_fid(ep_);
  regions_.clear();
  operands_.reset();
  close_fid(av_);
  close_fid(cq_);
  close_fid(domain_);
  close_fid(fabric_);
}

// Closing an endpoint drops what its provider still holds: tcp;ofi_rxm sends the delivery-complete
// acknowledgement of a peer's put, and a barrier message this rank posted just before it left the barrier,
// only while this rank drives progress, and a socket closed with unread data is reset, discarding what was
// still queued towards the peer. So a rank that left the last barrier first, closed its endpoint and went on
// (e.g. into the next transport's setup) left a peer waiting forever for its last barrier message or for the
// acknowledgement of a put (found on the virtual cluster; the proxy transport's spinning threads made the
// lagging rank slow enough to hit it often). Hence closing is collective (docs/fabrics.md 6.1, "a rank keeps
// polling until a collective teardown"): every put of this rank is complete at its target (quiet, which
// counts the barrier's puts too), and this rank keeps driving progress until every rank got that far
// (a nonblocking MPI barrier, since the fabric's own barrier would again end with messages in flight).
void LibfabricFabric::close_collectively() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!started_ || finalized) return;
  const Deadline deadline(timeout_seconds());
  Status status = quiet(deadline);
  if (status.ok()) status = progress_until_every_rank_is_quiet(deadline);
  if (!status.ok())
    std::fprintf(stderr, "epsuite: %s teardown on rank %d: %s\n", name_.c_str(), rank(),
                 status.message().c_str());
}

Status LibfabricFabric::progress_until_every_rank_is_quiet(const Deadline& deadline) {
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Ibarrier(comm(), &request));
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        int done = 0;
        const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) failure = mpi::check(rc, "MPI_Test", __FILE__, __LINE__);
        if (!failure.ok() || done != 0) return true;
        failure = quiet(deadline);  // one progress call: nothing of this rank is outstanding any more
        return !failure.ok();
      },
      [&] { return fmt::format("{} teardown (rank {}): every rank's puts complete", name_, rank()); }));
  return failure;
}

Status LibfabricFabric::open() {
  if (spec_.binds_interface) EPS_RETURN_IF_ERROR(agree(bind_interface(iface_), "interface choice"));
  EPS_RETURN_IF_ERROR(agree(open_local(), "provider setup"));
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                       mpi::allgather_string(address_, comm(), Deadline(timeout_seconds())));
  return agree(insert_peers(names), "address vector insert");
}

// docs/fabrics.md 6.4: --iface, else FI_TCP_IFACE, else loopback when every rank is on one node (127.0.0.1
// names a different process on every host, so ranks on two hosts need a real interface).
Status LibfabricFabric::bind_interface(const std::string& configured) {
  // Collective on every rank, whatever its environment says, so that no rank waits alone.
  EPS_ASSIGN_OR_RETURN(mpi::NodeLayout layout, mpi::node_layout(comm(), Deadline(timeout_seconds())));
  std::string iface = configured;
  const char* env = std::getenv("FI_TCP_IFACE");
  if (iface.empty() && env != nullptr) iface = env;
  if (iface.empty()) {
    if (layout.nodes() > 1) {
      return invalid_argument("--iface",
                              "{} spans {} nodes: name the network interface that joins them "
                              "(--iface IFACE or FI_TCP_IFACE)",
                              name_, layout.nodes());
    }
    iface = "lo";
  }
  EPS_ASSIGN_OR_RETURN(spec_.node, ofi::interface_ipv4(iface));
  // The provider reads FI_TCP_IFACE when libfabric first initialises it; the FI_SOURCE address binds
  // the endpoint either way, and open_local checks it.
  setenv("FI_TCP_IFACE", iface.c_str(), 1);
  interface_ = iface;
  return Status();
}

Status LibfabricFabric::open_local() {
  const device::HmemInterface hmem =
      memory_device_ != nullptr ? memory_device_->hmem_interface() : device::HmemInterface::kNone;
  EPS_ASSIGN_OR_RETURN(ofi::SelectedProvider selected, ofi::select_provider_for(spec_, hmem, &plan_));
  // select_provider succeeded, so libfabric is loaded.
  EPS_ASSIGN_OR_RETURN(fi_, ofi::fi_api());
  info_ = std::move(selected.info);
  limits_.max_put_bytes =
      static_cast<std::size_t>(std::min<std::uint64_t>(kMaxPutBytes, info_->ep_attr->max_msg_size));
  limits_.max_outstanding_puts =
      static_cast<int>(std::clamp<std::size_t>(info_->tx_attr->size, 1, kMaxOutstanding));
  ordered_ = selected.asked_ordered && ofi::waw_ordered(*info_, limits_.max_put_bytes);
  describe_ = ofi::describe_provider(*fi_, *info_, ordered_, limits_.max_put_bytes);
  if (spec_.binds_interface) describe_ += fmt::format(" on {} {}", interface_, spec_.node);
  EPS_RETURN_IF_ERROR(open_objects());
  if (memory_device_ != nullptr) {
    plan_ = ofi::probe_registration(domain_, *memory_device_, std::move(plan_), spec_.prov_name);
    describe_ += fmt::format(", memory {}", plan_.staging());
  }
  EPS_ASSIGN_OR_RETURN(address_, endpoint_name());
  if (spec_.binds_interface &&
      !ofi::address_is(address_.data(), address_.size(), info_->addr_format, spec_.node)) {
    return environment(
        fmt::format("endpoint address is not {} of interface {} (format {}); refusing to use it", spec_.node,
                    interface_, info_->addr_format));
  }
  const bool receives = (info_->mode & FI_RX_CQ_DATA) != 0;
  const std::size_t pool = receives ? std::min(info_->rx_attr->size, kMaxReceivePool) : 0;
  const auto puts = static_cast<std::size_t>(limits_.max_outstanding_puts);
  slots_ = std::vector<OpSlot>(puts + pool);
  for (std::size_t i = puts; i-- > 0;) free_slots_.push_back(i);
  for (std::size_t i = puts; i < slots_.size(); ++i) {
    slots_[i].receive = true;
    EPS_RETURN_IF_ERROR(post_receive(slots_[i]));
  }
  return open_atomics(selected);
}

// Remote atomics where the provider has them: FI_ATOMIC granted by fi_getinfo and FI_SUM on FI_UINT64
// confirmed by fi_query_atomic; otherwise atomic_support_ says why not (puts are unaffected). Each put slot
// gets an 8-byte operand in one registered buffer: the add's source must stay put (and, under FI_MR_LOCAL,
// be registered) until the atomic completes, like a put's source.
Status LibfabricFabric::open_atomics(const ofi::SelectedProvider& selected) {
  if (const std::string broken = ofi::broken_atomics(fi_->version(), spec_.prov_name); !broken.empty()) {
    atomic_support_ = no_remote_atomics(name_, broken);
    return Status();
  }
  if (!selected.atomics) {
    atomic_support_ = no_remote_atomics(
        name_,
        selected.atomics_only_unordered
            ? fmt::format("provider {} offers FI_ATOMIC only without FI_ORDER_WAW, and the fabric keeps "
                          "write-after-write ordering (the signal strategies rely on it)",
                          spec_.prov_name)
            : fmt::format("provider {} does not offer FI_ATOMIC with the fabric's RMA capabilities",
                          spec_.prov_name));
    return Status();
  }
  fi_atomic_attr attr{};
  const int rc = fi_query_atomic(domain_, FI_UINT64, FI_SUM, &attr, 0);
  if (rc != 0 || attr.count < 1) {
    atomic_support_ =
        no_remote_atomics(name_, fmt::format("provider {} has no FI_SUM on FI_UINT64 (fi_query_atomic: {})",
                                             spec_.prov_name, rc != 0 ? fi_->strerror(-rc) : "count 0"));
    return Status();
  }
  // Host memory whatever the regions' plan: the CPU writes each operand just before posting.
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t bytes = static_cast<std::size_t>(limits_.max_outstanding_puts) * sizeof(std::uint64_t);
  operands_ = std::make_unique<MappedRegion>();
  operands_->mapped = (bytes + page - 1) / page * page;
  void* base = mmap(nullptr, operands_->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    operands_->mapped = 0;
    return environment(fmt::format("mmap of {} bytes for atomic operands failed", bytes));
  }
  operands_->base = static_cast<std::byte*>(base);
  EPS_RETURN_IF_ERROR(ofi::register_memory(domain_, operands_->base, operands_->mapped, FI_READ | FI_WRITE,
                                           kOperandKey, ofi::RegistrationPlan{}, 0, &operands_->mr));
  if ((info_->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
    EPS_FI_CHECK(fi_mr_bind(operands_->mr, &ep_->fid, 0));
    EPS_FI_CHECK(fi_mr_enable(operands_->mr));
  }
  operands_->desc = fi_mr_desc(operands_->mr);
  atomic_support_ = Status();
  return Status();
}

Status LibfabricFabric::open_objects() {
  EPS_FI_CHECK(fi_->fabric(info_->fabric_attr, &fabric_, nullptr));
  EPS_FI_CHECK(fi_domain(fabric_, info_.get(), &domain_, nullptr));
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_DATA;
  cq_attr.wait_obj = FI_WAIT_NONE;
  cq_attr.size = info_->tx_attr->size + info_->rx_attr->size + kCqSlack;
  EPS_FI_CHECK(fi_cq_open(domain_, &cq_attr, &cq_, nullptr));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<std::size_t>(size());
  EPS_FI_CHECK(fi_av_open(domain_, &av_attr, &av_, nullptr));
  EPS_FI_CHECK(fi_endpoint(domain_, info_.get(), &ep_, nullptr));
  EPS_FI_CHECK(fi_ep_bind(ep_, &av_->fid, 0));
  EPS_FI_CHECK(fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV));
  EPS_FI_CHECK(fi_enable(ep_));
  return Status();
}

Result<std::string> LibfabricFabric::endpoint_name() {
  std::string name(kNameBytes, '\0');
  std::size_t length = name.size();
  int rc = fi_getname(&ep_->fid, name.data(), &length);
  if (rc == -FI_ETOOSMALL) {
    name.resize(length);
    rc = fi_getname(&ep_->fid, name.data(), &length);
  }
  EPS_FI_CHECK(rc);
  name.resize(length);
  // String addresses are inserted one at a time and must carry their terminator.
  if (info_->addr_format == FI_ADDR_STR && (name.empty() || name.back() != '\0')) name.push_back('\0');
  return name;
}

Status LibfabricFabric::insert_peers(const std::vector<std::string>& names) {
  peers_.assign(names.size(), FI_ADDR_NOTAVAIL);
  for (std::size_t r = 0; r < names.size(); ++r) {
    const int inserted = fi_av_insert(av_, names[r].data(), 1, &peers_[r], 0, nullptr);
    EPS_FI_CHECK(inserted);
    if (inserted != 1 || peers_[r] == FI_ADDR_NOTAVAIL) {
      return environment(fmt::format("fi_av_insert did not accept the address of rank {}", r));
    }
  }
  return Status();
}

// Every rank learns whether every rank succeeded, so that one rank's failure never leaves the others
// waiting in the next exchange.
Status LibfabricFabric::agree(const Status& local, std::string_view what) {
  EPS_ASSIGN_OR_RETURN(std::vector<int> codes,
                       mpi::allgather_int(local.exit_code(), comm(), Deadline(timeout_seconds())));
  if (!local.ok()) return local;
  std::vector<int> failed;
  for (std::size_t r = 0; r < codes.size(); ++r) {
    if (codes[r] != 0) failed.push_back(static_cast<int>(r));
  }
  if (failed.empty()) return Status();
  return environment(fmt::format("{} failed on rank(s) {} (see their error)", what, fmt::join(failed, ", ")));
}

Result<std::span<std::byte>> LibfabricFabric::create_region(int id, std::size_t bytes, std::byte* memory) {
  Result<std::unique_ptr<MappedRegion>> region = register_region(id, bytes, memory);
  EPS_RETURN_IF_ERROR(exchange_region(region.status(), region.ok() ? region->get() : nullptr));
  regions_.push_back(std::move(*region));
  return std::span<std::byte>(regions_.back()->base, bytes);
}

Result<std::unique_ptr<MappedRegion>> LibfabricFabric::register_region(int id, std::size_t bytes,
                                                                       std::byte* memory) {
  if (static_cast<std::size_t>(id) != regions_.size()) {
    return environment(fmt::format("region {} created out of order (expected {})", id, regions_.size()));
  }
  auto region = std::make_unique<MappedRegion>();
  std::size_t registered = std::max<std::size_t>(bytes, 1);
  // Adopted memory is the caller's host memory (the auto fabric's shm segment): registered as host memory.
  ofi::RegistrationPlan plan = memory != nullptr ? ofi::RegistrationPlan{} : plan_;
  if (memory != nullptr) {
    region->base = memory;  // adopted: the caller owns it (mapped stays 0, nothing to unmap)
  } else {
    EPS_RETURN_IF_ERROR(place_region(*region, id, bytes));
    registered = region->mapped;
  }
  const int ordinal = memory_device_ != nullptr ? memory_device_->properties().ordinal : 0;
  EPS_RETURN_IF_ERROR(ofi::register_memory(domain_, region->base, registered, FI_WRITE | FI_REMOTE_WRITE,
                                           static_cast<std::uint64_t>(id), plan, ordinal, &region->mr));
  if ((info_->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0) {
    EPS_FI_CHECK(fi_mr_bind(region->mr, &ep_->fid, 0));
    EPS_FI_CHECK(fi_mr_enable(region->mr));
  }
  region->key = fi_mr_key(region->mr);
  if (region->key == FI_KEY_NOTAVAIL) return environment(fmt::format("fi_mr_key: no key for region {}", id));
  region->desc = fi_mr_desc(region->mr);
  return region;
}

// Zero-filled memory for a region the fabric allocates: the device's memory under an FI_HMEM plan, else a
// page-aligned anonymous mapping. `mapped` is the size registered.
Status LibfabricFabric::place_region(MappedRegion& region, int id, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::size_t size = std::max<std::size_t>(1, (bytes + page - 1) / page) * page;
  if (plan_.kind == ofi::RegistrationKind::kHmem) {
    EPS_ASSIGN_OR_RETURN(region.device_memory, memory_device_->allocate(size, device::MemoryKind::kDevice));
    EPS_RETURN_IF_ERROR(memory_device_->fill(region.device_memory.data(), 0, size));
    region.base = region.device_memory.as<std::byte>();
    region.mapped = size;  // the Buffer frees it; only mappings without one are unmapped
    return Status();
  }
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return environment(fmt::format("mmap of {} bytes for region {} failed", size, id));
  region.base = static_cast<std::byte*>(base);
  region.mapped = size;
  return Status();
}

// (ok, address, key) from every rank: the peers learn the region and whether everyone registered it.
Status LibfabricFabric::exchange_region(const Status& local, MappedRegion* region) {
  const bool virt = (info_->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
  const std::uint64_t mine[3] = {
      local.ok() ? 1u : 0u, region != nullptr && virt ? reinterpret_cast<std::uintptr_t>(region->base) : 0,
      region != nullptr ? region->key : 0};
  std::vector<std::uint64_t> all(3 * static_cast<std::size_t>(size()), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallgather(mine, 3, MPI_UINT64_T, all.data(), 3, MPI_UINT64_T, comm(), &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, Deadline(timeout_seconds()), [this] {
    return fmt::format("{} region {} keys from {} ranks (rank {})", name_, regions_.size(), size(), rank());
  }));
  if (!local.ok()) return local;
  std::vector<int> failed;
  for (int r = 0; r < size(); ++r) {
    const std::size_t at = 3 * static_cast<std::size_t>(r);
    if (all[at] == 0) failed.push_back(r);
    region->remote_addr.push_back(all[at + 1]);
    region->remote_key.push_back(all[at + 2]);
  }
  if (failed.empty()) return Status();
  return environment(fmt::format("registering region {} failed on rank(s) {} (see their error)",
                                 regions_.size(), fmt::join(failed, ", ")));
}

Result<bool> LibfabricFabric::post(const PutOp& op) {
  if (free_slots_.empty()) return false;
  OpSlot& slot = slots_[free_slots_.back()];
  free_slots_.pop_back();
  slot.context = op.context;
  slot.peer = op.peer;
  const MappedRegion& local = *regions_[static_cast<std::size_t>(op.local_region)];
  const MappedRegion& remote = *regions_[static_cast<std::size_t>(op.remote_region)];
  const auto peer = static_cast<std::size_t>(op.peer);
  iovec iov{local.base + op.local_offset, op.bytes};
  void* desc = local.desc;
  fi_rma_iov rma{remote.remote_addr[peer] + op.remote_offset, op.bytes, remote.remote_key[peer]};
  fi_msg_rma msg{};
  msg.msg_iov = &iov;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peers_[peer];
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.context = &slot.provider;
  msg.data = op.imm.value_or(0);
  const std::uint64_t flags = completion_flag(op.bytes) | FI_COMPLETION | (op.imm ? FI_REMOTE_CQ_DATA : 0);
  const ssize_t rc = fi_writemsg(ep_, &msg, flags);
  if (rc == 0) return true;
  release(&slot);
  if (rc == -FI_EAGAIN) return false;
  return ofi::fi_status(rc, "fi_writemsg", __FILE__, __LINE__);
}

// fi_atomicmsg FI_SUM on one FI_UINT64, delivery-complete like a put: its local completion means the add
// is applied at the target. On ordered providers FI_ORDER_WAW covers RMA and atomic writes alike, so the
// add follows this rank's earlier puts to that peer.
Result<bool> LibfabricFabric::post_atomic(const AtomicOp& op) {
  if (free_slots_.empty()) return false;
  const std::size_t index = free_slots_.back();
  OpSlot& slot = slots_[index];
  free_slots_.pop_back();
  slot.context = op.context;
  slot.peer = op.peer;
  auto* operand = reinterpret_cast<std::uint64_t*>(operands_->base) + index;
  *operand = op.value;
  const MappedRegion& remote = *regions_[static_cast<std::size_t>(op.remote_region)];
  const auto peer = static_cast<std::size_t>(op.peer);
  fi_ioc ioc{operand, 1};
  void* desc = operands_->desc;
  fi_rma_ioc rma{remote.remote_addr[peer] + op.remote_offset, 1, remote.remote_key[peer]};
  fi_msg_atomic msg{};
  msg.msg_iov = &ioc;
  msg.desc = &desc;
  msg.iov_count = 1;
  msg.addr = peers_[peer];
  msg.rma_iov = &rma;
  msg.rma_iov_count = 1;
  msg.datatype = FI_UINT64;
  msg.op = FI_SUM;
  msg.context = &slot.provider;
  const ssize_t rc = fi_atomicmsg(ep_, &msg, FI_DELIVERY_COMPLETE | FI_COMPLETION);
  if (rc == 0) return true;
  release(&slot);
  if (rc == -FI_EAGAIN) return false;
  return ofi::fi_status(rc, "fi_atomicmsg", __FILE__, __LINE__);
}

Status LibfabricFabric::post_receive(OpSlot& slot) {
  // Zero-length receives: they exist only to be consumed by remote CQ data under FI_RX_CQ_DATA.
  EPS_FI_CHECK(fi_recv(ep_, nullptr, 0, nullptr, FI_ADDR_UNSPEC, &slot.provider));
  return Status();
}

Status LibfabricFabric::progress(std::vector<Completion>& sink) {
  fi_cq_data_entry entries[kCqBatch];
  for (int batch = 0; batch < kMaxBatchesPerProgress; ++batch) {
    const ssize_t n = fi_cq_read(cq_, entries, kCqBatch);
    if (n == -FI_EAGAIN) return Status();
    if (n == -FI_EAVAIL) return read_error();
    EPS_FI_CHECK(n);
    for (ssize_t i = 0; i < n; ++i) EPS_RETURN_IF_ERROR(handle(entries[i], sink));
    if (static_cast<std::size_t>(n) < kCqBatch) return Status();
  }
  return Status();
}

Status LibfabricFabric::handle(const fi_cq_data_entry& entry, std::vector<Completion>& sink) {
  OpSlot* slot = slot_of(entry.op_context);
  if ((entry.flags & FI_REMOTE_CQ_DATA) != 0) {
    // docs/fabrics.md 6.1: immediates are 32 bits; wider data would mean a peer outside this contract.
    if (entry.data > kImmMax) {
      return environment(fmt::format("remote CQ data {:#x} exceeds 32 bits", entry.data));
    }
    sink.push_back(Completion{CompletionKind::kRemote, 0, static_cast<std::uint32_t>(entry.data)});
    return slot != nullptr && slot->receive ? post_receive(*slot) : Status();
  }
  if (slot != nullptr && !slot->receive) {
    sink.push_back(Completion{CompletionKind::kLocal, slot->context, 0});
    release(slot);
    return Status();
  }
  // A remote write without an immediate produces no completion in the contract (fabric.hpp).
  if (slot == nullptr && (entry.flags & FI_REMOTE_WRITE) != 0) return Status();
  return environment(fmt::format("unexpected completion (flags {:#x}, {} bytes)", entry.flags, entry.len));
}

Status LibfabricFabric::read_error() {
  fi_cq_err_entry error{};
  const ssize_t rc = fi_cq_readerr(cq_, &error, 0);
  if (rc == -FI_EAGAIN) return Status();
  EPS_FI_CHECK(rc);
  char buffer[256] = {};
  const char* detail = fi_cq_strerror(cq_, error.prov_errno, error.err_data, buffer, sizeof(buffer));
  OpSlot* slot = slot_of(error.op_context);
  std::string what = "a remote operation";
  if (slot != nullptr)
    what = slot->receive ? "a posted receive"
                         : fmt::format("the put to rank {} (context {})", slot->peer, slot->context);
  if (slot != nullptr && !slot->receive) release(slot);
  return environment(fmt::format("completion error on {}: {} (provider: {})", what, fi_->strerror(error.err),
                                 detail != nullptr ? detail : "no detail"));
}

OpSlot* LibfabricFabric::slot_of(const void* context) {
  if (context == nullptr || slots_.empty()) return nullptr;
  const auto at = reinterpret_cast<std::uintptr_t>(context);
  const auto first = reinterpret_cast<std::uintptr_t>(slots_.data());
  const auto end = reinterpret_cast<std::uintptr_t>(slots_.data() + slots_.size());
  if (at < first || at >= end || (at - first) % sizeof(OpSlot) != 0) return nullptr;
  return &slots_[(at - first) / sizeof(OpSlot)];
}

}  // namespace

Result<std::unique_ptr<Fabric>> make_libfabric_fabric(const FabricConfig& config) {
  EPS_ASSIGN_OR_RETURN(ofi::ProviderSpec spec, ofi::provider_spec(config.variant));
  EPS_ASSIGN_OR_RETURN(MPI_Comm comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto fabric = std::make_unique<LibfabricFabric>(comm, config, std::move(spec));
  EPS_RETURN_IF_ERROR(fabric->open());
  EPS_RETURN_IF_ERROR(fabric->start());
  fabric->mark_started();
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace eps::fabric

void eps_register_fabric_libfabric(eps::fabric::FabricRegistry& registry) {
  registry.add(eps::fabric::FabricEntry{"libfabric",
                                        eps::fabric::ofi::libfabric_variants(),
                                        "libfabric FI_EP_RDM RMA writes: shm, tcp (tcp;ofi_rxm on --iface, "
                                        "loopback on one node), efa, verbs (verbs;ofi_rxm)",
                                        &eps::fabric::make_libfabric_fabric,
                                        {"efa"},
                                        [] { return eps::fabric::ofi::fi_api().status(); }});
}
