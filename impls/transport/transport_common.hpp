// Pieces every transport backend shares (mpi, direct, ...): argument checks of the Transport contract,
// the docs/dispatch.md 5.1 layout of a rank's own tokens, the receive-side routing of rank-major rows, and
// the data path that runs as device kernels (docs/devices.md): row copies (pack, unpack) and the
// source-side reductions of the docs/dispatch.md 5.5 combine trees. Backends differ in how bytes move, not
// in these.
//
// Kernels run on RoutedTransport::kernels(), a device whose memory the host addresses (the `cpu` device),
// so the index arrays they take are host vectors. Rows are named by index into one base pointer:
// - reduce_ht: records grouped by expert-side rank q ascending (`peer_begin` [R + 1] = first record of each
//   q), `record_token` the source token of each record, `record_rows` its returned row in `rows`; ht-rank
//   adds every row to fp32(bias0) + fp32(bias1) in ascending q; ht-two-level first sums each node's ranks
//   in fp32, rounds that to bf16, then adds it.
// - reduce_ll: `slot_rows` [T, K] = the returned row of (t, k) in `rows`, or -1 for a masked slot; the
//   result is bf16(sum over valid k ascending of w_k * y_k), exact 0 for a token without a valid slot.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

// The source side of one dispatch, which every backend's handle starts from: the caller's routing, the
// docs/dispatch.md 5.1 layout of these tokens, and the records to send in send order. Keys group the records:
// the destination rank q for rank-major (one record per (q, t), t ascending), the global expert e = q * L + l
// for the slot layouts (one record per valid (t, k), t ascending), so records go by q, then l, then t.
class RoutedHandle : public DispatchHandle {
 public:
  Layout layout_kind() const override { return kind; }
  std::int64_t num_recv_rows() const override { return num_rows; }
  const dispatch::DispatchLayout& layout() const override { return layout_info; }

  Layout kind = Layout::kHtRankMajor;
  const void* owner = nullptr;  // the transport that made it
  int num_tokens = 0;
  std::vector<int> topk_idx;
  std::vector<float> topk_weights;
  dispatch::DispatchLayout layout_info;  // the rank prefix matrix is the backend's to fill
  std::vector<int> send_token;           // per record
  std::vector<std::int64_t> send_rows;   // send_token widened: the row index list of the pack kernels
  std::vector<int> send_slot;            // per record: k, or -1 for rank-major records
  std::vector<int> key_begin;            // [keys + 1]: first record of each key
  std::int64_t num_rows = 0;             // rows written to the caller's receive buffers
};

