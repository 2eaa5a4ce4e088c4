#include "impls/transport/proxy/proxy_transport.hpp"
#include "impls/transport/registry.hpp"

void eps_register_transport_proxy(eps::transport::TransportRegistry& registry) {
  registry.add({.name = "proxy",
                .summary = "UCCL-EP design: puts as 16-byte commands through FIFOs to CPU proxy threads "
                           "(docs/channel.md 7), over --fabric with --signal",
                .factory = eps::transport::make_proxy_transport,
                .capabilities = eps::transport::proxy_capabilities,
                .uses_fabric = true});
}
