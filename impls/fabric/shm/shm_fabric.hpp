// The shm fabric (family "shm", no variants): puts between the ranks of one host through POSIX shared
// memory (docs/fabrics.md 6.1 `ordered`). Implements the Fabric contract of impls/fabric/fabric.hpp on
// FabricBase.
//
// Memory. Every region is one shared-memory segment per rank (shm_open "/eps-shm-<job>-r<region>-<rank>",
// where <job> is rank 0's pid and fabric serial, so concurrent jobs and fabrics never collide; space is
// reserved with posix_fallocate so a full /dev/shm fails at allocate() instead of with SIGBUS later).
// Every rank maps every peer's segment of the region; each rank unlinks its own segment as soon as all
// ranks have mapped it, so nothing is left in /dev/shm even if the job crashes later.
//
// Puts. A put is a memmove from this rank's segment into the peer's mapped segment, done inside try_put
// (placement at post time), so the local completion is immediate: it is queued for the next poll.
//
// Atomics. An atomic add is a lock-free 64-bit fetch-add (std::atomic_ref, acquire-release) on the peer's
// mapped segment, done inside try_atomic_add: applied at post time like a put, so it is ordered after this
// rank's earlier puts, and its local completion is queued the same way. The shm rings carry only
// immediates, never bytes or adds, so nothing an atomic does has to travel through them. Atomics from every
// rank of the host act on the same physical word and are atomic with each other.
//
// Remote completions. Each target owns a control segment holding one ShmRing (shm_ring.hpp) per source
// rank: single producer, single consumer, in issue order. A put with an immediate first checks that its
// ring has room (no room: try_put returns false, nothing written), copies the bytes, then publishes the
// immediate with a release store, so a target that sees the immediate sees the bytes. Hence ordered().
//
// Creation is collective over the communicator and fails on every rank alike: kEnvironment
// "shm: ranks span several hosts (...)" when the ranks are not all on one host (MPI processor names), or
// the failing system call with its errno text.
#pragma once

#include <cstdint>
#include <memory>

#include "impls/fabric/fabric_registry.hpp"

namespace eps::fabric::shm {

// Entries of each (source, target) completion ring: the immediates a target may leave unpolled per
// source before that source sees backpressure.
inline constexpr std::uint32_t kRingEntries = 512;

Result<std::unique_ptr<Fabric>> make_shm_fabric(const FabricConfig& config);

}  // namespace eps::fabric::shm

// Registers family "shm" (called by the generated register_builtin_fabrics).
void eps_register_fabric_shm(eps::fabric::FabricRegistry& registry);
