// A dispatch/combine problem shared by the transport conformance suite and `epsuite bench` (docs/dispatch.md
// 5), regenerated from seeds on every rank (docs/numerics.md 2.1, house style rule 8): any rank knows every
// peer's routing and payloads, so its expected outputs come from reference/dispatch without communication.
//
// - Shape: R ranks, E experts (a multiple of R), K, H, T_max, expert alignment, payload dtype, and the
//   nodes of ht-two-level (real or emulated, any sizes: docs/dispatch.md 5.5.1).
// - Workload: a reference/data generator name ("uniform", "zipf:1.2", "masked:0.6", ...) or
//   "zero-token-ranks" (uniform routing; every even rank has no tokens, so R = 1 has none at all).
//   Tokens per rank are drawn in [0, T_max] from the seed (reference/data tokens_per_rank), unless the
//   shape fixes them (`tokens_per_rank`, what `epsuite bench` sweeps).
// - Routing of (rank, step) from `routing_seed`; payloads x from `payload_seed` (bf16 values of
// docs/numerics.md 2.2,
//   quantized per token for fp8, docs/numerics.md 1.2, amax scales). Two problems with one routing seed and
//   different payload seeds model a cached dispatch with new activations. An fp8 shape with `quantize` set
//   hands the transport the bf16 rows to quantize in that scale mode (docs/dispatch.md 5.8); the expected
//   rows are the reference's quantization of them in that mode.
//
// Expert-side functions (cheap, deterministic, exact where it matters): the transport suite feeds combine
// with `transform_row` of the received row — the row's values (bf16, or fp8 code x scale in fp32) times
// 2^-shift, rounded to bf16. ht trees use shift q % 3 (q = the expert-side rank), ll-weighted shift e % 4
// (e = the slot's global expert). The reference gets the same functions through its callbacks, applied to
// the regenerated source row, so a row delivered to the wrong rank, expert or slot changes the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "impls/transport/transport.hpp"
#include "reference/common/status.hpp"
#include "reference/dispatch/combine.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/row_source.hpp"

namespace eps::problem {

struct ProblemShape {
  int ranks = 1;
  int experts = 16;
  int top_k = 4;
  int hidden = 256;
  int max_tokens = 64;
  int alignment = 1;
  NodeLayout nodes;  // ht-two-level's nodes; empty = one rank per node
  dispatch::PayloadType dtype = dispatch::PayloadType::kBf16;
  int tokens_per_rank = -1;  // >= 0: every rank has exactly this many tokens (benchmarks); -1: drawn
  std::optional<Fp8ScaleMode> quantize;  // fp8: bf16 rows that the dispatch quantizes (see above)
};

// The suite's default shape at R ranks (docs/dispatch.md 5.7 small shapes): E = R * ceil(16 / R) (at least 2
// local experts), K = 4 (K = max(4, R) for "spread", which needs K >= R), H = 256, T_max = 64. Nodes
// (ht-two-level): the cluster's own (`real`, any sizes) when it has several, else emulated: nodes of 2
// ranks when R is even, one node otherwise.
ProblemShape default_shape(int ranks, const std::string& workload, dispatch::PayloadType dtype,
                           const NodeLayout& real = {});

transport::TransportConfig transport_config(const ProblemShape& shape, double timeout_seconds);

// Regenerates payload rows (and fp8 scales, quantized in `mode`) of any (rank, token) from the payload seed.
class SeededRowSource final : public dispatch::RowSource {
 public:
  SeededRowSource(std::uint64_t seed, dispatch::PayloadType dtype, int hidden,
                  Fp8ScaleMode mode = Fp8ScaleMode::kAmax)
      : seed_(seed), dtype_(dtype), hidden_(hidden), mode_(mode) {}
  // The bf16 values an fp8 row is quantized from (the row itself for bf16).
  void fill_values(int rank, int token, std::span<bf16> values) const;
  void fill_row(int rank, int token, std::span<std::byte> row) const override;
  void fill_scales(int rank, int token, std::span<float> scales) const override;

 private:
  std::uint64_t seed_;
  dispatch::PayloadType dtype_;
  int hidden_;
  Fp8ScaleMode mode_;
};

class Problem {
 public:
  // `rank` is the rank whose inputs input() returns.
  static Result<Problem> make(const ProblemShape& shape, const std::string& workload, int rank,
                              std::uint64_t routing_seed, int step, std::uint64_t payload_seed);

