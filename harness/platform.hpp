// The platform a run happened on (SPEC 9.1 `platform`): host names, per-rank device and NIC, the
// communication provider, library versions, and a fingerprint of the hardware/software identity.
//
// The fingerprint is FNV-1a 64 (hex, 16 digits) over the canonical JSON of everything except host names
// and the fingerprint itself: two runs on different but identical nodes share a fingerprint; a different
// device, NIC, provider, library version or rank count changes it (SPEC 9.2 compares only equal
// fingerprints).
//
// `discover_platform` is collective over MPI_COMM_WORLD and lives in the eps_mpi library.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "harness/deadline.hpp"
#include "harness/json_io.hpp"
#include "reference/common/status.hpp"

namespace eps {

struct RankPlatform {
  std::string host;
  std::string device;  // e.g. "cpu: <model name>"
  std::string nic;     // RDMA devices, or "none"
};

struct Platform {
  std::vector<RankPlatform> ranks;  // index = rank
  std::string provider;             // e.g. "mpi (btl self,vader)"
  std::map<std::string, std::string> libraries;
};

// FNV-1a 64 of the bytes of `text` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
std::uint64_t fnv1a64(std::string_view text);
std::string platform_fingerprint(const Platform& platform);
// {"hostnames": [...], "ranks": [{"rank", "host", "device", "nic"}], "provider", "libraries", "fingerprint"}
Json platform_to_json(const Platform& platform);

// Gathers every rank's host, device and NIC (collective, bounded by `deadline`).
Result<Platform> discover_platform(const Deadline& deadline);

}  // namespace eps
