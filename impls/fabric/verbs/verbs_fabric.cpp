#include "impls/fabric/verbs/verbs_fabric.hpp"

#include <infiniband/verbs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#if EPS_HAVE_EFADV
#include <infiniband/efadv.h>
#endif

#include "impls/fabric/fabric_base.hpp"
#include "impls/fabric/verbs/verbs_api.hpp"
#include "impls/fabric/verbs/verbs_atomic.hpp"
#include "impls/fabric/verbs/verbs_check.hpp"
#include "impls/fabric/verbs/verbs_completion.hpp"
#include "impls/fabric/verbs/verbs_dmabuf.hpp"
#include "impls/fabric/verbs/verbs_setup.hpp"
#include "impls/fabric/verbs/verbs_wire.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric::verbs {
namespace {

constexpr int kWantedPuts = 1024;
constexpr int kRecvPerQp = 128;
constexpr int kPollBatch = 32;
constexpr int kMaxPollBatches = 16;  // progress() stays non-blocking under a steady stream
constexpr std::size_t kScratchBytes = 64;

#if EPS_HAVE_EFADV_RDMA_WRITE
constexpr std::uint32_t kEfaRdmaWriteFlag = EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE;
#else
constexpr std::uint32_t kEfaRdmaWriteFlag = 0;
#endif

const char* variant_name(Variant v) { return v == Variant::kRc ? "verbs:rc" : "verbs:efa"; }

Status prefixed(const Status& status, Variant variant) {
  if (status.ok()) return status;
  return Status(status.code(), fmt::format("{}: {}", variant_name(variant), status.message()));
}

const char* link_layer_name(std::uint8_t link_layer) {
  switch (link_layer) {
    case IBV_LINK_LAYER_INFINIBAND:
      return "InfiniBand";
    case IBV_LINK_LAYER_ETHERNET:
      return "RoCE";
    default:
      return "unspecified link layer";
  }
}

int mtu_bytes(std::uint8_t mtu) { return 128 << mtu; }  // IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5

// Registered host memory: a caller region, or the receive scratch buffer.
struct Memory {
  void* base = nullptr;
  std::size_t bytes = 0;
  ibv_mr* mr = nullptr;
  bool owned = true;              // false: adopted memory the caller frees, or device_memory
  device::Buffer device_memory;   // a dma-buf region's device memory (freed after deregistration)
  std::vector<RegionKey> remote;  // per rank
};

class VerbsFabric final : public FabricBase {
 public:
  VerbsFabric(MPI_Comm comm, double timeout_seconds, Variant variant, device::Device* memory_device)
      : FabricBase(comm, timeout_seconds), variant_(variant), memory_device_(memory_device), slots_(0) {}
  ~VerbsFabric() override;

  // Local setup: libraries, device, port, PD, CQ, QPs in INIT with receives posted. Not collective.
  Status open();
  // Collective: exchanges addresses and brings every QP to RTS.
  Status connect();
  std::string memory_registration() const override { return memory_plan_.staging(); }
  // Regions the fabric allocates are the device's memory when registered through dma-buf.
  device::Device* region_device() const override {
    return memory_plan_.kind == VerbsRegistration::kDmaBuf ? memory_device_ : nullptr;
  }

 protected:
  Result<std::span<std::byte>> create_region(int id, std::size_t bytes, std::byte* memory) override;
  Result<bool> post(const PutOp& op) override;
  Status backend_atomic_support() const override { return atomic_support_; }
  Result<bool> post_atomic(const AtomicOp& op) override;
  Status progress(std::vector<Completion>& sink) override;
  std::string backend_name() const override { return variant_name(variant_); }
  std::string backend_describe() const override;
  bool backend_ordered() const override { return variant_ == Variant::kRc; }
  FabricLimits backend_limits() const override { return limits_; }

