#include "impls/transport/plugin/plugin_transport.hpp"

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/frame/checks.hpp"
#include "impls/transport/plugin/call_guard.hpp"
#include "impls/transport/routing/routing.hpp"

namespace eps::transport {
namespace {

static_assert(sizeof(LlRange) == 2 * sizeof(std::int32_t), "layout_range travels as [L, R, 2] int32");
static_assert(sizeof(bf16) == sizeof(std::uint16_t), "bf16 travels as uint16_t bit patterns");

int abi_layout(Layout layout) {
  switch (layout) {
    case Layout::kHtRankMajor:
      return EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR;
    case Layout::kHtExpertMajor:
      return EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR;
    case Layout::kLl:
      break;
  }
  return EPS_PLUGIN_LAYOUT_LL;
}

int abi_tree(CombineTree tree) {
  switch (tree) {
    case CombineTree::kHtRank:
      return EPS_PLUGIN_TREE_HT_RANK;
    case CombineTree::kHtTwoLevel:
      return EPS_PLUGIN_TREE_HT_TWO_LEVEL;
    case CombineTree::kLlWeighted:
      break;
  }
  return EPS_PLUGIN_TREE_LL_WEIGHTED;
}

StatusCode code_of(int result) {
  switch (result) {
    case EPS_PLUGIN_INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case EPS_PLUGIN_UNAVAILABLE:
      return StatusCode::kUnavailable;
    case EPS_PLUGIN_INTERNAL_ERROR:
      return StatusCode::kCheckFailed;
    default:
      return StatusCode::kEnvironment;
  }
}

template <typename T>
T* data_or_null(std::span<T> values) {
  return values.empty() ? nullptr : values.data();
}

// The collectives a plugin gets from the suite (eps_plugin_bootstrap_v1), over the transport's duplicate of
// its communicator, each bounded by the transport's deadline.
struct Bootstrap {
  MPI_Comm comm = MPI_COMM_NULL;
  double timeout_seconds = 60.0;
  std::string last_error;  // of the last failed collective
  bool failed = false;     // since the plugin call began

  int fail(const Status& status) {
    last_error = status.message();
    failed = true;
    return EPS_PLUGIN_SYSTEM_ERROR;
  }

  static int allgather(void* context, const void* send, void* recv, size_t bytes) {
    auto& self = *static_cast<Bootstrap*>(context);
    if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      return self.fail(invalid_argument("bootstrap.allgather", "bytes must be <= 2^31 - 1, got {}", bytes));
    }
    MPI_Request request = MPI_REQUEST_NULL;
    const Status posted = mpi::check(MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv,
                                                    static_cast<int>(bytes), MPI_BYTE, self.comm, &request),
                                     "MPI_Iallgather", __FILE__, __LINE__);
    if (!posted.ok()) return self.fail(posted);
    const Status done = mpi::wait(&request, Deadline(self.timeout_seconds), [bytes] {
      return fmt::format("the plugin bootstrap's allgather of {} bytes", bytes);
    });
    return done.ok() ? EPS_PLUGIN_SUCCESS : self.fail(done);
  }

  static int barrier(void* context) {
    auto& self = *static_cast<Bootstrap*>(context);
    const Status done = mpi::barrier(self.comm, Deadline(self.timeout_seconds));
    return done.ok() ? EPS_PLUGIN_SUCCESS : self.fail(done);
  }

  static const char* error(void* context) { return static_cast<Bootstrap*>(context)->last_error.c_str(); }
};

enum Call { kInit, kDispatch, kDispatchCached, kCombine, kRelease, kFinalize, kWireBytes, kNumCalls };
constexpr std::array<const char*, kNumCalls> kCallNames = {
    "init", "dispatch", "dispatch_cached", "combine", "release", "finalize", "wire_bytes"};

