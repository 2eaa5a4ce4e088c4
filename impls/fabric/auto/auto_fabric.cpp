#include "impls/fabric/auto/auto_fabric.hpp"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/device/device.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric {
namespace {

// A world rank's place: on this node (its index in the node's shm fabric) or elsewhere (-1).
struct Routing {
  std::vector<int> node_index;  // per world rank
  int nodes = 1;
};

class AutoFabric final : public Fabric {
 public:
  AutoFabric(std::unique_ptr<Fabric> intra, std::unique_ptr<Fabric> inter, Routing routing)
      : intra_(std::move(intra)),
        inter_(std::move(inter)),
        routing_(std::move(routing)),
        atomic_support_(parts_atomic_support()) {}

  std::string name() const override { return fmt::format("auto({}+{})", intra_->name(), inter_->name()); }
  std::string describe() const override {
    return fmt::format("{} nodes; inside a node {}; between nodes {}", routing_.nodes, intra_->describe(),
                       inter_->describe());
  }
  bool ordered() const override { return intra_->ordered() && inter_->ordered(); }
  int rank() const override { return inter_->rank(); }
  int size() const override { return inter_->size(); }
  FabricLimits limits() const override {
    const FabricLimits a = intra_->limits();
    const FabricLimits b = inter_->limits();
    return {std::min(a.max_put_bytes, b.max_put_bytes),
            std::min(a.max_outstanding_puts, b.max_outstanding_puts)};
  }

  Result<Region> allocate(std::size_t bytes) override {
    EPS_ASSIGN_OR_RETURN(Region region, intra_->allocate(bytes));
    EPS_ASSIGN_OR_RETURN(Region adopted, inter_->adopt(region.local));
    if (adopted.id != region.id) {
      return Status(StatusCode::kEnvironment, fmt::format("{}: region ids diverged (shm {}, {} {})", name(),
                                                          region.id, inter_->name(), adopted.id));
    }
    return region;
  }
  Result<Region> adopt(std::span<std::byte>) override {
    return invalid_argument("adopt", "{} writes into the node's shared-memory segments only; use allocate",
                            name());
  }

  Status validate(const PutOp& op) const override {
    EPS_ASSIGN_OR_RETURN(const Route route, route_of(op));
    return route.part->validate(route.op);
  }
  Result<bool> try_put(const PutOp& op) override {
    EPS_ASSIGN_OR_RETURN(const Route route, route_of(op));
    return route.part->try_put(route.op);
  }
  // Atomics need both parts: which part carries one depends on the peer, and a caller cannot tell. Without
  // them every atomic is refused alike, in this fabric's name with the part's reason (found on the virtual
  // cluster: shm took intra-node adds while atomic_support() said no).
  Status atomic_support() const override { return atomic_support_; }
  Status validate(const AtomicOp& op) const override {
    EPS_RETURN_IF_ERROR(atomic_support_);
    EPS_ASSIGN_OR_RETURN(const AtomicRoute route, route_of(op));
    return route.part->validate(route.op);
  }
  Result<bool> try_atomic_add(const AtomicOp& op) override {
    if (!atomic_support_.ok()) return atomic_support_;
    EPS_ASSIGN_OR_RETURN(const AtomicRoute route, route_of(op));
    return route.part->try_atomic_add(route.op);
  }
  Result<std::size_t> poll(std::span<Completion> out) override {
    Fabric* first = intra_first_ ? intra_.get() : inter_.get();
    Fabric* second = intra_first_ ? inter_.get() : intra_.get();
    intra_first_ = !intra_first_;
    EPS_ASSIGN_OR_RETURN(const std::size_t n, first->poll(out));
    EPS_ASSIGN_OR_RETURN(const std::size_t m, second->poll(out.subspan(n)));
    return n + m;
  }
  Status quiet(const Deadline& deadline) override {
    EPS_RETURN_IF_ERROR(intra_->quiet(deadline));
    return inter_->quiet(deadline);
  }
  Status flush(const Deadline& deadline) override {
    EPS_RETURN_IF_ERROR(intra_->flush(deadline));
    return inter_->flush(deadline);
  }
  // Only the inter-node part waits on peers: a rank blocked in shm's barrier would stop driving the
  // inter-node provider, which on socket providers places a peer's puts only while the target progresses,
  // and two ranks would wait on each other. shm places its bytes when a put is posted, so its quiet never
  // waits, and the inter-node barrier over every rank orders them (after a fence) like its own.
  Status barrier(const Deadline& deadline) override {
    EPS_RETURN_IF_ERROR(intra_->quiet(deadline));
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return inter_->barrier(deadline);
  }
  // A peer on this node: the intra-node part's mapping of its region (docs/fabrics.md 6.5); others: none.
  std::span<std::byte> peer_memory(int peer, int region) const override {
    if (peer < 0 || peer >= size()) return {};
    const int local = routing_.node_index[static_cast<std::size_t>(peer)];
    return local < 0 ? std::span<std::byte>() : intra_->peer_memory(local, region);
  }

 private:
  struct Route {
    Fabric* part;
    PutOp op;
  };
  Result<Route> route_of(const PutOp& op) const {
    if (op.peer < 0 || op.peer >= size()) return out_of_range("put.peer", 0, size() - 1, op.peer);
    const int local = routing_.node_index[static_cast<std::size_t>(op.peer)];
    if (local < 0) return Route{inter_.get(), op};
    PutOp translated = op;
    translated.peer = local;
    return Route{intra_.get(), translated};
  }
  // Both parts' support, decided once when the parts are open (it does not change afterwards).
  Status parts_atomic_support() const {
    for (const Fabric* part : {intra_.get(), inter_.get()}) {
      const Status support = part->atomic_support();
      if (!support.ok()) return no_remote_atomics(name(), support.message());
    }
    return Status();
  }