 private:
  Status load_libraries();
  Status suitability(ibv_device* device, ibv_context* context) const;
  Status choose_port();
  Status open_queues();
  Status create_rc_qps();
  Status create_srd_qp();
  Status post_recv(int qp_index);
  Status connect_rc(const std::vector<PeerAddress>& peers);
  Status connect_srd(const std::vector<PeerAddress>& peers);
  Result<std::vector<PeerAddress>> exchange_addresses();
  Result<bool> post_rc(const PutOp& op, std::uint32_t slot);
  Result<bool> post_srd(const PutOp& op, std::uint32_t slot);
  // Claims a send slot and send-queue entry for `peer` and posts through `post_wr`; false: backpressure.
  template <typename PostWr>
  Result<bool> post_send(int peer, std::uint64_t context, PostWr&& post_wr);
  // `memory` null: allocate `bytes` zero-filled; otherwise register the caller's memory.
  Result<Memory> register_memory(std::size_t bytes, int access, std::byte* memory = nullptr);
  Result<std::span<std::byte>> register_region(int id, std::size_t bytes, std::byte* memory);
  // Zero-filled memory of memory_device_, registered through dma-buf (memory_plan_ is kDmaBuf).
  Result<Memory> register_device_memory(std::size_t bytes, int access);
  Status teardown();

