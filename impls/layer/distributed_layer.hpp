// One rank's part of the distributed MoE layer stack (docs/layer.md 4.4, layer_spec.hpp), run on a Device.
//
// A step of layer l on rank r, each phase timed on this rank (the device synchronized at its end):
//   route     this rank's tokens: routing::route over its logits and mask ratios, the fixed top-k form of
//             width slot_width(spec), uploaded to the device
//   dispatch  Transport::dispatch of the bf16 rows in the spec's layout (fp8: quantized by the dispatch,
//             power-of-two scales, docs/dispatch.md 5.8)
//   expert    every local expert l on the rows it received (fp8: dequantized to bf16 first, exact), with the
//             batch-invariant DeviceExpert; for ht-rank-major each received row's bf16 partial over its
//             slots here, ascending slot (docs/layer.md 4.3 `p_q`)
//   combine   Transport::combine with the layout's tree: routed [T_r, H]
//   shared    the shared experts on the layer input, out = bf16(fp32(routed) + Σ_s fp32(shared_s))
// The output of layer l is the input of layer l + 1; the stack's input is the payload of this rank's tokens
// (generated on the device), its output `output()`.
//
// Placement (docs/eplb.md 8.1, 8.4): the transport's experts are the spec's P slots, P / R on each rank;
// local slot l of rank r is slot p = r · P/R + l and runs the weights of the logical expert the placement
// puts there (initially the static placement: slot p holds expert p mod E). Routing picks logical experts;
// each (token, k) is sent to the slot of the replica spec.replica_rule picks. `switch_placement` installs a
// new placement between steps together with the experts staged for the slots it changes (eplb_runtime.hpp).
//
// All buffers are memory of the device (the transport is created with layer_transport_config on that
// device); the routing and the index lists are built on the host and uploaded. Creating the layer generates
// the weights of this rank's experts and of the shared experts of every layer, and the logits of its tokens
// (untimed); nothing is exchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/device/device_expert.hpp"
#include "impls/layer/layer_spec.hpp"
#include "impls/transport/transport.hpp"
#include "reference/eplb/placement.hpp"

namespace eps::layer {

struct PhaseTimes {
  double route_us = 0;
  double dispatch_us = 0;
  double expert_us = 0;
  double combine_us = 0;
  double shared_us = 0;
  double total_us() const { return route_us + dispatch_us + expert_us + combine_us + shared_us; }
};

// What one rank saw in one layer step.
struct StepRecord {
  PhaseTimes phases;
  std::vector<std::int64_t>
      expert_load;                  // [E] kept (token, slot) pairs of this rank's tokens per logical expert
  std::int64_t dropped_pairs = 0;   // token choice: (token, slot) pairs dropped by capacity
  std::int64_t dropped_tokens = 0;  // tokens of this rank with no kept slot
  std::int64_t received_rows = 0;   // rows the transport delivered here
  std::int64_t expert_rows = 0;     // (row, local expert) pairs this rank's experts computed
  std::int64_t compute_cost = 0;    // docs/routing.md 3.4 Σ_b S·k_b of this rank's samples
  std::int64_t static_cost = 0;     // B_r·S·k
  transport::WireBytes wire;        // bytes this step put on and took off the wire
};

class DistributedLayer {
 public:
  // `transport` must have been made with layer_transport_config(spec, ..., &device, ...) on R =
  // spec.num_ranks() ranks; `rank` is this rank in its communicator.
  static Result<std::unique_ptr<DistributedLayer>> create(const LayerSpec& spec,
                                                          transport::Transport& transport,
                                                          device::Device& device, int rank);
  ~DistributedLayer();

  // Collective: the whole stack at workload step spec.step, one StepRecord per layer.
  Result<std::vector<StepRecord>> run();
  void set_step(int step) { spec_.step = step; }

  // An expert staged for local slot `local` of layer `layer` under the next placement.
  struct StagedSlot {
    int layer = 0;
    int local = 0;
    device::DeviceExpert expert;
  };
  const eplb::Placement& placement() const { return placement_; }
  // Installs `next` (the shape of placement()): every local slot whose logical expert changes must be in
  // `staged` (kInvalidArgument naming the first one missing or wrongly shaped); the other slots keep theirs.
  Status switch_placement(const eplb::Placement& next, std::vector<StagedSlot> staged);
  // The last run's output [T_r, H], copied to the host.
  Result<std::vector<bf16>> output() const;
  std::int64_t num_tokens() const { return tokens_; }

 private:
  struct Buffers;
  DistributedLayer(const LayerSpec& spec, transport::Transport& transport, device::Device& device, int rank);
  Status prepare();
  Status step(int layer, StepRecord& record);
  Status route(int layer, StepRecord& record);
  Status place_slots(int layer, std::vector<int>& topk_idx) const;
  Result<std::unique_ptr<transport::DispatchHandle>> dispatch();
  Status run_experts(int layer, const transport::DispatchHandle& handle, StepRecord& record);
  Status experts_on_segments(int layer, const std::vector<int>& counts, std::int64_t stride_rows,
                             StepRecord& record);
  Status experts_on_rank_major(int layer, std::int64_t rows, StepRecord& record);
  Result<const bf16*> expert_input(std::int64_t first_row, std::int64_t rows);
  Status combine(const transport::DispatchHandle& handle);
  Status add_shared(int layer);

  LayerSpec spec_;
  transport::Transport& transport_;
  device::Device& device_;
  int rank_;
  std::int64_t tokens_;  // T_r
  std::int64_t first_;   // global index of this rank's first token
  int local_experts_;    // slots per rank P / R
  eplb::Placement placement_;
  int width_;                                                      // slot width (the transport's top-k)
  std::vector<std::vector<float>> logits_;                         // [layer][T_r · E]
  std::vector<std::vector<device::DeviceExpert>> experts_;         // [layer][l]
  std::vector<std::vector<device::DeviceExpert>> shared_experts_;  // [layer][s]
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace eps::layer
