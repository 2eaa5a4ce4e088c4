// verbs_setup.hpp: device and port selection, GID index, PSNs, QP transition attributes and queue depths
// of the verbs fabric (docs/fabrics.md 6.1), checked without an RDMA device.
#include "impls/fabric/verbs/verbs_setup.hpp"

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace eps::fabric::verbs {
namespace {

void expect_error(const Status& s, StatusCode code, const std::string& part) {
  EXPECT_EQ(s.code(), code) << s.message();
  EXPECT_NE(s.message().find(part), std::string::npos) << "'" << part << "' not in: " << s.message();
}

// mlx5_0 port 1 down, port 2 active; efa_0 active but unsuitable (for verbs:rc); mlx5_1 port 1 active.
std::vector<PortCandidate> cluster() {
  return {{"mlx5_0", 1, true, false, "PORT_DOWN"},
          {"mlx5_0", 2, true, true, "PORT_ACTIVE"},
          {"efa_0", 1, false, true, "not an InfiniBand/RoCE transport, PORT_ACTIVE"},
          {"mlx5_1", 1, true, true, "PORT_ACTIVE"}};
}

Result<PortChoice> pick(std::string_view env) {
  const std::vector<PortCandidate> c = cluster();
  return select_port(c, 3, env);
}

void expect_pick(std::string_view env, const std::string& device, int port, std::size_t index) {
  const Result<PortChoice> choice = pick(env);
  ASSERT_TRUE(choice.ok()) << env << ": " << choice.status().message();
  EXPECT_EQ(choice->device, device) << env;
  EXPECT_EQ(choice->port, port) << env;
  EXPECT_EQ(choice->index, index) << env;
}

TEST(VerbsSetup, NoDeviceIsUnavailable) {
  const Result<PortChoice> none = select_port({}, 0, "");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(none.status().message(), "no RDMA device (ibv_get_device_list found 0 devices)");
  // The environment variable cannot conjure a device.
  EXPECT_EQ(select_port({}, 0, "mlx5_0").status().message(),
            "no RDMA device (ibv_get_device_list found 0 devices)");
}

TEST(VerbsSetup, WithoutEnvTheFirstSuitableActivePortWins) {
  expect_pick("", "mlx5_0", 2, 1);
  const std::vector<PortCandidate> efa_first = {{"efa_0", 1, false, true, "unsuitable"},
                                                {"mlx5_3", 1, true, true, ""}};
  const Result<PortChoice> choice = select_port(efa_first, 2, "");
  ASSERT_TRUE(choice.ok());
  EXPECT_EQ(choice->device, "mlx5_3");
  const std::vector<PortCandidate> all_down = {{"mlx5_0", 1, true, false, "PORT_DOWN"},
                                               {"efa_0", 1, false, true, "not EFA"}};
  const Status down = select_port(all_down, 2, "").status();
  expect_error(down, StatusCode::kUnavailable, "no suitable active port on 2 RDMA device(s)");
  expect_error(down, StatusCode::kUnavailable, "mlx5_0:1 (PORT_DOWN), efa_0:1 (unsuitable, not EFA)");
}

TEST(VerbsSetup, EnvSelectsDeviceAndOptionalPort) {
  expect_pick("mlx5_1", "mlx5_1", 1, 3);
  expect_pick("mlx5_0", "mlx5_0", 2, 1);  // its first port is down: the active one is taken
  expect_pick("mlx5_0:2", "mlx5_0", 2, 1);
  expect_error(pick("mlx5_0:1").status(), StatusCode::kEnvironment, "selects mlx5_0:1, which is not active");
  expect_error(pick("efa_0").status(), StatusCode::kEnvironment, "selects efa_0:1, which is unsuitable");
  expect_error(pick("mlx5_9").status(), StatusCode::kEnvironment,
               "EPSUITE_VERBS_DEVICE=mlx5_9: no such device");
  expect_error(pick("mlx5_1:2").status(), StatusCode::kEnvironment, "no such device or port");
  // A device whose every port is down is reported by its first port.
  const std::vector<PortCandidate> down = {{"mlx5_0", 1, true, false, "PORT_DOWN"},
                                           {"mlx5_0", 2, true, false, "PORT_INIT"}};
  expect_error(select_port(down, 1, "mlx5_0").status(), StatusCode::kEnvironment,
               "selects mlx5_0:1, which is not active");
}

TEST(VerbsSetup, MalformedEnvIsInvalidArgument) {
  for (const char* env : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", "mlx5_0:256", "mlx5_0:1x", ":1"}) {
    expect_error(pick(env).status(), StatusCode::kInvalidArgument,
                 "EPSUITE_VERBS_DEVICE: must be DEVICE or DEVICE:PORT");
  }
}

TEST(VerbsSetup, GidIndexDefaultsToZeroAndIsRangeChecked) {
  EXPECT_EQ(*parse_gid_index(nullptr, 16), 0);
  EXPECT_EQ(*parse_gid_index("", 16), 0);
  EXPECT_EQ(*parse_gid_index("3", 16), 3);
  EXPECT_EQ(*parse_gid_index("15", 16), 15);
  EXPECT_EQ(parse_gid_index("16", 16).status().message(),
            "EPSUITE_VERBS_GID_INDEX: must be in [0, 15], got 16");
  EXPECT_EQ(parse_gid_index("-1", 16).status().message(),
            "EPSUITE_VERBS_GID_INDEX: must be in [0, 15], got -1");
  expect_error(parse_gid_index("3x", 16).status(), StatusCode::kInvalidArgument,
               "must be an integer in [0, 15], got '3x'");
  expect_error(parse_gid_index("v2", 16).status(), StatusCode::kInvalidArgument, "got 'v2'");
}

TEST(VerbsSetup, EmptyGidIsRefusedWhereGrhAddressingNeedsIt) {
  const std::uint8_t zero[16] = {};
  std::uint8_t link_local[16] = {0xfe, 0x80};
  const LocalPort roce{1, IBV_LINK_LAYER_ETHERNET, IBV_MTU_1024, 2};
  expect_error(check_gid(roce, zero), StatusCode::kEnvironment,
               "GID index 2 of port 1 is empty; choose a populated entry with EPSUITE_VERBS_GID_INDEX");
  EXPECT_TRUE(check_gid(roce, link_local).ok());
  const LocalPort efa{1, IBV_LINK_LAYER_UNSPECIFIED, IBV_MTU_4096, 0};
  EXPECT_FALSE(check_gid(efa, zero).ok());
  const LocalPort ib{1, IBV_LINK_LAYER_INFINIBAND, IBV_MTU_4096, 0};
  EXPECT_TRUE(check_gid(ib, zero).ok());  // routed by LID
}

TEST(VerbsSetup, InitialPsnIsDistinctPer24BitPair) {
  EXPECT_EQ(initial_psn(1, 2), (1u << 12) | 2u);  // 4098
  EXPECT_EQ(initial_psn(4095, 4095), 0xffffffu);
  std::set<std::uint32_t> seen;
  for (int r = 0; r < 64; ++r) {
    for (int p = 0; p < 64; ++p) {
      const std::uint32_t psn = initial_psn(r, p);
      EXPECT_LE(psn, kMax24Bit);
      seen.insert(psn);
    }
  }
  EXPECT_EQ(seen.size(), 64u * 64u);
}

LocalPort ib_port() { return LocalPort{1, IBV_LINK_LAYER_INFINIBAND, IBV_MTU_4096, 0}; }
LocalPort roce_port() { return LocalPort{2, IBV_LINK_LAYER_ETHERNET, IBV_MTU_1024, 3}; }

PeerAddress remote(std::uint8_t link_layer, std::uint8_t mtu) {
  PeerAddress a;
  a.link_layer = link_layer;
  a.mtu = mtu;
  a.port = 1;
  a.lid = 0x11;
  a.qpn = 0x123;
  a.psn = 0x456;
  for (std::size_t i = 0; i < a.gid.size(); ++i) a.gid[i] = static_cast<std::uint8_t>(0xa0 + i);
  return a;
}

TEST(VerbsSetup, RcInitGrantsRemoteWriteOnThePort) {
  const QpTransition t = rc_init(roce_port());
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 2);
  EXPECT_EQ(t.attr.pkey_index, 0);
  EXPECT_EQ(t.attr.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

TEST(VerbsSetup, RcRtrOnInfinibandUsesLidAndTheSmallerMtu) {
  const Result<QpTransition> t = rc_rtr(ib_port(), remote(IBV_LINK_LAYER_INFINIBAND, IBV_MTU_1024), 1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t->attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t->attr.dest_qp_num, 0x123u);
  EXPECT_EQ(t->attr.rq_psn, 0x456u);
  EXPECT_EQ(t->attr.max_dest_rd_atomic, 1);
  EXPECT_EQ(t->attr.min_rnr_timer, 12);
  EXPECT_EQ(t->attr.ah_attr.dlid, 0x11);
  EXPECT_EQ(t->attr.ah_attr.is_global, 0);
  EXPECT_EQ(t->attr.ah_attr.port_num, 1);
  EXPECT_EQ(t->mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

TEST(VerbsSetup, RcRtrOnRoceCarriesTheGrh) {
  const PeerAddress peer = remote(IBV_LINK_LAYER_ETHERNET, IBV_MTU_4096);
  const Result<QpTransition> t = rc_rtr(roce_port(), peer, 1);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->attr.path_mtu, IBV_MTU_1024);  // this port's active MTU is the smaller
  EXPECT_EQ(t->attr.ah_attr.is_global, 1);
  EXPECT_EQ(t->attr.ah_attr.grh.sgid_index, 3);
  EXPECT_EQ(t->attr.ah_attr.grh.hop_limit, 64);
  EXPECT_EQ(t->attr.ah_attr.port_num, 2);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_EQ(t->attr.ah_attr.grh.dgid.raw[i], 0xa0 + i) << i;
}

TEST(VerbsSetup, RcRtrRefusesMixedLinkLayers) {
  expect_error(rc_rtr(ib_port(), remote(IBV_LINK_LAYER_ETHERNET, IBV_MTU_4096), 5).status(),
               StatusCode::kEnvironment, "rank 5 is on link layer 2 but this rank on 1");
}

TEST(VerbsSetup, RcRtsRetriesRnrForever) {
  const QpTransition t = rc_rts(0xabcdef);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.sq_psn, 0xabcdefu);
  EXPECT_EQ(t.attr.timeout, 14);
  EXPECT_EQ(t.attr.retry_cnt, 7);
  EXPECT_EQ(t.attr.rnr_retry, 7);
  EXPECT_EQ(t.attr.max_rd_atomic, 1);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC);
}

TEST(VerbsSetup, SrdTransitions) {
  const LocalPort efa{1, IBV_LINK_LAYER_UNSPECIFIED, IBV_MTU_4096, 0};
  const QpTransition init = srd_init(efa);
  EXPECT_EQ(init.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(init.attr.qkey, kSrdQkey);
  EXPECT_EQ(init.attr.port_num, 1);
  EXPECT_EQ(init.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  EXPECT_EQ(srd_rtr().attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(srd_rtr().mask, IBV_QP_STATE);
  const QpTransition plain = srd_rts(77, false);
  EXPECT_EQ(plain.attr.sq_psn, 77u);
  EXPECT_EQ(plain.mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
  const QpTransition rnr = srd_rts(77, true);
  EXPECT_EQ(rnr.attr.rnr_retry, 7);
  EXPECT_EQ(rnr.mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RNR_RETRY);
  // EFA addresses peers by GID.
  const ibv_ah_attr ah = address_vector(efa, remote(IBV_LINK_LAYER_UNSPECIFIED, IBV_MTU_4096));
  EXPECT_EQ(ah.is_global, 1);
  EXPECT_EQ(ah.grh.dgid.raw[0], 0xa0);
  EXPECT_EQ(ah.grh.dgid.raw[15], 0xaf);
}

TEST(VerbsSetup, QueueDepthsWithinRoomyDeviceLimits) {
  const Result<QueueDepths> d = queue_depths(4, 1024, 128, 16384, 4194303);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->max_puts, 1024);
  EXPECT_EQ(d->send, 1024);
  EXPECT_EQ(d->recv, 128);
  EXPECT_EQ(d->cq, 1024 + 4 * 128);
  const Result<QueueDepths> small_wr = queue_depths(2, 1024, 128, 512, 4194303);
  ASSERT_TRUE(small_wr.ok());
  EXPECT_EQ(small_wr->max_puts, 512);
  EXPECT_EQ(small_wr->recv, 128);
}

TEST(VerbsSetup, QueueDepthsShrinkReceivesThenPutsToFitTheCq) {
  const Result<QueueDepths> d = queue_depths(8, 1024, 128, 32768, 1500);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->recv, 59);  // (1500 - 1024) / 8 = 59.5
  EXPECT_EQ(d->cq, 1024 + 8 * 59);
  const Result<QueueDepths> tight = queue_depths(8, 1024, 128, 32768, 1000);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->recv, 1);
  EXPECT_EQ(tight->max_puts, 992);  // 1000 - 8 * 1
  EXPECT_EQ(tight->cq, 1000);
  expect_error(queue_depths(8, 1024, 128, 32768, 8).status(), StatusCode::kEnvironment,
               "device queues too small for 8 QPs");
  // Brute-force invariants over a grid (an independent statement of the contract).
  for (int qps : {1, 2, 3, 8, 64}) {
    for (int max_wr : {1, 16, 1000, 32768}) {
      for (int max_cqe : {1, 64, 1000, 100000}) {
        const Result<QueueDepths> q = queue_depths(qps, 1024, 128, max_wr, max_cqe);
        // Fails exactly when the CQ cannot hold one put plus one receive per QP.
        ASSERT_EQ(q.ok(), qps + 1 <= max_cqe) << qps << " " << max_wr << " " << max_cqe;
        if (!q.ok()) continue;
        EXPECT_GE(q->recv, 1);
        EXPECT_GE(q->max_puts, 1);
        EXPECT_LE(q->recv, std::min(128, max_wr));
        EXPECT_LE(q->max_puts, std::min(1024, max_wr));
        EXPECT_EQ(q->send, q->max_puts);
        EXPECT_EQ(q->cq, q->max_puts + qps * q->recv);
        EXPECT_LE(q->cq, max_cqe);
      }
    }
  }
}

TEST(VerbsSetup, EfaNeedsTheRdmaWriteCapability) {
  expect_error(check_efa_rdma_write(0xffffffffu, 0), StatusCode::kEnvironment,
               "no EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE");
  expect_error(check_efa_rdma_write(0x7, 1u << 3), StatusCode::kEnvironment,
               "does not report RDMA write (device_caps 0x7)");
  EXPECT_TRUE(check_efa_rdma_write(0xf, 1u << 3).ok());
}

}  // namespace
}  // namespace eps::fabric::verbs
