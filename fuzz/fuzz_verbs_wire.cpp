// The verbs connection records (impls/fabric/verbs/verbs_wire.hpp) that ranks exchange while connecting:
// PeerAddress (32 bytes) and RegionKey (16 bytes) from a peer. The whole input is offered to both parsers,
// then its first 32 and 16 bytes. Properties: a wrong size is refused; an accepted record serializes back to
// the very bytes it was parsed from (the parser accepts exactly what `serialize` writes); immediates survive
// the wire byte order.
#include <cstring>
#include <span>

#include "fuzz/fuzz_util.hpp"
#include "impls/fabric/verbs/verbs_wire.hpp"

namespace {

namespace verbs = eps::fabric::verbs;

void check_peer_address(std::span<const std::byte> bytes) {
  const eps::Result<verbs::PeerAddress> address = verbs::parse_peer_address(bytes, 3);
  if (!address.ok()) {
    EPS_FUZZ_CHECK(!address.status().message().empty(), "an empty error");
    return;
  }
  EPS_FUZZ_CHECK(bytes.size() == verbs::kPeerAddressBytes, "a record of the wrong size was accepted");
  const verbs::PeerAddressBytes written = verbs::serialize(*address);
  EPS_FUZZ_CHECK(std::memcmp(written.data(), bytes.data(), written.size()) == 0, "PeerAddress round trip");
}

void check_region_key(std::span<const std::byte> bytes) {
  const eps::Result<verbs::RegionKey> key = verbs::parse_region_key(bytes, 3);
  if (!key.ok()) {
    EPS_FUZZ_CHECK(!key.status().message().empty(), "an empty error");
    return;
  }
  EPS_FUZZ_CHECK(bytes.size() == verbs::kRegionKeyBytes, "a record of the wrong size was accepted");
  const verbs::RegionKeyBytes written = verbs::serialize(*key);
  EPS_FUZZ_CHECK(std::memcmp(written.data(), bytes.data(), written.size()) == 0, "RegionKey round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  check_peer_address(bytes);
  check_region_key(bytes);
  if (size >= verbs::kPeerAddressBytes) check_peer_address(bytes.first(verbs::kPeerAddressBytes));
  if (size >= verbs::kRegionKeyBytes) check_region_key(bytes.first(verbs::kRegionKeyBytes));
  if (size >= 4) {
    std::uint32_t imm = 0;
    std::memcpy(&imm, data, 4);
    EPS_FUZZ_CHECK(verbs::imm_from_wire(verbs::imm_to_wire(imm)) == imm, "imm wire round trip");
  }
  return 0;
}
