// The argument checks of the Transport contract (transport.hpp), run once by the frame (frame.hpp) for every
// backend: each returns kInvalidArgument naming the field and its allowed range (docs/errors.md 10).
#pragma once

#include "impls/transport/transport.hpp"
#include "reference/common/status.hpp"

namespace eps::transport {

// T_r in [0, T_max], x / x_scales sizes (check_quantize_input when `quantize` is set), and (need_routing)
// topk sizes, expert indices in [-1, E - 1] and check_token_routing.
Status check_dispatch_input(const TransportConfig& config, const DispatchInput& input, bool need_routing);
// docs/dispatch.md 5.8: a known scale mode, dtype fp8, x_scales empty, x holding T_r bf16 rows.
Status check_quantize_input(const TransportConfig& config, const DispatchInput& input);
// Per token: no NaN weight on a valid slot, no expert named twice (kInvalidArgument naming token and slots).
Status check_token_routing(int top_k, const DispatchInput& input);
// Every span of `layout` holds at least recv_capacity_rows(layout) rows.
Status check_dispatch_output(const TransportConfig& config, int num_ranks, Layout layout,
                             const DispatchOutput& output);
// A cached dispatch along a handle of `layout` made for `handle_tokens` tokens: the same token count, the
// payload sizes, the output sizes.
Status check_cached_dispatch(const TransportConfig& config, int num_ranks, Layout layout, int handle_tokens,
                             const DispatchInput& input, const DispatchOutput& output);
// The tree fits the handle's layout; x holds the handle's rows (LL: the whole [L, C, H]); biases, out and
// combined_weights are empty or sized [T_r, ...].
Status check_combine_args(const TransportConfig& config, int num_ranks, const DispatchHandle& handle,
                          int num_tokens, const CombineInput& input, const CombineOutput& output);

}  // namespace eps::transport
