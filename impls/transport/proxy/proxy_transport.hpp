// The `proxy` transport: the UCCL-EP design (docs/channel.md 7). It runs the direct transport's protocol
// (impls/transport/direct: records into fixed slots of the destinations' receive regions, a signal record per
// destination, any fabric and signal strategy), but the transport's thread, standing in for the GPU kernels,
// never touches the fabric during an operation: every put becomes a 16-byte WRITE command in the FIFO of its
// destination (one FIFO per destination, so every command for one (destination, channel) takes one FIFO, one
// proxy thread and one fabric), and CPU proxy threads (--proxy-threads, FabricSelection::proxy_threads,
// default 4) post them, compute each put's immediate with the signal strategy in FIFO order (so ordering on a
// reordering fabric is emulated by the proxies, as on EFA), cap puts in flight per FIFO and count
// completions. sender-barrier's "signal after the data is placed" is a QUIET command ahead of the signal
// writes; an operation ends with a quiet of the proxies (every command handled, every put completed).
// Received immediates come back to the transport's thread through the engine
// (impls/channel/proxy_engine.hpp).
//
// Declares the direct transport's contracts. Limits of the command (docs/channel.md 7.1): fewer than 4096
// ranks and local experts, regions below 4 GiB (offsets are 32-bit), puts below 16 MiB; a shape beyond them
// is refused at creation (kInvalidArgument naming it).
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
