// The bodies of the device kernels (kernel_args.hpp), written once as EPS_HD functions over an index space
// and run unchanged by every backend: the `cpu` device calls them from host threads, the CUDA and HIP
// libraries wrap them in __global__ kernels (docs/devices.md). For each kernel, `<name>_extent(args)` is
// the size of its index space and `<name>_body(i, args)` does index i.
//
// The arithmetic is the references': the docs/numerics.md 1.2 group quantizer of
// reference/numerics/quant_group.hpp, the docs/dispatch.md 5.5 trees in the order of reference/dispatch,
// the 16-lane tree of reference/expert/tree_kernel.hpp (fma is part of its definition), the gate of
// reference/expert/silu.hpp and the Philox values of reference/data. Everything else is one rounding per
// operation: backends compile these bodies without FMA contraction.
#pragma once

#include <cstdint>
#include <cstring>

#include "impls/device/kernels/kernel_args.hpp"
#include "reference/common/host_device.hpp"
#include "reference/data/values.hpp"
#include "reference/expert/silu.hpp"

#if !defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#include <cmath>
#endif

namespace eps::device {

inline constexpr std::int64_t kCopyChunkBytes = 512;  // bytes one index of copy_rows moves
inline constexpr int kChannelBlock = 64;              // channels one index of a combine reduces
inline constexpr int kTreeLanes = 16;                 // lanes of the expert kernel's dot products
inline constexpr int kTreeTile = 4;                   // one tree_gemm index computes a 4 x 4 output tile
inline constexpr int kTreeBlockTiles = 8;             // column tiles of one tree_gemm weight block

EPS_HD inline std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return (n + d - 1) / d; }
EPS_HD inline std::int64_t min_i64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

// Full unrolling of the small fixed loops of a body (accumulators then stay in registers).
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
#define EPS_UNROLL _Pragma("unroll")
#elif defined(__CUDACC__) || defined(__HIPCC__)
#define EPS_UNROLL  // the host pass of a GPU build, which never runs a body
#else
#define EPS_UNROLL _Pragma("GCC unroll 16")
#endif

// fma with one rounding (std::fma on the host, the fp32 fma instruction on a GPU).
EPS_HD inline float fused_multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
  return fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// ---- copy_rows: one index per (row, 512-byte chunk of the row).
// n bytes in 16-, 4- and 1-byte pieces of fixed size: compilers turn each into one load and one store, where
// a memcpy of a run-time size would be a library call per row (pack and unpack copy rows of a few hundred
// bytes and fp8 scales of a few bytes each).
EPS_HD inline void copy_bytes(std::byte* dst, const std::byte* src, std::int64_t n) {
  std::int64_t at = 0;
  for (; at + 16 <= n; at += 16) memcpy(dst + at, src + at, 16);
  for (; at + 4 <= n; at += 4) memcpy(dst + at, src + at, 4);
  for (; at < n; ++at) dst[at] = src[at];
}
EPS_HD inline std::int64_t copy_rows_extent(const CopyRowsArgs& a) {
  return a.rows * ceil_div(a.row_bytes, kCopyChunkBytes);
}
EPS_HD inline void copy_rows_body(std::int64_t i, const CopyRowsArgs& a) {
  const std::int64_t chunks = ceil_div(a.row_bytes, kCopyChunkBytes);
  const bool whole_rows = chunks == 1;  // rows of up to one chunk: no division per index
  const std::int64_t row = whole_rows ? i : i / chunks;
  const std::int64_t begin = whole_rows ? 0 : (i % chunks) * kCopyChunkBytes;
  const std::int64_t dst_row = a.dst_rows != nullptr ? a.dst_rows[row] : row;
  if (dst_row < 0) return;
  const std::int64_t src_row = a.src_rows != nullptr ? a.src_rows[row] : row;
  copy_bytes(a.dst + dst_row * a.dst_stride_bytes + begin, a.src + src_row * a.src_stride_bytes + begin,
             min_i64(kCopyChunkBytes, a.row_bytes - begin));
}

