// Remote atomics of the verbs fabric (fabric.hpp try_atomic_add, docs/fabrics.md 6.1): the device-independent
// decisions, kept apart from the code that calls libibverbs so that unit tests cover them without an RDMA
// device.
//
// Whether the fabric has atomics (`atomic_support`): verbs:rc has them when the device reports an
// ibv_device_attr::atomic_cap other than IBV_ATOMIC_NONE. IBV_ATOMIC_HCA (atomic only with respect to other
// atomics of the same HCA) is enough here: every add of a verbs fabric, a rank's adds to itself included,
// goes through the NIC (its RC QP to itself), so the adds to one word are atomic with each other. verbs:efa
// has none: EFA's SRD offers RDMA write and read but no remote atomic verbs, so it is kUnavailable with
// that reason.
//
// The work request (`fetch_add_request`): IBV_WR_ATOMIC_FETCH_AND_ADD of one 64-bit word at the peer's
// (addr + offset, rkey), signaled, adding `value`. A fetch-and-add always returns the old value into an
// 8-byte local buffer; the fabric points every request at one registered scratch word it never reads
// (concurrent NIC writes of ignored values there are harmless). The send completion (IBV_WC_FETCH_ADD)
// comes after the responder executed the add and returned the old value, so the local completion means
// "applied at the target". An RC responder executes the requests of one QP in order, so the add follows the
// initiator's earlier writes to that peer (ordered()).
//
// Access: regions are registered, and RC QPs opened, with IBV_ACCESS_REMOTE_ATOMIC only when the fabric
// has atomics (a device without them may refuse the flag).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <string_view>

#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

// `srd`: verbs:efa; `atomic_cap`: the device's ibv_device_attr::atomic_cap; `fabric` and `device` name them
// in the reason.
Status atomic_support(std::string_view fabric, bool srd, ibv_atomic_cap atomic_cap, std::string_view device);

// The access flags of a caller region (and of the RC QPs): local and remote write, plus remote atomic when
// the fabric has atomics.
int region_access(bool atomics);

// The signaled fetch-and-add work request; `result` is the 8-byte local buffer the old value lands in.
ibv_send_wr fetch_add_request(std::uint64_t wr_id, std::uint64_t remote_addr, std::uint32_t rkey,
                              std::uint64_t value, ibv_sge* result);

}  // namespace eps::fabric::verbs
