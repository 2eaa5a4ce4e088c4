#include "impls/fabric/verbs/verbs_wire.hpp"

#include <arpa/inet.h>

namespace eps::fabric::verbs {
namespace {

// Explicit little-endian packing: records cross hosts, so the layout must not depend on struct padding or
// on the host's byte order.
template <typename T>
void put_le(std::span<std::byte> out, std::size_t at, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[at + i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xff);
  }
}

template <typename T>
T get_le(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) value |= std::to_integer<std::uint64_t>(in[at + i]) << (8 * i);
  return static_cast<T>(value);
}

Status bad_record(int from_rank, std::string_view field, std::string_view allowed, std::uint64_t got) {
  return Status(StatusCode::kEnvironment,
                fmt::format("verbs: address record from rank {}: {} must be {}, got {}", from_rank, field,
                            allowed, got));
}

}  // namespace

PeerAddressBytes serialize(const PeerAddress& address) {
  PeerAddressBytes out{};
  put_le<std::uint8_t>(out, 0, kPeerAddressVersion);
  put_le<std::uint8_t>(out, 1, address.link_layer);
  put_le<std::uint8_t>(out, 2, address.mtu);
  put_le<std::uint8_t>(out, 3, address.port);
  put_le<std::uint16_t>(out, 4, address.lid);
  put_le<std::uint32_t>(out, 8, address.qpn);
  put_le<std::uint32_t>(out, 12, address.psn);
  for (std::size_t i = 0; i < address.gid.size(); ++i) out[16 + i] = static_cast<std::byte>(address.gid[i]);
  return out;
}

Result<PeerAddress> parse_peer_address(std::span<const std::byte> bytes, int from_rank) {
  if (bytes.size() != kPeerAddressBytes) {
    return bad_record(from_rank, "size", fmt::format("{} bytes", kPeerAddressBytes), bytes.size());
  }
  const auto version = get_le<std::uint8_t>(bytes, 0);
  if (version != kPeerAddressVersion) {
    return bad_record(from_rank, "version",
                      fmt::format("{} (same epsuite build on every rank)", kPeerAddressVersion), version);
  }
  PeerAddress address;
  address.link_layer = get_le<std::uint8_t>(bytes, 1);
  address.mtu = get_le<std::uint8_t>(bytes, 2);
  address.port = get_le<std::uint8_t>(bytes, 3);
  address.lid = get_le<std::uint16_t>(bytes, 4);
  const auto padding = get_le<std::uint16_t>(bytes, 6);
  if (padding != 0) return bad_record(from_rank, "bytes 6..7", "zero", padding);
  address.qpn = get_le<std::uint32_t>(bytes, 8);
  address.psn = get_le<std::uint32_t>(bytes, 12);
  for (std::size_t i = 0; i < address.gid.size(); ++i)
    address.gid[i] = std::to_integer<std::uint8_t>(bytes[16 + i]);
  if (address.mtu < 1 || address.mtu > 5)
    return bad_record(from_rank, "mtu", "in [1, 5] (IBV_MTU_256..4096)", address.mtu);
  if (address.qpn > kMax24Bit) return bad_record(from_rank, "qpn", "a 24-bit value", address.qpn);
  if (address.psn > kMax24Bit) return bad_record(from_rank, "psn", "a 24-bit value", address.psn);
  return address;
}

RegionKeyBytes serialize(const RegionKey& key) {
  RegionKeyBytes out{};
  put_le<std::uint64_t>(out, 0, key.addr);
  put_le<std::uint32_t>(out, 8, key.rkey);
  return out;
}

Result<RegionKey> parse_region_key(std::span<const std::byte> bytes, int from_rank) {
  if (bytes.size() != kRegionKeyBytes) {
    return bad_record(from_rank, "region key size", fmt::format("{} bytes", kRegionKeyBytes), bytes.size());
  }
  const auto padding = get_le<std::uint32_t>(bytes, 12);
  if (padding != 0) return bad_record(from_rank, "region key bytes 12..15", "zero", padding);
  return RegionKey{get_le<std::uint64_t>(bytes, 0), get_le<std::uint32_t>(bytes, 8)};
}

std::uint32_t imm_to_wire(std::uint32_t imm) { return htonl(imm); }
std::uint32_t imm_from_wire(std::uint32_t wire) { return ntohl(wire); }

}  // namespace eps::fabric::verbs
