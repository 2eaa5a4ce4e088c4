// The Transport interface: dispatch and combine of docs/dispatch.md 5 between the ranks of an MPI
// communicator.
//
// A transport moves token rows from the ranks that own tokens ("source side") to the ranks that own
// their experts ("expert side", dispatch) and the expert outputs back (combine). Each backend lives in
// its own folder under impls/transport/ and registers itself by name (registry.hpp); nothing else
// switches on backend names (docs/architecture.md, house style rule 2).
//
// Contract (docs/dispatch.md 5; checked bit-exactly against reference/dispatch by conformance/transport):
//
// Setup. `TransportConfig` fixes the shapes for the transport's lifetime: E experts spread over the R ranks
// of `comm` (expert e on rank e / L, local index e % L, L = E / R), top-k K, hidden H, the payload dtype
// (bf16 rows, or fp8 e4m3fn codes plus H/128 fp32 scales, docs/numerics.md 1.2), T_max (the largest T_r any
// call may pass, docs/dispatch.md 5.4) and the expert alignment of docs/dispatch.md 5.2/5.3. Creating a
// transport is collective over `comm`. Errors are kInvalidArgument naming the field and its range.
//
// Dispatch (`dispatch`, collective): every rank passes its T_r tokens (DispatchInput: x, fp8 scales,
// topk_idx with -1 = masked slot, topk_weights) and caller-owned output buffers (DispatchOutput) sized
// for the chosen layout with `recv_capacity_rows` (rows beyond what a call writes are left untouched, so
// buffers pre-filled with NaN stay NaN there). Layouts:
// - kHtRankMajor (docs/dispatch.md 5.2): one row per (r, t) with this rank in dst_ranks(r, t), ordered (r,
// t);
//   recv_topk_idx [rows, K] holds the local expert index where the slot's expert lives here, else -1 with
//   weight +0.0f; num_recv_tokens_per_expert [L] counts valid local slots rounded up to the alignment.
// - kHtExpertMajor (docs/dispatch.md 5.3): one row per (local expert l, r, t), sorted, each expert's segment
// zero-padded
//   to the alignment (padding rows: zero bytes, zero scales, weight +0.0f); recv_weights [rows] is the slot
//   weight of each row; num_recv_tokens_per_expert [L] is each segment's (aligned) length.
// - kLl (docs/dispatch.md 5.4): packed_recv_x [L, C, row] with C = R * T_max, packed_recv_count [L], src_info
// [L, C]
//   (source token of each packed row), layout_range [L, R] (begin, count per source rank). A transport
//   whose capabilities say `ll_ordered` puts blocks in ascending r and rows in ascending t.
// The returned DispatchHandle holds what combine needs (who sent which row) and the docs/dispatch.md 5.1
// layout of this rank's tokens (`layout()`), plus the number of rows written (`num_recv_rows()`, HT layouts).
//
// Quantizing dispatch (DispatchInput.quantize set, docs/dispatch.md 5.8): with dtype fp8, x holds bf16 rows
// [T_r, H] (2H bytes each) and x_scales is empty; the transport quantizes them with the docs/numerics.md 1.2
// quantizer in the given scale mode, so every output (and every byte on the wire) is bit-identical to
// quantizing first and dispatching the codes and scales. Any transport takes it: `direct` and `proxy`
// quantize while packing their send records, the others into scratch of their own before sending.
//
// Cached dispatch (`dispatch_cached`, collective): re-sends new payloads (x, scales) along the routing of
// an earlier handle without exchanging counts again; its outputs are bit-equal to those of a fresh
// dispatch with that routing and these payloads (docs/dispatch.md 5.2). input.topk_idx / topk_weights are
// ignored.
//
// Combine (`combine`, collective) with a handle from this transport, on the tree named in CombineInput:
// - kHtRank / kHtTwoLevel (after kHtRankMajor): x [rows, H] bf16 holds one pre-weighted partial per
//   received row; optional bias0 / bias1 [T_r, H]; the result follows docs/dispatch.md 5.5 (two-level: the
//   nodes of config.nodes, any sizes, docs/dispatch.md 5.5.1).
// - kLlWeighted (after kHtExpertMajor: x [rows, H]; after kLl: x [L, C, H]): x holds the expert output
//   y of each received row; the source computes bf16(sum over valid k ascending of w_k * y_k), exact 0
//   for a token without a valid slot.
// out [T_r, H] receives the combined rows; combined_weights [T_r, K] (optional, empty = not wanted)
// receives the input weights of valid slots and +0.0f for masked ones (docs/dispatch.md 5.5).
//
// Handles stay valid until destroyed and are independent: dispatch A, dispatch B, combine A, combine B
// is allowed (docs/dispatch.md 5.7). Every wait is bounded by config.timeout_seconds (docs/errors.md 10); on
// expiry a call returns kEnvironment naming the operation, peer count and rank, and the communicator is
// unusable.
//
// Memory (docs/devices.md): with config.memory = kHost every span is host memory; with kDevice every span is
// memory of config.device (the backend declares the kinds it takes in `Capabilities::memory`). A transport
// runs its data path (pack, unpack, combine reductions) as kernels of a Device: config.device when the host
// can address its memory (the `cpu` device) or when the transport runs GPU-resident (`direct` over `ipc`,
// docs/devices.md 12.9: only index arrays cross), otherwise its own `cpu` device on host copies of the
// caller's buffers, staged through host memory around every call (`staging()` says which).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "reference/common/status.hpp"
#include "reference/dispatch/combine_tree.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/node_layout.hpp"
#include "reference/numerics/bf16.hpp"
#include "reference/numerics/quant_group.hpp"

