// The ipc fabric (family "ipc", no variants; docs/fabrics.md 6.5, SPEC 14.6): the scale-up path inside a
// node (NVLink/XGMI on GPUs), on the Device execution model (docs/devices.md 12.1-12.4). Implements the
// Fabric contract of impls/fabric/fabric.hpp on FabricBase.
//
// Device. The regions live in FabricConfig::memory_device, or, without one, in a `cpu` device of the
// fabric's own. Every rank allocates each region in its device's memory, exports it (Device::export_memory)
// and imports every peer's (Device::import_memory), so a rank addresses all ranks' regions. A device that
// cannot export (a plugin of ABI version 2) makes the fabric unavailable with the device's reason. The ranks
// must share one host (MPI processor names): across hosts creation is kUnavailable, naming the hosts.
//
// Puts. The fabric owns one queue of its device (so it is ordered: every put of this rank runs on it in
// issue order). A put enqueues a copy from this rank's region into the peer's imported region; an
// immediate then enqueues 64-bit write_values into the target's mailbox, after the data on the same queue;
// the local completion is an event recorded after all of it (kLocal once the event is done). On the `cpu`
// devices an idle queue runs each operation at once, so a put is placed by try_put as on shm.
//
// Mailboxes hold no token data, so they live in host shared memory (shm_segment.hpp): each target has one
// segment with a block per source: `count` (the caller immediates the source has sent, a 64-bit word the
// source's device writes), `head` (entries the target consumed, written by the target's host) and a ring of
// kMailboxEntries 64-bit entries, entry k = ((k + 1) mod 2^32) << 32 | imm, written by the source's device.
// Every rank registers every segment with its device (Device::register_host_memory). A put with an
// immediate whose ring holds kMailboxEntries unconsumed entries returns false (backpressure). poll reads
// each source's ring in order (an entry is new when its sequence half is the next one) and publishes `head`.
//
// Atomics. An atomic add is the device's atomic_add kernel (a system-scope fetch-add) on the peer's imported
// region, enqueued on the same queue, so it is ordered after this rank's earlier puts; its local completion
// is an event after it. Adds of all ranks meet in the same read-modify-write of the same memory.
//
// Load/store access (docs/fabrics.md 6.5): peer_memory(peer, region) is the peer's imported region,
// region_device() the device, and enqueue_wait_for_immediates(queue, peer, n) a wait_value (>= n) on the
// `count` word of `peer`'s block in this rank's mailbox: a queue of region_device() that waits so runs its
// later work after the bytes of those puts.
#pragma once

#include <cstdint>
#include <memory>

#include "impls/fabric/fabric_registry.hpp"

namespace eps::fabric::ipc {

// Entries of each (source, target) mailbox ring: the immediates a target may leave unpolled per source
// before that source sees backpressure.
inline constexpr std::uint32_t kMailboxEntries = 512;

Result<std::unique_ptr<Fabric>> make_ipc_fabric(const FabricConfig& config);

}  // namespace eps::fabric::ipc

// Registers family "ipc" (called by the generated register_builtin_fabrics).
void eps_register_fabric_ipc(eps::fabric::FabricRegistry& registry);
