// The direct protocol: host-initiated one-sided puts into fixed slots of the peers' registered memory, over
// any Fabric (impls/fabric) with any signal strategy (docs/fabrics.md 6.2). It is the protocol of both the
// `direct` transport (its puts posted by the calling thread, direct/) and the `proxy` transport (its puts
// handed to CPU proxy threads through command FIFOs, proxy/, docs/channel.md 7): they differ only in the put
// path (put_path.hpp). It implements HT rank-major dispatch with the ht-rank / ht-two-level trees and LL
// dispatch with ll-weighted (docs/dispatch.md 5.2, 5.4, 5.5), fp8 quantized while packing (5.8).
//
// Protocol. Every operation (dispatch, cached dispatch, combine) is one exchange: each rank packs, per
// destination, the records it sends into a registered send region and puts them straight into fixed slots of
// the destination's registered receive region (no count exchange first: slots.hpp), then puts one signal
// record per destination (its own tokens-per-rank row, for the docs/dispatch.md 5.1 rank prefix matrix, and
// per-channel record counts) into the destination's signal region. Where the destination knows those counts
// already (combine, cached dispatch: from the handle) and the strategy allows it (fabric-order, imm-seq), the
// last data put to it carries the signal immediate instead and no record is put (docs/fabrics.md 6.2); a
// destination without data still gets its record. The receiver waits until the signal strategy calls every
// source's stream complete (every wait bounded by the timeout, docs/errors.md 10), then unpacks into the
// caller's buffers in canonical order (rank-major rows by (r, t); LL blocks by r ascending, rows by t), so
// the LL output is ordered. Combine returns each received row to its source in the order the source sent
// them, into a per-peer slot of the source's receive region; the source reduces straight from there. A
// stream's records go in one put (split at 4 MiB / 8191 records), except under recv-count, whose immediates
// name one local expert per put. This rank's own stream is written in place into its own receive and signal
// regions (no put, no signal), except under the chaos decorator, whose job is to reorder and delay every put,
// these included (the negative control of docs/fabrics.md 6.3 counts on it).
//
// Operations alternate two receive/signal buffer sets by parity; a rank starts operation n+1 only after
// receiving everything of n, which its peers sent only after finishing n-1, so a parity's buffers are never
// overwritten while in use. The send region and signal records alternate too. An operation ends with a quiet
// (every put it issued is placed at its target), since on providers with manual progress a put still queued
// at the sender would wait for a sender that has gone on to compute or to MPI; teardown quiets and meets the
// peers.
//
// Declares: layouts ht-rank-major and ll (ordered); trees ht-rank, ht-two-level, ll-weighted; bf16, fp8;
// cached dispatch; host and device memory (device memory GPU-resident where the data path is, docs/devices.md
// 12.9, else staged by the frame); at most 64 ranks (the 6-bit source field of the immediates).
#pragma once

#include <memory>
#include <string_view>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/transport/data_path/data_path.hpp"
#include "impls/transport/frame/frame.hpp"
#include "impls/transport/protocol/put_path.hpp"

namespace eps::transport {

Capabilities direct_protocol_capabilities();

// Collective over the fabric's ranks: sizes and allocates the regions, makes the signal strategy of
// `selection` (kInvalidArgument naming --signal for one the fabric or the shape cannot take), makes the put
// path with `make_put_path`, and meets the peers. `name` is the transport's ("direct", "proxy").
Result<std::unique_ptr<Protocol>> open_direct_protocol(std::string_view name, const TransportConfig& config,
                                                       const fabric::FabricSelection& selection,
                                                       std::unique_ptr<fabric::Fabric> fabric,
                                                       DataPath& data_path,
                                                       const PutPathFactory& make_put_path);

}  // namespace eps::transport