namespace eps::transport {

using dispatch::LlRange;
using dispatch::PayloadType;

enum class Layout { kHtRankMajor, kHtExpertMajor, kLl };
// The one enum of the trees (reference/dispatch/combine_tree.hpp; its name: combine_tree_name).
using device::MemoryKind;
using ::eps::CombineTree;

// "ht-rank-major", "ht-expert-major", "ll"; "bf16", "fp8".
std::string_view layout_name(Layout layout);
std::string_view dtype_name(PayloadType dtype);
// The combine trees that can follow a layout (kHtRankMajor: ht-rank, ht-two-level; else ll-weighted).
std::vector<CombineTree> trees_for(Layout layout);

struct Capabilities {
  std::vector<Layout> layouts;
  std::vector<CombineTree> combine_trees;
  std::vector<PayloadType> dtypes;
  std::vector<MemoryKind> memory;
  bool ll_ordered = false;  // docs/dispatch.md 5.4 canonical block and row order
  // HT layouts whose receive order is open (SPEC 14.3, docs/dispatch.md 5.9): rows in any order inside a
  // block.
  std::vector<Layout> open_order;
  bool cached_dispatch = false;  // dispatch_cached is implemented
  int max_ranks = 0;
  int max_experts = 0;
  int max_top_k = 0;
  int max_hidden = 0;
  int max_tokens_per_rank = 0;

