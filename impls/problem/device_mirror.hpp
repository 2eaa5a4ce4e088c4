// Host buffers in front of a transport that takes device memory (docs/devices.md): what the conformance suite
// uses to run every transport on `--device` while its checks keep reading host vectors.
//
// The mirror forwards each call to `inner` (created with config.memory = kDevice on `device`) with device
// buffers of the caller's sizes: inputs are uploaded, output buffers are uploaded too (so elements a
// transport must leave untouched keep the caller's NaN fill, docs/dispatch.md 5.7) and downloaded whole
// after the call. Handles are the inner transport's. Capabilities, identity and wire bytes are the inner
// transport's; describe() adds the device.
#pragma once

#include <memory>

#include "impls/device/device.hpp"
#include "impls/transport/transport.hpp"

namespace eps::problem {

std::unique_ptr<transport::Transport> mirror_through_device(std::unique_ptr<transport::Transport> inner,
                                                            device::Device& device);

// The node-local rank of this process (for a GPU per rank, device_registry.hpp make_device). Collective.
Result<int> node_local_rank(MPI_Comm comm, double timeout_seconds);

// The largest number of ranks that run on one GPU (same host, same PCI address); 1 when every rank has its
// own or runs on the `cpu` device. Ranks sharing a GPU time-slice it between their processes, which timings
// must say. Collective.
Result<int> ranks_per_gpu(const device::Device& device, MPI_Comm comm, double timeout_seconds);

}  // namespace eps::problem
