// The `mpi` transport: Megatron-LM's alltoall token dispatcher as the baseline every other transport is
// compared with (docs/dispatch.md 5). Host buffers only.
//
// Each call is two or three collectives on the transport's private duplicate of the communicator, every
// one bounded by the configured deadline (docs/errors.md 10): MPI_Ialltoall of the per-destination record
// counts (per local expert for the expert-major and LL layouts), MPI_Iallgather of the per-rank token counts
// (the docs/dispatch.md 5.1 rank prefix matrix), then one MPI_Ialltoallv of whole records (a small header,
// the payload row and its fp8 scales) — never one message per token. A cached dispatch skips the two count
// collectives. Combine sends each received row back with one MPI_Ialltoallv and reduces at the source in
// the order its tree prescribes. ht-two-level applies the per-node rounding of docs/dispatch.md 5.5 at the
// source: MPI has no node-level staging, so the traffic is that of ht-rank.
//
// Declares: layouts ht-rank-major, ht-expert-major, ll (ordered); trees ht-rank, ht-two-level,
// ll-weighted; bf16 and fp8; cached dispatch; host memory.
#pragma once

#include <memory>

#include "impls/transport/transport.hpp"

namespace eps::transport {

Capabilities mpi_capabilities();
// Collective over config.comm (duplicates it).
Result<std::unique_ptr<Transport>> make_mpi_transport(const TransportConfig& config);

}  // namespace eps::transport