  Variant variant_;
  device::Device* memory_device_;  // FabricConfig::memory_device
  VerbsMemoryPlan memory_plan_;    // how regions are placed and registered (verbs_dmabuf.hpp)
  const VerbsApi* ibv_ = nullptr;  // libibverbs, loaded by open()
#if EPS_HAVE_EFADV
  const EfaApi* efadv_ = nullptr;  // libefa, loaded by open() for verbs:efa only
#endif
  ibv_device** device_list_ = nullptr;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;                // RC: index = peer; EFA: one
  std::vector<ibv_ah*> ahs_;                // EFA: index = peer
  std::vector<std::uint32_t> remote_qpns_;  // EFA: the peers' SRD QP numbers
  Memory scratch_;
  Memory atomic_result_;  // the 8-byte word every fetch-and-add returns its (ignored) old value into
  Status atomic_support_ = Status(StatusCode::kUnavailable, "no remote atomics: the fabric is not open");
  std::vector<Memory> regions_;  // backend region indices
  std::string device_name_;
  LocalPort port_;
  ibv_port_attr port_attr_{};
  ibv_device_attr device_attr_{};
  union ibv_gid gid_ {};
  QueueDepths depths_;
  FabricLimits limits_;
  SendSlots slots_;
  std::vector<int> sends_in_queue_;  // per QP
  bool efa_rnr_retry_ = false;
  std::vector<ibv_wc> wcs_ = std::vector<ibv_wc>(kPollBatch);
};

VerbsFabric::~VerbsFabric() {
  const Status status = teardown();
  if (!status.ok())
    fmt::print(stderr, "epsuite: {} teardown on rank {}: {}\n", backend_name(), rank(), status.message());
}

// Reverse order of creation; keeps going after a failure so that the rest is still released, and reports
// the first failure.
Status VerbsFabric::teardown() {
  if (ibv_ == nullptr) return Status();  // libibverbs never loaded: nothing was created
  Status first;
  auto check = [&first](int rc, const char* call) {
    if (rc != 0 && first.ok()) first = verbs_error(call, verbs_errno(rc, errno), __FILE__, __LINE__);
  };
  auto release = [this, &check](Memory& m) {
    if (m.mr != nullptr) check(ibv_->dereg_mr(m.mr), "ibv_dereg_mr");
    if (m.owned) std::free(m.base);
    m = Memory{};
  };
  for (auto it = regions_.rbegin(); it != regions_.rend(); ++it) release(*it);
  regions_.clear();
  for (auto it = ahs_.rbegin(); it != ahs_.rend(); ++it) check(ibv_->destroy_ah(*it), "ibv_destroy_ah");
  ahs_.clear();
  for (auto it = qps_.rbegin(); it != qps_.rend(); ++it) check(ibv_->destroy_qp(*it), "ibv_destroy_qp");
  qps_.clear();
  if (cq_ != nullptr) check(ibv_->destroy_cq(cq_), "ibv_destroy_cq");
  cq_ = nullptr;
  release(scratch_);
  release(atomic_result_);
  if (pd_ != nullptr) check(ibv_->dealloc_pd(pd_), "ibv_dealloc_pd");
  pd_ = nullptr;
  if (context_ != nullptr) check(ibv_->close_device(context_), "ibv_close_device");
  context_ = nullptr;
  if (device_list_ != nullptr) ibv_->free_device_list(device_list_);
  device_list_ = nullptr;
  return first;
}

Status VerbsFabric::load_libraries() {
  EPS_ASSIGN_OR_RETURN(ibv_, verbs_api());
#if EPS_HAVE_EFADV
  if (variant_ == Variant::kEfa) {
    EPS_ASSIGN_OR_RETURN(efadv_, efa_api());
  }
#endif
  return Status();
}

// Why a device can or cannot serve this variant.
Status VerbsFabric::suitability(ibv_device* device, ibv_context* context) const {
  if (variant_ == Variant::kRc) {
    if (device->transport_type == IBV_TRANSPORT_IB) return Status();
    return Status(StatusCode::kUnavailable, "not an InfiniBand/RoCE transport");
  }
#if EPS_HAVE_EFADV
  efadv_device_attr attr{};
  const int rc = efadv_->query_device(context, &attr, sizeof(attr));
  if (rc == 0) return Status();
  return Status(StatusCode::kEnvironment,
                fmt::format("not an EFA device (efadv_query_device: {})", std::strerror(rc)));
#else
  return Status(StatusCode::kEnvironment, "built without efadv");
#endif
}

Status VerbsFabric::choose_port() {
  errno = 0;
  int count = 0;
  device_list_ = ibv_->get_device_list(&count);
  const int list_errno = errno;
  if (device_list_ == nullptr) count = 0;
  std::vector<PortCandidate> candidates;
  std::vector<int> device_of;  // candidate -> device list index
  for (int d = 0; d < count; ++d) {
    ibv_device* device = device_list_[d];
    const std::string name = ibv_->get_device_name(device);
    errno = 0;
    ibv_context* context = ibv_->open_device(device);
    if (context == nullptr) {
      candidates.push_back({name, 1, false, false, fmt::format("ibv_open_device: {}", std::strerror(errno))});
      device_of.push_back(d);
      continue;
    }
    const Status suitable = suitability(device, context);
    ibv_device_attr attr{};
    const int query = ibv_->query_device(context, &attr);
    for (int p = 1; query == 0 && p <= attr.phys_port_cnt; ++p) {
      ibv_port_attr port{};
      const int rc = ibv_->query_port(context, static_cast<std::uint8_t>(p), &port);
      const std::string state =
          rc == 0 ? ibv_->port_state_str(port.state) : fmt::format("ibv_query_port: {}", std::strerror(rc));
      candidates.push_back({name, p, suitable.ok(), rc == 0 && port.state == IBV_PORT_ACTIVE,
                            suitable.ok() ? state : fmt::format("{}, {}", suitable.message(), state)});
      device_of.push_back(d);
    }
    if (query != 0) {
      candidates.push_back(
          {name, 1, false, false, fmt::format("ibv_query_device: {}", std::strerror(query))});
      device_of.push_back(d);
    }
    EPS_VERBS_CHECK(ibv_->close_device(context));
  }
  const char* env = std::getenv(kDeviceEnv);
  Result<PortChoice> choice = select_port(candidates, count, env == nullptr ? "" : env);
  if (!choice.ok()) {
    if (device_list_ != nullptr || list_errno == 0) return choice.status();
    return Status(choice.status().code(),
                  fmt::format("{}; ibv_get_device_list: {} (errno {})", choice.status().message(),
                              std::strerror(list_errno), list_errno));
  }
  device_name_ = choice->device;
  port_.port = static_cast<std::uint8_t>(choice->port);
  EPS_VERBS_ASSIGN_OR_RETURN(context_, ibv_->open_device(device_list_[device_of[choice->index]]));
  EPS_VERBS_CHECK(ibv_->query_device(context_, &device_attr_));
  EPS_VERBS_CHECK(ibv_->query_port(context_, port_.port, &port_attr_));
  port_.link_layer = port_attr_.link_layer;
  port_.mtu = static_cast<std::uint8_t>(port_attr_.active_mtu);
  EPS_ASSIGN_OR_RETURN(port_.gid_index, parse_gid_index(std::getenv(kGidIndexEnv), port_attr_.gid_tbl_len));
  EPS_VERBS_CHECK(ibv_->query_gid(context_, port_.port, port_.gid_index, &gid_));
  return check_gid(port_, std::span<const std::uint8_t>(gid_.raw, sizeof(gid_.raw)));
}

Result<Memory> VerbsFabric::register_memory(std::size_t bytes, int access, std::byte* memory) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  Memory m;
  m.bytes = bytes;
  std::size_t registered = std::max<std::size_t>(bytes, 1);
  if (memory != nullptr) {
    m.base = memory;
    m.owned = false;
  } else {
    registered = (registered + page - 1) / page * page;
    const int rc = posix_memalign(&m.base, page, registered);
    if (rc != 0) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("posix_memalign({} bytes): {}", registered, std::strerror(rc)));
    }
    std::memset(m.base, 0, registered);
  }
  errno = 0;
  m.mr = ibv_->reg_mr(pd_, m.base, registered, access);
  if (m.mr == nullptr) {
    const Status failed = verbs_error("ibv_reg_mr(pd, base, bytes, access)", errno, __FILE__, __LINE__);
    if (m.owned) std::free(m.base);
    return failed;
  }
  return m;
}