// The frame of the transports that start from a RoutedHandle (mpi, direct): it owns the shapes, the
// declared capabilities and the wire counters, checks every argument of the Transport contract once (an
// undeclared layout, the inputs, the output sizes, a handle of another transport, the combine arguments),
// builds the source side of a fresh dispatch (start_dispatch) and writes the combined weights, so a backend
// only moves rows. Backends downcast the RoutedHandle they made (make_handle) with static_cast.
class RoutedTransport : public Transport {
 public:
  const Capabilities& capabilities() const final { return caps_; }
  const TransportConfig& config() const final { return config_; }
  WireBytes wire_bytes() const final { return wire_; }
  // "host" when the caller's buffers are staged through host copies, else how the wire reaches them (a
  // fabric-based backend sets region_memory_ from its fabric: "none", "fi-hmem:<iface>", "dma-buf",
  // "host-staging: <reason>"; docs/devices.md).
  std::string_view staging() const final { return staging_ ? std::string_view("host") : region_memory_; }
  Result<std::unique_ptr<DispatchHandle>> dispatch(Layout layout, const DispatchInput& input,
                                                   const DispatchOutput& output) final;
  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) final;
  Status combine(const DispatchHandle& handle, const CombineInput& input, const CombineOutput& output) final;

 protected:
  RoutedTransport(const TransportConfig& config, Capabilities caps, int rank, int size);

  // The device the data path runs on: config.device when the host addresses its memory, else a `cpu`
  // device of the transport's own (the caller's buffers are then staged through host copies).
  device::Device& kernels() const { return *kernels_; }

  // An empty handle of the backend's own type.
  virtual std::unique_ptr<RoutedHandle> make_handle() const = 0;
  // Whether run_dispatch and run_cached_dispatch take a DispatchInput with `quantize` set and quantize while
  // packing (docs/dispatch.md 5.8); otherwise the frame hands them fp8 codes and scales it made first.
  virtual bool fuses_quantize() const { return false; }
  // A fresh dispatch: `handle` holds the source side; the backend moves the rows and fills its part.
  virtual Status run_dispatch(RoutedHandle& handle, const DispatchInput& input,
                              const DispatchOutput& output) = 0;
  // New payloads along the routing of `handle` (docs/dispatch.md 5.2).
  virtual Status run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& input,
                                     const DispatchOutput& output) = 0;
  // The expert outputs back to their sources, reduced on the tree of `input` into output.out.
  virtual Status run_combine(const RoutedHandle& handle, const CombineInput& input,
                             const CombineOutput& output) = 0;

  TransportConfig config_;
  Capabilities caps_;
  int rank_;
  int size_;
  WireBytes wire_;  // the backend adds what it puts on and takes off the wire
  std::string region_memory_ = "none";

 private:
  struct Staging;  // host copies of the caller's device buffers (staging.cpp)
  Result<std::unique_ptr<DispatchHandle>> staged_dispatch(Layout layout, const DispatchInput& input,
                                                          const DispatchOutput& output);
  Status staged_dispatch_cached(const RoutedHandle& handle, const DispatchInput& input,
                                const DispatchOutput& output);
  // Copies to the caller's buffers exactly the elements a dispatch wrote into the host copies.
  Status copy_back_dispatch(const RoutedHandle& handle, const DispatchOutput& output);
  Status staged_combine(const RoutedHandle& handle, const CombineInput& input, const CombineOutput& output);
  Result<std::unique_ptr<DispatchHandle>> direct_dispatch(Layout layout, const DispatchInput& input,
                                                          const DispatchOutput& output);
  Status direct_combine(const RoutedHandle& handle, const CombineInput& input, const CombineOutput& output);
  // `input` as the backend takes it: itself, unless it asks for a quantization the backend does not fuse;
  // then its rows quantized on kernels() into quantized_codes_ / quantized_scales_ (sized for T_max once).
  Result<DispatchInput> backend_input(const DispatchInput& input);

  std::unique_ptr<device::Device> own_device_;
  device::Buffer quantized_codes_, quantized_scales_;
  device::Device* kernels_ = nullptr;
  bool staging_ = false;
  std::shared_ptr<Staging> staged_;  // shared_ptr: Staging is complete only in staging.cpp
};

// Fills `h` for a fresh dispatch of `input` (already checked) by `owner`.
void start_dispatch(RoutedHandle& h, Layout layout, const void* owner, const TransportConfig& config,
                    int num_ranks, int rank, const DispatchInput& input);
// The checks of a cached dispatch: the handle's token count, payload sizes, output sizes.
Status check_cached_dispatch(const TransportConfig& config, int num_ranks, const RoutedHandle& handle,
                             const DispatchInput& input, const DispatchOutput& output);
// `handle` as the backend's own type when `owner` made it; kInvalidArgument otherwise.
template <typename Handle>
Result<const Handle*> owned_handle(const DispatchHandle& handle, const void* owner,
                                   std::string_view transport) {
  const auto* h = dynamic_cast<const Handle*>(&handle);
  if (h == nullptr || h->owner != owner) {
    return invalid_argument("handle", "was not made by this {} transport instance", transport);
  }
  return h;
}

// kInvalidArgument naming the field: T_r in [0, T_max], x / x_scales sizes (check_quantize_input when
// `quantize` is set), and (need_routing) topk sizes, expert indices in [-1, E - 1] and check_token_routing.
Status check_dispatch_input(const TransportConfig& config, const DispatchInput& input, bool need_routing);
// docs/dispatch.md 5.8: a known scale mode, dtype fp8, x_scales empty, x holding T_r bf16 rows.
Status check_quantize_input(const TransportConfig& config, const DispatchInput& input);
// Per token: no NaN weight on a valid slot, no expert named twice (kInvalidArgument naming token and slots).
Status check_token_routing(int top_k, const DispatchInput& input);
// Every span of `layout` holds at least recv_capacity_rows(layout) rows.
Status check_dispatch_output(const TransportConfig& config, int num_ranks, Layout layout,
                             const DispatchOutput& output);
// The tree fits the handle's layout; x holds the handle's rows (LL: the whole [L, C, H]); biases, out and
// combined_weights are empty or sized [T_r, ...].
Status check_combine_args(const TransportConfig& config, int num_ranks, const DispatchHandle& handle,
                          int num_tokens, const CombineInput& input, const CombineOutput& output);

