// The `direct` transport: the direct protocol (protocol/direct_protocol.hpp: host-initiated one-sided puts
// over any Fabric with any signal strategy, docs/fabrics.md 6.2) whose puts the calling thread posts itself
// (fabric_put_path.hpp), in the frame every built-in transport shares (frame/frame.hpp). Selected by a
// FabricSelection (--fabric, --signal, --chaos, --allow-unsafe). Declares the direct protocol's contracts.
#pragma once

#include <memory>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

Capabilities direct_capabilities();
// Collective over config.comm: creates the fabric (with the chaos decorator when fabric.chaos is set) and
// the signal strategy. kInvalidArgument for a bad shape, fabric name, chaos spec or signal choice (e.g.
// fabric-order on an unordered fabric without allow_unsafe); kEnvironment when the fabric cannot run here.
Result<std::unique_ptr<Transport>> make_direct_transport(const TransportConfig& config,
                                                         const fabric::FabricSelection& fabric);
// The same over a fabric the caller made (collective over the fabric's ranks): how a test wraps the fabric to
// watch the transport's puts. `selection` gives the signal strategy and the chaos spec of describe().
Result<std::unique_ptr<Transport>> make_direct_transport_over(const TransportConfig& config,
                                                              const fabric::FabricSelection& selection,
                                                              std::unique_ptr<fabric::Fabric> fab);

}  // namespace eps::transport