// ---- fp8_quantize / fp8_dequantize: one index per (row, 128-channel group).
EPS_HD inline std::int64_t fp8_quantize_extent(const Fp8QuantizeArgs& a) {
  return a.rows * (a.hidden / kFp8GroupSize);
}
EPS_HD inline void fp8_quantize_body(std::int64_t i, const Fp8QuantizeArgs& a) {
  const int groups = a.hidden / kFp8GroupSize;
  const std::int64_t row = i / groups;
  const std::int64_t g = i % groups;
  const std::int64_t dst = a.dst_rows != nullptr ? a.dst_rows[row] : row;
  if (dst < 0) return;
  const std::int64_t src = a.src_rows != nullptr ? a.src_rows[row] : row;
  const float scale = fp8_quantize_group(a.x + src * a.x_stride + g * kFp8GroupSize,
                                         a.codes + dst * a.codes_stride_bytes + g * kFp8GroupSize, a.mode);
  memcpy(a.scales + dst * a.scales_stride_bytes + g * 4, &scale, 4);
}

EPS_HD inline std::int64_t fp8_dequantize_extent(const Fp8DequantizeArgs& a) {
  return a.rows * (a.hidden / kFp8GroupSize);
}
EPS_HD inline void fp8_dequantize_body(std::int64_t i, const Fp8DequantizeArgs& a) {
  const int groups = a.hidden / kFp8GroupSize;
  const std::int64_t row = i / groups;
  const std::int64_t g = i % groups;
  float scale = 0.0f;
  memcpy(&scale, a.scales + row * a.scales_stride_bytes + g * 4, 4);
  const std::uint8_t* codes = a.codes + row * a.codes_stride_bytes + g * kFp8GroupSize;
  if (a.out_bf16 == nullptr) {
    fp8_dequantize_group(codes, scale, a.out + row * a.out_stride + g * kFp8GroupSize);
    return;
  }
  bf16* out = a.out_bf16 + row * a.out_stride + g * kFp8GroupSize;
  for (int c = 0; c < kFp8GroupSize; ++c) out[c] = bf16::from_float(fp8_dequantize_value(codes[c], scale));
}

// ---- combine_ll / combine_ht: one index per (token, block of 64 channels).
// Each body reduces channels [c0, c0 + n) of one token through combine_*_channels<kWidth>: a full block runs
// with kWidth = n = kChannelBlock, so every channel loop has a constant trip count and the accumulators stay
// in vector registers on the host; the last, partial block of a row runs the same code with its n. Per
// channel the operations and their order are the same either way (docs/dispatch.md 5.5). acc[c] +=
// fp32(row[c]) for c < n (kWidth a compile-time bound).
template <int kWidth>
EPS_HD inline void add_bf16_row(float* acc, const bf16* row, int n) {
  EPS_UNROLL for (int c = 0; c < kWidth; ++c) {
    if (c < n) acc[c] = acc[c] + row[c].to_float();
  }
}
template <int kWidth>
EPS_HD inline void store_bf16_row(bf16* out, const float* acc, int n) {
  EPS_UNROLL for (int c = 0; c < kWidth; ++c) {
    if (c < n) out[c] = bf16::from_float(acc[c]);
  }
}
EPS_HD inline std::int64_t combine_ll_extent(const CombineLlArgs& a) {
  return a.tokens * ceil_div(a.hidden, kChannelBlock);
}
template <int kWidth>
EPS_HD inline void combine_ll_channels(std::int64_t t, int c0, int n, const CombineLlArgs& a) {
  float acc[kWidth];
  EPS_UNROLL for (int c = 0; c < kWidth; ++c) acc[c] = 0.0f;
  for (int k = 0; k < a.top_k; ++k) {
    const std::int64_t row = a.slot_rows[t * a.top_k + k];
    if (row < 0) continue;
    const float w = a.weights[t * a.top_k + k];
    const bf16* y = a.rows + row * a.row_stride + c0;
    EPS_UNROLL for (int c = 0; c < kWidth; ++c) {
      if (c < n) acc[c] = acc[c] + w * y[c].to_float();
    }
  }
  store_bf16_row<kWidth>(a.out + t * a.hidden + c0, acc, n);
}
// Channel block `block` of token t.
EPS_HD inline void combine_ll_body(std::int64_t i, const CombineLlArgs& a) {
  const std::int64_t blocks = ceil_div(a.hidden, kChannelBlock);
  const std::int64_t t = i / blocks;
  const int c0 = static_cast<int>(i % blocks) * kChannelBlock;
  const int n = static_cast<int>(min_i64(kChannelBlock, a.hidden - c0));
  if (n == kChannelBlock) {
    combine_ll_channels<kChannelBlock>(t, c0, kChannelBlock, a);
  } else {
    combine_ll_channels<kChannelBlock>(t, c0, n, a);
  }
}

