// The put path of the `proxy` transport (protocol/put_path.hpp), the UCCL-EP design (docs/channel.md 7): the
// transport's thread, standing in for the GPU kernels, never touches the fabric during an operation. Every
// put becomes a 16-byte WRITE command in the FIFO of its destination (one FIFO per destination, so every
// command for one (destination, channel) takes one FIFO, one proxy thread and one fabric), pushed by the
// fifo_push kernel of the data path's device, one producer per command; CPU proxy threads (`proxy_threads`,
// default 4) post them, compute each put's immediate with the signal strategy in FIFO order (so ordering on a
// reordering fabric is emulated by the proxies, as on EFA), cap puts in flight per FIFO and count
// completions. sender-barrier's "signal after the data is placed" is a QUIET command ahead of the signal
// writes; an operation ends with a quiet of the proxies (every command handled, every put completed).
// Received immediates come back to the transport's thread through the engine
// (impls/channel/proxy_engine.hpp).
//
// Limits of the command (docs/channel.md 7.1): fewer than 4096 ranks and local experts, regions below 4 GiB
// (offsets are 32-bit), puts below 16 MiB; a shape beyond them is refused (kInvalidArgument naming it).
#pragma once

#include <memory>

#include "impls/transport/protocol/put_path.hpp"

namespace eps::transport {

// Checks the command limits, then starts the proxy threads. Destroying the put path stops them.
Result<std::unique_ptr<PutPath>> start_fifo_put_path(const PutContext& context, int proxy_threads);

}  // namespace eps::transport
