// The device-independent decisions of verbs fabric setup: which device and port to use, which GID index,
// how deep the queues are, and the attributes of every QP state transition (docs/fabrics.md 6.1). Kept apart
// from the code that calls libibverbs so that unit tests cover them on machines without an RDMA device.
//
// Device selection (`select_port`). The candidates are every (device, port) that ibv_get_device_list and
// ibv_query_port report, in that order, each marked `suitable` for the variant (verbs:rc needs an
// InfiniBand-transport device: ConnectX, Broadcom, ...; verbs:efa needs a device efadv_query_device
// accepts) and `active` (IBV_PORT_ACTIVE). The environment variable EPSUITE_VERBS_DEVICE ("mlx5_0" or
// "mlx5_0:1") picks the device and optionally the port; without it the first suitable active port wins.
// Errors: no device at all is kEnvironment "no RDMA device (ibv_get_device_list found 0 devices)"; a
// malformed EPSUITE_VERBS_DEVICE is kInvalidArgument; a named device or port that is absent, unsuitable
// or not active, or no suitable active port at all, is kEnvironment listing what was found. The fabric
// prefixes every message with its name ("verbs:rc: no RDMA device ...").
//
// GID index (`parse_gid_index`). EPSUITE_VERBS_GID_INDEX selects the source GID for RoCE (and EFA); the
// default 0 is the port's first GID, which on RoCE is usually the RoCE v1 / link-local entry. RoCE v2
// over IPv4 typically needs another index (the one `show_gids` lists as v2 with the interface's IPv4
// address, often 3). InfiniBand ports route by LID and ignore the GID unless they cross subnets.
//
// QP transitions. verbs:rc connects one RC QP per peer (itself included): RESET->INIT (port, P_Key 0,
// remote write access, and remote atomic access when the fabric has atomics), INIT->RTR (path MTU = min of
// both ports' active MTU, peer QP number, receive PSN = the peer's send PSN, address vector: LID on
// InfiniBand; GRH with the peer's GID, `gid_index` and hop limit 64 on RoCE, where it is mandatory), RTR->RTS
// (send PSN, timeout 14 = 4.096 us * 2^14 ~ 67 ms, retry count 7, RNR retry 7 = retry for ever: a receiver
// that has not yet re-posted a receive slows the sender down instead of failing it). verbs:efa's SRD QP:
// RESET->INIT (port, P_Key 0, Q_Key), INIT->RTR (state only), RTR->RTS (send PSN, and RNR retry 7 when the
// device reports RNR retry). Each function returns the attributes and the exact ibv_modify_qp attribute mask
// to pass with them.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "impls/fabric/verbs/verbs_wire.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

inline constexpr const char* kDeviceEnv = "EPSUITE_VERBS_DEVICE";
inline constexpr const char* kGidIndexEnv = "EPSUITE_VERBS_GID_INDEX";
inline constexpr std::uint32_t kSrdQkey = 0x11111111;
inline constexpr std::uint8_t kRcTimeout = 14;
inline constexpr std::uint8_t kRetryCount = 7;
inline constexpr std::uint8_t kRnrRetryForever = 7;
inline constexpr std::uint8_t kMinRnrTimer = 12;  // 0.64 ms (IB spec table of RNR NAK timer values)
inline constexpr std::uint8_t kHopLimit = 64;

struct PortCandidate {
  std::string device;
  int port = 1;
  bool suitable = false;
  bool active = false;
  std::string note;  // why unsuitable or the port state, for error listings ("PORT_DOWN", "not EFA")
};

struct PortChoice {
  std::string device;
  int port = 1;
  std::size_t index = 0;  // into the candidate list
};

// `device_count`: what ibv_get_device_list returned (candidates hold only their ports). `env`: the value
// of EPSUITE_VERBS_DEVICE, empty when unset.
Result<PortChoice> select_port(std::span<const PortCandidate> candidates, int device_count,
                               std::string_view env);

// EPSUITE_VERBS_GID_INDEX (`env`, nullptr or empty when unset) within the port's GID table.
Result<int> parse_gid_index(const char* env, int gid_table_len);

// A deterministic 24-bit PSN for the QP of `rank` towards `peer`, different for every ordered pair of a
// job of up to 4096 ranks (so a crossed connection shows up as a PSN error, not silent success).
std::uint32_t initial_psn(int rank, int peer);

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

struct LocalPort {
  std::uint8_t port = 1;
  std::uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;
  std::uint8_t mtu = IBV_MTU_1024;  // active MTU
  int gid_index = 0;
};

// `remote_atomics`: the QP also accepts remote atomics (the fabric has them, verbs_atomic.hpp).
QpTransition rc_init(const LocalPort& local, bool remote_atomics = false);
// kEnvironment when the peer is on another link layer than this port (InfiniBand with RoCE).
Result<QpTransition> rc_rtr(const LocalPort& local, const PeerAddress& remote, int remote_rank);
QpTransition rc_rts(std::uint32_t send_psn);

QpTransition srd_init(const LocalPort& local);
QpTransition srd_rtr();
QpTransition srd_rts(std::uint32_t send_psn, bool rnr_retry);

// A GID the port can send from: on RoCE and EFA (GRH addressing) an all-zero entry is an unused slot of the
// GID table, kEnvironment naming the index and EPSUITE_VERBS_GID_INDEX; InfiniBand (LID routing) accepts any.
Status check_gid(const LocalPort& local, std::span<const std::uint8_t> gid);

// The address vector of a peer: LID (InfiniBand) or GRH with the peer's GID (RoCE, EFA).
ibv_ah_attr address_vector(const LocalPort& local, const PeerAddress& remote);

struct QueueDepths {
  int send = 0;      // per QP
  int recv = 0;      // per QP
  int cq = 0;        // the one CQ
  int max_puts = 0;  // the fabric's outstanding-put limit (FabricLimits::max_outstanding_puts)
};

// Queue depths for `qps` QPs (RC: one per rank; EFA: one) within the device limits: at most
// `wanted_puts` puts in flight, a receive queue of `recv_per_qp` per QP, and a CQ large enough for every
// send and receive that can be outstanding at once (a CQ overrun is fatal to the device context).
// kEnvironment when the device cannot hold even one put and one receive per QP.
Result<QueueDepths> queue_depths(int qps, int wanted_puts, int recv_per_qp, int max_qp_wr, int max_cqe);

// verbs:efa: RDMA write support as efadv_query_device reports it in `device_caps`; `rdma_write_flag` is
// EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE where this rdma-core defines it, 0 where it does not.
Status check_efa_rdma_write(std::uint32_t device_caps, std::uint32_t rdma_write_flag);

}  // namespace eps::fabric::verbs
