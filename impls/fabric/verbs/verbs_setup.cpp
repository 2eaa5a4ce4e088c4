#include "impls/fabric/verbs/verbs_setup.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "impls/fabric/verbs/verbs_atomic.hpp"

namespace eps::fabric::verbs {
namespace {

std::string describe_candidates(std::span<const PortCandidate> candidates) {
  std::vector<std::string> parts;
  for (const PortCandidate& c : candidates) {
    parts.push_back(fmt::format("{}:{} ({}{})", c.device, c.port, c.suitable ? "" : "unsuitable, ", c.note));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

Result<PortChoice> choose(std::span<const PortCandidate> candidates, std::size_t i, std::string_view env) {
  const PortCandidate& c = candidates[i];
  if (!c.suitable || !c.active) {
    return Status(
        StatusCode::kEnvironment,
        fmt::format("{}={} selects {}:{}, which is {} ({}); found: {}", kDeviceEnv, env, c.device, c.port,
                    c.suitable ? "not active" : "unsuitable", c.note, describe_candidates(candidates)));
  }
  return PortChoice{c.device, c.port, i};
}

}  // namespace

Result<PortChoice> select_port(std::span<const PortCandidate> candidates, int device_count,
                               std::string_view env) {
  if (device_count == 0) {
    return Status(StatusCode::kUnavailable, "no RDMA device (ibv_get_device_list found 0 devices)");
  }
  if (env.empty()) {
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].suitable && candidates[i].active)
        return PortChoice{candidates[i].device, candidates[i].port, i};
    }
    return Status(StatusCode::kUnavailable, fmt::format("no suitable active port on {} RDMA device(s): {}",
                                                        device_count, describe_candidates(candidates)));
  }
  const std::size_t colon = env.find(':');
  const std::string_view device = env.substr(0, colon);
  int port = 0;
  if (colon != std::string_view::npos) {
    const std::string_view digits = env.substr(colon + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
    if (ec != std::errc() || end != digits.data() + digits.size() || port < 1 || port > 255) {
      return invalid_argument(kDeviceEnv, "must be DEVICE or DEVICE:PORT with PORT in [1, 255], got '{}'",
                              env);
    }
  }
  if (device.empty()) return invalid_argument(kDeviceEnv, "must be DEVICE or DEVICE:PORT, got '{}'", env);
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].device != device || (port != 0 && candidates[i].port != port)) continue;
    if (port != 0 || (candidates[i].suitable && candidates[i].active)) return choose(candidates, i, env);
    // Without a port, keep looking for an active port of this device; report the first otherwise.
    const bool later =
        std::any_of(candidates.begin() + static_cast<std::ptrdiff_t>(i) + 1, candidates.end(),
                    [&](const PortCandidate& c) { return c.device == device && c.suitable && c.active; });
    if (!later) return choose(candidates, i, env);
  }
  return Status(StatusCode::kEnvironment, fmt::format("{}={}: no such device or port; found: {}", kDeviceEnv,
                                                      env, describe_candidates(candidates)));
}

Result<int> parse_gid_index(const char* env, int gid_table_len) {
  if (env == nullptr || *env == '\0') return 0;
  const std::string_view text(env);
  int index = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), index);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return invalid_argument(kGidIndexEnv, "must be an integer in [0, {}], got '{}'", gid_table_len - 1, text);
  }
  if (index < 0 || index >= gid_table_len) return out_of_range(kGidIndexEnv, 0, gid_table_len - 1, index);
  return index;
}

std::uint32_t initial_psn(int rank, int peer) {
  // 12 bits of each rank index make the PSN unique per ordered pair for jobs of up to 4096 ranks.
  return ((static_cast<std::uint32_t>(rank) & 0xfff) << 12) | (static_cast<std::uint32_t>(peer) & 0xfff);
}

QpTransition rc_init(const LocalPort& local, bool remote_atomics) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = local.port;
  t.attr.qp_access_flags = static_cast<unsigned>(region_access(remote_atomics));
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

Status check_gid(const LocalPort& local, std::span<const std::uint8_t> gid) {
  if (local.link_layer == IBV_LINK_LAYER_INFINIBAND) return Status();
  if (std::any_of(gid.begin(), gid.end(), [](std::uint8_t b) { return b != 0; })) return Status();
  return Status(
      StatusCode::kEnvironment,
      fmt::format("GID index {} of port {} is empty; choose a populated entry with {} (show_gids lists them)",
                  local.gid_index, local.port, kGidIndexEnv));
}