Result<Memory> VerbsFabric::register_device_memory(std::size_t bytes, int access) {
  Memory m;
  m.bytes = bytes;
  m.owned = false;
  const std::size_t registered = std::max<std::size_t>(bytes, 1);
  EPS_ASSIGN_OR_RETURN(m.device_memory, memory_device_->allocate(registered, device::MemoryKind::kDevice));
  EPS_RETURN_IF_ERROR(memory_device_->fill(m.device_memory.data(), 0, registered));
  m.base = m.device_memory.data();
  EPS_ASSIGN_OR_RETURN(m.mr, register_dma_buf(*ibv_, pd_, *memory_device_, m.base, registered, access));
  return m;
}

Status VerbsFabric::open_queues() {
  EPS_VERBS_ASSIGN_OR_RETURN(pd_, ibv_->alloc_pd(context_));
  EPS_ASSIGN_OR_RETURN(scratch_, register_memory(kScratchBytes, IBV_ACCESS_LOCAL_WRITE));
  atomic_support_ = verbs::atomic_support(variant_name(variant_), variant_ == Variant::kEfa,
                                          device_attr_.atomic_cap, device_name_);
  if (atomic_support_.ok()) {
    EPS_ASSIGN_OR_RETURN(atomic_result_, register_memory(kAtomicBytes, IBV_ACCESS_LOCAL_WRITE));
  }
  int max_wr = device_attr_.max_qp_wr;
  int qps = size();
  int recv = kRecvPerQp;
  std::size_t max_put = port_attr_.max_msg_sz;
#if EPS_HAVE_EFADV
  if (variant_ == Variant::kEfa) {
    efadv_device_attr efa{};
    EPS_VERBS_CHECK(efadv_->query_device(context_, &efa, sizeof(efa)));
    EPS_RETURN_IF_ERROR(check_efa_rdma_write(efa.device_caps, kEfaRdmaWriteFlag));
    efa_rnr_retry_ = (efa.device_caps & EFADV_DEVICE_ATTR_CAPS_RNR_RETRY) != 0;
    max_wr = static_cast<int>(std::min(efa.max_sq_wr, efa.max_rq_wr));
    max_put = efa.max_rdma_size;
    qps = 1;
    recv = kRecvPerQp * size();  // one receive queue for every peer's immediates
  }
#endif
  EPS_ASSIGN_OR_RETURN(depths_, queue_depths(qps, kWantedPuts, recv, max_wr, device_attr_.max_cqe));
  limits_.max_put_bytes = std::min(kMaxPutBytes, max_put);
  limits_.max_outstanding_puts = depths_.max_puts;
  slots_ = SendSlots(static_cast<std::size_t>(depths_.max_puts));
  sends_in_queue_.assign(static_cast<std::size_t>(qps), 0);
  EPS_VERBS_ASSIGN_OR_RETURN(cq_, ibv_->create_cq(context_, depths_.cq, nullptr, nullptr, 0));
  return Status();
}