// The plugin's context and the state every call shares; handles keep it alive so that a handle destroyed
// after its transport does not call into a finalized context.
struct Session {
  std::shared_ptr<const PluginLibrary> library;
  std::string name;  // "plugin:<name>"
  void* context = nullptr;
  bool finalized = false;
  Bootstrap bootstrap;
  std::vector<PluginCallSite> sites;  // per Call
  // Layouts of destroyed handles, whose arrays a later dispatch reuses without allocating.
  std::vector<dispatch::DispatchLayout> spare_layouts;

  // Runs `call` under a guard; the plugin's failure as a Status (plugin_transport.hpp).
  template <typename Fn>
  Status run(Call which, Fn&& call) {
    bootstrap.failed = false;
    int result = EPS_PLUGIN_SUCCESS;
    {
      const PluginCallGuard guard(sites[which]);
      result = call();
    }
    if (result == EPS_PLUGIN_SUCCESS) return Status();
    const char* message = library->api->last_error();
    std::string text = fmt::format("{} {}: {}", name, kCallNames[which],
                                   message != nullptr && *message != '\0' ? message : "(no message)");
    if (bootstrap.failed) text += fmt::format(" (bootstrap: {})", bootstrap.last_error);
    if (result < EPS_PLUGIN_SUCCESS || result > EPS_PLUGIN_INTERNAL_ERROR) {
      text += fmt::format(" (unknown result code {})", result);
    }
    return Status(code_of(result), std::move(text));
  }

  ~Session() {
    if (bootstrap.comm != MPI_COMM_NULL) MPI_Comm_free(&bootstrap.comm);
  }
};

class PluginHandle final : public DispatchHandle {
 public:
  PluginHandle(std::shared_ptr<Session> session, Layout kind, int num_tokens)
      : session(std::move(session)), kind(kind), num_tokens(num_tokens) {}
  ~PluginHandle() override {
    session->spare_layouts.push_back(std::move(layout_info));
    if (plugin_handle == nullptr || session->finalized) return;
    const Status released = session->run(
        kRelease, [&] { return session->library->api->release(session->context, plugin_handle); });
    if (!released.ok()) fmt::print(stderr, "epsuite: warning on {}: {}\n", mpi::where(), released.message());
  }
  Layout layout_kind() const override { return kind; }
  std::int64_t num_recv_rows() const override { return rows; }
  const dispatch::DispatchLayout& layout() const override { return layout_info; }

  std::shared_ptr<Session> session;
  Layout kind;
  int num_tokens;
  void* plugin_handle = nullptr;
  std::int64_t rows = 0;
  dispatch::DispatchLayout layout_info;
};

class PluginTransport final : public Transport {
 public:
  PluginTransport(std::shared_ptr<Session> session, const TransportConfig& config, Capabilities caps,
                  int rank, int size, int memory)
      : session_(std::move(session)),
        config_(config),
        caps_(std::move(caps)),
        rank_(rank),
        size_(size),
        memory_(memory) {}

  ~PluginTransport() override {
    if (session_->finalized) return;  // init failed: no context
    session_->finalized = true;
    const Status finalized =
        session_->run(kFinalize, [&] { return session_->library->api->finalize(session_->context); });
    if (!finalized.ok())
      fmt::print(stderr, "epsuite: warning on {}: {}\n", mpi::where(), finalized.message());
  }

  Status init(const mpi::NodeLayout& nodes);

  std::string_view name() const override { return session_->name; }
  std::string describe() const override {
    const PluginLibrary& l = *session_->library;
    return fmt::format("{} ({}, version {}, ABI v{})", session_->name, l.path, l.version, l.api->abi_version);
  }
  const Capabilities& capabilities() const override { return caps_; }
  const TransportConfig& config() const override { return config_; }
  WireBytes wire_bytes() const override;

