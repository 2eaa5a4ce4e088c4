#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/platform/platform.hpp"
#include "harness/platform/platform_probe.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps {
namespace {

// The CPU device runs everything until a GPU device library is selected (docs/architecture.md "Device").
std::string local_device() { return "cpu: " + probe_cpu_model(); }

std::string local_nics() {
  std::string note;
  const std::vector<std::string> names = probe_verbs_devices(note);  // sorted: stable fingerprints
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
  // Every rank probes its own node so that all ranks hold the same record of a homogeneous job.
  p.node = probe_node();
  return p;
}

}  // namespace eps