Status VerbsFabric::post_recv(int qp_index) {
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(scratch_.base), static_cast<std::uint32_t>(kScratchBytes),
              scratch_.mr->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = recv_wr_id(qp_index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  EPS_VERBS_CHECK(ibv_post_recv(qps_[static_cast<std::size_t>(qp_index)], &wr, &bad));
  return Status();
}

Status VerbsFabric::create_rc_qps() {
  for (int peer = 0; peer < size(); ++peer) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = static_cast<std::uint32_t>(depths_.send);
    init.cap.max_recv_wr = static_cast<std::uint32_t>(depths_.recv);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.sq_sig_all = 0;
    EPS_VERBS_ASSIGN_OR_RETURN(ibv_qp * qp, ibv_->create_qp(pd_, &init));
    qps_.push_back(qp);
    QpTransition t = rc_init(port_, atomic_support_.ok());
    EPS_VERBS_CHECK(ibv_->modify_qp(qp, &t.attr, t.mask));
  }
  return Status();
}

Status VerbsFabric::create_srd_qp() {
#if EPS_HAVE_EFADV
  ibv_qp_init_attr_ex init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_DRIVER;
  init.cap.max_send_wr = static_cast<std::uint32_t>(depths_.send);
  init.cap.max_recv_wr = static_cast<std::uint32_t>(depths_.recv);
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.pd = pd_;
  init.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  init.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  efadv_qp_init_attr efa{};
  efa.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD;
  EPS_VERBS_ASSIGN_OR_RETURN(ibv_qp * qp, efadv_->create_qp_ex(context_, &init, &efa, sizeof(efa)));
  qps_.push_back(qp);
  QpTransition t = srd_init(port_);
  EPS_VERBS_CHECK(ibv_->modify_qp(qp, &t.attr, t.mask));
  return Status();
#else
  return Status(StatusCode::kEnvironment, "built without efadv");
#endif
}

Status VerbsFabric::open() {
  EPS_RETURN_IF_ERROR(load_libraries());
  memory_plan_ = plan_verbs_memory(memory_device_, *ibv_);
  EPS_RETURN_IF_ERROR(choose_port());
  EPS_RETURN_IF_ERROR(open_queues());
  EPS_RETURN_IF_ERROR(variant_ == Variant::kRc ? create_rc_qps() : create_srd_qp());
  for (std::size_t q = 0; q < qps_.size(); ++q) {
    for (int i = 0; i < depths_.recv; ++i) EPS_RETURN_IF_ERROR(post_recv(static_cast<int>(q)));
  }
  return Status();
}

Result<std::vector<PeerAddress>> VerbsFabric::exchange_addresses() {
  const auto n = static_cast<std::size_t>(size());
  std::vector<std::byte> out(n * kPeerAddressBytes);
  std::vector<std::byte> in(n * kPeerAddressBytes);
  for (std::size_t peer = 0; peer < n; ++peer) {
    const ibv_qp* qp = qps_[variant_ == Variant::kRc ? peer : 0];
    PeerAddress mine{port_.link_layer,
                     port_.mtu,
                     port_.port,
                     port_attr_.lid,
                     qp->qp_num,
                     initial_psn(rank(), static_cast<int>(peer)),
                     {}};
    std::memcpy(mine.gid.data(), gid_.raw, mine.gid.size());
    const PeerAddressBytes bytes = serialize(mine);
    std::copy(bytes.begin(), bytes.end(),
              out.begin() + static_cast<std::ptrdiff_t>(peer * kPeerAddressBytes));
  }
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Ialltoall(out.data(), static_cast<int>(kPeerAddressBytes), MPI_BYTE, in.data(),
                              static_cast<int>(kPeerAddressBytes), MPI_BYTE, comm(), &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, Deadline(timeout_seconds()), [this] {
    return fmt::format("{} QP addresses from {} ranks (rank {})", backend_name(), size(), rank());
  }));
  std::vector<PeerAddress> peers;
  for (std::size_t peer = 0; peer < n; ++peer) {
    EPS_ASSIGN_OR_RETURN(PeerAddress address,
                         parse_peer_address(std::span<const std::byte>(in).subspan(peer * kPeerAddressBytes,
                                                                                   kPeerAddressBytes),
                                            static_cast<int>(peer)));
    peers.push_back(address);
  }
  return peers;
}

Status VerbsFabric::connect_rc(const std::vector<PeerAddress>& peers) {
  for (int peer = 0; peer < size(); ++peer) {
    ibv_qp* qp = qps_[static_cast<std::size_t>(peer)];
    EPS_ASSIGN_OR_RETURN(QpTransition rtr, rc_rtr(port_, peers[static_cast<std::size_t>(peer)], peer));
    EPS_VERBS_CHECK(ibv_->modify_qp(qp, &rtr.attr, rtr.mask));
    QpTransition rts = rc_rts(initial_psn(rank(), peer));
    EPS_VERBS_CHECK(ibv_->modify_qp(qp, &rts.attr, rts.mask));
  }
  return Status();
}

