#include "impls/problem/device_mirror.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <utility>
#include <vector>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::problem {
namespace {

using transport::CombineInput;
using transport::CombineOutput;
using transport::DispatchHandle;
using transport::DispatchInput;
using transport::DispatchOutput;

// A device allocation kept between calls: grown when a call needs more, never shrunk, so that a mirror
// allocates once per shape rather than once per call (a GPU allocation synchronizes the device and costs
// milliseconds, which bench would otherwise time as part of every call).
Status reserve(device::Device& device, device::Buffer& slot, std::size_t bytes) {
  if (slot.data() != nullptr && slot.bytes() >= bytes) return Status();
  slot.reset();
  EPS_ASSIGN_OR_RETURN(slot, device.allocate(bytes, device::MemoryKind::kDevice));
  return Status();
}

// One device copy of a host span in `slot`; `download` brings it back into the same span.
template <typename T>
class Mirrored {
 public:
  static Result<Mirrored> of(device::Device& device, device::Buffer& slot, std::span<T> host) {
    Mirrored m;
    m.host_ = host;
    if (host.empty()) return m;
    EPS_RETURN_IF_ERROR(reserve(device, slot, host.size_bytes()));
    m.device_ = slot.as<std::remove_const_t<T>>();
    EPS_RETURN_IF_ERROR(device.copy(m.device_, host.data(), host.size_bytes()));
    return m;
  }
  std::span<std::remove_const_t<T>> device_span() const { return {device_, host_.size()}; }
  Status download(device::Device& device) const {
    if constexpr (std::is_const_v<T>) {
      return Status();
    } else {
      return host_.empty() ? Status() : device.copy(host_.data(), device_, host_.size_bytes());
    }
  }

 private:
  std::span<T> host_;
  std::remove_const_t<T>* device_ = nullptr;
};

class DeviceMirror final : public transport::Transport {
 public:
  DeviceMirror(std::unique_ptr<transport::Transport> inner, device::Device& device)
      : inner_(std::move(inner)), device_(device) {}

  std::string_view name() const override { return inner_->name(); }
  std::string describe() const override {
    return fmt::format("{} on {} (staging {})", inner_->describe(), device_.describe(), inner_->staging());
  }
  std::map<std::string, std::string> identity() const override { return inner_->identity(); }
  const transport::Capabilities& capabilities() const override { return inner_->capabilities(); }
  const transport::TransportConfig& config() const override { return inner_->config(); }
  std::string_view staging() const override { return inner_->staging(); }
  transport::WireBytes wire_bytes() const override { return inner_->wire_bytes(); }

  Result<std::unique_ptr<DispatchHandle>> dispatch(transport::Layout layout, const DispatchInput& in,
                                                   const DispatchOutput& out) override {
    EPS_ASSIGN_OR_RETURN(Inputs inputs, upload(in));
    EPS_ASSIGN_OR_RETURN(Outputs outputs, upload(out));
    EPS_ASSIGN_OR_RETURN(std::unique_ptr<DispatchHandle> handle,
                         inner_->dispatch(layout, inputs.view(in.num_tokens), outputs.view()));
    EPS_RETURN_IF_ERROR(outputs.download(device_));
    return handle;
  }

  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& in,
                         const DispatchOutput& out) override {
    EPS_ASSIGN_OR_RETURN(Inputs inputs, upload(in));
    EPS_ASSIGN_OR_RETURN(Outputs outputs, upload(out));
    EPS_RETURN_IF_ERROR(inner_->dispatch_cached(handle, inputs.view(in.num_tokens), outputs.view()));
    return outputs.download(device_);
  }

  Status combine(const DispatchHandle& handle, const CombineInput& in, const CombineOutput& out) override {
    Slots& s = combine_slots_;
    EPS_ASSIGN_OR_RETURN(auto x, Mirrored<const bf16>::of(device_, s[0], in.x));
    EPS_ASSIGN_OR_RETURN(auto bias0, Mirrored<const bf16>::of(device_, s[1], in.bias0));
    EPS_ASSIGN_OR_RETURN(auto bias1, Mirrored<const bf16>::of(device_, s[2], in.bias1));
    EPS_ASSIGN_OR_RETURN(auto combined, Mirrored<bf16>::of(device_, s[3], out.out));
    EPS_ASSIGN_OR_RETURN(auto weights, Mirrored<float>::of(device_, s[4], out.combined_weights));
    EPS_RETURN_IF_ERROR(inner_->combine(handle,
                                        {in.tree, x.device_span(), bias0.device_span(), bias1.device_span()},
                                        {combined.device_span(), weights.device_span()}));
    EPS_RETURN_IF_ERROR(combined.download(device_));
    return weights.download(device_);
  }

 private:
  // The device buffers of one call's spans, in the order the call mirrors them.
  using Slots = std::array<device::Buffer, 9>;

