// One checked dispatch + combine through a transport, shared by the tests that run the same round trip over
// other memory (staging_test: host staging; hmem_test: fabric-registered device memory). Every output is
// compared with reference/ (transport_problem.hpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "impls/problem/transport_problem.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"

namespace eps::problem {

struct RoundTrip {
  std::unique_ptr<transport::DispatchHandle> handle;
  std::int64_t rows = 0;  // received rows of the dispatch
};

// Dispatches the masked:0.6 problem of `shape` on `layout`, checks layout and rows, runs the expert and
// combines on `tree`, checks the combined rows and weights. `handle` is null when a step failed.
inline RoundTrip expect_round_trip(transport::Transport& t, const ProblemShape& shape,
                                   transport::Layout layout, transport::CombineTree tree) {
  RoundTrip trip;
  const int rank = mpi::rank();
  Result<Problem> problem = Problem::make(shape, "masked:0.6", rank, 41, 0, 42);
  EXPECT_TRUE(problem.ok()) << problem.status().message();
  if (!problem.ok()) return trip;
  DispatchBuffers buffers(layout, shape);
  Result<std::unique_ptr<transport::DispatchHandle>> handle =
      t.dispatch(layout, problem->input(), buffers.view());
  EXPECT_TRUE(handle.ok()) << handle.status().message();
  if (!handle.ok()) return trip;
  const std::int64_t rows = (*handle)->num_recv_rows();
  EXPECT_TRUE(check_layout(*problem, rank, (*handle)->layout()).ok());
  const dispatch::MismatchReport dispatched = check_dispatch(*problem, rank, buffers, rows, true);
  EXPECT_TRUE(dispatched.ok()) << dispatched.to_string();

  const std::vector<bf16> y = expert_outputs(shape, rank, buffers, rows);
  const int tokens = problem->plan().num_tokens(rank);
  std::vector<bf16> out(static_cast<std::size_t>(tokens) * shape.hidden, bf16::from_bits(0x7fc1));
  std::vector<float> weights(static_cast<std::size_t>(tokens) * shape.top_k, std::nanf("1"));
  const bool ht = tree != transport::CombineTree::kLlWeighted;
  transport::CombineInput in{tree, y, ht ? problem->bias0() : std::span<const bf16>{},
                             ht ? problem->bias1() : std::span<const bf16>{}};
  const Status combined_status = t.combine(**handle, in, {out, weights});
  EXPECT_TRUE(combined_status.ok()) << combined_status.message();
  if (!combined_status.ok()) return trip;
  Result<dispatch::MismatchReport> combined = check_combine(*problem, rank, tree, ht, out, weights);
  EXPECT_TRUE(combined.ok()) << combined.status().message();
  if (combined.ok()) {
    EXPECT_TRUE(combined->ok()) << combined->to_string();
  }
  trip.handle = std::move(handle).value();
  trip.rows = rows;
  return trip;
}

}  // namespace eps::problem