Status VerbsFabric::connect_srd(const std::vector<PeerAddress>& peers) {
  QpTransition rtr = srd_rtr();
  EPS_VERBS_CHECK(ibv_->modify_qp(qps_[0], &rtr.attr, rtr.mask));
  QpTransition rts = srd_rts(initial_psn(rank(), rank()), efa_rnr_retry_);
  EPS_VERBS_CHECK(ibv_->modify_qp(qps_[0], &rts.attr, rts.mask));
  for (const PeerAddress& peer : peers) {
    ibv_ah_attr attr = address_vector(port_, peer);
    EPS_VERBS_ASSIGN_OR_RETURN(ibv_ah * ah, ibv_->create_ah(pd_, &attr));
    ahs_.push_back(ah);
    remote_qpns_.push_back(peer.qpn);
  }
  return Status();
}

Status VerbsFabric::connect() {
  EPS_ASSIGN_OR_RETURN(std::vector<PeerAddress> peers, exchange_addresses());
  return variant_ == Variant::kRc ? connect_rc(peers) : connect_srd(peers);
}

Result<std::span<std::byte>> VerbsFabric::create_region(int id, std::size_t bytes, std::byte* memory) {
  Result<std::span<std::byte>> region = register_region(id, bytes, memory);
  if (!region.ok()) return prefixed(region.status(), variant_);
  return region;
}

Result<std::span<std::byte>> VerbsFabric::register_region(int id, std::size_t bytes, std::byte* memory) {
  if (static_cast<std::size_t>(id) != regions_.size()) {
    return Status(StatusCode::kEnvironment, fmt::format("region {} created out of order", id));
  }
  const int access = region_access(atomic_support_.ok());
  const bool on_device = memory == nullptr && memory_plan_.kind == VerbsRegistration::kDmaBuf;
  EPS_ASSIGN_OR_RETURN(Memory registered, on_device ? register_device_memory(bytes, access)
                                                    : register_memory(bytes, access, memory));
  regions_.push_back(std::move(registered));
  Memory& region = regions_.back();
  const RegionKeyBytes mine =
      serialize(RegionKey{reinterpret_cast<std::uintptr_t>(region.base), region.mr->rkey});
  std::vector<std::byte> all(static_cast<std::size_t>(size()) * kRegionKeyBytes);
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallgather(mine.data(), static_cast<int>(kRegionKeyBytes), MPI_BYTE, all.data(),
                               static_cast<int>(kRegionKeyBytes), MPI_BYTE, comm(), &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, Deadline(timeout_seconds()), [this, id] {
    return fmt::format("region {} keys from {} ranks (rank {})", id, size(), rank());
  }));
  for (int r = 0; r < size(); ++r) {
    EPS_ASSIGN_OR_RETURN(RegionKey key,
                         parse_region_key(std::span<const std::byte>(all).subspan(
                                              static_cast<std::size_t>(r) * kRegionKeyBytes, kRegionKeyBytes),
                                          r));
    region.remote.push_back(key);
  }
  return std::span<std::byte>(static_cast<std::byte*>(region.base), bytes);
}

Result<bool> VerbsFabric::post_rc(const PutOp& op, std::uint32_t slot) {
  const Memory& local = regions_[static_cast<std::size_t>(op.local_region)];
  const RegionKey& remote =
      regions_[static_cast<std::size_t>(op.remote_region)].remote[static_cast<std::size_t>(op.peer)];
  ibv_sge sge{reinterpret_cast<std::uintptr_t>(local.base) + op.local_offset,
              static_cast<std::uint32_t>(op.bytes), local.mr->lkey};
  ibv_send_wr wr{};
  wr.wr_id = send_wr_id(slot);
  wr.sg_list = op.bytes > 0 ? &sge : nullptr;
  wr.num_sge = op.bytes > 0 ? 1 : 0;
  wr.opcode = op.imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (op.imm) wr.imm_data = imm_to_wire(*op.imm);
  wr.wr.rdma.remote_addr = remote.addr + op.remote_offset;
  wr.wr.rdma.rkey = remote.rkey;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qps_[static_cast<std::size_t>(op.peer)], &wr, &bad);
  if (rc == ENOMEM) return false;
  EPS_VERBS_CHECK(rc);
  return true;
}

