#include "impls/fabric/verbs/verbs_atomic.hpp"

#include "impls/fabric/fabric.hpp"

namespace eps::fabric::verbs {

Status atomic_support(std::string_view fabric, bool srd, ibv_atomic_cap atomic_cap, std::string_view device) {
  if (srd) {
    return no_remote_atomics(fabric, "EFA SRD has RDMA write and read but no remote atomic operations");
  }
  if (atomic_cap == IBV_ATOMIC_NONE) {
    return no_remote_atomics(
        fabric, fmt::format("device {} reports atomic_cap IBV_ATOMIC_NONE (no RDMA atomics)", device));
  }
  return Status();
}

int region_access(bool atomics) {
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
  return atomics ? access | IBV_ACCESS_REMOTE_ATOMIC : access;
}

ibv_send_wr fetch_add_request(std::uint64_t wr_id, std::uint64_t remote_addr, std::uint32_t rkey,
                              std::uint64_t value, ibv_sge* result) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = result;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = remote_addr;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = value;
  wr.wr.atomic.swap = 0;
  return wr;
}

}  // namespace eps::fabric::verbs
