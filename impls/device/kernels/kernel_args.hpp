// Arguments of the device kernels (docs/devices.md): plain structs of pointers and sizes, passed by value
// to a CUDA/HIP kernel or to the host threads of the `cpu` device, and the one list of kernels that every
// backend instantiates (EPS_DEVICE_KERNELS). Pointers are memory of the device that runs the kernel;
// strides count elements of the pointed-to type unless named `*_stride_bytes`.
//
// Every kernel runs one body (kernel_bodies.hpp) over an index space [0, extent): each index writes its
// own outputs and reads nothing another index writes, so indices may run in any order and concurrently.
//
// Every pointer field of every struct is listed in kernel_pointers.hpp: the `cpu-isolated` device
// translates exactly those fields into its private view of device memory (docs/devices.md 12.5).
#pragma once

#include <cstddef>
#include <cstdint>

#include "impls/channel/fifo.hpp"
#include "reference/data/philox.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps::device {

// Row copies, gathered and scattered (pack and unpack of docs/dispatch.md 5.2-5.4): row i of `rows` copies
// row_bytes bytes from src row src_rows[i] (null: i) to dst row dst_rows[i] (null: i; negative: skipped).
struct CopyRowsArgs {
  std::byte* dst = nullptr;
  const std::byte* src = nullptr;
  std::int64_t rows = 0;
  std::int64_t row_bytes = 0;
  std::int64_t dst_stride_bytes = 0;
  std::int64_t src_stride_bytes = 0;
  const std::int64_t* dst_rows = nullptr;
  const std::int64_t* src_rows = nullptr;
};

// FP8 per-token quantization (docs/numerics.md 1.2) of the bf16 rows x[src_rows[i]] (null: i) into row
// dst_rows[i] (null: i; negative: skipped) of codes (H bytes) and scales (H/128 fp32, stored unaligned-safe),
// both at byte strides so that a pack can quantize straight into its send records, gathered and scattered.
struct Fp8QuantizeArgs {
  const bf16* x = nullptr;
  std::int64_t x_stride = 0;
  const std::int64_t* src_rows = nullptr;
  std::uint8_t* codes = nullptr;
  std::int64_t codes_stride_bytes = 0;
  std::byte* scales = nullptr;
  std::int64_t scales_stride_bytes = 0;
  std::int64_t rows = 0;
  std::int32_t hidden = 0;  // a multiple of 128
  Fp8ScaleMode mode = Fp8ScaleMode::kAmax;
  const std::int64_t* dst_rows = nullptr;
};

// out[i, c] = fp32(codes[i, c]) * scale[i, c / 128] (docs/numerics.md 1.2); with out_bf16 set instead of out,
// bf16 of that value (exact for power-of-two scales: an e4m3 significand times 2^k), at the same stride.
struct Fp8DequantizeArgs {
  const std::uint8_t* codes = nullptr;
  std::int64_t codes_stride_bytes = 0;
  const std::byte* scales = nullptr;
  std::int64_t scales_stride_bytes = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
  std::int64_t rows = 0;
  std::int32_t hidden = 0;
  bf16* out_bf16 = nullptr;
};

// The ll-weighted combine tree (docs/dispatch.md 5.5): out[t] = bf16(sum over k ascending with
// slot_rows[t, k] >= 0 of weights[t, k] * fp32(rows[slot_rows[t, k]])), exact 0 without a valid slot.
struct CombineLlArgs {
  bf16* out = nullptr;  // [tokens, hidden]
  std::int64_t tokens = 0;
  std::int32_t hidden = 0;
  std::int32_t top_k = 0;
  const float* weights = nullptr;           // [tokens, top_k]
  const std::int64_t* slot_rows = nullptr;  // [tokens, top_k]
  const bf16* rows = nullptr;
  std::int64_t row_stride = 0;
};

// The ht-rank and ht-two-level combine trees (docs/dispatch.md 5.5). Token t's records are
// [token_begin[t], token_begin[t + 1]), in ascending expert-side rank; record j's row is rows[record_rows[j]]
// and its rank's node is record_nodes[j] (docs/dispatch.md 5.5.1: nodes numbered by lowest rank, any sizes,
// not necessarily consecutive ranks). record_nodes null = ht-rank; set = ht-two-level.
struct CombineHtArgs {
  bf16* out = nullptr;  // [tokens, hidden]
  std::int64_t tokens = 0;
  std::int32_t hidden = 0;
  const std::int64_t* token_begin = nullptr;  // [tokens + 1]
  const std::int64_t* record_rows = nullptr;
  const std::int32_t* record_nodes = nullptr;
  const bf16* rows = nullptr;
  std::int64_t row_stride = 0;
  const bf16* bias0 = nullptr;  // [tokens, hidden] or null
  const bf16* bias1 = nullptr;
};

// The dot products of the batch-invariant expert kernel (docs/layer.md 4.2, the tree of
// reference/expert/tree_kernel.hpp): out[i, j] = tree_dot(x[i, 0..len), w[j, 0..len)) for i < rows, j < cols.
// len is a multiple of 16; x and w rows are zero-padded up to it.
struct TreeGemmArgs {
  const float* x = nullptr;
  std::int64_t rows = 0;
  std::int64_t x_stride = 0;
  const float* w = nullptr;
  std::int32_t cols = 0;
  std::int64_t w_stride = 0;
  std::int32_t len = 0;
  float* out = nullptr;
  std::int64_t out_stride = 0;
};