Result<bool> VerbsFabric::post_srd(const PutOp& op, std::uint32_t slot) {
#if EPS_HAVE_EFADV
  const Memory& local = regions_[static_cast<std::size_t>(op.local_region)];
  const RegionKey& remote =
      regions_[static_cast<std::size_t>(op.remote_region)].remote[static_cast<std::size_t>(op.peer)];
  ibv_qp_ex* qpx = ibv_->qp_to_qp_ex(qps_[0]);
  ibv_wr_start(qpx);
  qpx->wr_id = send_wr_id(slot);
  qpx->wr_flags = IBV_SEND_SIGNALED;
  if (op.imm) {
    ibv_wr_rdma_write_imm(qpx, remote.rkey, remote.addr + op.remote_offset, imm_to_wire(*op.imm));
  } else {
    ibv_wr_rdma_write(qpx, remote.rkey, remote.addr + op.remote_offset);
  }
  if (op.bytes > 0) {
    ibv_wr_set_sge(qpx, local.mr->lkey, reinterpret_cast<std::uintptr_t>(local.base) + op.local_offset,
                   static_cast<std::uint32_t>(op.bytes));
  } else {
    ibv_wr_set_sge_list(qpx, 0, nullptr);
  }
  ibv_wr_set_ud_addr(qpx, ahs_[static_cast<std::size_t>(op.peer)],
                     remote_qpns_[static_cast<std::size_t>(op.peer)], kSrdQkey);
  const int rc = ibv_wr_complete(qpx);
  if (rc == ENOMEM) return false;
  EPS_VERBS_CHECK(rc);
  return true;
#else
  return Status(StatusCode::kEnvironment, "built without efadv");
#endif
}

template <typename PostWr>
Result<bool> VerbsFabric::post_send(int peer, std::uint64_t context, PostWr&& post_wr) {
  const std::size_t qp = variant_ == Variant::kRc ? static_cast<std::size_t>(peer) : 0;
  if (sends_in_queue_[qp] >= depths_.send) return false;
  const std::optional<std::uint32_t> slot = slots_.acquire(context, peer);
  if (!slot) return false;
  Result<bool> posted = post_wr(*slot);
  if (!posted.ok() || !*posted) {
    EPS_RETURN_IF_ERROR(slots_.release(*slot).status());
    if (!posted.ok()) return prefixed(posted.status(), variant_);
    return false;
  }
  ++sends_in_queue_[qp];
  return true;
}

Result<bool> VerbsFabric::post(const PutOp& op) {
  return post_send(op.peer, op.context, [&](std::uint32_t slot) {
    return variant_ == Variant::kRc ? post_rc(op, slot) : post_srd(op, slot);
  });
}

// Only verbs:rc gets here (atomic_support_ refuses verbs:efa before any post).
Result<bool> VerbsFabric::post_atomic(const AtomicOp& op) {
  return post_send(op.peer, op.context, [&](std::uint32_t slot) -> Result<bool> {
    const RegionKey& remote =
        regions_[static_cast<std::size_t>(op.remote_region)].remote[static_cast<std::size_t>(op.peer)];
    ibv_sge result{reinterpret_cast<std::uintptr_t>(atomic_result_.base),
                   static_cast<std::uint32_t>(kAtomicBytes), atomic_result_.mr->lkey};
    ibv_send_wr wr =
        fetch_add_request(send_wr_id(slot), remote.addr + op.remote_offset, remote.rkey, op.value, &result);
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(qps_[static_cast<std::size_t>(op.peer)], &wr, &bad);
    if (rc == ENOMEM) return false;
    EPS_VERBS_CHECK(rc);
    return true;
  });
}

