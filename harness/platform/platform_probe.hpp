// Probes of the local node for the platform record (docs/results.md 9.1; harness/platform.hpp), without MPI.
//
// - CPU model: hwloc's CPUModel of the first package, else /proc/cpuinfo "model name", else "unknown".
// - Memory: physical pages x page size (sysconf), bytes.
// - Topology: hwloc object counts (packages, NUMA nodes, cores, PUs, PCI devices) and the OS devices of
//   type network, openfabrics, GPU and coprocessor; empty with a note when epsuite has no hwloc.
// - GPUs: only when epsuite was built with CUDA (kWithCuda) or HIP (kWithHip), through the runtime
//   library loaded with dlopen at run time (libcudart + libcuda for names, libamdhip64), so epsuite has
//   no link-time dependency on either; "none" with the runtime's reason otherwise.
// - Verbs devices: ibv_get_device_list when built with ibverbs (EPS_HAVE_VERBS).
// - libfabric providers: fi_getinfo with no node, no service and no flags (a local query: nothing is
//   resolved or sent), one entry per provider and endpoint type, when built with libfabric.
//   libibverbs and libfabric are loaded at run time too (verbs_api.hpp, fi_api.hpp); where one cannot be
//   loaded, its list is empty with the loader's message as the note.
// - Library versions: fmt, nlohmann_json, hwloc_api (hwloc_get_api_version), libfabric (fi_version), and
//   the CUDA/HIP runtime when loaded.
// Every probe that finds nothing says why in its `*_note`; no probe fails the run.
#pragma once

#include <string>
#include <vector>

#include "harness/platform/platform.hpp"

namespace eps {

std::string probe_cpu_model();
// Verbs device names, sorted; `note` says why the list is empty ("" otherwise).
std::vector<std::string> probe_verbs_devices(std::string& note);
NodePlatform probe_node();

}  // namespace eps