  struct Inputs {
    Mirrored<const std::byte> x;
    Mirrored<const float> scales;
    Mirrored<const int> idx;
    Mirrored<const float> weights;
    std::optional<Fp8ScaleMode> quantize;
    DispatchInput view(int tokens) const {
      return {tokens,  x.device_span(), scales.device_span(), idx.device_span(), weights.device_span(),
              quantize};
    }
  };
  struct Outputs {
    Mirrored<std::byte> recv_x;
    Mirrored<float> recv_x_scales;
    Mirrored<int> recv_topk_idx;
    Mirrored<float> recv_topk_weights;
    Mirrored<float> recv_weights;
    Mirrored<int> num_recv_tokens_per_expert;
    Mirrored<int> packed_recv_count;
    Mirrored<int> src_info;
    Mirrored<transport::LlRange> layout_range;
    DispatchOutput view() const {
      return {recv_x.device_span(),
              recv_x_scales.device_span(),
              recv_topk_idx.device_span(),
              recv_topk_weights.device_span(),
              recv_weights.device_span(),
              num_recv_tokens_per_expert.device_span(),
              packed_recv_count.device_span(),
              src_info.device_span(),
              layout_range.device_span()};
    }
    Status download(device::Device& d) const {
      for (const Status& s :
           {recv_x.download(d), recv_x_scales.download(d), recv_topk_idx.download(d),
            recv_topk_weights.download(d), recv_weights.download(d), num_recv_tokens_per_expert.download(d),
            packed_recv_count.download(d), src_info.download(d), layout_range.download(d)}) {
        EPS_RETURN_IF_ERROR(s);
      }
      return Status();
    }
  };

  Result<Inputs> upload(const DispatchInput& in) {
    Slots& s = input_slots_;
    Inputs m;
    EPS_ASSIGN_OR_RETURN(m.x, Mirrored<const std::byte>::of(device_, s[0], in.x));
    EPS_ASSIGN_OR_RETURN(m.scales, Mirrored<const float>::of(device_, s[1], in.x_scales));
    EPS_ASSIGN_OR_RETURN(m.idx, Mirrored<const int>::of(device_, s[2], in.topk_idx));
    EPS_ASSIGN_OR_RETURN(m.weights, Mirrored<const float>::of(device_, s[3], in.topk_weights));
    m.quantize = in.quantize;
    return m;
  }

  Result<Outputs> upload(const DispatchOutput& out) {
    Slots& s = output_slots_;
    Outputs m;
    EPS_ASSIGN_OR_RETURN(m.recv_x, Mirrored<std::byte>::of(device_, s[0], out.recv_x));
    EPS_ASSIGN_OR_RETURN(m.recv_x_scales, Mirrored<float>::of(device_, s[1], out.recv_x_scales));
    EPS_ASSIGN_OR_RETURN(m.recv_topk_idx, Mirrored<int>::of(device_, s[2], out.recv_topk_idx));
    EPS_ASSIGN_OR_RETURN(m.recv_topk_weights, Mirrored<float>::of(device_, s[3], out.recv_topk_weights));
    EPS_ASSIGN_OR_RETURN(m.recv_weights, Mirrored<float>::of(device_, s[4], out.recv_weights));
    EPS_ASSIGN_OR_RETURN(m.num_recv_tokens_per_expert,
                         Mirrored<int>::of(device_, s[5], out.num_recv_tokens_per_expert));
    EPS_ASSIGN_OR_RETURN(m.packed_recv_count, Mirrored<int>::of(device_, s[6], out.packed_recv_count));
    EPS_ASSIGN_OR_RETURN(m.src_info, Mirrored<int>::of(device_, s[7], out.src_info));
    EPS_ASSIGN_OR_RETURN(m.layout_range, Mirrored<transport::LlRange>::of(device_, s[8], out.layout_range));
    return m;
  }

  std::unique_ptr<transport::Transport> inner_;
  device::Device& device_;
  Slots input_slots_, output_slots_, combine_slots_;
};

}  // namespace

std::unique_ptr<transport::Transport> mirror_through_device(std::unique_ptr<transport::Transport> inner,
                                                            device::Device& device) {
  return std::make_unique<DeviceMirror>(std::move(inner), device);
}

Result<int> node_local_rank(MPI_Comm comm, double timeout_seconds) {
  EPS_ASSIGN_OR_RETURN(mpi::NodeLayout layout, mpi::node_layout(comm, Deadline(timeout_seconds)));
  int rank = 0;
  EPS_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return layout.local_index(rank);
}

Result<int> ranks_per_gpu(const device::Device& device, MPI_Comm comm, double timeout_seconds) {
  const Deadline deadline(timeout_seconds);
  EPS_ASSIGN_OR_RETURN(const std::vector<std::string> hosts, mpi::all_hosts(comm, deadline));
  EPS_ASSIGN_OR_RETURN(const std::vector<std::string> gpus,
                       mpi::allgather_string(device.properties().pci_bus_id, comm, deadline));
  std::map<std::pair<std::string, std::string>, int> ranks_of_gpu;
  int most = 1;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    if (!gpus[r].empty()) most = std::max(most, ++ranks_of_gpu[{hosts[r], gpus[r]}]);
  }
  return most;
}

}  // namespace eps::problem