  Result<std::unique_ptr<DispatchHandle>> dispatch(Layout layout, const DispatchInput& input,
                                                   const DispatchOutput& output) override;
  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) override;
  Status combine(const DispatchHandle& handle, const CombineInput& input,
                 const CombineOutput& output) override;

 private:
  const eps_ep_plugin_v1_t& api() const { return *session_->library->api; }
  // Where the caller's memory can be read by host code (routing checks).
  bool host_addressable() const {
    return config_.memory == MemoryKind::kHost || config_.device == nullptr ||
           config_.device->host_accessible();
  }
  Status check_input(const DispatchInput& input, bool need_routing);
  // `input` with its rows quantized to fp8 codes and scales when it asks for it (docs/dispatch.md 5.8).
  Result<DispatchInput> quantized(const DispatchInput& input);
  eps_plugin_dispatch_v1 dispatch_args(Layout layout, const DispatchInput& input,
                                       const DispatchOutput& output) const;
  Result<const PluginHandle*> own(const DispatchHandle& handle) const;

  std::shared_ptr<Session> session_;
  TransportConfig config_;
  Capabilities caps_;
  int rank_;
  int size_;
  int memory_;  // EPS_PLUGIN_MEMORY_* the plugin is given
  std::unique_ptr<device::Device> own_device_;
  device::Buffer codes_, scales_;
};

// ABI v1's ht-two-level nodes are groups of ranks_per_node consecutive ranks (ep_plugin_v1.h): config.nodes
// (empty = one rank per node) as that number, or kUnavailable for nodes it cannot describe (SPEC 14.2).
Result<int> abi_ranks_per_node(const NodeLayout& nodes, int size) {
  if (nodes.node_of.empty()) return 1;
  const int per_node = nodes.ranks_per_node();
  if (per_node > 0 && NodeLayout::uniform(size, per_node).ok() &&
      NodeLayout::uniform(size, per_node)->node_of == nodes.node_of)
    return per_node;
  return Status(
      StatusCode::kUnavailable,
      fmt::format("plugin ABI v1 describes ht-two-level's nodes as equal groups of consecutive ranks; "
                  "these nodes hold {} ranks (node of each rank: {})",
                  nodes.sizes_text(), fmt::join(nodes.node_of, ",")));
}

Status PluginTransport::init(const mpi::NodeLayout& nodes) {
  EPS_ASSIGN_OR_RETURN(const int ranks_per_node, abi_ranks_per_node(config_.nodes, size_));
  const int node = nodes.node_of[static_cast<std::size_t>(rank_)];
  const std::string device = config_.device != nullptr ? config_.device->describe() : "host";
  eps_plugin_config_v1 c{};
  c.rank = rank_;
  c.size = size_;
  c.node = node;
  c.num_nodes = nodes.nodes();
  c.local_rank = nodes.local_index(rank_);
  c.local_size = nodes.node_sizes[static_cast<std::size_t>(node)];
  c.num_experts = config_.num_experts;
  c.top_k = config_.top_k;
  c.hidden = config_.hidden;
  c.max_tokens_per_rank = config_.max_tokens_per_rank;
  c.dtype = config_.dtype == PayloadType::kFp8 ? EPS_PLUGIN_DTYPE_FP8 : EPS_PLUGIN_DTYPE_BF16;
  c.expert_alignment = config_.expert_alignment;
  c.ranks_per_node = ranks_per_node;
  c.memory = memory_;
  c.device_ordinal = memory_ == EPS_PLUGIN_MEMORY_DEVICE && config_.device != nullptr
                         ? config_.device->properties().ordinal
                         : -1;
  c.device = device.c_str();
  c.timeout_seconds = config_.timeout_seconds;
  c.mpi_comm = &session_->bootstrap.comm;
  c.bootstrap = {&session_->bootstrap, &Bootstrap::allgather, &Bootstrap::barrier, &Bootstrap::error};
  return session_->run(kInit, [&] { return api().init(&c, &session_->context); });
}