// The SwiGLU gate (docs/layer.md 4.1): h = bf16(silu(a) * b) for a, b [rows, ffn]; h is written as fp32 into
// h_wide (the next dot product's input) and, when h_narrow is set, as bf16.
struct SwigluGateArgs {
  const float* a = nullptr;
  const float* b = nullptr;
  std::int64_t ab_stride = 0;
  std::int64_t rows = 0;
  std::int32_t ffn = 0;
  float* h_wide = nullptr;
  std::int64_t h_wide_stride = 0;
  bf16* h_narrow = nullptr;
  std::int64_t h_narrow_stride = 0;
};

// dst[r, c] = fp32(src[r, c]) for c < cols, +0.0f for cols <= c < padded_cols (exact).
struct WidenBf16Args {
  const bf16* src = nullptr;
  std::int64_t src_stride = 0;
  std::int64_t rows = 0;
  std::int32_t cols = 0;
  float* dst = nullptr;
  std::int64_t dst_stride = 0;
  std::int32_t padded_cols = 0;
};

// dst[r, c] = bf16(src[r, c]) (docs/numerics.md 1.1).
struct RoundBf16Args {
  const float* src = nullptr;
  std::int64_t src_stride = 0;
  std::int64_t rows = 0;
  std::int32_t cols = 0;
  bf16* dst = nullptr;
  std::int64_t dst_stride = 0;
};

// x[r, c] = data::payload_value(seed, rank, first_token + r, c) (docs/numerics.md 2.2): token payloads
// generated where they are used.
struct FillPayloadArgs {
  bf16* x = nullptr;
  std::int64_t rows = 0;
  std::int32_t hidden = 0;
  std::uint64_t seed = 0;
  std::uint32_t rank = 0;
  std::uint32_t first_token = 0;
};

// out[r * cols + c] = data::stream_bits(seed, address, r, c) (docs/numerics.md 2.1).
struct StreamBitsArgs {
  std::uint32_t* out = nullptr;
  std::uint64_t seed = 0;
  data::StreamAddress address{};
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;
};

// The shared-expert sum of the MoE layer (docs/layer.md 4.3): out[r, c] = bf16(((fp32(t_0) + fp32(t_1)) +
// ...)
// + fp32(t_{count-1})), the fp32 sum starting from term 0 (the routed output) and adding terms 1.. (shared
// expert 0, 1, ...) in order, one rounding per add, then one bf16 rounding. Term j of row r, channel c is
// terms[(j * rows + r) * hidden + c].
struct SumRowsArgs {
  bf16* out = nullptr;  // [rows, hidden]
  const bf16* terms = nullptr;
  std::int64_t rows = 0;
  std::int32_t hidden = 0;
  std::int32_t count = 0;
};

// Device-side producers of the command channel (docs/channel.md 7.3): index i pushes commands[i] into the
// FIFO, one producer per index racing for slots as warps do (on the `cpu` device: host threads standing in
// for warps). A push that still finds the ring full after max_polls polls of the tail, or (host producers) at
// deadline_ns, gives up and adds 1 to *gave_up (the channel is then stuck at its slot; the caller reports
// it).
struct FifoPushArgs {
  channel::FifoView fifo{};
  const channel::Command* commands = nullptr;
  std::int64_t count = 0;
  std::uint64_t max_polls = 0;
  std::uint64_t* gave_up = nullptr;
  std::int64_t deadline_ns =
      0;  // host producers: give up at this steady-clock time (channel::producer_clock_ns); 0 = none
};

// A remote 64-bit atomic add (the `ipc` fabric's Fabric::try_atomic_add, docs/fabrics.md 6.5): *word +=
// value (mod 2^64) with one system-scope read-modify-write (acquire-release), atomic with every other such
// add to the word from any process or device that maps it. One index.
struct AtomicAddArgs {
  std::uint64_t* word = nullptr;  // 8-byte aligned
  std::uint64_t value = 0;
};

// The kernels: X(CamelName, snake_name, Args). Backends expand this list, so a kernel added here is built
// for every device; the GPU kernels are named eps_<snake_name>_kernel.
#define EPS_DEVICE_KERNELS(X)                         \
  X(CopyRows, copy_rows, CopyRowsArgs)                \
  X(Fp8Quantize, fp8_quantize, Fp8QuantizeArgs)       \
  X(Fp8Dequantize, fp8_dequantize, Fp8DequantizeArgs) \
  X(CombineLl, combine_ll, CombineLlArgs)             \
  X(CombineHt, combine_ht, CombineHtArgs)             \
  X(TreeGemm, tree_gemm, TreeGemmArgs)                \
  X(SwigluGate, swiglu_gate, SwigluGateArgs)          \
  X(WidenBf16, widen_bf16, WidenBf16Args)             \
  X(RoundBf16, round_bf16, RoundBf16Args)             \
  X(FillPayload, fill_payload, FillPayloadArgs)       \
  X(StreamBits, stream_bits, StreamBitsArgs)          \
  X(SumRows, sum_rows, SumRowsArgs)                   \
  X(FifoPush, fifo_push, FifoPushArgs)                \
  X(AtomicAdd, atomic_add, AtomicAddArgs)

enum class KernelId : std::int32_t {
#define EPS_KERNEL_ID(camel, snake, args) k##camel,
  EPS_DEVICE_KERNELS(EPS_KERNEL_ID)
#undef EPS_KERNEL_ID
      kCount
};

// The KernelId of an argument struct: KernelOf<CopyRowsArgs>::id == KernelId::kCopyRows.
template <typename Args>
struct KernelOf;
#define EPS_KERNEL_OF(camel, snake, args)              \
  template <>                                          \
  struct KernelOf<args> {                              \
    static constexpr KernelId id = KernelId::k##camel; \
    static constexpr const char* name = #snake;        \
  };
EPS_DEVICE_KERNELS(EPS_KERNEL_OF)
#undef EPS_KERNEL_OF

}  // namespace eps::device