Status VerbsFabric::progress(std::vector<Completion>& sink) {
  for (int batch = 0; batch < kMaxPollBatches; ++batch) {
    const int n = ibv_poll_cq(cq_, kPollBatch, wcs_.data());
    if (n < 0) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("{}: ibv_poll_cq returned {} on rank {}", backend_name(), n, rank()));
    }
    for (int i = 0; i < n; ++i) {
      Result<WcEvent> event = classify(wcs_[static_cast<std::size_t>(i)], slots_);
      if (!event.ok()) {
        return Status(event.status().code(),
                      fmt::format("{} (rank {}): {}", backend_name(), rank(), event.status().message()));
      }
      if (event->kind == CompletionKind::kRemote) {
        EPS_RETURN_IF_ERROR(prefixed(post_recv(event->qp), variant_));
        sink.push_back(Completion{CompletionKind::kRemote, 0, event->imm});
        continue;
      }
      EPS_ASSIGN_OR_RETURN(SendSlots::Slot slot, slots_.release(event->slot));
      --sends_in_queue_[variant_ == Variant::kRc ? static_cast<std::size_t>(slot.peer) : 0];
      sink.push_back(Completion{CompletionKind::kLocal, slot.context, 0});
    }
    if (n < kPollBatch) break;
  }
  return Status();
}

std::string VerbsFabric::backend_describe() const {
  return fmt::format("{} on {}:{} ({}, GID index {}, MTU {}), libibverbs {}, {}", backend_name(),
                     device_name_, port_.port, link_layer_name(port_.link_layer), port_.gid_index,
                     mtu_bytes(port_.mtu), build_info().libibverbs_version,
                     backend_ordered() ? "ordered" : "unordered") +
         (memory_device_ != nullptr ? fmt::format(", memory {}", memory_plan_.staging()) : "");
}

// Every rank learns whether every rank's setup step succeeded, so that none waits for a peer that gave up.
Status agree(const Status& local, MPI_Comm comm, double timeout_seconds) {
  EPS_ASSIGN_OR_RETURN(std::vector<int> codes,
                       mpi::allgather_int(static_cast<int>(local.code()), comm, Deadline(timeout_seconds)));
  if (!local.ok()) return local;
  std::vector<int> ranks;
  int worst = 0;
  for (std::size_t r = 0; r < codes.size(); ++r) {
    if (codes[r] != 0) ranks.push_back(static_cast<int>(r));
    worst = std::max(worst, codes[r]);
  }
  if (ranks.empty()) return Status();
  // The peers' own outcome (unavailable device, or an error) is this rank's too.
  return Status(static_cast<StatusCode>(worst),
                fmt::format("rank(s) {} failed to set up verbs (see their errors)", fmt::join(ranks, ", ")));
}

}  // namespace

BuildInfo build_info() {
  return BuildInfo{EPS_VERBS_VERSION, EPS_HAVE_EFADV != 0, EPS_HAVE_EFADV_RDMA_WRITE != 0};
}

Result<std::unique_ptr<Fabric>> make_verbs_fabric(const FabricConfig& config, Variant variant) {
  if (variant == Variant::kEfa && !build_info().efadv) {
    return Status(StatusCode::kUnavailable,
                  "verbs:efa: built without efadv (infiniband/efadv.h and libefa not found)");
  }
  EPS_ASSIGN_OR_RETURN(MPI_Comm comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto fabric = std::make_unique<VerbsFabric>(comm, config.timeout_seconds, variant, config.memory_device);
  EPS_RETURN_IF_ERROR(prefixed(agree(fabric->open(), comm, config.timeout_seconds), variant));
  EPS_RETURN_IF_ERROR(prefixed(agree(fabric->connect(), comm, config.timeout_seconds), variant));
  EPS_RETURN_IF_ERROR(prefixed(fabric->start(), variant));
  return std::unique_ptr<Fabric>(std::move(fabric));
}

}  // namespace eps::fabric::verbs

void eps_register_fabric_verbs(eps::fabric::FabricRegistry& registry) {
  using eps::fabric::verbs::Variant;
  registry.add(eps::fabric::FabricEntry{
      "verbs",
      {"rc", "efa"},
      "libibverbs: RC write-with-immediate (ConnectX, Broadcom; ordered) and EFA SRD via efadv (unordered)",
      [](const eps::fabric::FabricConfig& config) {
        return eps::fabric::verbs::make_verbs_fabric(config,
                                                     config.variant == "efa" ? Variant::kEfa : Variant::kRc);
      },
      {"efa"},
      [] { return eps::fabric::verbs::verbs_api().status(); }});
}