ibv_ah_attr address_vector(const LocalPort& local, const PeerAddress& remote) {
  ibv_ah_attr ah{};
  ah.port_num = local.port;
  ah.sl = 0;
  ah.src_path_bits = 0;
  if (local.link_layer == IBV_LINK_LAYER_INFINIBAND) {
    ah.dlid = remote.lid;
    ah.is_global = 0;
    return ah;
  }
  ah.is_global = 1;
  std::memcpy(ah.grh.dgid.raw, remote.gid.data(), remote.gid.size());
  ah.grh.sgid_index = static_cast<std::uint8_t>(local.gid_index);
  ah.grh.hop_limit = kHopLimit;
  ah.grh.flow_label = 0;
  ah.grh.traffic_class = 0;
  return ah;
}

Result<QpTransition> rc_rtr(const LocalPort& local, const PeerAddress& remote, int remote_rank) {
  if (remote.link_layer != local.link_layer) {
    return Status(
        StatusCode::kEnvironment,
        fmt::format("rank {} is on link layer {} but this rank on {} (InfiniBand = {}, Ethernet/RoCE = {}); "
                    "pick ports of one kind with {}",
                    remote_rank, remote.link_layer, local.link_layer,
                    static_cast<int>(IBV_LINK_LAYER_INFINIBAND), static_cast<int>(IBV_LINK_LAYER_ETHERNET),
                    kDeviceEnv));
  }
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
  t.attr.dest_qp_num = remote.qpn;
  t.attr.rq_psn = remote.psn;
  t.attr.max_dest_rd_atomic = 1;
  t.attr.min_rnr_timer = kMinRnrTimer;
  t.attr.ah_attr = address_vector(local, remote);
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition rc_rts(std::uint32_t send_psn) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.sq_psn = send_psn;
  t.attr.timeout = kRcTimeout;
  t.attr.retry_cnt = kRetryCount;
  t.attr.rnr_retry = kRnrRetryForever;
  t.attr.max_rd_atomic = 1;
  t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
           IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

QpTransition srd_init(const LocalPort& local) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = local.port;
  t.attr.qkey = kSrdQkey;
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY;
  return t;
}

QpTransition srd_rtr() {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.mask = IBV_QP_STATE;
  return t;
}

QpTransition srd_rts(std::uint32_t send_psn, bool rnr_retry) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.sq_psn = send_psn;
  t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (rnr_retry) {
    t.attr.rnr_retry = kRnrRetryForever;
    t.mask |= IBV_QP_RNR_RETRY;
  }
  return t;
}

Result<QueueDepths> queue_depths(int qps, int wanted_puts, int recv_per_qp, int max_qp_wr, int max_cqe) {
  QueueDepths d;
  d.max_puts = std::min(wanted_puts, max_qp_wr);
  d.recv = std::min(recv_per_qp, max_qp_wr);
  // Shrink the receive queues first (RNR retry makes a short one only slower), then the put limit.
  if (static_cast<std::int64_t>(d.max_puts) + static_cast<std::int64_t>(qps) * d.recv > max_cqe) {
    d.recv = std::max<int>(1, static_cast<int>((static_cast<std::int64_t>(max_cqe) - d.max_puts) / qps));
  }
  if (static_cast<std::int64_t>(d.max_puts) + static_cast<std::int64_t>(qps) * d.recv > max_cqe) {
    d.max_puts = static_cast<int>(max_cqe - static_cast<std::int64_t>(qps) * d.recv);
  }
  if (d.max_puts < 1 || d.recv < 1) {
    return Status(
        StatusCode::kEnvironment,
        fmt::format(
            "device queues too small for {} QPs: max_qp_wr {}, max_cqe {} (need at least one send and "
            "one receive per QP)",
            qps, max_qp_wr, max_cqe));
  }
  d.send = d.max_puts;
  d.cq = d.max_puts + qps * d.recv;
  return d;
}

Status check_efa_rdma_write(std::uint32_t device_caps, std::uint32_t rdma_write_flag) {
  if (rdma_write_flag == 0) {
    return Status(
        StatusCode::kEnvironment,
        "this build's rdma-core (efadv.h) has no EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE, so RDMA write support "
        "cannot be confirmed; rebuild against rdma-core with EFA RDMA write (efadv_query_device(3) lists "
        "it)");
  }
  if ((device_caps & rdma_write_flag) == 0) {
    return Status(
        StatusCode::kEnvironment,
        fmt::format("the EFA device does not report RDMA write (device_caps {:#x}); it needs EFA hardware "
                    "and driver with RDMA write support",
                    device_caps));
  }
  return Status();
}

}  // namespace eps::fabric::verbs
