#include "conformance/tests/stale_transport.hpp"

#include <memory>
#include <vector>

#include "impls/transport/mpi/mpi_transport.hpp"
#include "impls/transport/registry.hpp"

namespace eps::conformance {
namespace {

using transport::CombineInput;
using transport::CombineOutput;
using transport::DispatchHandle;
using transport::DispatchInput;
using transport::DispatchOutput;

// Scratch storage shaped like the caller's outputs, so the inner transport writes somewhere else.
template <typename T>
std::span<T> scratch_like(std::span<T> caller, std::vector<T>& storage) {
  storage.resize(caller.size());
  return storage;
}

class StaleTransport final : public transport::Transport {
 public:
  explicit StaleTransport(std::unique_ptr<transport::Transport> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return "stale"; }
  const transport::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const transport::TransportConfig& config() const override { return inner_->config(); }
  transport::WireBytes wire_bytes() const override { return inner_->wire_bytes(); }

  Result<std::unique_ptr<DispatchHandle>> dispatch(transport::Layout layout, const DispatchInput& input,
                                                   const DispatchOutput& output) override {
    return inner_->dispatch(layout, input, dispatches_++ == 0 ? output : scratch(output));
  }
  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) override {
    return inner_->dispatch_cached(handle, input, dispatches_++ == 0 ? output : scratch(output));
  }
  Status combine(const DispatchHandle& handle, const CombineInput& input,
                 const CombineOutput& output) override {
    if (combines_++ == 0) return inner_->combine(handle, input, output);
    return inner_->combine(handle, input,
                           {scratch_like(output.out, out_), scratch_like(output.combined_weights, weights_)});
  }

 private:
  DispatchOutput scratch(const DispatchOutput& o) {
    return {scratch_like(o.recv_x, recv_x_),
            scratch_like(o.recv_x_scales, recv_x_scales_),
            scratch_like(o.recv_topk_idx, recv_topk_idx_),
            scratch_like(o.recv_topk_weights, recv_topk_weights_),
            scratch_like(o.recv_weights, recv_weights_),
            scratch_like(o.num_recv_tokens_per_expert, num_recv_tokens_per_expert_),
            scratch_like(o.packed_recv_count, packed_recv_count_),
            scratch_like(o.src_info, src_info_),
            scratch_like(o.layout_range, layout_range_)};
  }

  std::unique_ptr<transport::Transport> inner_;
  int dispatches_ = 0;
  int combines_ = 0;
  std::vector<std::byte> recv_x_;
  std::vector<float> recv_x_scales_, recv_topk_weights_, recv_weights_, weights_;
  std::vector<int> recv_topk_idx_, num_recv_tokens_per_expert_, packed_recv_count_, src_info_;
  std::vector<transport::LlRange> layout_range_;
  std::vector<bf16> out_;
};

}  // namespace

void register_stale_transport() {
  transport::register_test_transport(
      {.name = "stale",
       .summary = "TEST ONLY: the mpi baseline that stops writing its outputs after the first call",
       .factory = [](const transport::TransportConfig& config,
                     const fabric::FabricSelection&) -> Result<std::unique_ptr<transport::Transport>> {
         EPS_ASSIGN_OR_RETURN(std::unique_ptr<transport::Transport> inner,
                              transport::make_mpi_transport(config));
         return std::unique_ptr<transport::Transport>(std::make_unique<StaleTransport>(std::move(inner)));
       },
       .capabilities = transport::mpi_capabilities,
       .uses_fabric = false});
}

}  // namespace eps::conformance
