// verbs_completion.hpp: how work completions become fabric completions (docs/fabrics.md 6.1: one kLocal per
// put with its context, one kRemote per immediate, errors named), and the send-slot table behind the wr_ids.
#include "impls/fabric/verbs/verbs_completion.hpp"

#include <arpa/inet.h>

#include <string>

#include <gtest/gtest.h>

namespace eps::fabric::verbs {
namespace {

ibv_wc completion(std::uint64_t wr_id, ibv_wc_status status, ibv_wc_opcode opcode) {
  ibv_wc wc{};
  wc.wr_id = wr_id;
  wc.status = status;
  wc.opcode = opcode;
  return wc;
}

void expect_message_has(const Status& s, const std::string& part) {
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);
  EXPECT_NE(s.message().find(part), std::string::npos) << "'" << part << "' not in: " << s.message();
}

TEST(VerbsCompletion, WrIdsSeparateSendsFromReceives) {
  EXPECT_EQ(send_wr_id(5), 5u);
  EXPECT_FALSE(is_recv_wr_id(send_wr_id(0)));
  EXPECT_FALSE(is_recv_wr_id(send_wr_id(0xffffffffu)));
  EXPECT_TRUE(is_recv_wr_id(recv_wr_id(0)));
  EXPECT_EQ(recv_wr_id(7), (std::uint64_t{1} << 63) | 7u);
  EXPECT_EQ(recv_wr_id_qp(recv_wr_id(7)), 7);
  EXPECT_EQ(recv_wr_id_qp(recv_wr_id(4095)), 4095);
}

TEST(VerbsCompletion, SendSlotsHandOutEveryIndexOnceAndRecycle) {
  SendSlots slots(3);
  EXPECT_EQ(slots.acquire(100, 0), std::optional<std::uint32_t>(0));
  EXPECT_EQ(slots.acquire(~std::uint64_t{0}, 1), std::optional<std::uint32_t>(1));
  EXPECT_EQ(slots.acquire(300, 2), std::optional<std::uint32_t>(2));
  EXPECT_EQ(slots.acquire(400, 0), std::nullopt);
  EXPECT_EQ(slots.in_use(), 3u);
  const Result<SendSlots::Slot> one = slots.release(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->context, ~std::uint64_t{0});
  EXPECT_EQ(one->peer, 1);
  EXPECT_EQ(slots.peek(1), nullptr);
  EXPECT_EQ(slots.in_use(), 2u);
  EXPECT_EQ(slots.acquire(500, 3), std::optional<std::uint32_t>(1));
  ASSERT_NE(slots.peek(1), nullptr);
  EXPECT_EQ(slots.peek(1)->context, 500u);
  ASSERT_TRUE(slots.release(0).ok());
  expect_message_has(slots.release(0).status(), "slot 0, which holds no posted put");  // twice
  expect_message_has(slots.release(3).status(), "slot 3");                             // out of range
}

TEST(VerbsCompletion, SuccessfulWriteIsLocalCompletionOfItsSlot) {
  SendSlots slots(4);
  const Result<WcEvent> e = classify(completion(send_wr_id(2), IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE), slots);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, CompletionKind::kLocal);
  EXPECT_EQ(e->slot, 2u);
}

TEST(VerbsCompletion, SuccessfulFetchAndAddIsLocalCompletionOfItsSlot) {
  SendSlots slots(4);
  const Result<WcEvent> e = classify(completion(send_wr_id(3), IBV_WC_SUCCESS, IBV_WC_FETCH_ADD), slots);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, CompletionKind::kLocal);
  EXPECT_EQ(e->slot, 3u);
  expect_message_has(classify(completion(send_wr_id(0), IBV_WC_SUCCESS, IBV_WC_COMP_SWAP), slots).status(),
                     "or a fetch-and-add (opcode 4)");
}

TEST(VerbsCompletion, WriteWithImmediateIsRemoteCompletionInHostOrder) {
  SendSlots slots(1);
  ibv_wc wc = completion(recv_wr_id(3), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
  wc.wc_flags = IBV_WC_WITH_IMM;
  wc.imm_data = htonl(0x12345678u);
  const Result<WcEvent> e = classify(wc, slots);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, CompletionKind::kRemote);
  EXPECT_EQ(e->qp, 3);
  EXPECT_EQ(e->imm, 0x12345678u);
}

TEST(VerbsCompletion, UnexpectedSuccessfulOpcodesAreErrors) {
  SendSlots slots(1);
  ibv_wc no_flag = completion(recv_wr_id(1), IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
  expect_message_has(classify(no_flag, slots).status(), "expected an RDMA write with immediate");
  ibv_wc a_send = completion(recv_wr_id(1), IBV_WC_SUCCESS, IBV_WC_RECV);
  a_send.wc_flags = IBV_WC_WITH_IMM;
  expect_message_has(classify(a_send, slots).status(), "got opcode 128");  // IBV_WC_RECV = 1 << 7
  expect_message_has(classify(completion(send_wr_id(0), IBV_WC_SUCCESS, IBV_WC_SEND), slots).status(),
                     "send completion with opcode 0");
}

TEST(VerbsCompletion, FailedPutNamesPeerContextStatusAndVendorError) {
  SendSlots slots(2);
  ASSERT_EQ(slots.acquire(7, 0), std::optional<std::uint32_t>(0));
  ASSERT_EQ(slots.acquire(42, 1), std::optional<std::uint32_t>(1));
  ibv_wc wc = completion(send_wr_id(1), IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
  wc.vendor_err = 0x88;
  wc.qp_num = 0x1a2;
  const Status s = classify(wc, slots).status();
  expect_message_has(s, "put to rank 1 (context 42) failed: ");
  expect_message_has(s, "(status 10, vendor error 0x88, QP 0x1a2)");  // IBV_WC_REM_ACCESS_ERR = 10
  expect_message_has(
      classify(completion(send_wr_id(9), IBV_WC_RETRY_EXC_ERR, IBV_WC_RDMA_WRITE), slots).status(),
      "put in unknown slot 9 failed");
}

TEST(VerbsCompletion, FailedReceiveNamesItsQp) {
  SendSlots slots(1);
  // On an error completion the opcode is undefined (ibv_poll_cq(3)); garbage there must not matter.
  const Status s =
      classify(completion(recv_wr_id(5), IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE), slots).status();
  expect_message_has(s, "receive on QP index 5 failed: ");
  expect_message_has(s, "(status 5,");  // IBV_WC_WR_FLUSH_ERR = 5
}

}  // namespace
}  // namespace eps::fabric::verbs
