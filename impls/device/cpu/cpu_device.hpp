// The `cpu` and `cpu-isolated` devices (docs/devices.md 12.1-12.7): kernels are the EPS_HD bodies of
// kernels/kernel_bodies.hpp run on host threads, so every test of these devices covers the logic the CUDA
// and HIP kernels run. Queues, events, stream memory operations and graphs run on a worker thread per queue
// (cpu_queue.hpp); device memory is a memfd the host may address (`cpu`) or may not (`cpu-isolated`:
// PROT_NONE for host code, reached by device operations through a private view), cpu_memory.hpp.
//
// The bodies are compiled three times from the one source: portable x86-64, AVX2 + FMA and AVX-512 (GCC
// target attributes on the loops that call them; every body is inlined into its loop), and the widest set
// this CPU supports runs them. The results are identical on every set: the bodies round once per
// operation (no contraction) and call fma only where their definition does.
//
// Threads: a launch splits its index space over `threads` host threads (1 = the calling thread only, the
// default: MPI ranks are processes, one per core).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"

namespace eps::device {

enum class CpuIsa { kPortable, kAvx2, kAvx512 };

std::string_view cpu_isa_name(CpuIsa isa);  // "portable", "avx2", "avx512"
// Every instruction set this CPU can run the kernels with, narrowest first (always starts with kPortable).
std::vector<CpuIsa> available_cpu_isas();

struct CpuDeviceOptions {
  int threads = 1;               // in [1, 1024]
  CpuIsa isa = CpuIsa::kAvx512;  // the widest available set not wider than this
  // false: the device claims that the host cannot address its memory, as a GPU's, so that callers take
  // their staging paths (what the tests of those paths use).
  bool host_accessible = true;
  // true: `cpu-isolated` (docs/devices.md 12.5): host code faults on the device's kDevice memory, which
  // only the device's operations reach; host_accessible() is false whatever host_accessible says.
  bool isolated = false;
  // true: the device declares its memory as FI_HMEM_SYSTEM memory (HmemInterface::kSystem), so that fabrics
  // take their device-memory registration path over it (fi_mr_regattr with an iface); the memory stays host
  // memory. false: kNone, plain host memory.
  bool system_hmem = false;
};

Result<std::unique_ptr<Device>> make_cpu_device(const CpuDeviceOptions& options = {});

}  // namespace eps::device
