#include "impls/transport/mpi/mpi_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_mpi(eps::transport::TransportRegistry& registry) {
  registry.add({"mpi", "MPI_Ialltoallv baseline (Megatron-LM alltoall dispatcher)",
                eps::transport::make_mpi_transport});
}
