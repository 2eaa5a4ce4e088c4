#include <filesystem>
#include <fstream>
#include <set>

#include "harness/mpi_runtime.hpp"
#include "harness/platform.hpp"

namespace eps {
namespace {

// The CPU device runs everything until a GPU device library is selected (ARCHITECTURE.md "Device").
std::string local_device() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return "cpu: " + line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "cpu";
}

std::string local_nics() {
  std::set<std::string> names;  // sorted, so the fingerprint does not depend on directory order
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/class/infiniband", ec)) {
    names.insert(entry.path().filename().string());
  }
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ","));
}

std::string provider() {
  const char* btl = std::getenv("OMPI_MCA_btl");
  return btl ? fmt::format("mpi (btl {})", btl) : "mpi";
}

}  // namespace

Result<Platform> discover_platform(const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, mpi::all_hosts(MPI_COMM_WORLD, deadline));
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> devices,
                       mpi::allgather_string(local_device(), MPI_COMM_WORLD, deadline));
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> nics,
                       mpi::allgather_string(local_nics(), MPI_COMM_WORLD, deadline));
  Platform p;
  for (std::size_t r = 0; r < hosts.size(); ++r) p.ranks.push_back({hosts[r], devices[r], nics[r]});
  p.provider = provider();
  p.libraries["mpi"] = mpi::library_version();
#if defined(__clang__)
  p.libraries["compiler"] = "clang " __clang_version__;
#else
  p.libraries["compiler"] = "gcc " __VERSION__;
#endif
  return p;
}

}  // namespace eps
