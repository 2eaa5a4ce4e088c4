// The libfabric fabric (docs/fabrics.md 6.1): FI_EP_RDM endpoints with FI_RMA writes, family "libfabric" with
// variants "shm", "tcp", "efa" and "verbs" (provider.hpp maps them to providers).
//
// Per fabric: one fabric, domain, FI_AV_TABLE address vector holding every rank's endpoint (rank order),
// one FI_CQ_FORMAT_DATA completion queue bound for transmit and receive, one endpoint. Endpoint names and
// each region's (address, key) are exchanged over the fabric's communicator with deadlines; a local setup
// failure on any rank fails the construction on every rank (each rank learns who failed) instead of
// leaving the others waiting.
//
// Puts are fi_writemsg with FI_DELIVERY_COMPLETE (and FI_REMOTE_CQ_DATA carrying the 32-bit immediate):
// the kLocal completion therefore means placed at the target (fabric.hpp). Zero-byte puts (immediate
// only) place nothing and use FI_TRANSMIT_COMPLETE (shm 1.17 never completes a zero-length
// delivery-complete write). -FI_EAGAIN is backpressure
// (try_put false). Remote CQ data above 32 bits is an environment error, never truncated. Providers that
// require FI_RX_CQ_DATA get a pool of posted zero-length receives, re-posted as they are consumed.
// ordered() is true only when the provider enabled FI_ORDER_WAW (+ FI_ORDER_RMA_WAW) on tx and rx for
// messages up to max_put_bytes (provider.hpp waw_ordered).
//
// Atomics are fi_atomicmsg FI_SUM on one FI_UINT64 with FI_DELIVERY_COMPLETE, so their local completion means
// the add is applied at the target; the operand sits in a registered host buffer, one 8-byte word per put
// slot. They exist where fi_getinfo granted FI_ATOMIC (provider.hpp asks for it, and falls back to a
// provider without it) and fi_query_atomic confirms FI_SUM on FI_UINT64; otherwise atomic_support() is
// kUnavailable naming the provider and what it lacks. tcp;ofi_rxm emulates atomics with messages that the
// target applies while it drives progress (so targets must keep polling, as for puts); shm applies them in
// the target's progress as well. On ordered providers FI_ORDER_WAW orders atomic writes with RMA writes.
//
// Limits: max_put_bytes = min(kMaxPutBytes, ep max_msg_size); max_outstanding_puts = tx queue size.
// Memory is page-aligned anonymous mappings (zero-filled), registered with FI_WRITE | FI_REMOTE_WRITE; with
// FabricConfig::memory_device, the device's memory registered through FI_HMEM where the provider can
// (hmem.hpp; memory_registration() and describe() say which).
// Destruction of a fabric that opened on every rank is collective (docs/fabrics.md 6.4, "Closing"): it
// waits (deadline: the fabric's timeout, a failure is printed, never thrown) until every put of this rank is
// complete at its target and, driving progress, until every rank got that far; then it closes endpoint,
// memory registrations, address vector, completion queue, domain and fabric in that order and unmaps the
// memory. A fabric whose construction failed closes at once.
//
// libfabric is loaded when the first fabric is made (fi_api.hpp), not linked; where it cannot be,
// construction fails with kEnvironment "libfabric:shm: libfabric.so.1 cannot be loaded: <dlerror>".
#pragma once

#include <memory>

#include "impls/fabric/fabric_registry.hpp"

namespace eps::fabric {

// Collective over config.comm (duplicated). kInvalidArgument for an unknown variant, kEnvironment when the
// provider is missing or unsuitable here or setup fails on any rank.
Result<std::unique_ptr<Fabric>> make_libfabric_fabric(const FabricConfig& config);

}  // namespace eps::fabric

// Registers family "libfabric" (fabric_registry.hpp; called by the generated builtin_fabrics.cpp).
void eps_register_fabric_libfabric(eps::fabric::FabricRegistry& registry);
