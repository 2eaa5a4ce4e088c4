// The `proxy` transport: the UCCL-EP design (docs/channel.md 7). The direct protocol
// (protocol/direct_protocol.hpp: records into fixed slots of the destinations' receive regions, a signal
// record per destination, any fabric and signal strategy) whose every put goes through a command FIFO to CPU
// proxy threads (fifo_put_path.hpp: --proxy-threads, FabricSelection::proxy_threads, default 4), in the frame
// every built-in transport shares (frame/frame.hpp). Declares the direct protocol's contracts, within the
// command's limits (docs/channel.md 7.1, fifo_put_path.hpp).
#pragma once

#include <memory>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

Capabilities proxy_capabilities();
// Collective over config.comm, like make_direct_transport; also starts the proxy threads.
Result<std::unique_ptr<Transport>> make_proxy_transport(const TransportConfig& config,
                                                        const fabric::FabricSelection& fabric);
// The same over a fabric the caller made, like make_direct_transport_over (no check of the node layout).
Result<std::unique_ptr<Transport>> make_proxy_transport_over(const TransportConfig& config,
                                                             const fabric::FabricSelection& selection,
                                                             std::unique_ptr<fabric::Fabric> fab);

}  // namespace eps::transport