WireBytes PluginTransport::wire_bytes() const {
  WireBytes bytes;
  if (api().wire_bytes == nullptr) return bytes;
  const Status counted = session_->run(
      kWireBytes, [&] { return api().wire_bytes(session_->context, &bytes.sent, &bytes.received); });
  return counted.ok() ? bytes : WireBytes{};
}

Status PluginTransport::check_input(const DispatchInput& input, bool need_routing) {
  need_routing = need_routing && !session_->library->checks_routing;
  if (!need_routing || host_addressable()) return check_dispatch_input(config_, input, need_routing);
  // Routing in memory the host cannot read: check a host copy of it.
  std::vector<int> idx(input.topk_idx.size());
  std::vector<float> weights(input.topk_weights.size());
  if (!idx.empty())
    EPS_RETURN_IF_ERROR(config_.device->copy(idx.data(), input.topk_idx.data(), idx.size() * 4));
  if (!weights.empty()) {
    EPS_RETURN_IF_ERROR(config_.device->copy(weights.data(), input.topk_weights.data(), weights.size() * 4));
  }
  DispatchInput host = input;
  host.topk_idx = idx;
  host.topk_weights = weights;
  return check_dispatch_input(config_, host, true);
}

Result<DispatchInput> PluginTransport::quantized(const DispatchInput& in) {
  if (!in.quantize) return in;
  device::Device* kernels = config_.memory == MemoryKind::kDevice ? config_.device : nullptr;
  if (kernels == nullptr) {
    if (own_device_ == nullptr) {
      EPS_ASSIGN_OR_RETURN(own_device_, device::make_cpu_device());
    }
    kernels = own_device_.get();
  }
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  const std::size_t scale_bytes = 4 * hidden / dispatch::kFp8GroupSize;
  const auto t_max = static_cast<std::size_t>(std::max(config_.max_tokens_per_rank, 1));
  if (codes_.data() == nullptr) {
    EPS_ASSIGN_OR_RETURN(codes_, kernels->allocate(t_max * hidden, MemoryKind::kDevice));
    EPS_ASSIGN_OR_RETURN(scales_, kernels->allocate(t_max * scale_bytes, MemoryKind::kDevice));
  }
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  if (tokens > 0) {
    EPS_RETURN_IF_ERROR(kernels->run(device::Fp8QuantizeArgs{
        reinterpret_cast<const bf16*>(in.x.data()), config_.hidden, nullptr, codes_.as<std::uint8_t>(),
        config_.hidden, scales_.as<std::byte>(), static_cast<std::int64_t>(scale_bytes), in.num_tokens,
        config_.hidden, *in.quantize}));
    EPS_RETURN_IF_ERROR(kernels->synchronize());
  }
  DispatchInput codes = in;
  codes.x = {codes_.as<const std::byte>(), tokens * hidden};
  codes.x_scales = {scales_.as<const float>(), tokens * scale_bytes / 4};
  codes.quantize.reset();
  return codes;
}

eps_plugin_dispatch_v1 PluginTransport::dispatch_args(Layout layout, const DispatchInput& in,
                                                      const DispatchOutput& out) const {
  eps_plugin_dispatch_v1 a{};
  a.layout = abi_layout(layout);
  a.num_tokens = in.num_tokens;
  a.x = in.x.data();
  a.x_scales = data_or_null(in.x_scales);
  a.topk_idx = data_or_null(in.topk_idx);
  a.topk_weights = data_or_null(in.topk_weights);
  a.recv_capacity = recv_capacity_rows(layout, config_, size_);
  a.recv_x = out.recv_x.data();
  a.recv_x_scales = data_or_null(out.recv_x_scales);
  if (layout == Layout::kHtRankMajor) {
    a.recv_topk_idx = data_or_null(out.recv_topk_idx);
    a.recv_topk_weights = data_or_null(out.recv_topk_weights);
  }
  if (layout == Layout::kHtExpertMajor) a.recv_weights = data_or_null(out.recv_weights);
  if (layout != Layout::kLl) {
    a.num_recv_tokens_per_expert = data_or_null(out.num_recv_tokens_per_expert);
  } else {
    a.packed_recv_count = data_or_null(out.packed_recv_count);
    a.src_info = data_or_null(out.src_info);
    a.layout_range = reinterpret_cast<std::int32_t*>(data_or_null(out.layout_range));
  }
  return a;
}