EPS_HD inline std::int64_t combine_ht_extent(const CombineHtArgs& a) {
  return a.tokens * ceil_div(a.hidden, kChannelBlock);
}
// acc = fp32(bias0) + fp32(bias1) per channel (a missing bias is +0.0f).
template <int kWidth>
EPS_HD inline void combine_ht_bias(float* acc, std::int64_t at, int n, const CombineHtArgs& a) {
  EPS_UNROLL for (int c = 0; c < kWidth; ++c) {
    const bool inside = c < n;
    const float b0 = inside && a.bias0 != nullptr ? a.bias0[at + c].to_float() : 0.0f;
    const float b1 = inside && a.bias1 != nullptr ? a.bias1[at + c].to_float() : 0.0f;
    acc[c] = b0 + b1;
  }
}
// ht-rank: the bias, then every record's row in ascending rank. Its own function (not a branch of the
// two-level loop) so that its accumulators alone claim the vector registers.
template <int kWidth>
EPS_HD inline void combine_ht_rank_channels(std::int64_t t, int c0, int n, const CombineHtArgs& a) {
  const std::int64_t at = t * a.hidden + c0;
  float acc[kWidth];
  combine_ht_bias<kWidth>(acc, at, n, a);
  for (std::int64_t j = a.token_begin[t]; j < a.token_begin[t + 1]; ++j)
    add_bf16_row<kWidth>(acc, a.rows + a.record_rows[j] * a.row_stride + c0, n);
  store_bf16_row<kWidth>(a.out + at, acc, n);
}
// ht-two-level: the bias, then per node (ascending node number) the bf16 rounding of the fp32 sum of its
// ranks' rows (ascending rank) from +0.0f. A node's records need not be consecutive, so each pass picks the
// smallest node above the last one and sums its records (passes = nodes the token reaches, at most K).
EPS_HD inline int next_record_node(const std::int32_t* record_nodes, std::int64_t begin, std::int64_t end,
                                   int after) {
  int next = -1;
  for (std::int64_t j = begin; j < end; ++j) {
    const int node = record_nodes[j];
    if (node > after && (next < 0 || node < next)) next = node;
  }
  return next;
}
template <int kWidth>
EPS_HD inline void combine_ht_two_level_channels(std::int64_t t, int c0, int n, const CombineHtArgs& a) {
  const std::int64_t at = t * a.hidden + c0;
  const std::int64_t begin = a.token_begin[t];
  const std::int64_t end = a.token_begin[t + 1];
  float acc[kWidth];
  float node_acc[kWidth];
  combine_ht_bias<kWidth>(acc, at, n, a);
  for (int node = next_record_node(a.record_nodes, begin, end, -1); node >= 0;
       node = next_record_node(a.record_nodes, begin, end, node)) {
    EPS_UNROLL for (int c = 0; c < kWidth; ++c) node_acc[c] = 0.0f;
    for (std::int64_t j = begin; j < end; ++j) {
      if (a.record_nodes[j] == node)
        add_bf16_row<kWidth>(node_acc, a.rows + a.record_rows[j] * a.row_stride + c0, n);
    }
    EPS_UNROLL for (int c = 0; c < kWidth; ++c) acc[c] = acc[c] + round_to_bf16(node_acc[c]);
  }
  store_bf16_row<kWidth>(a.out + at, acc, n);
}
template <int kWidth>
EPS_HD inline void combine_ht_channels(std::int64_t t, int c0, int n, const CombineHtArgs& a) {
  if (a.record_nodes == nullptr) {
    combine_ht_rank_channels<kWidth>(t, c0, n, a);
  } else {
    combine_ht_two_level_channels<kWidth>(t, c0, n, a);
  }
}
EPS_HD inline void combine_ht_body(std::int64_t i, const CombineHtArgs& a) {
  const std::int64_t blocks = ceil_div(a.hidden, kChannelBlock);
  const std::int64_t t = i / blocks;
  const int c0 = static_cast<int>(i % blocks) * kChannelBlock;
  const int n = static_cast<int>(min_i64(kChannelBlock, a.hidden - c0));
  if (n == kChannelBlock) {
    combine_ht_channels<kChannelBlock>(t, c0, kChannelBlock, a);
  } else {
    combine_ht_channels<kChannelBlock>(t, c0, n, a);
  }
}

