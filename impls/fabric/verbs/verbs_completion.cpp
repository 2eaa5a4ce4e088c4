#include "impls/fabric/verbs/verbs_completion.hpp"

#include <fmt/format.h>

#include "impls/fabric/verbs/verbs_api.hpp"
#include "impls/fabric/verbs/verbs_wire.hpp"

namespace eps::fabric::verbs {
namespace {

// ibv_wc_status_str's text; a completion implies libibverbs is loaded, the number says enough otherwise.
const char* status_text(ibv_wc_status status) {
  const Result<const VerbsApi*> ibv = verbs_api();
  return ibv.ok() ? (*ibv)->wc_status_str(status) : "unknown status";
}

}  // namespace

std::uint64_t send_wr_id(std::uint32_t slot) { return slot; }
std::uint64_t recv_wr_id(int qp_index) { return kRecvTag | static_cast<std::uint32_t>(qp_index); }
bool is_recv_wr_id(std::uint64_t wr_id) { return (wr_id & kRecvTag) != 0; }
int recv_wr_id_qp(std::uint64_t wr_id) { return static_cast<int>(wr_id & 0x7fffffff); }

SendSlots::SendSlots(std::size_t capacity) : capacity_(capacity), slots_(capacity), used_(capacity, false) {
  free_.reserve(capacity);
  // Highest index first so that acquire hands out 0, 1, 2, ... on a fresh table.
  for (std::size_t i = capacity; i > 0; --i) free_.push_back(static_cast<std::uint32_t>(i - 1));
}

std::optional<std::uint32_t> SendSlots::acquire(std::uint64_t context, int peer) {
  if (free_.empty()) return std::nullopt;
  const std::uint32_t slot = free_.back();
  free_.pop_back();
  slots_[slot] = Slot{context, peer};
  used_[slot] = true;
  return slot;
}

const SendSlots::Slot* SendSlots::peek(std::uint32_t slot) const {
  return slot < capacity_ && used_[slot] ? &slots_[slot] : nullptr;
}

Result<SendSlots::Slot> SendSlots::release(std::uint32_t slot) {
  if (peek(slot) == nullptr) {
    return Status(
        StatusCode::kEnvironment,
        fmt::format("send completion for slot {}, which holds no posted put (capacity {})", slot, capacity_));
  }
  used_[slot] = false;
  free_.push_back(slot);
  return slots_[slot];
}

Result<WcEvent> classify(const ibv_wc& wc, const SendSlots& slots) {
  const bool recv = is_recv_wr_id(wc.wr_id);
  if (wc.status != IBV_WC_SUCCESS) {
    const std::string what =
        fmt::format("{} (status {}, vendor error {:#x}, QP {:#x})", status_text(wc.status),
                    static_cast<int>(wc.status), wc.vendor_err, wc.qp_num);
    if (recv) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("receive on QP index {} failed: {}", recv_wr_id_qp(wc.wr_id), what));
    }
    const SendSlots::Slot* slot = slots.peek(static_cast<std::uint32_t>(wc.wr_id));
    if (slot == nullptr) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("put in unknown slot {} failed: {}", wc.wr_id, what));
    }
    return Status(StatusCode::kEnvironment,
                  fmt::format("put to rank {} (context {}) failed: {}", slot->peer, slot->context, what));
  }
  if (recv) {
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("receive on QP index {}: expected an RDMA write with immediate "
                                "(opcode {}, with-imm flag), got opcode {}, flags {:#x}",
                                recv_wr_id_qp(wc.wr_id), static_cast<int>(IBV_WC_RECV_RDMA_WITH_IMM),
                                static_cast<int>(wc.opcode), wc.wc_flags));
    }
    return WcEvent{CompletionKind::kRemote, 0, recv_wr_id_qp(wc.wr_id), imm_from_wire(wc.imm_data)};
  }
  if (wc.opcode != IBV_WC_RDMA_WRITE && wc.opcode != IBV_WC_FETCH_ADD) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("send completion with opcode {}, expected an RDMA write (opcode {}) or a "
                              "fetch-and-add (opcode {})",
                              static_cast<int>(wc.opcode), static_cast<int>(IBV_WC_RDMA_WRITE),
                              static_cast<int>(IBV_WC_FETCH_ADD)));
  }
  return WcEvent{CompletionKind::kLocal, static_cast<std::uint32_t>(wc.wr_id), 0, 0};
}

}  // namespace eps::fabric::verbs
