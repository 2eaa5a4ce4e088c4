// The `auto` fabric (docs/fabrics.md 6.4), the default --fabric: what a user wants on a cluster without
// knowing its NICs.
//
// On one node it is simply `shm`, or `ipc` when FabricConfig::memory_device is a device the host cannot
// address (a GPU, cpu-isolated) that exports memory to other processes (docs/fabrics.md 6.4, 6.5): then the
// regions stay device memory, mapped between the ranks. On several nodes it is a composite named
// "auto(shm+<inter>)" (its intra-node part stays `shm`, whose host memory the inter-node fabric adopts): puts
// to a peer on the same node (MPI_COMM_TYPE_SHARED) go through `shm` over the node's ranks; puts to any other
// peer go through the first inter-node fabric that opens on every rank, tried in the order of
// kInterNodeCandidates (RDMA first: verbs:rc, verbs:efa, libfabric:efa, libfabric:verbs, then libfabric:tcp
// on --iface / FI_TCP_IFACE). The choice is the fabric's name, which transports record as their "fabric"
// identity, and describe() prints both parts.
//
// Regions: each region is allocated by `shm` (the node's segments) and adopted by the inter-node fabric
// (Fabric::adopt), so both write the same memory and region ids agree. Every put from one initiator to
// one target takes the same part, so the composite is ordered when both parts are. `quiet` and `flush`
// cover both parts. Only the inter-node part ever waits on peers: `barrier` is the inter-node fabric's
// barrier over every rank (shm places its bytes when a put is posted, so shm's quiet never waits), since
// a rank blocked inside shm's own barrier would stop driving the inter-node provider, and socket providers
// place a peer's puts only while the target progresses. Completions of both parts are returned by `poll`,
// alternating which part goes first so that neither starves.
//
// Atomics: an atomic add takes the same part as a put to its peer (so it is ordered after that initiator's
// puts when the composite is ordered); atomic_support() needs both parts. A counter that receives adds from
// peers on its node (shm: CPU atomics) and from other nodes (the inter-node fabric) mixes the two kinds of
// atomic on one word: that is atomic only where the inter-node fabric's atomics are coherent with the CPU's
// (an RDMA NIC whose ibv_device_attr::atomic_cap is IBV_ATOMIC_GLOB, a provider that applies adds with CPU
// atomics); otherwise keep one counter per part.
//
// Errors: kInvalidArgument from a candidate (a bad --iface) is returned at once; when no candidate
// opens, kEnvironment lists every candidate's reason.
#pragma once

#include <array>
#include <string_view>

namespace eps::fabric {

inline constexpr std::array<std::string_view, 5> kInterNodeCandidates = {
    "verbs:rc", "verbs:efa", "libfabric:efa", "libfabric:verbs", "libfabric:tcp"};

}  // namespace eps::fabric
