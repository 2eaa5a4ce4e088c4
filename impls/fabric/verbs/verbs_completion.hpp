// Work-request ids and the mapping of verbs work completions (struct ibv_wc) onto fabric completions
// (fabric.hpp `Completion`, docs/fabrics.md 6.1).
//
// One completion queue serves every QP of a verbs fabric, sends and receives alike. For an error
// completion only wr_id, status, qp_num and vendor_err are valid (ibv_poll_cq(3)): the opcode is not, so
// the wr_id alone must tell a send from a receive. Hence:
// - send wr_id = slot index in a SendSlots table (top bit clear); the slot keeps the put's caller context
//   (any 64-bit value, so it cannot travel in the wr_id itself) and its peer;
// - receive wr_id = kRecvTag | QP index (the QP the receive was posted on, to re-post it: on verbs:rc QP
//   index p is the QP connected to rank p; verbs:efa has one SRD QP, index 0).
//
// `classify(wc)` returns what a completion means:
// - a successful send completion (IBV_WC_RDMA_WRITE, or IBV_WC_FETCH_ADD for an atomic add, whose completion
//   comes after the responder executed it): kLocal for its slot. On RC this completion comes
//   after the responder acknowledged the write, and an RC responder acknowledges only data it has placed,
//   so local completion implies placement at the target (fabric.hpp delivery-complete semantics). On EFA
//   SRD the send completion is likewise generated after the remote side acknowledged the packet.
// - a successful receive completion with opcode IBV_WC_RECV_RDMA_WITH_IMM and IBV_WC_WITH_IMM set:
//   kRemote with the immediate in host order (imm_from_wire), and the receive to re-post;
// - any other status: kEnvironment "put to rank p (context c) failed: <status text> (status s, vendor
//   error v, QP q)" for a send (peer and context from `slots`), "receive on QP index i failed: ..." for a
//   receive (the caller adds the fabric name);
// - a successful completion with any other opcode (a SEND arriving, say): kEnvironment naming it.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "impls/fabric/fabric.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

inline constexpr std::uint64_t kRecvTag = std::uint64_t{1} << 63;

std::uint64_t send_wr_id(std::uint32_t slot);
std::uint64_t recv_wr_id(int qp_index);
bool is_recv_wr_id(std::uint64_t wr_id);
int recv_wr_id_qp(std::uint64_t wr_id);

// The contexts of posted puts, indexed by slot; a fixed capacity (the fabric's outstanding-put limit).
class SendSlots {
 public:
  struct Slot {
    std::uint64_t context = 0;
    int peer = 0;
  };
  explicit SendSlots(std::size_t capacity);
  // A free slot holding (context, peer); nullopt when all are in use.
  std::optional<std::uint32_t> acquire(std::uint64_t context, int peer);
  // Frees `slot` and returns what it held; kEnvironment for a slot that is not in use (a completion the
  // fabric did not post, or one reported twice).
  Result<Slot> release(std::uint32_t slot);
  // What `slot` holds; nullptr when it is not in use.
  const Slot* peek(std::uint32_t slot) const;
  std::size_t in_use() const { return capacity_ - free_.size(); }
  std::size_t capacity() const { return capacity_; }

 private:
  std::size_t capacity_;
  std::vector<Slot> slots_;
  std::vector<bool> used_;
  std::vector<std::uint32_t> free_;
};

struct WcEvent {
  CompletionKind kind = CompletionKind::kLocal;
  std::uint32_t slot = 0;  // kLocal: the send slot
  int qp = 0;              // kRemote: the QP index whose receive must be re-posted
  std::uint32_t imm = 0;   // kRemote: immediate, host order
};

// `slots` only names the peer and context of a failed send.
Result<WcEvent> classify(const ibv_wc& wc, const SendSlots& slots);

}  // namespace eps::fabric::verbs