// ---- tree_gemm: one index per 4 x 4 tile of outputs. Each dot product is the tree of tree_kernel.hpp:
// lane l accumulates the indices = l (mod 16) with fma from +0.0f, then lanes fold pairwise (8, 4, 2, 1).
// Rows and columns past the end re-read the last one and are not stored, so every stored value has the
// tree of its own row and column whatever tile it sits in (batch invariance, docs/layer.md 4.2).
EPS_HD inline std::int64_t tree_gemm_extent(const TreeGemmArgs& a) {
  return ceil_div(a.rows, kTreeTile) * ceil_div(a.cols, kTreeTile);
}

// The outputs [r0, r0 + kRows) x [c0, c0 + kCols), all accumulators live at once.
template <int kRows, int kCols>
EPS_HD inline void tree_gemm_block(std::int64_t r0, std::int64_t c0, const TreeGemmArgs& a) {
  const float* x[kRows];
  const float* w[kCols];
  for (int r = 0; r < kRows; ++r) x[r] = a.x + min_i64(r0 + r, a.rows - 1) * a.x_stride;
  for (int c = 0; c < kCols; ++c) w[c] = a.w + min_i64(c0 + c, a.cols - 1) * a.w_stride;
  float acc[kRows][kCols][kTreeLanes];
  EPS_UNROLL for (int r = 0; r < kRows; ++r) EPS_UNROLL for (int c = 0; c < kCols; ++c)
      EPS_UNROLL for (int l = 0; l < kTreeLanes; ++l) acc[r][c][l] = 0.0f;
  for (int k = 0; k < a.len; k += kTreeLanes) {
    EPS_UNROLL for (int r = 0; r < kRows; ++r) {
      EPS_UNROLL for (int c = 0; c < kCols; ++c) {
        EPS_UNROLL for (int l = 0; l < kTreeLanes; ++l) acc[r][c][l] =
            fused_multiply_add(x[r][k + l], w[c][k + l], acc[r][c][l]);
      }
    }
  }
  EPS_UNROLL for (int r = 0; r < kRows; ++r) {
    EPS_UNROLL for (int c = 0; c < kCols; ++c) {
      float* lanes = acc[r][c];
      EPS_UNROLL for (int s = kTreeLanes / 2; s >= 1; s /= 2) EPS_UNROLL for (int l = 0; l < s; ++l)
          lanes[l] = lanes[l] + lanes[l + s];
      if (r0 + r < a.rows && c0 + c < a.cols) a.out[(r0 + r) * a.out_stride + c0 + c] = lanes[0];
    }
  }
}

// Tile i in blocks of kRows x kCols (dividing 4): a backend whose registers cannot hold 4 x 4 x 16
// accumulators (AVX2: 16 ymm) computes the same tile in smaller blocks, each output with the same tree.
// Tiles are numbered column block by column block (kTreeBlockTiles tiles = 32 weight rows each), row tiles
// within a block, so that consecutive indices reuse one block of weights from cache across every row (the
// blocking of the reference kernels); the numbering changes no output.
template <int kRows, int kCols>
EPS_HD inline void tree_gemm_tile(std::int64_t i, const TreeGemmArgs& a) {
  const std::int64_t col_tiles = ceil_div(a.cols, kTreeTile);
  const std::int64_t row_tiles = ceil_div(a.rows, kTreeTile);
  const std::int64_t block = i / (row_tiles * kTreeBlockTiles);
  const std::int64_t in_block = i % (row_tiles * kTreeBlockTiles);
  const std::int64_t block_tiles = min_i64(kTreeBlockTiles, col_tiles - block * kTreeBlockTiles);
  const std::int64_t r0 = (in_block / block_tiles) * kTreeTile;
  const std::int64_t c0 = (block * kTreeBlockTiles + in_block % block_tiles) * kTreeTile;
  for (int r = 0; r < kTreeTile && r0 + r < a.rows; r += kRows) {
    for (int c = 0; c < kTreeTile && c0 + c < a.cols; c += kCols)
      tree_gemm_block<kRows, kCols>(r0 + r, c0 + c, a);
  }
}

EPS_HD inline void tree_gemm_body(std::int64_t i, const TreeGemmArgs& a) {
  tree_gemm_tile<kTreeTile, kTreeTile>(i, a);
}

// ---- elementwise kernels: one index per element.
EPS_HD inline std::int64_t swiglu_gate_extent(const SwigluGateArgs& a) { return a.rows * a.ffn; }
EPS_HD inline void swiglu_gate_body(std::int64_t i, const SwigluGateArgs& a) {
  const std::int64_t r = i / a.ffn;
  const std::int64_t j = i % a.ffn;
  const bf16 h = swiglu_gate(a.a[r * a.ab_stride + j], a.b[r * a.ab_stride + j]);
  a.h_wide[r * a.h_wide_stride + j] = h.to_float();
  if (a.h_narrow != nullptr) a.h_narrow[r * a.h_narrow_stride + j] = h;
}

