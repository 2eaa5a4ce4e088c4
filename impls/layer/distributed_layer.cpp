#include "impls/layer/distributed_layer.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include <fmt/format.h>

#include "reference/data/fill.hpp"
#include "reference/eplb/policy.hpp"

namespace eps::layer {

using device::Buffer;
using device::MemoryKind;
using transport::Layout;

// Device buffers, each grown to the largest use and reused.
struct DistributedLayer::Buffers {
  Buffer x, next;                 // [T_r, H] layer input and output
  Buffer topk_idx, topk_weights;  // [T_r, K]
  Buffer recv_x, recv_scales, recv_topk_idx, recv_topk_weights, recv_weights;
  Buffer recv_counts, packed_count, src_info, layout_range;
  Buffer expert_in;              // fp8: the dequantized rows [rows, H]
  Buffer gather_rows, gathered;  // rank-major: row list and the gathered rows of one expert
  Buffer pair_y, slot_rows;      // rank-major: expert outputs per (row, slot), [rows, K] index into pair_y
  Buffer combine_x;              // what combine takes: [rows or L·C, H]
  Buffer stacked;                // [(1 + shared) · T_r, H]: routed, then each shared expert's output
  std::int64_t recv_rows = 0;    // rows of every HT row array; L·C for ll
};

namespace {

// The mutant build (CMakeLists.txt) leaves out the last row each local expert received.
#if defined(EPS_LAYER_MUTANT)
constexpr std::int64_t kMutantRowsShort = 1;
#else
constexpr std::int64_t kMutantRowsShort = 0;
#endif

// At least `bytes` of device memory in `buffer` (never 0 bytes: spans of empty arrays still need an address).
Status ensure(device::Device& device, Buffer& buffer, std::size_t bytes) {
  bytes = std::max<std::size_t>(bytes, 64);
  if (buffer.data() && buffer.bytes() >= bytes) return Status();
  buffer.reset();
  EPS_ASSIGN_OR_RETURN(buffer, device.allocate(bytes, MemoryKind::kDevice));
  return Status();
}

template <typename T>
std::span<T> span_of(const Buffer& buffer, std::int64_t count) {
  return std::span<T>(buffer.as<T>(), static_cast<std::size_t>(count));
}

template <typename T>
Status upload(device::Device& device, Buffer& buffer, const std::vector<T>& host) {
  EPS_RETURN_IF_ERROR(ensure(device, buffer, host.size() * sizeof(T)));
  if (host.empty()) return Status();
  return device.copy(buffer.data(), host.data(), host.size() * sizeof(T));
}

template <typename T>
Result<std::vector<T>> download(device::Device& device, const Buffer& buffer, std::int64_t count) {
  std::vector<T> host(static_cast<std::size_t>(count));
  if (count > 0) EPS_RETURN_IF_ERROR(device.copy(host.data(), buffer.data(), host.size() * sizeof(T)));
  return host;
}

// Runs `work`, synchronizes the device and adds the elapsed µs to `phase`.
template <typename F>
Status timed(device::Device& device, double& phase, F&& work) {
  const auto start = std::chrono::steady_clock::now();
  EPS_RETURN_IF_ERROR(work());
  EPS_RETURN_IF_ERROR(device.synchronize());
  phase += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  return Status();
}

std::int64_t row_bytes(const LayerSpec& spec) {
  return spec.dtype == dispatch::PayloadType::kFp8 ? spec.hidden : spec.hidden * std::int64_t{2};
}

std::int64_t scale_columns(const LayerSpec& spec) {
  return spec.dtype == dispatch::PayloadType::kFp8 ? spec.hidden / dispatch::kFp8GroupSize : 0;
}

Result<device::DeviceExpert> make_expert(device::Device& device, const LayerSpec& spec, int layer,
                                         ExpertRole role, int index) {
  const int ffn = role == ExpertRole::kShared ? spec.shared_ffn : spec.ffn;
  EPS_ASSIGN_OR_RETURN(ExpertWeights weights,
                       generate_expert_weights(spec.seed, static_cast<std::uint32_t>(layer), role,
                                               static_cast<std::uint32_t>(index), {spec.hidden, ffn}));
  return device::DeviceExpert::create(device, weights);
}

}  // namespace

DistributedLayer::DistributedLayer(const LayerSpec& spec, transport::Transport& transport,
                                   device::Device& device, int rank)
    : spec_(spec),
      transport_(transport),
      device_(device),
      rank_(rank),
      tokens_(spec.rank_tokens[rank]),
      first_(spec.first_token(rank)),
      local_experts_(spec.slots() / spec.num_ranks()),
      width_(slot_width(spec)),
      buffers_(std::make_unique<Buffers>()) {}

DistributedLayer::~DistributedLayer() = default;

Result<std::unique_ptr<DistributedLayer>> DistributedLayer::create(const LayerSpec& spec,
                                                                   transport::Transport& transport,
                                                                   device::Device& device, int rank) {
  EPS_RETURN_IF_ERROR(validate_layer_spec(spec));
  if (rank < 0 || rank >= spec.num_ranks()) return out_of_range("rank", 0, spec.num_ranks() - 1, rank);
  const transport::TransportConfig& c = transport.config();
  if (c.num_experts != spec.slots() || c.hidden != spec.hidden || c.dtype != spec.dtype ||
      c.top_k != slot_width(spec) || c.max_tokens_per_rank < spec.max_rank_tokens() ||
      c.memory != MemoryKind::kDevice || c.device != &device) {
    return invalid_argument("transport",
                            "was not made with layer_transport_config for this layer and device");
  }
  std::unique_ptr<DistributedLayer> layer(new DistributedLayer(spec, transport, device, rank));
  EPS_RETURN_IF_ERROR(layer->prepare());
  return layer;
}

Status DistributedLayer::prepare() {
  EPS_ASSIGN_OR_RETURN(placement_, eplb::static_placement(spec_.num_layers, spec_.num_experts, spec_.slots(),
                                                          spec_.num_ranks()));
  const int first_slot = rank_ * local_experts_;
  for (int layer = 0; layer < spec_.num_layers; ++layer) {
    std::vector<float> logits(static_cast<std::size_t>(tokens_ * spec_.num_experts));
    EPS_RETURN_IF_ERROR(data::fill_router_logits(
        spec_.seed, static_cast<std::uint32_t>(layer), 0, static_cast<std::uint64_t>(first_),
        static_cast<std::uint64_t>(tokens_), static_cast<std::uint32_t>(spec_.num_experts), logits));
    logits_.push_back(std::move(logits));
    experts_.emplace_back();
    for (int l = 0; l < local_experts_; ++l) {
      EPS_ASSIGN_OR_RETURN(device::DeviceExpert e,
                           make_expert(device_, spec_, layer, ExpertRole::kRouted,
                                       placement_.slot_expert(layer, first_slot + l)));
      experts_.back().push_back(std::move(e));
    }
    shared_experts_.emplace_back();
    for (int s = 0; s < spec_.num_shared; ++s) {
      EPS_ASSIGN_OR_RETURN(device::DeviceExpert e,
                           make_expert(device_, spec_, layer, ExpertRole::kShared, s));
      shared_experts_.back().push_back(std::move(e));
    }
  }
  Buffers& b = *buffers_;
  const transport::TransportConfig& c = transport_.config();
  const int ranks = spec_.num_ranks();
  const std::size_t h = static_cast<std::size_t>(spec_.hidden);
  b.recv_rows = transport::recv_capacity_rows(spec_.layout, c, ranks);
  const auto rows = static_cast<std::size_t>(b.recv_rows);
  const auto t = static_cast<std::size_t>(tokens_);
  const auto k = static_cast<std::size_t>(width_);
  const auto l = static_cast<std::size_t>(local_experts_);
  EPS_RETURN_IF_ERROR(ensure(device_, b.x, t * h * sizeof(bf16)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.next, t * h * sizeof(bf16)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.recv_x, rows * static_cast<std::size_t>(row_bytes(spec_))));
  EPS_RETURN_IF_ERROR(
      ensure(device_, b.recv_scales, rows * static_cast<std::size_t>(scale_columns(spec_)) * 4));
  EPS_RETURN_IF_ERROR(ensure(device_, b.recv_topk_idx, rows * k * sizeof(int)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.recv_topk_weights, rows * k * sizeof(float)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.recv_weights, rows * sizeof(float)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.recv_counts, l * sizeof(int)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.packed_count, l * sizeof(int)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.src_info, rows * sizeof(int)));
  EPS_RETURN_IF_ERROR(
      ensure(device_, b.layout_range, l * static_cast<std::size_t>(ranks) * sizeof(transport::LlRange)));
  EPS_RETURN_IF_ERROR(ensure(device_, b.combine_x, rows * h * sizeof(bf16)));
  EPS_RETURN_IF_ERROR(
      ensure(device_, b.stacked, (1 + static_cast<std::size_t>(spec_.num_shared)) * t * h * sizeof(bf16)));
  return Status();
}

Result<std::vector<StepRecord>> DistributedLayer::run() {
  Buffers& b = *buffers_;
  EPS_RETURN_IF_ERROR(device_.run(device::FillPayloadArgs{b.x.as<bf16>(), tokens_, spec_.hidden, spec_.seed,
                                                          0, static_cast<std::uint32_t>(first_)}));
  EPS_RETURN_IF_ERROR(device_.synchronize());
  std::vector<StepRecord> records(static_cast<std::size_t>(spec_.num_layers));
  for (int layer = 0; layer < spec_.num_layers; ++layer) {
    const transport::WireBytes before = transport_.wire_bytes();
    EPS_RETURN_IF_ERROR(step(layer, records[layer]));
    const transport::WireBytes after = transport_.wire_bytes();
    records[layer].wire = {after.sent - before.sent, after.received - before.received};
    std::swap(b.x, b.next);
  }
  return records;
}

Result<std::vector<bf16>> DistributedLayer::output() const {
  EPS_RETURN_IF_ERROR(device_.synchronize());
  return download<bf16>(device_, buffers_->x, tokens_ * spec_.hidden);
}

Status DistributedLayer::step(int layer, StepRecord& record) {
  PhaseTimes& p = record.phases;
  EPS_RETURN_IF_ERROR(timed(device_, p.route_us, [&] { return route(layer, record); }));
  std::unique_ptr<transport::DispatchHandle> handle;
  EPS_RETURN_IF_ERROR(timed(device_, p.dispatch_us, [&]() -> Status {
    EPS_ASSIGN_OR_RETURN(handle, dispatch());
    return Status();
  }));
  record.received_rows = handle->num_recv_rows();
  EPS_RETURN_IF_ERROR(timed(device_, p.expert_us, [&] { return run_experts(layer, *handle, record); }));
  EPS_RETURN_IF_ERROR(timed(device_, p.combine_us, [&] { return combine(*handle); }));
  return timed(device_, p.shared_us, [&] { return add_shared(layer); });
}

Status DistributedLayer::route(int layer, StepRecord& record) {
  record.expert_load.assign(static_cast<std::size_t>(spec_.num_experts), 0);
  if (tokens_ == 0) return Status();
  const std::int64_t s = spec_.seq_len;
  const std::span<const float> ratios =
      spec_.mask_ratio.empty()
          ? std::span<const float>()
          : std::span<const float>(spec_.mask_ratio)
                .subspan(static_cast<std::size_t>(first_ / s), static_cast<std::size_t>(tokens_ / s));
  const routing::RoutingInput input{logits_[layer], tokens_, spec_.num_experts, s, ratios};
  EPS_ASSIGN_OR_RETURN(const routing::Routing routed, spec_.routing_workload
                                                          ? workload_routing(spec_, layer, rank_)
                                                          : routing::route(spec_.router, input));
  record.expert_load = routed.expert_load;
  record.dropped_pairs = routed.dropped_assignments;
  record.dropped_tokens = routed.dropped_tokens;
  record.compute_cost = routed.compute_cost;
  record.static_cost = routed.static_cost;
  Result<routing::FixedTopk> fixed = routing::to_fixed_topk(routed, width_);
  if (!fixed.ok()) {
    return invalid_argument("router",
                            "layer {}, rank {}: {} (a token picked by more experts than the transport's "
                            "top-k {} cannot be dispatched)",
                            layer, rank_, fixed.status().message(), width_);
  }
  EPS_RETURN_IF_ERROR(place_slots(layer, fixed->topk_idx));
  EPS_RETURN_IF_ERROR(upload(device_, buffers_->topk_idx, fixed->topk_idx));
  return upload(device_, buffers_->topk_weights, fixed->topk_weights);
}

// Logical expert ids -> the slots of the replicas that serve them (docs/eplb.md 8.4), in place.
Status DistributedLayer::place_slots(int layer, std::vector<int>& topk_idx) const {
  eplb::Assignment a;
  a.layer = layer;
  a.top_k = width_;
  a.source_rank = rank_;
  for (std::size_t i = 0; i < topk_idx.size(); ++i) {
    if (topk_idx[i] < 0) continue;
    a.expert = topk_idx[i];
    a.token = static_cast<std::int64_t>(i) / width_;
    a.k = static_cast<int>(static_cast<std::int64_t>(i) % width_);
    EPS_ASSIGN_OR_RETURN(topk_idx[i],
                         eplb::replica_slot_for(placement_, a, spec_.replica_rule, spec_.ranks_per_node));
  }
  return Status();
}

Status DistributedLayer::switch_placement(const eplb::Placement& next, std::vector<StagedSlot> staged) {
  if (next.num_layers != placement_.num_layers || next.num_slots != placement_.num_slots ||
      next.num_experts != placement_.num_experts || next.num_ranks != placement_.num_ranks) {
    return invalid_argument("placement",
                            "has another shape than the layer's ({} layers, {} slots, {} experts)",
                            placement_.num_layers, placement_.num_slots, placement_.num_experts);
  }
  EPS_RETURN_IF_ERROR(eplb::check_placement(next));
  const int first_slot = rank_ * local_experts_;
  std::vector<char> covered(static_cast<std::size_t>(spec_.num_layers * local_experts_), 0);
  for (const StagedSlot& s : staged) {
    if (s.layer < 0 || s.layer >= spec_.num_layers || s.local < 0 || s.local >= local_experts_) {
      return invalid_argument("staged", "layer {} slot {} is not a local slot of rank {}", s.layer, s.local,
                              rank_);
    }
    covered[static_cast<std::size_t>(s.layer * local_experts_ + s.local)] = 1;
  }
  for (int layer = 0; layer < spec_.num_layers; ++layer) {
    for (int l = 0; l < local_experts_; ++l) {
      const int p = first_slot + l;
      if (next.slot_expert(layer, p) == placement_.slot_expert(layer, p)) continue;
      if (!covered[static_cast<std::size_t>(layer * local_experts_ + l)]) {
        return invalid_argument("staged",
                                "layer {} slot {} changes to expert {} but nothing was staged for it", layer,
                                p, next.slot_expert(layer, p));
      }
    }
  }
  for (StagedSlot& s : staged) experts_[s.layer][s.local] = std::move(s.expert);
  placement_ = next;
  return Status();
}

Result<std::unique_ptr<transport::DispatchHandle>> DistributedLayer::dispatch() {
  Buffers& b = *buffers_;
  const std::int64_t t = tokens_;
  const std::int64_t k = width_;
  transport::DispatchInput in;
  in.num_tokens = static_cast<int>(t);
  in.topk_idx = span_of<const int>(b.topk_idx, t * k);
  in.topk_weights = span_of<const float>(b.topk_weights, t * k);
  // The bf16 rows either way; fp8 is quantized inside the dispatch (docs/dispatch.md 5.8).
  in.x = span_of<const std::byte>(b.x, t * spec_.hidden * static_cast<std::int64_t>(sizeof(bf16)));
  if (spec_.dtype == dispatch::PayloadType::kFp8) in.quantize = Fp8ScaleMode::kRoundScale;
  const std::int64_t rows = b.recv_rows;
  const std::int64_t l = local_experts_;
  transport::DispatchOutput out;
  out.recv_x = span_of<std::byte>(b.recv_x, rows * row_bytes(spec_));
  out.recv_x_scales = span_of<float>(b.recv_scales, rows * scale_columns(spec_));
  switch (spec_.layout) {
    case Layout::kHtRankMajor:
      out.recv_topk_idx = span_of<int>(b.recv_topk_idx, rows * k);
      out.recv_topk_weights = span_of<float>(b.recv_topk_weights, rows * k);
      out.num_recv_tokens_per_expert = span_of<int>(b.recv_counts, l);
      break;
    case Layout::kHtExpertMajor:
      out.recv_weights = span_of<float>(b.recv_weights, rows);
      out.num_recv_tokens_per_expert = span_of<int>(b.recv_counts, l);
      break;
    case Layout::kLl:
      out.packed_recv_count = span_of<int>(b.packed_count, l);
      out.src_info = span_of<int>(b.src_info, rows);
      out.layout_range = span_of<transport::LlRange>(b.layout_range, l * spec_.num_ranks());
      break;
  }
  return transport_.dispatch(spec_.layout, in, out);
}

Result<const bf16*> DistributedLayer::expert_input(std::int64_t first_row, std::int64_t rows) {
  Buffers& b = *buffers_;
  const std::int64_t h = spec_.hidden;
  if (spec_.dtype == dispatch::PayloadType::kBf16) return b.recv_x.as<const bf16>() + first_row * h;
  // fp8: codes · power-of-two scale is a bf16, so the expert sees the round trip exactly (moe_layer.hpp step
  // 3).
  EPS_RETURN_IF_ERROR(ensure(device_, b.expert_in, static_cast<std::size_t>(b.recv_rows * h) * sizeof(bf16)));
  const std::int64_t scale_bytes = scale_columns(spec_) * 4;
  bf16* narrow = b.expert_in.as<bf16>() + first_row * h;
  device::Fp8DequantizeArgs args{b.recv_x.as<const std::uint8_t>() + first_row * h,
                                 h,
                                 b.recv_scales.as<const std::byte>() + first_row * scale_bytes,
                                 scale_bytes,
                                 nullptr,
                                 h,
                                 rows,
                                 spec_.hidden};
  args.out_bf16 = narrow;
  EPS_RETURN_IF_ERROR(device_.run(args));
  return narrow;
}

Status DistributedLayer::run_experts(int layer, const transport::DispatchHandle& handle, StepRecord& record) {
  EPS_RETURN_IF_ERROR(device_.synchronize());
  const Buffers& b = *buffers_;
  switch (spec_.layout) {
    case Layout::kLl: {
      EPS_ASSIGN_OR_RETURN(const std::vector<int> counts,
                           download<int>(device_, b.packed_count, local_experts_));
      return experts_on_segments(layer, counts, b.recv_rows / local_experts_, record);
    }
    case Layout::kHtExpertMajor: {
      EPS_ASSIGN_OR_RETURN(const std::vector<int> counts,
                           download<int>(device_, b.recv_counts, local_experts_));
      return experts_on_segments(layer, counts, 0, record);
    }
    case Layout::kHtRankMajor:
      return experts_on_rank_major(layer, handle.num_recv_rows(), record);
  }
  return Status();
}

// Local expert l's rows are `counts[l]` consecutive rows starting at l · stride_rows (ll), or right after
// expert l - 1's (stride_rows 0: ht-expert-major, alignment 1); its outputs go to the same rows of combine_x.
Status DistributedLayer::experts_on_segments(int layer, const std::vector<int>& counts,
                                             std::int64_t stride_rows, StepRecord& record) {
  std::int64_t first = 0;
  for (int l = 0; l < local_experts_; ++l) {
    if (stride_rows > 0) first = l * stride_rows;
    const std::int64_t n = counts[l] > 0 ? counts[l] - kMutantRowsShort : 0;
    if (n > 0) {
      EPS_ASSIGN_OR_RETURN(const bf16* in, expert_input(first, n));
      EPS_RETURN_IF_ERROR(
          experts_[layer][l].forward(in, n, buffers_->combine_x.as<bf16>() + first * spec_.hidden));
      record.expert_rows += n;
    }
    first += counts[l];
  }
  return Status();
}

// ht-rank-major: each received row carries its slots here (recv_topk_idx, ascending slot). Expert l runs on
// the rows that have it, gathered; then combine_ll forms each row's partial bf16(Σ_k w_k · fp32(y_k)) over
// its slots in slot order, which is docs/layer.md 4.3's p_q for this rank.
Status DistributedLayer::experts_on_rank_major(int layer, std::int64_t rows, StepRecord& record) {
  Buffers& b = *buffers_;
  const std::int64_t k = width_;
  const std::int64_t h = spec_.hidden;
  EPS_ASSIGN_OR_RETURN(const std::vector<int> idx, download<int>(device_, b.recv_topk_idx, rows * k));
  EPS_ASSIGN_OR_RETURN(const bf16* in, expert_input(0, rows));
  std::vector<std::vector<std::int64_t>> rows_of(static_cast<std::size_t>(local_experts_));
  std::vector<std::int64_t> slot_rows(static_cast<std::size_t>(rows * k), -1);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < k; ++j) {
      const int l = idx[r * k + j];
      if (l < 0) continue;
      rows_of[l].push_back(r);
    }
  }
  std::int64_t pairs = 0;
  for (const auto& list : rows_of) pairs += static_cast<std::int64_t>(list.size());
  EPS_RETURN_IF_ERROR(ensure(device_, b.pair_y, static_cast<std::size_t>(pairs * h) * sizeof(bf16)));
  std::int64_t offset = 0;
  for (int l = 0; l < local_experts_; ++l) {
    const std::vector<std::int64_t>& list = rows_of[l];
    const auto n = static_cast<std::int64_t>(list.size()) - (list.empty() ? 0 : kMutantRowsShort);
    if (n == 0) continue;
    EPS_RETURN_IF_ERROR(upload(device_, b.gather_rows, list));
    EPS_RETURN_IF_ERROR(ensure(device_, b.gathered, static_cast<std::size_t>(n * h) * sizeof(bf16)));
    EPS_RETURN_IF_ERROR(device_.run(
        device::CopyRowsArgs{b.gathered.as<std::byte>(), reinterpret_cast<const std::byte*>(in), n, h * 2,
                             h * 2, h * 2, nullptr, b.gather_rows.as<const std::int64_t>()}));
    EPS_RETURN_IF_ERROR(
        experts_[layer][l].forward(b.gathered.as<bf16>(), n, b.pair_y.as<bf16>() + offset * h));
    // Row list[i]'s slot with local expert l gets pair offset + i (each expert appears once per row).
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t r = list[i];
      for (std::int64_t j = 0; j < k; ++j) {
        if (idx[r * k + j] == l) slot_rows[r * k + j] = offset + i;
      }
    }
    offset += n;
    EPS_RETURN_IF_ERROR(device_.synchronize());  // the row list is reused by the next expert
  }
  record.expert_rows += pairs;
  if (rows == 0) return Status();
  EPS_RETURN_IF_ERROR(upload(device_, b.slot_rows, slot_rows));
  return device_.run(device::CombineLlArgs{
      b.combine_x.as<bf16>(), rows, spec_.hidden, width_, b.recv_topk_weights.as<const float>(),
      b.slot_rows.as<const std::int64_t>(), b.pair_y.as<const bf16>(), h});
}