  bool supports(Layout layout) const;
  bool supports(CombineTree tree) const;
  bool supports(PayloadType dtype) const;
  // Whether `layout` is received in the fixed order of docs/dispatch.md 5.2-5.4 (ll: ll_ordered; ht: not in
  // open_order), compared row by row; otherwise as the multisets of docs/dispatch.md 5.9.
  bool fixed_order(Layout layout) const;
};

struct TransportConfig {
  MPI_Comm comm = MPI_COMM_WORLD;
  int num_experts = 1;          // E, a multiple of the rank count
  int top_k = 1;                // K in [1, E]
  int hidden = 1;               // H (a multiple of 128 for fp8)
  int max_tokens_per_rank = 0;  // T_max
  PayloadType dtype = PayloadType::kBf16;
  int expert_alignment = 1;  // docs/dispatch.md 5.2 / 5.3
  NodeLayout nodes;          // ht-two-level's nodes (real or emulated); empty = one rank per node
  double timeout_seconds = 60.0;
  device::Device* device = nullptr;       // where the caller's buffers live; null = host memory
  MemoryKind memory = MemoryKind::kHost;  // kDevice: every span is memory of `device`
};

struct DispatchInput {
  int num_tokens = 0;                   // T_r in [0, T_max]
  std::span<const std::byte> x;         // [T_r, row_bytes]: bf16 bit patterns or fp8 codes (quantize: bf16)
  std::span<const float> x_scales;      // [T_r, H/128] (fp8), empty (bf16, or quantize set)
  std::span<const int> topk_idx;        // [T_r, K], -1 = masked
  std::span<const float> topk_weights;  // [T_r, K]
  // Set (dtype fp8 only): x holds bf16 rows that the dispatch quantizes with this scale mode (see above).
  std::optional<Fp8ScaleMode> quantize;
};

// Caller-owned outputs; only the spans of the requested layout are used (the others may be empty).
struct DispatchOutput {
  std::span<std::byte> recv_x;         // HT: [capacity, row_bytes]; LL: packed_recv_x [L, C, row_bytes]
  std::span<float> recv_x_scales;      // same rows, H/128 each (fp8), empty (bf16)
  std::span<int> recv_topk_idx;        // rank-major: [capacity, K]
  std::span<float> recv_topk_weights;  // rank-major: [capacity, K]
  std::span<float> recv_weights;       // expert-major: [capacity]
  std::span<int> num_recv_tokens_per_expert;  // HT: [L]
  std::span<int> packed_recv_count;           // LL: [L]
  std::span<int> src_info;                    // LL: [L, C]
  std::span<LlRange> layout_range;            // LL: [L, R]
};

struct CombineInput {
  CombineTree tree = CombineTree::kHtRank;
  std::span<const bf16> x;      // see the contract above
  std::span<const bf16> bias0;  // [T_r, H] or empty (ht trees only)
  std::span<const bf16> bias1;
};

struct CombineOutput {
  std::span<bf16> out;                // [T_r, H]
  std::span<float> combined_weights;  // [T_r, K] or empty
};

// Bytes a transport put on the wire to, and took off the wire from, other ranks (docs/dispatch.md 5.6
// `physical`): payloads, scales, headers, signals, count exchanges and padding, as actually sent; bytes a
// rank moves to itself are not counted. Cumulative over the transport's life; callers take differences.
struct WireBytes {
  std::int64_t sent = 0;
  std::int64_t received = 0;
};

// What a dispatch leaves for combine. Backends derive their own state from it.
class DispatchHandle {
 public:
  virtual ~DispatchHandle() = default;
  virtual Layout layout_kind() const = 0;
  // Rows written to recv_x (HT layouts); for kLl the sum of packed_recv_count.
  virtual std::int64_t num_recv_rows() const = 0;
  // docs/dispatch.md 5.1 layout of this rank's tokens and the rank prefix matrix.
  virtual const dispatch::DispatchLayout& layout() const = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;
  // One line for headers and failure messages: the name plus what a replay needs (a fabric transport adds
  // its fabric, signal strategy and the chaos replay string).
  virtual std::string describe() const { return std::string(name()); }
  // The transport's part of a case identity (docs/results.md 9.3): "fabric", "signal" and "chaos" as used
  // (a fabric transport names its fabric and the strategy `auto` resolved to); "none" / "off" for a transport
  // that moves no data over a fabric.
  virtual std::map<std::string, std::string> identity() const {
    return {{"fabric", "none"}, {"signal", "none"}, {"chaos", "off"}};
  }
  virtual const Capabilities& capabilities() const = 0;
  virtual const TransportConfig& config() const = 0;
  // How the caller's buffers reach the wire (results field `staging`, docs/devices.md): "none" when the data
  // path reads and writes them in place, "host" when every call copies them through host memory.
  virtual std::string_view staging() const { return "none"; }
  virtual WireBytes wire_bytes() const = 0;

  virtual Result<std::unique_ptr<DispatchHandle>> dispatch(Layout layout, const DispatchInput& input,
                                                           const DispatchOutput& output) = 0;
  virtual Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                                 const DispatchOutput& output) = 0;
  virtual Status combine(const DispatchHandle& handle, const CombineInput& input,
                         const CombineOutput& output) = 0;
};

// Rows a caller must provide in DispatchOutput.recv_x for `layout` (the first dimension of every row
// array of that layout): rank-major R * T_max; expert-major R * T_max * min(K, L) + L * (alignment - 1);
// LL L * R * T_max.
std::int64_t recv_capacity_rows(Layout layout, const TransportConfig& config, int num_ranks);

// Shape checks shared by every backend's factory: E % R, K in [1, E], H in range and a multiple of 128
// for fp8, T_max >= 0, alignment >= 1, nodes empty or placing the R ranks (NodeLayout::check), timeout > 0,
// and the capability limits. kInvalidArgument naming the field.
Status validate_config(const TransportConfig& config, int num_ranks, const Capabilities& caps);

}  // namespace eps::transport
