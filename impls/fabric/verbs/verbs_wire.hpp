// What verbs ranks exchange over MPI while connecting, in a fixed byte layout, and the byte order of
// immediates on the wire (docs/fabrics.md 6.1).
//
// PeerAddress: one record per (rank, peer) pair, 32 bytes, little-endian integers:
//   [0] version (kPeerAddressVersion)  [1] link layer (IBV_LINK_LAYER_*; 0 on EFA)
//   [2] active MTU (enum ibv_mtu, 1..5) [3] port number
//   [4..5] LID  [6..7] zero  [8..11] QP number  [12..15] starting PSN  [16..31] GID (raw, network order)
// For verbs:rc, rank r sends peer p the QP number of its QP dedicated to p and that QP's send PSN, which
// becomes p's receive PSN for the pair. For verbs:efa every record of a rank carries its one SRD QP.
// `parse_peer_address` accepts exactly what `serialize` writes: a wrong size or version (a peer running
// another build), an MTU outside 1..5, or a QP number or PSN wider than 24 bits is kEnvironment naming
// the field, the value and the sending rank.
//
// RegionKey: 16 bytes, little-endian: [0..7] virtual address of the region's first byte, [8..11] rkey,
// [12..15] zero. RDMA writes target `addr + offset` with `rkey` (ibv_post_send `wr.rdma`).
//
// Immediates: libibverbs carries imm_data as a big-endian 32-bit field (ibv_send_wr::imm_data and
// ibv_wc::imm_data are __be32). `imm_to_wire` is htonl and `imm_from_wire` ntohl, so that the value a
// caller passes to try_put is the value the target's kRemote completion reports, whatever the hosts'
// byte order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

inline constexpr std::uint8_t kPeerAddressVersion = 1;
inline constexpr std::size_t kPeerAddressBytes = 32;
inline constexpr std::size_t kRegionKeyBytes = 16;
inline constexpr std::uint32_t kMax24Bit = (1u << 24) - 1;

struct PeerAddress {
  std::uint8_t link_layer = 0;
  std::uint8_t mtu = 0;
  std::uint8_t port = 0;
  std::uint16_t lid = 0;
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::array<std::uint8_t, 16> gid{};
  friend bool operator==(const PeerAddress&, const PeerAddress&) = default;
};

struct RegionKey {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  friend bool operator==(const RegionKey&, const RegionKey&) = default;
};

using PeerAddressBytes = std::array<std::byte, kPeerAddressBytes>;
using RegionKeyBytes = std::array<std::byte, kRegionKeyBytes>;

PeerAddressBytes serialize(const PeerAddress& address);
// `from_rank` only names the sender in errors.
Result<PeerAddress> parse_peer_address(std::span<const std::byte> bytes, int from_rank);

RegionKeyBytes serialize(const RegionKey& key);
Result<RegionKey> parse_region_key(std::span<const std::byte> bytes, int from_rank);

std::uint32_t imm_to_wire(std::uint32_t imm);
std::uint32_t imm_from_wire(std::uint32_t wire);

}  // namespace eps::fabric::verbs
