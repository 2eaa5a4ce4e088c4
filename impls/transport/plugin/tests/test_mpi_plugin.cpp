// A test EP plugin (epsuite/ep_plugin_v1.h): the suite's own `mpi` transport behind the C ABI, built as
// libepsuite-plugin-test-mpi.so. It serves three checks:
// - the ABI's overhead: `epsuite bench --transport mpi,plugin:test-mpi` times the same transport built in and
//   through the ABI in one run (docs/plugins.md);
// - open receive order (SPEC 14.3, docs/dispatch.md 5.9): EPS_TEST_PLUGIN_PERMUTE=1 reverses the rows inside
//   every block of every layout it returns (and un-reverses combine's input, so combine stays right);
//   EPS_TEST_PLUGIN_ORDER=open declares every layout open. Permuted rows must pass under "open" and fail
//   under "fixed" (the default);
// - faults: EPS_TEST_PLUGIN_FAULT=KIND:CALL makes CALL (init, dispatch, combine) return an error (KIND
// error),
//   never return (hang) or raise SIGSEGV (crash), on every rank, or only on rank N with KIND:CALL:N.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <epsuite/ep_plugin_v1.h>

#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/mpi/mpi_transport.hpp"

namespace {

using eps::Status;
using eps::StatusCode;
namespace t = eps::transport;

// The ABI's layout and tree values are the suite's enumerators (this plugin casts between them).
static_assert(static_cast<int>(t::Layout::kHtExpertMajor) == EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR &&
              static_cast<int>(t::Layout::kLl) == EPS_PLUGIN_LAYOUT_LL);
static_assert(static_cast<int>(t::CombineTree::kHtTwoLevel) == EPS_PLUGIN_TREE_HT_TWO_LEVEL &&
              static_cast<int>(t::CombineTree::kLlWeighted) == EPS_PLUGIN_TREE_LL_WEIGHTED);

thread_local std::string t_last_error;

int fail(const Status& status) {
  t_last_error = status.message();
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return EPS_PLUGIN_INVALID_ARGUMENT;
    case StatusCode::kUnavailable:
      return EPS_PLUGIN_UNAVAILABLE;
    case StatusCode::kEnvironment:
      return EPS_PLUGIN_SYSTEM_ERROR;
    default:
      return EPS_PLUGIN_INTERNAL_ERROR;
  }
}

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool open_order() { return env("EPS_TEST_PLUGIN_ORDER") == "open"; }
bool permute() {
  static const bool enabled = env("EPS_TEST_PLUGIN_PERMUTE") == "1";
  return enabled;
}

// The injected fault of `call` on this rank: "" (none), "error", "hang" or "crash".
std::string fault_of(const char* call, int rank) {
  static const std::string spec = env("EPS_TEST_PLUGIN_FAULT");
  if (spec.empty()) return "";
  const std::size_t colon = spec.find(':');
  if (colon == std::string::npos) return "";
  const std::string rest = spec.substr(colon + 1);
  const std::size_t second = rest.find(':');
  if (rest.substr(0, second) != call) return "";
  if (second != std::string::npos && std::atoi(rest.c_str() + second + 1) != rank) return "";
  return spec.substr(0, colon);
}

// Runs the injected fault of `call`, if any: returns an error code, or never returns.
int inject(const char* call, int rank) {
  const std::string kind = fault_of(call, rank);
  if (kind == "hang") {
    for (;;) pause();
  }
  if (kind == "crash") raise(SIGSEGV);
  if (kind == "error") {
    return fail(Status(StatusCode::kCheckFailed,
                       "injected failure (EPS_TEST_PLUGIN_FAULT=" + kind + ":" + call + ")"));
  }
  return EPS_PLUGIN_SUCCESS;
}

struct Handle;

struct Context {
  Handle* handles = nullptr;  // the live handles (a list through Handle::next): finalize frees them
  std::unique_ptr<t::Transport> inner;
  t::TransportConfig config;
  eps_plugin_bootstrap_v1 bootstrap;
  int rank = 0;
  int size = 1;
  int local() const { return config.num_experts / size; }
};

// Rows [begin, begin + count) reversed: the blocks of one dispatch.
struct Block {
  std::int64_t begin;
  std::int64_t count;
};

struct Handle {
  std::unique_ptr<t::DispatchHandle> inner;
  t::Layout layout;
  std::vector<Block> blocks;  // what the permutation reverses (empty without EPS_TEST_PLUGIN_PERMUTE)
  Handle* previous = nullptr;
  Handle* next = nullptr;

