#include "impls/transport/direct/direct_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_direct(eps::transport::TransportRegistry& registry) {
  registry.add({"direct", "host-initiated one-sided puts over --fabric with --signal (SPEC 6)",
                eps::transport::make_direct_transport});
}
