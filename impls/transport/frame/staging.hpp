// Staging of the caller's device buffers through host memory (transport.hpp "Memory", docs/devices.md), for
// the frame (frame.hpp): when the data path's device cannot address config.device's memory, every call copies
// the inputs to pinned host memory of that device (Device::allocate kHost: cudaMallocHost / hipHostMalloc on
// a GPU, so the copies are DMA), the protocol runs on those copies, and exactly the output elements the
// contract says the call writes are copied back (rows beyond them stay untouched, docs/dispatch.md 5.7). The
// host copies are kept between calls so that their capacity is reused.
//
// Index only (`Staged::kIndex`): a GPU-resident data path (data_path.hpp) addresses the token buffers itself
// (x, x_scales, recv_x, recv_x_scales, the combine's x, biases and out stay the caller's device buffers) and
// only the index arrays are staged: the routing in, the index outputs and combined weights out.
#pragma once

#include <memory>

#include "impls/device/device.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

class HostStaging {
 public:
  enum class Staged { kAll, kIndex };
  HostStaging(device::Device& device, const TransportConfig& config, int num_ranks, Staged staged);
  ~HostStaging();

  // Host copies of a dispatch's inputs (the routing only `with_routing`: a cached dispatch ignores it) and
  // host outputs of the sizes of `out` (their contents are not copied: a dispatch writes what it reports).
  Result<DispatchInput> dispatch_input(const DispatchInput& in, bool with_routing);
  Result<DispatchOutput> dispatch_output(const DispatchOutput& out);
  // Copies to `out` the elements a dispatch of `layout` wrote into the host outputs: `num_rows` HT rows, or
  // each LL expert's packed rows, and the counts.
  Status copy_back_dispatch(Layout layout, std::int64_t num_rows, const DispatchOutput& out);

  Result<CombineInput> combine_input(const CombineInput& in);
  Result<CombineOutput> combine_output(const CombineOutput& out);
  Status copy_back_combine(const CombineOutput& out);

 private:
  struct Arrays;  // the pinned host arrays (staging.cpp)
  device::Device& device_;
  TransportConfig config_;
  bool tokens_;  // Staged::kAll
  int num_ranks_;
  std::unique_ptr<Arrays> arrays_;
};

}  // namespace eps::transport
