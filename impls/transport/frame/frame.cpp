#include "impls/transport/frame/frame.hpp"

#include <utility>
#include <vector>

#include <fmt/format.h>

#include "impls/transport/frame/checks.hpp"
#include "impls/transport/frame/staging.hpp"

namespace eps::transport {
namespace {

// combined_weights [T, K]: the input weight of valid slots, +0.0f for masked ones (docs/dispatch.md 5.5).
void write_combined_weights(const SendPlan& plan, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = plan.topk_idx[i] >= 0 ? plan.topk_weights[i] : 0.0f;
}

class FramedTransport final : public Transport {
 public:
  FramedTransport(const TransportConfig& config, Capabilities caps, int rank, int size,
                  std::unique_ptr<DataPath> data_path, std::unique_ptr<Protocol> protocol)
      : config_(config),
        caps_(std::move(caps)),
        rank_(rank),
        size_(size),
        data_path_(std::move(data_path)),
        protocol_(std::move(protocol)),
        region_memory_(protocol_->region_memory()) {
    if (config.memory == MemoryKind::kDevice && config.device != nullptr &&
        !config.device->host_accessible()) {
      staged_ = data_path_->resident() ? HostStaging::Staged::kIndex : HostStaging::Staged::kAll;
      staging_ = std::make_unique<HostStaging>(*config.device, config, size, staged_);
    }
  }

  std::string_view name() const override { return protocol_->name(); }
  std::string describe() const override { return protocol_->describe(); }
  std::map<std::string, std::string> identity() const override { return protocol_->identity(); }
  const Capabilities& capabilities() const override { return caps_; }
  const TransportConfig& config() const override { return config_; }
  std::string_view staging() const override {
    return staging_ && staged_ == HostStaging::Staged::kAll ? std::string_view("host") : region_memory_;
  }
  WireBytes wire_bytes() const override { return protocol_->wire_bytes(); }

  Result<std::unique_ptr<DispatchHandle>> dispatch(Layout layout, const DispatchInput& in,
                                                   const DispatchOutput& out) override {
    EPS_RETURN_IF_ERROR(check_declared(layout));
    if (!staging_) {
      EPS_ASSIGN_OR_RETURN(std::unique_ptr<RoutedHandle> h, dispatch_here(layout, in, out));
      return std::unique_ptr<DispatchHandle>(std::move(h));
    }
    EPS_ASSIGN_OR_RETURN(const DispatchInput host_in, staging_->dispatch_input(in, true));
    EPS_ASSIGN_OR_RETURN(const DispatchOutput host_out, staging_->dispatch_output(out));
    EPS_ASSIGN_OR_RETURN(std::unique_ptr<RoutedHandle> h, dispatch_here(layout, host_in, host_out));
    EPS_RETURN_IF_ERROR(staging_->copy_back_dispatch(layout, h->num_rows, out));
    return std::unique_ptr<DispatchHandle>(std::move(h));
  }

  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& in,
                         const DispatchOutput& out) override {
    EPS_ASSIGN_OR_RETURN(const RoutedHandle* h, own(handle));
    EPS_RETURN_IF_ERROR(check_cached_dispatch(config_, size_, h->sends.layout, h->sends.num_tokens, in, out));
    if (!staging_) return dispatch_cached_here(*h, in, out);
    EPS_ASSIGN_OR_RETURN(const DispatchInput host_in, staging_->dispatch_input(in, false));
    EPS_ASSIGN_OR_RETURN(const DispatchOutput host_out, staging_->dispatch_output(out));
    EPS_RETURN_IF_ERROR(dispatch_cached_here(*h, host_in, host_out));
    return staging_->copy_back_dispatch(h->sends.layout, h->num_rows, out);
  }

