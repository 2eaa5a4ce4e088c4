// The `direct` transport: host-initiated one-sided puts over any Fabric (impls/fabric) with any signal
// strategy (docs/fabrics.md 6.2), implementing HT rank-major dispatch with the ht-rank / ht-two-level trees
// and LL dispatch with ll-weighted (docs/dispatch.md 5.2, 5.4, 5.5). Selected by a FabricSelection (--fabric,
// --signal,
// --chaos, --allow-unsafe).
//
// Protocol. Every operation (dispatch, cached dispatch, combine) is one exchange: each rank packs, per
// destination, the records it sends into a registered send region and puts them straight into fixed slots of
// the destination's registered receive region (no count exchange first: a slot per source holds T_max
// rank-major records, or T_max x min(K, L) LL records in (local expert, token) order, found again through
// the counts of the signal record), then puts one signal
// record per destination (its own tokens-per-rank row, for the docs/dispatch.md 5.1 rank prefix matrix, and
// per-channel record counts) into the destination's signal region. Where the destination knows those counts
// already (combine, cached dispatch: from the handle) and the strategy allows it (fabric-order, imm-seq), the
// last data put to it carries the signal immediate instead and no record is put (docs/fabrics.md 6.2); a
// destination without data still gets its record. The receiver waits until the signal
// strategy calls every source's stream complete (every wait bounded by the timeout, docs/errors.md 10), then
// unpacks into the caller's buffers in canonical order (rank-major rows by (r, t); LL blocks by r ascending,
// rows by t), so the LL output is ordered. Combine returns each received row to its source in the order the
// source sent them, into a per-peer slot of the source's receive region; the source reduces straight from
// there. Records: rank-major = token, K expert ids, K weights, row, fp8 scales; LL = token, slot, expert,
// weight (16 bytes, docs/dispatch.md 5.6), row, scales. A stream's records go in one put (split at 4 MiB /
// 8191 records), except under recv-count, whose immediates name one local expert per put.
//
// Operations alternate two receive/signal buffer sets by parity; a rank starts operation n+1 only after
// receiving everything of n, which its peers sent only after finishing n-1, so a parity's buffers are never
// overwritten while in use. The send region and signal records alternate too. An operation ends with a
// quiet (Fabric::quiet: every put it issued is placed at its target), since on providers with manual
// progress a put still queued at the sender would wait for a sender that has gone on to compute or to MPI;
// teardown quiets and meets the peers.
//
// Declares: layouts ht-rank-major and ll (ordered); trees ht-rank, ht-two-level, ll-weighted; bf16, fp8;
// cached dispatch; host memory; at most 64 ranks (the 6-bit source field of the immediates).
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
