// The ibverbs fabric (docs/fabrics.md 6.1): family "verbs" with variants "rc" and "efa"
// (fabric_registry.hpp).
//
// verbs:rc - reliable-connected QPs on InfiniBand or RoCE devices (ConnectX, Broadcom, ...). One
// protection domain, one completion queue, one RC QP per peer (this rank included, connected to itself),
// connected RESET->INIT->RTR->RTS with every peer's (LID, GID, QP number, PSN, MTU) exchanged over MPI
// (verbs_setup.hpp has the attributes; verbs_wire.hpp the records). Puts are signaled RDMA writes, with
// immediate (IBV_WR_RDMA_WRITE_WITH_IMM, imm in network byte order) when they carry one. ordered() is
// true: an RC QP places writes, and delivers their immediates, in posting order.
//
// verbs:efa - AWS EFA's Scalable Reliable Datagram through efadv: one SRD QP (efadv_create_qp_ex) and one
// address handle per peer; puts go through the extended QP API (ibv_wr_rdma_write[_imm]). Requires that
// efadv_query_device reports RDMA write; ordered() is false (SRD delivers out of order). A build without
// efadv fails creation with "verbs:efa: built without efadv".
//
// Atomics (verbs_atomic.hpp): verbs:rc posts IBV_WR_ATOMIC_FETCH_AND_ADD on the peer's RC QP, its old value
// returned into one registered 8-byte scratch word that is never read; regions and QPs get
// IBV_ACCESS_REMOTE_ATOMIC. Available when the device's atomic_cap is not IBV_ATOMIC_NONE; the send
// completion follows the responder's execution (applied at the target), and RC executes one QP's requests
// in order (ordered after earlier puts). verbs:efa has no atomics: SRD offers none, atomic_support() is
// kUnavailable saying so.
//
// Both variants:
// - Local completions: a put's local completion is its signaled send completion. RC generates it after
//   the responder acknowledged the write, and a responder acknowledges only after placing the data, so
//   the local completion means "placed at the target" as fabric.hpp requires; SRD's send completion is
//   likewise generated after the remote acknowledgement.
// - Remote completions: an RDMA write with immediate consumes one posted receive at the target and
//   produces an IBV_WC_RECV_RDMA_WITH_IMM completion there. Every QP keeps receives posted (one SGE on a
//   shared 64-byte scratch buffer that writes never touch) and re-posts each one as its completion is
//   polled. On RC a write arriving when none is posted is answered with RNR NAKs and retried for ever
//   (rnr_retry 7): the sender slows down, nothing fails.
// - Backpressure: try_put returns false when the QP's send queue is full (counted, or ENOMEM from the
//   provider) or the outstanding-put limit is reached.
// - Regions: page-aligned, zero-filled host memory registered with local and remote write access; every
//   rank's (address, rkey) is exchanged over MPI.
// - Setup: device and port selection, GID index and queue depths as verbs_setup.hpp describes
//   (EPSUITE_VERBS_DEVICE, EPSUITE_VERBS_GID_INDEX). Every setup failure is kEnvironment prefixed with the
//   fabric name, e.g. "verbs:rc: no RDMA device (ibv_get_device_list found 0 devices)"; a rank whose
//   peers failed reports which ranks, so that every rank fails and callers can skip the fabric. Every
//   ibv_* and efadv_* return code is checked (verbs_check.hpp); resources are released in reverse order
//   of creation.
// - Libraries: libibverbs (and libefa, for verbs:efa only) are loaded when the first fabric is opened
//   (verbs_api.hpp), not linked; a missing one is kEnvironment "verbs:rc: libibverbs.so.1 cannot be
//   loaded: <dlerror>".
#pragma once

#include <memory>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

enum class Variant { kRc, kEfa };

// What this build of the verbs fabric was compiled against.
struct BuildInfo {
  const char* libibverbs_version;  // pkg-config version of libibverbs at build time
  bool efadv;                      // infiniband/efadv.h and libefa found (verbs:efa can be built)
  bool efadv_rdma_write;           // efadv.h defines EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
};
BuildInfo build_info();

// Collective over config.comm (the communicator is duplicated).
Result<std::unique_ptr<Fabric>> make_verbs_fabric(const FabricConfig& config, Variant variant);

}  // namespace eps::fabric::verbs