// docs/dispatch.md 5.1 for `topk_idx` [T, K] of this rank: tokens per rank, per expert, is_token_in_rank. The
// rank prefix matrix (which needs every rank's counts) is left empty: see rank_prefix_matrix.
dispatch::DispatchLayout local_layout(const TransportConfig& config, int num_ranks, int rank, int num_tokens,
                                      std::span<const int> topk_idx);
// [i][j] = tokens rank j receives from ranks 0..i, from every rank's num_tokens_per_rank ([R][R], row =
// sender).
std::vector<int> rank_prefix_matrix(int num_ranks, std::span<const int> tokens_per_rank_of_every_rank);

// One received rank-major record on `rank`: the token's routing [K] becomes recv_topk_idx (local index or -1)
// and recv_topk_weights (+0.0f where not local), docs/dispatch.md 5.2.
void localize_routing(const TransportConfig& config, int num_ranks, int rank, const std::int32_t* topk_idx,
                      const float* topk_weights, int* recv_topk_idx, float* recv_topk_weights);
// num_recv_tokens_per_expert [L] of `rows` rank-major rows: valid local slots, rounded up to the alignment.
void count_rank_major(const TransportConfig& config, int num_ranks, std::int64_t rows,
                      const DispatchOutput& output);

// Row i of `rows` rows (row_bytes each) goes from src + src_rows[i] * src_stride (src_rows empty: i) to
// dst + i * dst_stride, or to dst row dst_rows[i] when given (negative: skipped). Enqueued on `device`.
Status copy_rows(device::Device& device, std::byte* dst, std::size_t dst_stride, const std::byte* src,
                 std::size_t src_stride, std::size_t row_bytes, std::int64_t rows,
                 std::span<const std::int64_t> src_rows, std::span<const std::int64_t> dst_rows = {});

// Where a source finds the returned rows of its tokens, in the order the combine trees read them (built once
// per dispatch handle by a backend that keeps it; `ready` says it was built):
// - ll: slot_rows [T, K] = the returned row of (t, k), or -1 for a masked slot;
// - ht: token t's records are [token_begin[t], token_begin[t + 1]) in ascending expert-side rank
//   record_ranks[...], record j's row is record_rows[j].
struct CombineIndex {
  bool ready = false;
  std::vector<std::int64_t> slot_rows;
  std::vector<std::int64_t> token_begin;
  std::vector<std::int64_t> record_rows;
  std::vector<std::int32_t> record_ranks;
};
// The ll index of records (send_token[i], send_slot[i]) whose rows are record_rows[i].
CombineIndex ll_combine_index(int top_k, int num_tokens, std::span<const int> send_token,
                              std::span<const int> send_slot, std::span<const std::int64_t> record_rows);
// The ht index of records grouped by expert-side rank q ascending (peer_begin [R + 1]), record i of token
// record_token[i] with row record_rows[i].
CombineIndex ht_combine_index(int num_ranks, int num_tokens, std::span<const int> peer_begin,
                              std::span<const int> record_token, std::span<const std::int64_t> record_rows);

// The combine trees of docs/dispatch.md 5.5 into `out` [T, H] (see the top of this file); they return after
// the device finished.
Status reduce_ht(device::Device& device, const TransportConfig& config, int num_tokens, CombineTree tree,
                 const CombineIndex& index, const bf16* rows, std::span<const bf16> bias0,
                 std::span<const bf16> bias1, std::span<bf16> out);
Status reduce_ll(device::Device& device, const TransportConfig& config, int num_tokens,
                 std::span<const float> topk_weights, const bf16* rows, const CombineIndex& index,
                 std::span<bf16> out);
Status reduce_ht(device::Device& device, const TransportConfig& config, int num_ranks, int num_tokens,
                 CombineTree tree, std::span<const int> peer_begin, std::span<const int> record_token,
                 const bf16* rows, std::span<const std::int64_t> record_rows, std::span<const bf16> bias0,
                 std::span<const bf16> bias1, std::span<bf16> out);
Status reduce_ll(device::Device& device, const TransportConfig& config, int num_tokens,
                 std::span<const float> topk_weights, const bf16* rows,
                 std::span<const std::int64_t> slot_rows, std::span<bf16> out);
// combined_weights [T, K]: the input weight of valid slots, +0.0f for masked ones (docs/dispatch.md 5.5).
void write_combined_weights(std::span<const int> topk_idx, std::span<const float> topk_weights,
                            std::span<float> out);

}  // namespace eps::transport
