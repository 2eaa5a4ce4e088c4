#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/platform/platform.hpp"
#include "harness/platform/platform_probe.hpp"
#include "impls/device/device_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps {
namespace {

// The device this rank computes on: the one `spec` (--device) opens here, a GPU as "cuda: NAME (ARCH)",
// else the CPU's model (the `cpu` device, or a GPU that cannot be opened, whose reason the command itself
// reports when it opens its device). No ordinal or PCI address: identical nodes share a fingerprint.
std::string local_device(std::string_view spec, int local_rank) {
  Result<std::unique_ptr<device::Device>> device = device::make_device(spec, local_rank);
  if (!device.ok() || (*device)->properties().backend == "cpu") return "cpu: " + probe_cpu_model();
  const device::DeviceProperties& p = (*device)->properties();
  return fmt::format("{}: {} ({})", p.backend, p.name, p.architecture);
}

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

Result<Platform> discover_platform(const Deadline& deadline, std::string_view device_spec) {
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, mpi::all_hosts(MPI_COMM_WORLD, deadline));
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout nodes, mpi::node_layout(MPI_COMM_WORLD, deadline));
  const int local = nodes.local_index(mpi::rank());
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> devices,
                       mpi::allgather_string(local_device(device_spec, local), MPI_COMM_WORLD, deadline));
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
