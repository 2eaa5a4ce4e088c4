// The pointer fields of every kernel argument struct (kernel_args.hpp), as byte offsets: the `cpu-isolated`
// device (docs/devices.md 12.5) hands out device memory the host cannot touch and runs each operation on a
// private view of it, so before a kernel runs it rewrites exactly these fields (each pointer that lies in
// its device memory) into that view. Declared rather than guessed: a scan of every 8-byte word would also
// rewrite an integer that happens to equal a device address (a steady-clock deadline in nanoseconds can).
//
// PointerFields has no primary definition, so a kernel added to EPS_DEVICE_KERNELS without its entry here
// does not compile; a pointer field added to an existing struct without its entry here faults at once in the
// kernel checks on `cpu-isolated` (impls/device/tests), which run every kernel with device memory.
#pragma once

#include <cstddef>

#include "impls/device/kernels/kernel_args.hpp"

namespace eps::device {

template <typename Args>
struct PointerFields;

#define EPS_POINTER_FIELDS(Args, ...)                       \
  template <>                                               \
  struct PointerFields<Args> {                              \
    static constexpr std::size_t offsets[] = {__VA_ARGS__}; \
  };

#define EPS_AT(Args, field) offsetof(Args, field)

EPS_POINTER_FIELDS(CopyRowsArgs, EPS_AT(CopyRowsArgs, dst), EPS_AT(CopyRowsArgs, src),
                   EPS_AT(CopyRowsArgs, dst_rows), EPS_AT(CopyRowsArgs, src_rows))
EPS_POINTER_FIELDS(Fp8QuantizeArgs, EPS_AT(Fp8QuantizeArgs, x), EPS_AT(Fp8QuantizeArgs, src_rows),
                   EPS_AT(Fp8QuantizeArgs, codes), EPS_AT(Fp8QuantizeArgs, scales),
                   EPS_AT(Fp8QuantizeArgs, dst_rows))
EPS_POINTER_FIELDS(Fp8DequantizeArgs, EPS_AT(Fp8DequantizeArgs, codes), EPS_AT(Fp8DequantizeArgs, scales),
                   EPS_AT(Fp8DequantizeArgs, out), EPS_AT(Fp8DequantizeArgs, out_bf16))
EPS_POINTER_FIELDS(CombineLlArgs, EPS_AT(CombineLlArgs, out), EPS_AT(CombineLlArgs, weights),
                   EPS_AT(CombineLlArgs, slot_rows), EPS_AT(CombineLlArgs, rows))
EPS_POINTER_FIELDS(CombineHtArgs, EPS_AT(CombineHtArgs, out), EPS_AT(CombineHtArgs, token_begin),
                   EPS_AT(CombineHtArgs, record_rows), EPS_AT(CombineHtArgs, record_nodes),
                   EPS_AT(CombineHtArgs, rows), EPS_AT(CombineHtArgs, bias0), EPS_AT(CombineHtArgs, bias1))
EPS_POINTER_FIELDS(TreeGemmArgs, EPS_AT(TreeGemmArgs, x), EPS_AT(TreeGemmArgs, w), EPS_AT(TreeGemmArgs, out))
EPS_POINTER_FIELDS(SwigluGateArgs, EPS_AT(SwigluGateArgs, a), EPS_AT(SwigluGateArgs, b),
                   EPS_AT(SwigluGateArgs, h_wide), EPS_AT(SwigluGateArgs, h_narrow))
EPS_POINTER_FIELDS(WidenBf16Args, EPS_AT(WidenBf16Args, src), EPS_AT(WidenBf16Args, dst))
EPS_POINTER_FIELDS(RoundBf16Args, EPS_AT(RoundBf16Args, src), EPS_AT(RoundBf16Args, dst))
EPS_POINTER_FIELDS(FillPayloadArgs, EPS_AT(FillPayloadArgs, x))
EPS_POINTER_FIELDS(StreamBitsArgs, EPS_AT(StreamBitsArgs, out))
EPS_POINTER_FIELDS(SumRowsArgs, EPS_AT(SumRowsArgs, out), EPS_AT(SumRowsArgs, terms))
EPS_POINTER_FIELDS(FifoPushArgs, EPS_AT(FifoPushArgs, fifo) + offsetof(channel::FifoView, header),
                   EPS_AT(FifoPushArgs, fifo) + offsetof(channel::FifoView, slots),
                   EPS_AT(FifoPushArgs, fifo) + offsetof(channel::FifoView, head),
                   EPS_AT(FifoPushArgs, commands), EPS_AT(FifoPushArgs, gave_up))
EPS_POINTER_FIELDS(AtomicAddArgs, EPS_AT(AtomicAddArgs, word))

#undef EPS_AT
#undef EPS_POINTER_FIELDS

}  // namespace eps::device