Result<const PluginHandle*> PluginTransport::own(const DispatchHandle& handle) const {
  const auto* h = dynamic_cast<const PluginHandle*>(&handle);
  if (h == nullptr || h->session != session_) {
    return invalid_argument("handle", "was not made by this {} transport instance", name());
  }
  return h;
}

Result<std::unique_ptr<DispatchHandle>> PluginTransport::dispatch(Layout layout, const DispatchInput& input,
                                                                  const DispatchOutput& output) {
  if (!caps_.supports(layout)) {
    std::vector<std::string_view> declared;
    for (Layout l : caps_.layouts) declared.push_back(layout_name(l));
    return invalid_argument("layout", "{} declares no {} dispatch (declared: {})", name(),
                            layout_name(layout), fmt::join(declared, ", "));
  }
  EPS_RETURN_IF_ERROR(check_input(input, true));
  EPS_RETURN_IF_ERROR(check_dispatch_output(config_, size_, layout, output));
  EPS_ASSIGN_OR_RETURN(const DispatchInput payload, quantized(input));
  auto handle = std::make_unique<PluginHandle>(session_, layout, input.num_tokens);
  dispatch::DispatchLayout& l = handle->layout_info;
  if (!session_->spare_layouts.empty()) {
    l = std::move(session_->spare_layouts.back());
    session_->spare_layouts.pop_back();
  }
  // Poisoned, so that an entry the plugin does not write cannot pass (docs/dispatch.md 5.1 is checked).
  l.rank = rank_;
  l.num_tokens_per_rank.assign(static_cast<std::size_t>(size_), -1);
  l.num_tokens_per_expert.assign(static_cast<std::size_t>(config_.num_experts), -1);
  l.is_token_in_rank.assign(static_cast<std::size_t>(input.num_tokens) * static_cast<std::size_t>(size_),
                            0xff);
  l.rank_prefix_matrix.assign(static_cast<std::size_t>(size_) * static_cast<std::size_t>(size_), -1);
  const eps_plugin_layout_v1 layout_out{l.num_tokens_per_rank.data(), l.num_tokens_per_expert.data(),
                                        data_or_null(std::span(l.is_token_in_rank)),
                                        l.rank_prefix_matrix.data()};
  const eps_plugin_dispatch_v1 args = dispatch_args(layout, payload, output);
  EPS_RETURN_IF_ERROR(session_->run(kDispatch, [&] {
    return api().dispatch(session_->context, &args, &layout_out, &handle->plugin_handle, &handle->rows);
  }));
  const std::int64_t capacity = recv_capacity_rows(layout, config_, size_);
  if (handle->rows < 0 || handle->rows > capacity) {
    return Status(
        StatusCode::kCheckFailed,
        fmt::format("{} dispatch: reported {} received rows; the receive buffers hold {} (docs/dispatch.md "
                    "5)",
                    name(), handle->rows, capacity));
  }
  return std::unique_ptr<DispatchHandle>(std::move(handle));
}

Status PluginTransport::dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                                        const DispatchOutput& output) {
  if (!caps_.cached_dispatch) {
    return invalid_argument("dispatch_cached", "{} declares no cached dispatch", name());
  }
  EPS_ASSIGN_OR_RETURN(const PluginHandle* h, own(handle));
  if (input.num_tokens != h->num_tokens) {
    return invalid_argument("num_tokens", "a cached dispatch must pass the handle's {} tokens, got {}",
                            h->num_tokens, input.num_tokens);
  }
  EPS_RETURN_IF_ERROR(check_input(input, false));
  EPS_RETURN_IF_ERROR(check_dispatch_output(config_, size_, h->kind, output));
  EPS_ASSIGN_OR_RETURN(DispatchInput payload, quantized(input));
  payload.topk_idx = {};
  payload.topk_weights = {};
  const eps_plugin_dispatch_v1 args = dispatch_args(h->kind, payload, output);
  return session_->run(kDispatchCached,
                       [&] { return api().dispatch_cached(session_->context, h->plugin_handle, &args); });
}

