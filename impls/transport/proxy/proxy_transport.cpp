#include "impls/transport/proxy/proxy_transport.hpp"

#include <cstdlib>
#include <string_view>

#include <fmt/format.h>

#include "impls/channel/proxy_engine.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/data_path/data_path.hpp"
#include "impls/transport/frame/frame.hpp"
#include "impls/transport/protocol/direct_protocol.hpp"
#include "impls/transport/proxy/fifo_put_path.hpp"

namespace eps::transport {
namespace {

constexpr const char* kAcrossNodesVariable = "EPS_PROXY_ACROSS_NODES";

Status check_proxy_threads(const fabric::FabricSelection& selection) {
  if (selection.proxy_threads < 1 || selection.proxy_threads > channel::kMaxProxyThreads) {
    return out_of_range("--proxy-threads", 1, channel::kMaxProxyThreads, selection.proxy_threads);
  }
  return Status();
}

// Across nodes the proxy is opt-in (EPS_PROXY_ACROSS_NODES=1, docs/channel.md): its conformance suite passes
// between the virtual cluster's nodes, but a layer bench there once ended in a timeout not yet understood.
// Every rank sees the same layout and, under mpirun -x, the same environment.
Status check_nodes_allowed(const TransportConfig& config) {
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout nodes,
                       mpi::node_layout(config.comm, Deadline(config.timeout_seconds)));
  const char* opt_in = std::getenv(kAcrossNodesVariable);
  if (nodes.nodes() == 1 || (opt_in != nullptr && std::string_view(opt_in) == "1")) return Status();
  return Status(StatusCode::kUnavailable,
                fmt::format("proxy across {} nodes is experimental: set {}=1 to run it (docs/channel.md)",
                            nodes.nodes(), kAcrossNodesVariable));
}

}  // namespace

Capabilities proxy_capabilities() { return direct_protocol_capabilities(); }

Result<std::unique_ptr<Transport>> make_proxy_transport(const TransportConfig& config,
                                                        const fabric::FabricSelection& selection) {
  // The shape and --proxy-threads are checked before the fabric is made (and again by _over).
  int size = 0;
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_RETURN_IF_ERROR(validate_config(config, size, proxy_capabilities()));
  EPS_RETURN_IF_ERROR(check_proxy_threads(selection));
  EPS_RETURN_IF_ERROR(check_nodes_allowed(config));
  // The proxy's data path is not GPU-resident yet: it stages a device the host cannot address through host
  // memory (transport.hpp "Memory"), so its fabric keeps host regions (docs/devices.md 12.9).
  fabric::FabricSelection host_regions = selection;
  if (config.device != nullptr && !config.device->host_accessible()) host_regions.memory_device = nullptr;
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Fabric> fab,
                       fabric::make_fabric(host_regions, config.comm, config.timeout_seconds));
  return make_proxy_transport_over(config, host_regions, std::move(fab));
}

Result<std::unique_ptr<Transport>> make_proxy_transport_over(const TransportConfig& config,
                                                             const fabric::FabricSelection& selection,
                                                             std::unique_ptr<fabric::Fabric> fab) {
  EPS_RETURN_IF_ERROR(validate_config(config, fab->size(), proxy_capabilities()));
  EPS_RETURN_IF_ERROR(check_proxy_threads(selection));
  const int rank = fab->rank();
  const int size = fab->size();
  auto data_path = std::make_unique<DataPath>(config, rank, size);
  const int threads = selection.proxy_threads;
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<Protocol> protocol,
                       open_direct_protocol("proxy", config, selection, std::move(fab), *data_path,
                                            [threads](const PutContext& context) {
                                              return start_fifo_put_path(context, threads);
                                            }));
  return make_framed_transport(config, proxy_capabilities(), rank, size, std::move(data_path),
                               std::move(protocol));
}

}  // namespace eps::transport