  // An atomic takes the same part as a put to its peer, so ordering against that initiator's puts holds.
  struct AtomicRoute {
    Fabric* part;
    AtomicOp op;
  };
  Result<AtomicRoute> route_of(const AtomicOp& op) const {
    if (op.peer < 0 || op.peer >= size()) return out_of_range("atomic.peer", 0, size() - 1, op.peer);
    const int local = routing_.node_index[static_cast<std::size_t>(op.peer)];
    if (local < 0) return AtomicRoute{inter_.get(), op};
    AtomicOp translated = op;
    translated.peer = local;
    return AtomicRoute{intra_.get(), translated};
  }

  std::unique_ptr<Fabric> intra_;
  std::unique_ptr<Fabric> inter_;
  Routing routing_;
  Status atomic_support_;  // parts_atomic_support(), after the parts
  bool intra_first_ = true;
};

Result<Routing> route_by_node(MPI_Comm comm, MPI_Comm node, const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout layout, mpi::node_layout(comm, deadline));
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  EPS_ASSIGN_OR_RETURN(const std::vector<int> members,
                       mpi::allgather_int(rank, node, deadline, "world ranks"));
  Routing routing{std::vector<int>(layout.node_of.size(), -1), layout.nodes()};
  for (std::size_t i = 0; i < members.size(); ++i) {
    routing.node_index[static_cast<std::size_t>(members[i])] = static_cast<int>(i);
  }
  return routing;
}

// The first candidate that opens on every rank. A rank whose candidate opened while a peer's failed drops
// it again, so that all ranks move on to the next candidate together; a configuration error on any rank (a
// bad --iface, exit code 2) ends the search on every rank.
Result<std::unique_ptr<Fabric>> open_inter_node(const FabricConfig& config) {
  constexpr int kInvalidArgumentExit = exit_code_of(StatusCode::kInvalidArgument);
  std::vector<std::string> reasons;
  for (std::string_view candidate : kInterNodeCandidates) {
    FabricConfig part = config;
    part.name = std::string(candidate);
    Result<std::unique_ptr<Fabric>> made = config.make_other(part);
    EPS_ASSIGN_OR_RETURN(const std::vector<int> codes,
                         mpi::allgather_int(made.status().exit_code(), config.comm,
                                            Deadline(config.timeout_seconds), "inter-node fabric results"));
    if (std::find(codes.begin(), codes.end(), kInvalidArgumentExit) != codes.end()) {
      if (!made.ok()) return made.status();
      return invalid_argument("--fabric", "auto: {} was refused on another rank (see its error)", candidate);
    }
    const bool everywhere = std::all_of(codes.begin(), codes.end(), [](int code) { return code == 0; });
    if (everywhere) return made;
    reasons.push_back(made.ok() ? fmt::format("{}: failed on another rank", candidate)
                                : made.status().message());
  }
  return Status(
      StatusCode::kEnvironment,
      fmt::format("auto: no inter-node fabric opens on every rank; tried {}", fmt::join(reasons, "; ")));
}

// Whether the regions should be the device's own memory, mapped between the ranks (the ipc fabric): a device
// the host cannot address (a GPU, cpu-isolated) that can export its memory to other processes. Probed with
// one small export, so that a device without IPC (a plugin of ABI version 2) keeps shm.
bool prefers_ipc(device::Device* device) {
  if (device == nullptr || device->host_accessible()) return false;
  Result<device::Buffer> probe = device->allocate(256, device::MemoryKind::kDevice);
  return probe.ok() && device->export_memory(probe->data(), probe->bytes()).ok();
}

Result<std::unique_ptr<Fabric>> make_auto_fabric(const FabricConfig& config) {
  const Deadline deadline(config.timeout_seconds);
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout layout, mpi::node_layout(config.comm, deadline));
  FabricConfig shm = config;
  shm.name = "shm";
  if (layout.nodes() == 1) {
    FabricConfig intra = config;
    intra.name = prefers_ipc(config.memory_device) ? "ipc" : "shm";
    return config.make_other(intra);
  }
  EPS_ASSIGN_OR_RETURN(MPI_Comm node, mpi::comm_split_node(config.comm, deadline));
  Result<Routing> routing = route_by_node(config.comm, node, deadline);
  shm.comm = node;
  Result<std::unique_ptr<Fabric>> intra = routing.ok() ? config.make_other(shm) : routing.status();
  MPI_Comm_free(&node);  // the shm fabric duplicated it
  EPS_RETURN_IF_ERROR(intra.status());
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<Fabric> inter, open_inter_node(config));
  return std::unique_ptr<Fabric>(
      std::make_unique<AutoFabric>(std::move(intra).value(), std::move(inter), std::move(routing).value()));
}

}  // namespace
}  // namespace eps::fabric

void eps_register_fabric_auto(eps::fabric::FabricRegistry& registry) {
  registry.add(eps::fabric::FabricEntry{
      "auto",
      {},
      "shm inside a node (ipc on one node when the regions go to a device the host cannot address and it "
      "exports memory); between nodes the first of verbs:rc, verbs:efa, libfabric:efa, libfabric:verbs, "
      "libfabric:tcp that opens on every rank",
      &eps::fabric::make_auto_fabric});
}