Status PluginTransport::combine(const DispatchHandle& handle, const CombineInput& input,
                                const CombineOutput& output) {
  EPS_ASSIGN_OR_RETURN(const PluginHandle* h, own(handle));
  if (!caps_.supports(input.tree)) {
    return invalid_argument("tree", "{} declares no {} combine", name(), combine_tree_name(input.tree));
  }
  EPS_RETURN_IF_ERROR(check_combine_args(config_, size_, *h, h->num_tokens, input, output));
  eps_plugin_combine_v1 args{};
  args.tree = abi_tree(input.tree);
  args.num_tokens = h->num_tokens;
  args.x = reinterpret_cast<const std::uint16_t*>(input.x.data());
  args.x_rows = static_cast<std::int64_t>(input.x.size() / static_cast<std::size_t>(config_.hidden));
  args.bias0 = reinterpret_cast<const std::uint16_t*>(data_or_null(input.bias0));
  args.bias1 = reinterpret_cast<const std::uint16_t*>(data_or_null(input.bias1));
  args.out = reinterpret_cast<std::uint16_t*>(data_or_null(output.out));
  args.combined_weights = data_or_null(output.combined_weights);
  return session_->run(kCombine, [&] { return api().combine(session_->context, h->plugin_handle, &args); });
}

// The memory kind a plugin is given for `config` (plugin_transport.hpp), or kUnavailable.
Result<int> plugin_memory(const PluginLibrary& library, const TransportConfig& config) {
  const bool host_memory =
      config.memory == MemoryKind::kHost || config.device == nullptr || config.device->host_accessible();
  if (host_memory && library.host_memory) return EPS_PLUGIN_MEMORY_HOST;
  if (!host_memory && library.device_memory) return EPS_PLUGIN_MEMORY_DEVICE;
  const std::string where = config.device != nullptr ? config.device->describe() : "the host";
  return Status(StatusCode::kUnavailable,
                host_memory
                    ? fmt::format("plugin:{} takes device memory only; the memory of {} is host memory",
                                  library.name, where)
                    : fmt::format("plugin:{} takes host memory only; the device memory of {} is not "
                                  "addressable by the host",
                                  library.name, where));
}

}  // namespace

Result<std::unique_ptr<Transport>> make_plugin_transport(std::shared_ptr<const PluginLibrary> library,
                                                         const TransportConfig& config) {
  int rank = 0, size = 1;
  EPS_MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_RETURN_IF_ERROR(validate_config(config, size, library->capabilities));
  EPS_ASSIGN_OR_RETURN(const int memory, plugin_memory(*library, config));
  const Deadline deadline(config.timeout_seconds);
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout nodes, mpi::node_layout(config.comm, deadline));
  auto session = std::make_shared<Session>();
  session->library = library;
  session->name = "plugin:" + library->name;
  session->bootstrap.timeout_seconds = config.timeout_seconds;
  EPS_ASSIGN_OR_RETURN(session->bootstrap.comm, mpi::comm_dup(config.comm, deadline));
  const std::string who = fmt::format("{} ({})", session->name, library->path);
  for (const char* call : kCallNames) session->sites.emplace_back(who, call, config.timeout_seconds);
  auto transport =
      std::make_unique<PluginTransport>(session, config, library->capabilities, rank, size, memory);
  const Status initialized = transport->init(nodes);
  if (!initialized.ok()) {
    session->finalized = true;  // no context to finalize
    return initialized;
  }
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace eps::transport
