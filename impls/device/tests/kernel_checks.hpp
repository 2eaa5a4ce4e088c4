// Checks of every device kernel against reference/ (docs/devices.md: a device's results are bit-identical to
// the references'), written once over a Device so that the `cpu` device tests and the `gpu` tests of the
// CUDA and HIP devices run the same cases. Each returns a GoogleTest assertion naming the first mismatch.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "impls/device/device.hpp"

namespace eps::device::testing {

// A device buffer holding `host` (at least 1 byte).
template <typename T>
Buffer upload(Device& device, const std::vector<T>& host) {
  Buffer b =
      value_or_throw(device.allocate(std::max<std::size_t>(1, host.size() * sizeof(T)), MemoryKind::kDevice));
  throw_if_error(device.copy(b.data(), host.data(), host.size() * sizeof(T)));
  return b;
}

// The first `count` elements of a device buffer, after everything enqueued on the default queue.
template <typename T>
std::vector<T> download(Device& device, const Buffer& b, std::size_t count) {
  throw_if_error(device.synchronize());
  std::vector<T> host(count);
  throw_if_error(device.copy(host.data(), b.data(), count * sizeof(T)));
  return host;
}

// Row gathers and scatters with strides and skipped rows (copy_rows).
::testing::AssertionResult check_copy_rows(Device& device);
// fp8_quantize (gathered rows into strided records, both scale modes, NaN/inf/zero groups) against
// quantize_fp8_per_token, and fp8_dequantize against dequantize_fp8_per_token.
::testing::AssertionResult check_fp8(Device& device);
// combine_ll, combine_ht (ht-rank and ht-two-level, with and without biases) against the expected combines
// of reference/dispatch/combine.hpp.
::testing::AssertionResult check_combine(Device& device);
// DeviceExpert against the reference `vectorized` expert kernel (TreeExpert): y and h bit for bit, for
// several batch sizes (batch invariance) and shapes that are not multiples of 4 or 16.
::testing::AssertionResult check_expert(Device& device);
// fill_payload and stream_bits against reference/data.
::testing::AssertionResult check_fills(Device& device);
// sum_rows against docs/layer.md 4.3's shared-expert sum written out here, -0 terms included.
::testing::AssertionResult check_sum_rows(Device& device);
// atomic_add: 200 adds of distinct 64-bit values to one word, from the default queue and a second queue
// at once, sum to the expected total modulo 2^64; an add with a null word launches nothing.
::testing::AssertionResult check_atomic_add(Device& device);
// fifo_push: the device's producers push 20000 commands into a 64-slot FIFO in the device's pinned host
// memory while a host thread pops them as a proxy does; every command arrives exactly once and no producer
// gives up.
::testing::AssertionResult check_fifo_push(Device& device);

}  // namespace eps::device::testing
