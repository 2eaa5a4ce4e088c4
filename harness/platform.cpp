#include "harness/platform.hpp"

#include <fmt/format.h>

namespace eps {

std::uint64_t fnv1a64(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char byte : text) {
    hash ^= byte;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

namespace {

Json identity(const Platform& p) {
  Json ranks = Json::array();
  for (const RankPlatform& r : p.ranks) ranks.push_back({{"device", r.device}, {"nic", r.nic}});
  return Json{{"ranks", ranks}, {"provider", p.provider}, {"libraries", p.libraries}};
}

}  // namespace

std::string platform_fingerprint(const Platform& platform) {
  // nlohmann's dump() orders object keys, so the text is canonical.
  return fmt::format("{:016x}", fnv1a64(identity(platform).dump()));
}

Json platform_to_json(const Platform& platform) {
  Json hostnames = Json::array();
  Json ranks = Json::array();
  for (std::size_t r = 0; r < platform.ranks.size(); ++r) {
    const RankPlatform& rp = platform.ranks[r];
    hostnames.push_back(rp.host);
    ranks.push_back({{"rank", r}, {"host", rp.host}, {"device", rp.device}, {"nic", rp.nic}});
  }
  return Json{{"hostnames", hostnames},
              {"ranks", ranks},
              {"provider", platform.provider},
              {"libraries", platform.libraries},
              {"fingerprint", platform_fingerprint(platform)}};
}

}  // namespace eps
