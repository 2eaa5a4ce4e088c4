// RowSource: payload rows regenerated on demand (docs/numerics.md 2.1, docs/dispatch.md 5).
//
// The expected outputs of a rank need the payload rows of its peers, and the payloads of all ranks are
// far too large to hold at once (8 ranks × 4096 tokens × 7168 bytes for ht-deepseek-v3), so the
// reference never materializes them: it asks a RowSource for exactly the rows it needs. A workload
// generator implements RowSource by regenerating the row from (seed, stream, rank, token)
// (docs/numerics.md 2.1); MaterializedRowSource below holds explicit rows for tests and small problems.
//
// Contract for implementations:
// - fill_row(rank, token, row): writes the payload of token `token` of source rank `rank`. row.size() is
//   exactly payload_row_bytes(dtype, H) (dispatch_plan.hpp): 2H bytes of bf16 bit patterns in native
//   byte order, or H fp8 e4m3fn codes. Every byte must be written.
// - fill_scales(rank, token, scales): fp8 payloads only, writes the H/128 fp32 scales of that row
//   (docs/numerics.md 1.2). Never called for bf16 payloads (a bf16 source may leave the body empty).
// - Both are pure: the same arguments always give the same bytes, whatever the call order or thread
//   (concurrent calls on one object must be safe). Callers only ask for tokens in [0, T_rank).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "reference/common/status.hpp"
#include "reference/dispatch/dispatch_plan.hpp"

namespace eps::dispatch {

class RowSource {
 public:
  virtual ~RowSource() = default;
  virtual void fill_row(int rank, int token, std::span<std::byte> row) const = 0;
  virtual void fill_scales(int rank, int token, std::span<float> scales) const = 0;
};

// Explicit rows of every rank: rows[r] is [T_r, row_bytes], scales[r] is [T_r, H/128] (fp8) or empty
// (bf16). For tests and small problems only.
class MaterializedRowSource final : public RowSource {
 public:
  // Errors: hidden out of range or not a multiple of 128 for fp8; rows[r].size() not a multiple of the row
  // size; scales[r].size() != T_r · H/128 (fp8) or non-empty (bf16); rows and scales of different length.
  static Result<MaterializedRowSource> make(PayloadType dtype, int hidden,
                                            std::vector<std::vector<std::byte>> rows,
                                            std::vector<std::vector<float>> scales);

  int num_ranks() const { return static_cast<int>(rows_.size()); }
  int num_tokens(int rank) const { return static_cast<int>(rows_[rank].size() / row_bytes_); }
  // Preconditions: rank in [0, num_ranks()), token in [0, num_tokens(rank)), sizes as in the contract.
  void fill_row(int rank, int token, std::span<std::byte> row) const override;
  void fill_scales(int rank, int token, std::span<float> scales) const override;

 private:
  MaterializedRowSource() = default;

  std::size_t row_bytes_ = 0;
  std::size_t num_scales_ = 0;
  std::vector<std::vector<std::byte>> rows_;
  std::vector<std::vector<float>> scales_;
};

}  // namespace eps::dispatch
