#include "impls/transport/direct/direct_transport.hpp"

#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/data_path/data_path.hpp"
#include "impls/transport/direct/fabric_put_path.hpp"
#include "impls/transport/frame/frame.hpp"
#include "impls/transport/protocol/direct_protocol.hpp"

namespace eps::transport {

Capabilities direct_capabilities() { return direct_protocol_capabilities(); }

Result<std::unique_ptr<Transport>> make_direct_transport(const TransportConfig& config,
                                                         const fabric::FabricSelection& selection) {
  int size = 0;
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_RETURN_IF_ERROR(validate_config(config, size, direct_capabilities()));
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Fabric> fab,
                       fabric::make_fabric(selection, config.comm, config.timeout_seconds));
  return make_direct_transport_over(config, selection, std::move(fab));
}

Result<std::unique_ptr<Transport>> make_direct_transport_over(const TransportConfig& config,
                                                              const fabric::FabricSelection& selection,
                                                              std::unique_ptr<fabric::Fabric> fab) {
  EPS_RETURN_IF_ERROR(validate_config(config, fab->size(), direct_capabilities()));
  const int rank = fab->rank();
  const int size = fab->size();
  auto data_path = std::make_unique<DataPath>(config, rank, size, /*device_resident=*/true);
  EPS_ASSIGN_OR_RETURN(
      std::unique_ptr<Protocol> protocol,
      open_direct_protocol("direct", config, selection, std::move(fab), *data_path,
                           [](const PutContext& context) -> Result<std::unique_ptr<PutPath>> {
                             return make_fabric_put_path(context);
                           }));
  return make_framed_transport(config, direct_capabilities(), rank, size, std::move(data_path),
                               std::move(protocol));
}

}  // namespace eps::transport