EPS_HD inline std::int64_t widen_bf16_extent(const WidenBf16Args& a) { return a.rows * a.padded_cols; }
EPS_HD inline void widen_bf16_body(std::int64_t i, const WidenBf16Args& a) {
  const std::int64_t r = i / a.padded_cols;
  const std::int64_t c = i % a.padded_cols;
  a.dst[r * a.dst_stride + c] = c < a.cols ? a.src[r * a.src_stride + c].to_float() : 0.0f;
}

EPS_HD inline std::int64_t round_bf16_extent(const RoundBf16Args& a) { return a.rows * a.cols; }
EPS_HD inline void round_bf16_body(std::int64_t i, const RoundBf16Args& a) {
  const std::int64_t r = i / a.cols;
  const std::int64_t c = i % a.cols;
  a.dst[r * a.dst_stride + c] = bf16::from_float(a.src[r * a.src_stride + c]);
}

EPS_HD inline std::int64_t fill_payload_extent(const FillPayloadArgs& a) { return a.rows * a.hidden; }
EPS_HD inline void fill_payload_body(std::int64_t i, const FillPayloadArgs& a) {
  const std::int64_t r = i / a.hidden;
  const std::int64_t c = i % a.hidden;
  a.x[i] = data::payload_value(a.seed, a.rank, a.first_token + static_cast<std::uint32_t>(r),
                               static_cast<std::uint32_t>(c));
}

EPS_HD inline std::int64_t sum_rows_extent(const SumRowsArgs& a) { return a.rows * a.hidden; }
EPS_HD inline void sum_rows_body(std::int64_t i, const SumRowsArgs& a) {
  const std::int64_t plane = a.rows * a.hidden;
  float acc = a.terms[i].to_float();
  for (int j = 1; j < a.count; ++j) acc = acc + a.terms[j * plane + i].to_float();
  a.out[i] = bf16::from_float(acc);
}

// ---- fifo_push: one index per command (one producer each).
EPS_HD inline std::int64_t fifo_push_extent(const FifoPushArgs& a) { return a.count; }
EPS_HD inline void fifo_push_body(std::int64_t i, const FifoPushArgs& a) {
  channel::FifoProducer producer{a.fifo, 0};
  std::uint64_t polls = 0;
  const channel::PushOutcome outcome = channel::fifo_push(producer, a.commands[i], [&polls, &a] {
    channel::producer_backoff(++polls);
    const bool in_time =
        a.deadline_ns == 0 || polls % 64 != 0 || channel::producer_clock_ns() < a.deadline_ns;
    return polls < a.max_polls && in_time;
  });
  if (outcome != channel::PushOutcome::kPushed) channel::fifo_atomics::fetch_add(a.gave_up, std::uint64_t{1});
}

EPS_HD inline std::int64_t stream_bits_extent(const StreamBitsArgs& a) {
  return static_cast<std::int64_t>(a.rows) * a.cols;
}
EPS_HD inline void stream_bits_body(std::int64_t i, const StreamBitsArgs& a) {
  a.out[i] = data::stream_bits(a.seed, a.address, static_cast<std::uint32_t>(i / a.cols),
                               static_cast<std::uint32_t>(i % a.cols));
}

// ---- atomic_add: one index, a system-scope acquire-release fetch-add (the memory model mapping of
// impls/channel/fifo.hpp: GCC __atomic builtins on the host, cuda::atomic_ref at system scope, HIP's
// __hip_atomic_* at system scope).
EPS_HD inline std::int64_t atomic_add_extent(const AtomicAddArgs& a) { return a.word != nullptr ? 1 : 0; }
EPS_HD inline void atomic_add_body(std::int64_t, const AtomicAddArgs& a) {
#if defined(__CUDA_ARCH__)
  cuda::atomic_ref<std::uint64_t, cuda::thread_scope_system>(*a.word).fetch_add(a.value,
                                                                                cuda::memory_order_acq_rel);
#elif defined(__HIP_DEVICE_COMPILE__)
  __hip_atomic_fetch_add(a.word, a.value, __ATOMIC_ACQ_REL, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  __atomic_fetch_add(a.word, a.value, __ATOMIC_ACQ_REL);
#endif
}

}  // namespace eps::device
