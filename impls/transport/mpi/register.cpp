#include "impls/transport/mpi/mpi_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_mpi(eps::transport::TransportRegistry& registry) {
  registry.add({.name = "mpi",
                .summary = "MPI_Ialltoallv baseline (Megatron-LM alltoall dispatcher)",
                // The baseline moves bytes with MPI, never over a fabric: the selection does not apply.
                .factory =
                    [](const eps::transport::TransportConfig& config, const eps::fabric::FabricSelection&) {
                      return eps::transport::make_mpi_transport(config);
                    },
                .capabilities = eps::transport::mpi_capabilities,
                .uses_fabric = false});
}