  void link(Context& c) {
    next = c.handles;
    if (next != nullptr) next->previous = this;
    c.handles = this;
  }
  void unlink(Context& c) {
    (previous != nullptr ? previous->next : c.handles) = next;
    if (next != nullptr) next->previous = previous;
  }
};

template <typename T>
void reverse_blocks(T* base, std::size_t width, const std::vector<Block>& blocks) {
  if (base == nullptr) return;
  for (const Block& b : blocks) {
    for (std::int64_t lo = b.begin, hi = b.begin + b.count - 1; lo < hi; ++lo, --hi) {
      std::swap_ranges(base + lo * width, base + (lo + 1) * width, base + hi * width);
    }
  }
}

std::size_t row_bytes(const t::TransportConfig& c) {
  return c.dtype == eps::dispatch::PayloadType::kFp8 ? c.hidden : 2 * static_cast<std::size_t>(c.hidden);
}
std::size_t num_scales(const t::TransportConfig& c) {
  return c.dtype == eps::dispatch::PayloadType::kFp8 ? c.hidden / 128 : 0;
}

// The blocks of a dispatch (docs/dispatch.md 5.9): source ranks' rows (rank-major), local experts' valid rows
// (expert-major, counted with the bootstrap's allgather of every rank's per-expert counts), (expert, source)
// blocks (ll).
eps::Result<std::vector<Block>> blocks_of(Context& c, const t::DispatchHandle& h,
                                          const eps_plugin_dispatch_v1& a) {
  std::vector<Block> blocks;
  const eps::dispatch::DispatchLayout& l = h.layout();
  const int q = c.rank;
  if (h.layout_kind() == t::Layout::kHtRankMajor) {
    int begin = 0;
    for (int r = 0; r < c.size; ++r) {
      const int end = l.rank_prefix_matrix[static_cast<std::size_t>(r) * c.size + q];
      blocks.push_back({begin, end - begin});
      begin = end;
    }
    return blocks;
  }
  if (h.layout_kind() == t::Layout::kLl) {
    const std::int64_t capacity = static_cast<std::int64_t>(c.size) * c.config.max_tokens_per_rank;
    for (int e = 0; e < c.local(); ++e) {
      for (int r = 0; r < c.size; ++r) {
        const std::int32_t* range = a.layout_range + (static_cast<std::size_t>(e) * c.size + r) * 2;
        blocks.push_back({e * capacity + range[0], range[1]});
      }
    }
    return blocks;
  }
  const auto experts = static_cast<std::size_t>(c.config.num_experts);
  std::vector<int> all(experts * static_cast<std::size_t>(c.size));
  if (c.bootstrap.allgather(c.bootstrap.context, l.num_tokens_per_expert.data(), all.data(), experts * 4) !=
      EPS_PLUGIN_SUCCESS) {
    return Status(StatusCode::kEnvironment, c.bootstrap.last_error(c.bootstrap.context));
  }
  std::int64_t begin = 0;
  for (int e = 0; e < c.local(); ++e) {
    std::int64_t count = 0;
    for (int r = 0; r < c.size; ++r) count += all[static_cast<std::size_t>(r) * experts + q * c.local() + e];
    blocks.push_back({begin, count});
    begin += a.num_recv_tokens_per_expert[e];
  }
  return blocks;
}

void reverse_outputs(const Context& c, const eps_plugin_dispatch_v1& a, const Handle& h) {
  reverse_blocks(static_cast<std::byte*>(a.recv_x), row_bytes(c.config), h.blocks);
  reverse_blocks(a.recv_x_scales, num_scales(c.config), h.blocks);
  reverse_blocks(a.recv_topk_idx, static_cast<std::size_t>(c.config.top_k), h.blocks);
  reverse_blocks(a.recv_topk_weights, static_cast<std::size_t>(c.config.top_k), h.blocks);
  reverse_blocks(a.recv_weights, 1, h.blocks);
  reverse_blocks(a.src_info, 1, h.blocks);
}

t::DispatchInput input_of(const Context& c, const eps_plugin_dispatch_v1& a) {
  const auto tokens = static_cast<std::size_t>(a.num_tokens);
  const auto slots = tokens * static_cast<std::size_t>(c.config.top_k);
  t::DispatchInput in;
  in.num_tokens = a.num_tokens;
  in.x = {static_cast<const std::byte*>(a.x), tokens * row_bytes(c.config)};
  if (a.x_scales != nullptr) in.x_scales = {a.x_scales, tokens * num_scales(c.config)};
  if (a.topk_idx != nullptr) in.topk_idx = {a.topk_idx, slots};
  if (a.topk_weights != nullptr) in.topk_weights = {a.topk_weights, slots};
  return in;
}