  Status combine(const DispatchHandle& handle, const CombineInput& in, const CombineOutput& out) override {
    EPS_ASSIGN_OR_RETURN(const RoutedHandle* h, own(handle));
    EPS_RETURN_IF_ERROR(check_combine_args(config_, size_, *h, h->sends.num_tokens, in, out));
    if (!staging_) return combine_here(*h, in, out);
    EPS_ASSIGN_OR_RETURN(const CombineInput host_in, staging_->combine_input(in));
    EPS_ASSIGN_OR_RETURN(const CombineOutput host_out, staging_->combine_output(out));
    EPS_RETURN_IF_ERROR(combine_here(*h, host_in, host_out));
    return staging_->copy_back_combine(out);
  }

 private:
  Status check_declared(Layout layout) const {
    if (caps_.supports(layout)) return Status();
    std::vector<std::string_view> declared;
    for (Layout l : caps_.layouts) declared.push_back(layout_name(l));
    return invalid_argument("layout", "{} declares no {} dispatch (declared: {})", name(),
                            layout_name(layout), fmt::join(declared, ", "));
  }

  // `handle` as a RoutedHandle of this transport; kInvalidArgument for one another transport made.
  Result<const RoutedHandle*> own(const DispatchHandle& handle) const {
    const auto* h = dynamic_cast<const RoutedHandle*>(&handle);
    if (h == nullptr || h->owner != this) {
      return invalid_argument("handle", "was not made by this {} transport instance", name());
    }
    return h;
  }

  // The three calls on buffers the data path addresses (the caller's, or their host copies).
  Result<std::unique_ptr<RoutedHandle>> dispatch_here(Layout layout, const DispatchInput& in,
                                                      const DispatchOutput& out) {
    EPS_RETURN_IF_ERROR(check_dispatch_input(config_, in, true));
    EPS_RETURN_IF_ERROR(check_dispatch_output(config_, size_, layout, out));
    std::unique_ptr<RoutedHandle> h = protocol_->make_handle();
    h->owner = this;
    h->sends = plan_sends(layout, config_, size_, in);
    h->layout_info = local_layout(config_, size_, rank_, in.num_tokens, h->sends.topk_idx);
    EPS_ASSIGN_OR_RETURN(const DispatchInput payload, protocol_payload(in));
    EPS_RETURN_IF_ERROR(protocol_->dispatch(*h, payload, out));
    return h;
  }

  Status dispatch_cached_here(const RoutedHandle& h, const DispatchInput& in, const DispatchOutput& out) {
    EPS_ASSIGN_OR_RETURN(const DispatchInput payload, protocol_payload(in));
    return protocol_->dispatch_cached(h, payload, out);
  }

  Status combine_here(const RoutedHandle& h, const CombineInput& in, const CombineOutput& out) {
    EPS_RETURN_IF_ERROR(protocol_->combine(h, in, out));
    write_combined_weights(h.sends, out.combined_weights);
    return Status();
  }

  // `in` as the protocol takes it: quantized first (docs/dispatch.md 5.8) unless the protocol fuses that.
  Result<DispatchInput> protocol_payload(const DispatchInput& in) {
    if (protocol_->fuses_quantize()) return in;
    return data_path_->quantized_input(in);
  }

  TransportConfig config_;
  Capabilities caps_;
  int rank_;
  int size_;
  std::unique_ptr<DataPath> data_path_;  // before protocol_: the protocol holds a reference to it
  std::unique_ptr<Protocol> protocol_;
  std::string region_memory_;
  // Null where the data path addresses the caller's buffers; index arrays only where it is GPU-resident.
  std::unique_ptr<HostStaging> staging_;
  HostStaging::Staged staged_ = HostStaging::Staged::kAll;
};

}  // namespace

std::unique_ptr<Transport> make_framed_transport(const TransportConfig& config, Capabilities caps, int rank,
                                                 int size, std::unique_ptr<DataPath> data_path,
                                                 std::unique_ptr<Protocol> protocol) {
  return std::make_unique<FramedTransport>(config, std::move(caps), rank, size, std::move(data_path),
                                           std::move(protocol));
}

}  // namespace eps::transport
