// What a user selects for the transports that move data over a fabric (direct, proxy): the fabric, the
// signal strategy, the chaos decorator and the negative-control permission (--fabric, --signal, --chaos,
// --allow-unsafe; docs/fabrics.md 6). Only fabric-based transports read it; the generic TransportConfig
// (impls/transport/transport.hpp) holds shapes only.
//
// `validate_fabric_selection` checks a selection without creating anything, so that every command refuses
// a bad one up front (exit 2) whichever transports run, also those that ignore it (mpi): the fabric name
// must be registered, the chaos spec must parse, the signal must be a strategy name, and fabric-order
// signalling on a fabric known to be unordered (any fabric under --chaos, EFA) needs --allow-unsafe;
// a --require-fabric must be a registered name other than auto.
#pragma once

#include <string>

#include "impls/runtime/params.hpp"
#include "reference/common/status.hpp"

namespace eps::device {
class Device;
}  // namespace eps::device

namespace eps::fabric {

struct FabricSelection {
  std::string fabric = "auto";  // a registered fabric name (fabric_registry.hpp)
  std::string signal =
      "auto";         // fabric-order, imm-seq, recv-count, sender-barrier or auto (signal_strategy.hpp)
  std::string chaos;  // --chaos spec; empty = no chaos decorator
  bool allow_unsafe = false;    // permit fabric-order on an unordered fabric (the negative control)
  std::string iface;            // --iface: network interface of socket fabrics; empty = FI_TCP_IFACE or lo
  int proxy_threads = 4;        // --proxy-threads: CPU proxy threads per rank of the proxy transport
  bool allow_fallback = false;  // --allow-fallback: auto may pass over a present but failing RDMA fabric
  std::string require_fabric;   // --require-fabric: the fabric that must be chosen; empty = any
  // Not a user parameter: the device whose memory the fabric's regions live in (FabricConfig::memory_device),
  // set by transport::make_transport from the TransportConfig; null = host memory.
  device::Device* memory_device = nullptr;
};

// The selection of the --fabric, --signal, --chaos, --allow-unsafe, --iface and --proxy-threads parameters,
// and of --allow-fallback and --require-fabric where `params` defines them (defaults otherwise).
FabricSelection fabric_selection_from(const Params& params);

Status validate_fabric_selection(const FabricSelection& selection);

// "shm, signal auto" / "libfabric:tcp, signal imm-seq, chaos seed=7" for headers and logs.
std::string describe_selection(const FabricSelection& selection);

}  // namespace eps::fabric