template <typename T>
std::span<T> span_of(T* data, std::size_t n) {
  return data != nullptr ? std::span<T>(data, n) : std::span<T>();
}

t::DispatchOutput output_of(const Context& c, const eps_plugin_dispatch_v1& a) {
  const auto rows = static_cast<std::size_t>(a.recv_capacity);
  const auto local = static_cast<std::size_t>(c.local());
  const auto k = static_cast<std::size_t>(c.config.top_k);
  return {span_of(static_cast<std::byte*>(a.recv_x), rows * row_bytes(c.config)),
          span_of(a.recv_x_scales, rows * num_scales(c.config)),
          span_of(a.recv_topk_idx, rows * k),
          span_of(a.recv_topk_weights, rows * k),
          span_of(a.recv_weights, rows),
          span_of(a.num_recv_tokens_per_expert, local),
          span_of(a.packed_recv_count, local),
          span_of(a.src_info, rows),
          span_of(reinterpret_cast<t::LlRange*>(a.layout_range), local * static_cast<std::size_t>(c.size))};
}

int properties(eps_plugin_properties_v1* out) {
  const t::Capabilities caps = t::mpi_capabilities();
  const std::uint32_t layouts = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR) |
                                EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) |
                                EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_LL);
  *out = {};
  out->layouts = layouts;
  out->trees = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_RANK) | EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_TWO_LEVEL) |
               EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED);
  out->dtypes = EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_BF16) | EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_FP8);
  out->memory = EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_HOST);
  out->open_order = open_order() ? layouts : 0;
  out->cached_dispatch = 1;
  out->checks_routing = 1;  // the mpi transport rejects bad routing itself
  out->max_ranks = caps.max_ranks;
  out->max_experts = caps.max_experts;
  out->max_top_k = caps.max_top_k;
  out->max_hidden = caps.max_hidden;
  out->max_tokens_per_rank = caps.max_tokens_per_rank;
  return EPS_PLUGIN_SUCCESS;
}

int init(const eps_plugin_config_v1* config, void** context) {
  if (const int injected = inject("init", config->rank); injected != EPS_PLUGIN_SUCCESS) return injected;
  const Status mpi = eps::mpi::init(nullptr, nullptr);  // this library's copy of the runtime
  if (!mpi.ok()) return fail(mpi);
  auto c = std::make_unique<Context>();
  c->rank = config->rank;
  c->size = config->size;
  c->bootstrap = config->bootstrap;
  c->config.comm = *static_cast<const MPI_Comm*>(config->mpi_comm);
  c->config.num_experts = config->num_experts;
  c->config.top_k = config->top_k;
  c->config.hidden = config->hidden;
  c->config.max_tokens_per_rank = config->max_tokens_per_rank;
  c->config.dtype = config->dtype == EPS_PLUGIN_DTYPE_FP8 ? eps::dispatch::PayloadType::kFp8
                                                          : eps::dispatch::PayloadType::kBf16;
  c->config.expert_alignment = config->expert_alignment;
  // ABI v1's nodes: groups of ranks_per_node consecutive ranks (ep_plugin_v1.h).
  eps::Result<eps::NodeLayout> nodes = eps::NodeLayout::uniform(config->size, config->ranks_per_node);
  if (!nodes.ok()) return fail(nodes.status());
  c->config.nodes = std::move(nodes).value();
  c->config.timeout_seconds = config->timeout_seconds;
  eps::Result<std::unique_ptr<t::Transport>> made = t::make_mpi_transport(c->config);
  if (!made.ok()) return fail(made.status());
  c->inner = std::move(made).value();
  *context = c.release();
  return EPS_PLUGIN_SUCCESS;
}