Status DistributedLayer::combine(const transport::DispatchHandle& handle) {
  const Buffers& b = *buffers_;
  const std::int64_t rows = spec_.layout == Layout::kLl ? b.recv_rows : handle.num_recv_rows();
  transport::CombineInput in{
      layer_tree(spec_.layout), span_of<const bf16>(b.combine_x, rows * spec_.hidden), {}, {}};
  transport::CombineOutput out{span_of<bf16>(b.stacked, tokens_ * spec_.hidden), {}};
  return transport_.combine(handle, in, out);
}

Status DistributedLayer::add_shared(int layer) {
  Buffers& b = *buffers_;
  if (tokens_ == 0) return Status();
  const std::int64_t plane = tokens_ * spec_.hidden;
  for (int s = 0; s < spec_.num_shared; ++s) {
    EPS_RETURN_IF_ERROR(shared_experts_[layer][s].forward(b.x.as<const bf16>(), tokens_,
                                                          b.stacked.as<bf16>() + (1 + s) * plane));
  }
  if (spec_.num_shared == 0) return device_.copy(b.next.data(), b.stacked.data(), plane * sizeof(bf16));
  return device_.run(device::SumRowsArgs{b.next.as<bf16>(), b.stacked.as<const bf16>(), tokens_, spec_.hidden,
                                         1 + spec_.num_shared});
}

}  // namespace eps::layer