  // The same routing with the payloads (and bias rows) of `payload_seed`: what one benchmark iteration sends
  // when every iteration gets its own payload.
  Problem with_payload(std::uint64_t payload_seed) const;

  const ProblemShape& shape() const { return shape_; }
  const dispatch::DispatchPlan& plan() const { return plan_; }
  const SeededRowSource& source() const { return source_; }
  std::uint64_t payload_seed() const { return payload_seed_; }
  // This rank's dispatch input (spans into the problem).
  transport::DispatchInput input() const;
  // Bias rows of the ht trees for this rank's tokens, [T_r, H], and the reference's callbacks for them.
  std::span<const bf16> bias0() const { return bias0_; }
  std::span<const bf16> bias1() const { return bias1_; }
  dispatch::CombineBias reference_bias() const;

 private:
  Problem(ProblemShape shape, dispatch::DispatchPlan plan, std::uint64_t payload_seed, int rank)
      : shape_(shape),
        plan_(std::move(plan)),
        source_(payload_seed, shape.dtype, shape.hidden, shape.quantize.value_or(Fp8ScaleMode::kAmax)),
        payload_seed_(payload_seed),
        rank_(rank) {}

  void fill_payloads();  // x, scales and bias rows of this rank from the payload seed

  ProblemShape shape_;
  dispatch::DispatchPlan plan_;
  SeededRowSource source_;
  std::uint64_t payload_seed_;
  int rank_ = 0;
  std::vector<std::byte> x_;
  std::vector<float> x_scales_;
  std::vector<bf16> bias0_, bias1_;
};

// values(row) * 2^-shift rounded to bf16: row is row_bytes of bf16 bits or fp8 codes; scales H/128 (fp8).
void transform_row(dispatch::PayloadType dtype, std::span<const std::byte> row, std::span<const float> scales,
                   int shift, std::span<bf16> out);
int ht_shift(int expert_rank);
int ll_shift(int expert);

// Caller-owned dispatch buffers of one layout, at capacity, pre-filled with NaN (floats and bf16) and
// -7 (ints), so that an element a transport forgets to write cannot pass by accident (docs/dispatch.md 5.7).
struct DispatchBuffers {
  DispatchBuffers(transport::Layout layout, const ProblemShape& shape);
  transport::DispatchOutput view();

  transport::Layout layout;
  std::int64_t capacity = 0;
  std::vector<std::byte> recv_x;
  std::vector<float> recv_x_scales;
  std::vector<int> recv_topk_idx;
  std::vector<float> recv_topk_weights;
  std::vector<float> recv_weights;
  std::vector<int> num_recv_tokens_per_expert;
  std::vector<int> packed_recv_count;
  std::vector<int> src_info;
  std::vector<transport::LlRange> layout_range;
};

// The expert side of combine: one bf16 row per received row (ht: [rows, H]; ll: [L, C, H]) computed with
// transform_row from what this rank received.
std::vector<bf16> expert_outputs(const ProblemShape& shape, int rank, const DispatchBuffers& received,
                                 std::int64_t num_rows);

// Bit-exact checks against reference/dispatch (every mismatch names rank, source rank and token, column,
// expected and actual bits). check_dispatch compares rows in the fixed order of docs/dispatch.md 5.2-5.4, or,
// with `fixed_order` false (Capabilities::fixed_order), as the multisets of docs/dispatch.md 5.9.
dispatch::MismatchReport check_layout(const Problem& problem, int rank,
                                      const dispatch::DispatchLayout& actual);
dispatch::MismatchReport check_dispatch(const Problem& problem, int rank, const DispatchBuffers& actual,
                                        std::int64_t num_rows, bool fixed_order);
// The reference's combine of `rank`'s tokens [T_r, H] on `tree`, with the expert side's function
// (transform_row of each delivered row) and, `with_bias`, the problem's bias rows (ht trees).
Result<std::vector<bf16>> expected_combine(const Problem& problem, int rank, transport::CombineTree tree,
                                           bool with_bias);
// `with_bias`: the ht trees were given the problem's bias rows. Combined weights are checked when given.
Result<dispatch::MismatchReport> check_combine(const Problem& problem, int rank, transport::CombineTree tree,
                                               bool with_bias, std::span<const bf16> out,
                                               std::span<const float> combined_weights);

}  // namespace eps::problem