int dispatch(void* context, const eps_plugin_dispatch_v1* a, const eps_plugin_layout_v1* layout,
             void** handle, std::int64_t* num_recv_rows) {
  auto& c = *static_cast<Context*>(context);
  if (const int injected = inject("dispatch", c.rank); injected != EPS_PLUGIN_SUCCESS) return injected;
  const auto kind = static_cast<t::Layout>(a->layout);  // the ABI's values are the Layout enumerators
  eps::Result<std::unique_ptr<t::DispatchHandle>> made =
      c.inner->dispatch(kind, input_of(c, *a), output_of(c, *a));
  if (!made.ok()) return fail(made.status());
  auto h = std::make_unique<Handle>(Handle{std::move(made).value(), kind, {}, nullptr, nullptr});
  const eps::dispatch::DispatchLayout& l = h->inner->layout();
  std::copy(l.num_tokens_per_rank.begin(), l.num_tokens_per_rank.end(), layout->num_tokens_per_rank);
  std::copy(l.num_tokens_per_expert.begin(), l.num_tokens_per_expert.end(), layout->num_tokens_per_expert);
  std::copy(l.is_token_in_rank.begin(), l.is_token_in_rank.end(), layout->is_token_in_rank);
  std::copy(l.rank_prefix_matrix.begin(), l.rank_prefix_matrix.end(), layout->rank_prefix_matrix);
  if (permute()) {
    eps::Result<std::vector<Block>> blocks = blocks_of(c, *h->inner, *a);
    if (!blocks.ok()) return fail(blocks.status());
    h->blocks = std::move(blocks).value();
    reverse_outputs(c, *a, *h);
  }
  *num_recv_rows = h->inner->num_recv_rows();
  h->link(c);
  *handle = h.release();
  return EPS_PLUGIN_SUCCESS;
}

int dispatch_cached(void* context, void* handle, const eps_plugin_dispatch_v1* a) {
  auto& c = *static_cast<Context*>(context);
  auto& h = *static_cast<Handle*>(handle);
  const Status done = c.inner->dispatch_cached(*h.inner, input_of(c, *a), output_of(c, *a));
  if (!done.ok()) return fail(done);
  reverse_outputs(c, *a, h);
  return EPS_PLUGIN_SUCCESS;
}

int combine(void* context, void* handle, const eps_plugin_combine_v1* a) {
  auto& c = *static_cast<Context*>(context);
  auto& h = *static_cast<Handle*>(handle);
  if (const int injected = inject("combine", c.rank); injected != EPS_PLUGIN_SUCCESS) return injected;
  const auto hidden = static_cast<std::size_t>(c.config.hidden);
  const auto tokens = static_cast<std::size_t>(a->num_tokens);
  // The caller's rows follow the permuted order; the inner transport wants its own.
  const auto* rows = reinterpret_cast<const eps::bf16*>(a->x);
  std::vector<eps::bf16> unpermuted;
  if (!h.blocks.empty()) {
    unpermuted.assign(rows, rows + a->x_rows * static_cast<std::int64_t>(hidden));
    reverse_blocks(unpermuted.data(), hidden, h.blocks);
    rows = unpermuted.data();
  }
  t::CombineInput in{
      static_cast<t::CombineTree>(a->tree), {rows, static_cast<std::size_t>(a->x_rows) * hidden}, {}, {}};
  if (a->bias0 != nullptr) in.bias0 = {reinterpret_cast<const eps::bf16*>(a->bias0), tokens * hidden};
  if (a->bias1 != nullptr) in.bias1 = {reinterpret_cast<const eps::bf16*>(a->bias1), tokens * hidden};
  t::CombineOutput out{span_of(reinterpret_cast<eps::bf16*>(a->out), tokens * hidden),
                       span_of(a->combined_weights, tokens * static_cast<std::size_t>(c.config.top_k))};
  const Status done = c.inner->combine(*h.inner, in, out);
  return done.ok() ? EPS_PLUGIN_SUCCESS : fail(done);
}

int release(void* context, void* handle) {
  auto* h = static_cast<Handle*>(handle);
  h->unlink(*static_cast<Context*>(context));
  delete h;
  return EPS_PLUGIN_SUCCESS;
}

int finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  while (c->handles != nullptr) release(c, c->handles);
  delete c;
  return EPS_PLUGIN_SUCCESS;
}

const char* last_error() { return t_last_error.c_str(); }

int wire_bytes(void* context, std::int64_t* sent, std::int64_t* received) {
  const t::WireBytes bytes = static_cast<Context*>(context)->inner->wire_bytes();
  *sent = bytes.sent;
  *received = bytes.received;
  return EPS_PLUGIN_SUCCESS;
}

}  // namespace

extern "C" const eps_ep_plugin_v1_t eps_ep_plugin_v1 = {
    EPS_PLUGIN_ABI_VERSION_V1, "test-mpi", "1",     properties, init,       dispatch,
    dispatch_cached,           combine,    release, finalize,   last_error, wire_bytes};
