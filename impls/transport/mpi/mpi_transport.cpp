#include "impls/transport/mpi/mpi_transport.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::transport {
namespace {

// Record headers. Rank-major rows carry the whole routing of the token (the receiver derives its local
// indices and the weights); expert-major and LL rows carry one slot (16 bytes, the size of DeepEP's LL
// message header that SPEC 5.6 counts).
struct SlotHeader {
  std::int32_t token;
  std::int32_t slot;
  std::int32_t expert;
  float weight;
};

std::size_t rank_major_header_bytes(int top_k) { return 4 + 8 * static_cast<std::size_t>(top_k); }

template <typename T>
void put(std::byte* at, const T& value) {
  std::memcpy(at, &value, sizeof(T));
}
template <typename T>
T get(const std::byte* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// One alltoallv in records: counts and displacements per peer.
struct Exchange {
  std::vector<int> send_counts, send_displs, recv_counts, recv_displs;
  void set_displacements() {
    send_displs.assign(send_counts.size(), 0);
    recv_displs.assign(recv_counts.size(), 0);
    std::exclusive_scan(send_counts.begin(), send_counts.end(), send_displs.begin(), 0);
    std::exclusive_scan(recv_counts.begin(), recv_counts.end(), recv_displs.begin(), 0);
  }
  int total_send() const { return send_counts.empty() ? 0 : send_displs.back() + send_counts.back(); }
  int total_recv() const { return recv_counts.empty() ? 0 : recv_displs.back() + recv_counts.back(); }
};

class MpiHandle final : public DispatchHandle {
 public:
  Layout layout_kind() const override { return kind; }
  std::int64_t num_recv_rows() const override { return num_rows; }
  const dispatch::DispatchLayout& layout() const override { return layout_info; }

  Layout kind = Layout::kHtRankMajor;
  const void* owner = nullptr;  // the transport that made it
  int num_tokens = 0;
  std::vector<int> topk_idx;
  std::vector<float> topk_weights;
  dispatch::DispatchLayout layout_info;
  Exchange exchange;
  std::vector<int> send_token;         // per sent record, in send order
  std::vector<int> send_slot;          // k, or -1 for rank-major records
  std::vector<std::int64_t> recv_row;  // per received record: its row in recv_x / packed_recv_x
  std::vector<int> per_expert_count;   // [R, L] records received from r for local expert l
  std::int64_t num_rows = 0;
};

class MpiTransport final : public Transport {
 public:
  MpiTransport(const TransportConfig& config, MPI_Comm comm, int rank, int size);
  ~MpiTransport() override;

  std::string_view name() const override { return "mpi"; }
  const Capabilities& capabilities() const override { return caps_; }
  const TransportConfig& config() const override { return config_; }

  Result<std::unique_ptr<DispatchHandle>> dispatch(Layout layout, const DispatchInput& input,
                                                   const DispatchOutput& output) override;
  Status dispatch_cached(const DispatchHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) override;
  Status combine(const DispatchHandle& handle, const CombineInput& input,
                 const CombineOutput& output) override;

 private:
  Deadline deadline() const { return Deadline(config_.timeout_seconds); }
  std::size_t record_bytes(Layout layout) const;
  MPI_Datatype record_type(Layout layout) const {
    return layout == Layout::kHtRankMajor ? rank_type_ : slot_type_;
  }
  Status check_input(const DispatchInput& input, bool need_routing) const;
  Status check_output(Layout layout, const DispatchOutput& output) const;
  Result<const MpiHandle*> own(const DispatchHandle& handle) const;

  void plan_sends(MpiHandle& h, std::vector<int>& counts_per_key) const;
  void local_layout(MpiHandle& h) const;
  Status exchange_counts(MpiHandle& h, const std::vector<int>& counts_per_key);
  void plan_receives(MpiHandle& h) const;
  Status move_payload(const MpiHandle& h, const DispatchInput& input, const DispatchOutput& output);
  void pack(const MpiHandle& h, const DispatchInput& input, std::vector<std::byte>& send) const;
  void unpack(const MpiHandle& h, const std::vector<std::byte>& recv, const DispatchOutput& output) const;
  void write_counts(const MpiHandle& h, const DispatchOutput& output) const;

  Status check_combine(const MpiHandle& h, const CombineInput& input, const CombineOutput& output) const;
  void reduce_ht(const MpiHandle& h, const CombineInput& input, const std::vector<bf16>& back,
                 std::span<bf16> out) const;
  void reduce_ll(const MpiHandle& h, const std::vector<bf16>& back, std::span<bf16> out) const;

  TransportConfig config_;
  Capabilities caps_;
  MPI_Comm comm_;
  int rank_;
  int size_;
  int local_experts_;
  std::size_t row_bytes_;
  int num_scales_;
  MPI_Datatype rank_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype slot_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype combine_type_ = MPI_DATATYPE_NULL;
};

MpiTransport::MpiTransport(const TransportConfig& config, MPI_Comm comm, int rank, int size)
    : config_(config),
      caps_(mpi_capabilities()),
      comm_(comm),
      rank_(rank),
      size_(size),
      local_experts_(config.num_experts / size),
      row_bytes_(dispatch::payload_row_bytes(config.dtype, config.hidden)),
      num_scales_(dispatch::payload_num_scales(config.dtype, config.hidden)) {
  config_.comm = comm;
  EPS_MPI_CHECK(
      MPI_Type_contiguous(static_cast<int>(record_bytes(Layout::kHtRankMajor)), MPI_BYTE, &rank_type_));
  EPS_MPI_CHECK(MPI_Type_commit(&rank_type_));
  EPS_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(record_bytes(Layout::kLl)), MPI_BYTE, &slot_type_));
  EPS_MPI_CHECK(MPI_Type_commit(&slot_type_));
  EPS_MPI_CHECK(MPI_Type_contiguous(2 * config.hidden, MPI_BYTE, &combine_type_));
  EPS_MPI_CHECK(MPI_Type_commit(&combine_type_));
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Type_free(&rank_type_);
  MPI_Type_free(&slot_type_);
  MPI_Type_free(&combine_type_);
  MPI_Comm_free(&comm_);
}

std::size_t MpiTransport::record_bytes(Layout layout) const {
  const std::size_t header =
      layout == Layout::kHtRankMajor ? rank_major_header_bytes(config_.top_k) : sizeof(SlotHeader);
  return header + row_bytes_ + 4 * static_cast<std::size_t>(num_scales_);
}

Status MpiTransport::check_input(const DispatchInput& in, bool need_routing) const {
  const int t_max = config_.max_tokens_per_rank;
  if (in.num_tokens < 0 || in.num_tokens > t_max) {
    return invalid_argument("num_tokens", "must be in [0, {}] (T_max, SPEC 5.4), got {}", t_max,
                            in.num_tokens);
  }
  const auto tokens = static_cast<std::size_t>(in.num_tokens);
  if (in.x.size() != tokens * row_bytes_) {
    return invalid_argument("x", "must hold {} bytes (T_r x row bytes), got {}", tokens * row_bytes_,
                            in.x.size());
  }
  if (in.x_scales.size() != tokens * static_cast<std::size_t>(num_scales_)) {
    return invalid_argument("x_scales", "must hold {} values, got {}", tokens * num_scales_,
                            in.x_scales.size());
  }
  if (!need_routing) return Status();
  const std::size_t slots = tokens * static_cast<std::size_t>(config_.top_k);
  if (in.topk_idx.size() != slots || in.topk_weights.size() != slots) {
    return invalid_argument("topk_idx",
                            "topk_idx and topk_weights must hold T_r x K = {} values, got {} and {}", slots,
                            in.topk_idx.size(), in.topk_weights.size());
  }
  for (std::size_t i = 0; i < slots; ++i) {
    if (in.topk_idx[i] < -1 || in.topk_idx[i] >= config_.num_experts) {
      return invalid_argument("topk_idx", "entry {} must be in [-1, {}], got {}", i, config_.num_experts - 1,
                              in.topk_idx[i]);
    }
  }
  return Status();
}

Status MpiTransport::check_output(Layout layout, const DispatchOutput& out) const {
  const auto rows = static_cast<std::size_t>(recv_capacity_rows(layout, config_, size_));
  const auto local = static_cast<std::size_t>(local_experts_);
  const auto k = static_cast<std::size_t>(config_.top_k);
  auto need = [](std::string_view field, std::size_t want, std::size_t got) -> Status {
    if (got < want) return invalid_argument(field, "must hold at least {} elements, got {}", want, got);
    return Status();
  };
  EPS_RETURN_IF_ERROR(need("recv_x", rows * row_bytes_, out.recv_x.size()));
  EPS_RETURN_IF_ERROR(need("recv_x_scales", rows * num_scales_, out.recv_x_scales.size()));
  switch (layout) {
    case Layout::kHtRankMajor:
      EPS_RETURN_IF_ERROR(need("recv_topk_idx", rows * k, out.recv_topk_idx.size()));
      EPS_RETURN_IF_ERROR(need("recv_topk_weights", rows * k, out.recv_topk_weights.size()));
      return need("num_recv_tokens_per_expert", local, out.num_recv_tokens_per_expert.size());
    case Layout::kHtExpertMajor:
      EPS_RETURN_IF_ERROR(need("recv_weights", rows, out.recv_weights.size()));
      return need("num_recv_tokens_per_expert", local, out.num_recv_tokens_per_expert.size());
    case Layout::kLl:
      EPS_RETURN_IF_ERROR(need("packed_recv_count", local, out.packed_recv_count.size()));
      EPS_RETURN_IF_ERROR(need("src_info", rows, out.src_info.size()));
      return need("layout_range", local * size_, out.layout_range.size());
  }
  return Status();
}

Result<const MpiHandle*> MpiTransport::own(const DispatchHandle& handle) const {
  const auto* h = dynamic_cast<const MpiHandle*>(&handle);
  if (h == nullptr || h->owner != this) {
    return invalid_argument("handle", "was not made by this mpi transport instance");
  }
  return h;
}

// Send order: rank-major records by (destination q, token t); slot records by (global expert e, token t),
// which is (q, local expert l, t) since e = q * L + l. counts_per_key is [R] or [R * L].
void MpiTransport::plan_sends(MpiHandle& h, std::vector<int>& counts_per_key) const {
  const int k_max = config_.top_k;
  const bool rank_major = h.kind == Layout::kHtRankMajor;
  std::vector<std::vector<std::pair<int, int>>> buckets(rank_major ? size_ : config_.num_experts);
  std::vector<int> marked(size_, -1);
  for (int t = 0; t < h.num_tokens; ++t) {
    for (int k = 0; k < k_max; ++k) {
      const int e = h.topk_idx[static_cast<std::size_t>(t) * k_max + k];
      if (e < 0) continue;
      const int q = e / local_experts_;
      if (!rank_major) {
        buckets[e].emplace_back(t, k);
      } else if (marked[q] != t) {
        marked[q] = t;
        buckets[q].emplace_back(t, -1);
      }
    }
  }
  counts_per_key.assign(buckets.size(), 0);
  h.send_token.clear();
  h.send_slot.clear();
  for (std::size_t key = 0; key < buckets.size(); ++key) {
    counts_per_key[key] = static_cast<int>(buckets[key].size());
    for (const auto& [t, k] : buckets[key]) {
      h.send_token.push_back(t);
      h.send_slot.push_back(k);
    }
  }
}

// SPEC 5.1 for this rank's tokens (the rank prefix matrix needs every rank: exchange_counts).
void MpiTransport::local_layout(MpiHandle& h) const {
  dispatch::DispatchLayout& l = h.layout_info;
  l.rank = rank_;
  l.num_tokens_per_rank.assign(size_, 0);
  l.num_tokens_per_expert.assign(config_.num_experts, 0);
  l.is_token_in_rank.assign(static_cast<std::size_t>(h.num_tokens) * size_, 0);
  for (int t = 0; t < h.num_tokens; ++t) {
    for (int k = 0; k < config_.top_k; ++k) {
      const int e = h.topk_idx[static_cast<std::size_t>(t) * config_.top_k + k];
      if (e < 0) continue;
      ++l.num_tokens_per_expert[e];
      std::uint8_t& in_rank = l.is_token_in_rank[static_cast<std::size_t>(t) * size_ + e / local_experts_];
      if (in_rank == 0) ++l.num_tokens_per_rank[e / local_experts_];
      in_rank = 1;
    }
  }
}

Status MpiTransport::exchange_counts(MpiHandle& h, const std::vector<int>& counts_per_key) {
  const int per_peer = static_cast<int>(counts_per_key.size()) / size_;
  h.per_expert_count.assign(counts_per_key.size(), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_RETURN_IF_ERROR(MPI_Ialltoall(counts_per_key.data(), per_peer, MPI_INT, h.per_expert_count.data(),
                                        per_peer, MPI_INT, comm_, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline(), [this] {
    return fmt::format("MPI_Ialltoall of dispatch counts over {} ranks (rank {})", size_, rank_);
  }));
  std::vector<int> all_per_rank(static_cast<std::size_t>(size_) * size_);
  EPS_MPI_RETURN_IF_ERROR(MPI_Iallgather(h.layout_info.num_tokens_per_rank.data(), size_, MPI_INT,
                                         all_per_rank.data(), size_, MPI_INT, comm_, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline(), [this] {
    return fmt::format("MPI_Iallgather of tokens per rank over {} ranks (rank {})", size_, rank_);
  }));
  // [i][j] = rows j receives from ranks 0..i (SPEC 5.1).
  std::vector<int>& prefix = h.layout_info.rank_prefix_matrix;
  prefix.assign(all_per_rank.size(), 0);
  for (int i = 0; i < size_; ++i) {
    for (int j = 0; j < size_; ++j) {
      const std::size_t at = static_cast<std::size_t>(i) * size_ + j;
      prefix[at] = all_per_rank[at] + (i > 0 ? prefix[at - size_] : 0);
    }
  }
  Exchange& x = h.exchange;
  x.send_counts.assign(size_, 0);
  x.recv_counts.assign(size_, 0);
  for (int q = 0; q < size_; ++q) {
    for (int l = 0; l < per_peer; ++l) {
      x.send_counts[q] += counts_per_key[static_cast<std::size_t>(q) * per_peer + l];
      x.recv_counts[q] += h.per_expert_count[static_cast<std::size_t>(q) * per_peer + l];
    }
  }
  x.set_displacements();
  return Status();
}

// Where each received record lands. Records from r arrive in (l, t) order (slot layouts) or t order.
void MpiTransport::plan_receives(MpiHandle& h) const {
  const Exchange& x = h.exchange;
  h.recv_row.assign(static_cast<std::size_t>(x.total_recv()), 0);
  if (h.kind == Layout::kHtRankMajor) {
    std::iota(h.recv_row.begin(), h.recv_row.end(), std::int64_t{0});
    h.num_rows = x.total_recv();
    return;
  }
  const int local = local_experts_;
  const auto count = [&](int r, int l) {
    return h.per_expert_count[static_cast<std::size_t>(r) * local + l];
  };
  const std::int64_t capacity = static_cast<std::int64_t>(size_) * config_.max_tokens_per_rank;
  std::int64_t segment = 0;
  h.num_rows = 0;
  std::vector<std::int64_t> next(static_cast<std::size_t>(size_) * local);  // first row of block (r, l)
  for (int l = 0; l < local; ++l) {
    std::int64_t row = h.kind == Layout::kLl ? l * capacity : segment;
    for (int r = 0; r < size_; ++r) {
      next[static_cast<std::size_t>(r) * local + l] = row;
      row += count(r, l);
    }
    const std::int64_t real = row - (h.kind == Layout::kLl ? l * capacity : segment);
    const int align = config_.expert_alignment;
    segment += (real + align - 1) / align * align;
    h.num_rows += h.kind == Layout::kLl ? real : (real + align - 1) / align * align;
  }
  std::size_t i = 0;
  for (int r = 0; r < size_; ++r) {
    for (int l = 0; l < local; ++l) {
      for (int n = 0; n < count(r, l); ++n)
        h.recv_row[i++] = next[static_cast<std::size_t>(r) * local + l] + n;
    }
  }
}

void MpiTransport::pack(const MpiHandle& h, const DispatchInput& in, std::vector<std::byte>& send) const {
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  const int k_max = config_.top_k;
  send.resize(h.send_token.size() * rec);
  for (std::size_t i = 0; i < h.send_token.size(); ++i) {
    std::byte* at = send.data() + i * rec;
    const int t = h.send_token[i];
    const std::size_t routing = static_cast<std::size_t>(t) * k_max;
    if (h.kind == Layout::kHtRankMajor) {
      put(at, static_cast<std::int32_t>(t));
      std::memcpy(at + 4, h.topk_idx.data() + routing, 4 * static_cast<std::size_t>(k_max));
      std::memcpy(at + 4 + 4 * k_max, h.topk_weights.data() + routing, 4 * static_cast<std::size_t>(k_max));
      at += rank_major_header_bytes(k_max);
    } else {
      const int k = h.send_slot[i];
      put(at, SlotHeader{t, k, h.topk_idx[routing + k], h.topk_weights[routing + k]});
      at += sizeof(SlotHeader);
    }
    std::memcpy(at, in.x.data() + static_cast<std::size_t>(t) * row_bytes_, row_bytes_);
    if (scale_bytes > 0)
      std::memcpy(at + row_bytes_, in.x_scales.data() + static_cast<std::size_t>(t) * num_scales_,
                  scale_bytes);
  }
}

void MpiTransport::unpack(const MpiHandle& h, const std::vector<std::byte>& recv,
                          const DispatchOutput& out) const {
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t scale_bytes = 4 * static_cast<std::size_t>(num_scales_);
  const int k_max = config_.top_k;
  for (std::size_t i = 0; i < h.recv_row.size(); ++i) {
    const std::byte* at = recv.data() + i * rec;
    const auto row = static_cast<std::size_t>(h.recv_row[i]);
    if (h.kind == Layout::kHtRankMajor) {
      for (int k = 0; k < k_max; ++k) {
        const auto e = get<std::int32_t>(at + 4 + 4 * k);
        const bool here = e >= 0 && e / local_experts_ == rank_;
        out.recv_topk_idx[row * k_max + k] = here ? e % local_experts_ : -1;
        out.recv_topk_weights[row * k_max + k] = here ? get<float>(at + 4 + 4 * (k_max + k)) : 0.0f;
      }
      at += rank_major_header_bytes(k_max);
    } else {
      const auto header = get<SlotHeader>(at);
      if (h.kind == Layout::kLl) {
        out.src_info[row] = header.token;
      } else {
        out.recv_weights[row] = header.weight;
      }
      at += sizeof(SlotHeader);
    }
    std::memcpy(out.recv_x.data() + row * row_bytes_, at, row_bytes_);
    if (scale_bytes > 0)
      std::memcpy(out.recv_x_scales.data() + row * num_scales_, at + row_bytes_, scale_bytes);
  }
}

// Per-expert counts, LL ranges and expert-major padding: functions of the counts alone.
void MpiTransport::write_counts(const MpiHandle& h, const DispatchOutput& out) const {
  const int local = local_experts_;
  const int align = config_.expert_alignment;
  if (h.kind == Layout::kHtRankMajor) {
    std::vector<int> counts(local, 0);
    for (std::size_t row = 0; row < static_cast<std::size_t>(h.num_rows); ++row) {
      for (int k = 0; k < config_.top_k; ++k) {
        const int l = out.recv_topk_idx[row * config_.top_k + k];
        if (l >= 0) ++counts[l];
      }
    }
    for (int l = 0; l < local; ++l)
      out.num_recv_tokens_per_expert[l] = (counts[l] + align - 1) / align * align;
    return;
  }
  std::int64_t segment = 0;
  for (int l = 0; l < local; ++l) {
    int real = 0;
    for (int r = 0; r < size_; ++r) {
      const int n = h.per_expert_count[static_cast<std::size_t>(r) * local + l];
      if (h.kind == Layout::kLl) out.layout_range[static_cast<std::size_t>(l) * size_ + r] = LlRange{real, n};
      real += n;
    }
    if (h.kind == Layout::kLl) {
      out.packed_recv_count[l] = real;
      continue;
    }
    const int aligned = (real + align - 1) / align * align;
    out.num_recv_tokens_per_expert[l] = aligned;
    for (std::int64_t row = segment + real; row < segment + aligned; ++row) {  // zero padding (SPEC 5.3)
      const auto r = static_cast<std::size_t>(row);
      std::memset(out.recv_x.data() + r * row_bytes_, 0, row_bytes_);
      std::fill_n(out.recv_x_scales.begin() + static_cast<std::ptrdiff_t>(r * num_scales_), num_scales_,
                  0.0f);
      out.recv_weights[r] = 0.0f;
    }
    segment += aligned;
  }
}

Status MpiTransport::move_payload(const MpiHandle& h, const DispatchInput& in, const DispatchOutput& out) {
  std::vector<std::byte> send;
  pack(h, in, send);
  std::vector<std::byte> recv(static_cast<std::size_t>(h.exchange.total_recv()) * record_bytes(h.kind));
  const Exchange& x = h.exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.send_counts, x.send_displs, record_type(h.kind),
                                     recv.data(), x.recv_counts, x.recv_displs, record_type(h.kind), comm_,
                                     deadline()));
  unpack(h, recv, out);
  write_counts(h, out);
  return Status();
}

Result<std::unique_ptr<DispatchHandle>> MpiTransport::dispatch(Layout layout, const DispatchInput& in,
                                                               const DispatchOutput& out) {
  EPS_RETURN_IF_ERROR(check_input(in, true));
  EPS_RETURN_IF_ERROR(check_output(layout, out));
  auto h = std::make_unique<MpiHandle>();
  h->kind = layout;
  h->owner = this;
  h->num_tokens = in.num_tokens;
  h->topk_idx.assign(in.topk_idx.begin(), in.topk_idx.end());
  h->topk_weights.assign(in.topk_weights.begin(), in.topk_weights.end());
  std::vector<int> counts_per_key;
  plan_sends(*h, counts_per_key);
  local_layout(*h);
  EPS_RETURN_IF_ERROR(exchange_counts(*h, counts_per_key));
  plan_receives(*h);
  EPS_RETURN_IF_ERROR(move_payload(*h, in, out));
  return std::unique_ptr<DispatchHandle>(std::move(h));
}

Status MpiTransport::dispatch_cached(const DispatchHandle& handle, const DispatchInput& in,
                                     const DispatchOutput& out) {
  EPS_ASSIGN_OR_RETURN(const MpiHandle* h, own(handle));
  if (in.num_tokens != h->num_tokens) {
    return invalid_argument("num_tokens", "a cached dispatch must pass the handle's {} tokens, got {}",
                            h->num_tokens, in.num_tokens);
  }
  EPS_RETURN_IF_ERROR(check_input(in, false));
  EPS_RETURN_IF_ERROR(check_output(h->kind, out));
  return move_payload(*h, in, out);
}

Status MpiTransport::check_combine(const MpiHandle& h, const CombineInput& in,
                                   const CombineOutput& out) const {
  const bool ht_tree = in.tree != CombineTree::kLlWeighted;
  if (ht_tree != (h.kind == Layout::kHtRankMajor)) {
    return invalid_argument("tree", "{} cannot combine a {} dispatch", tree_name(in.tree),
                            layout_name(h.kind));
  }
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  const auto tokens = static_cast<std::size_t>(h.num_tokens);
  const std::size_t rows = h.kind == Layout::kLl
                               ? static_cast<std::size_t>(recv_capacity_rows(Layout::kLl, config_, size_))
                               : static_cast<std::size_t>(h.num_rows);
  if (in.x.size() < rows * hidden) {
    return invalid_argument("x", "must hold at least {} bf16 values (rows x H), got {}", rows * hidden,
                            in.x.size());
  }
  for (auto [field, bias] : {std::pair{"bias0", in.bias0}, std::pair{"bias1", in.bias1}}) {
    if (!bias.empty() && (!ht_tree || bias.size() != tokens * hidden)) {
      return invalid_argument(field, "must be empty or hold T_r x H = {} values on an ht tree, got {}",
                              tokens * hidden, bias.size());
    }
  }
  if (out.out.size() != tokens * hidden) {
    return invalid_argument("out", "must hold T_r x H = {} values, got {}", tokens * hidden, out.out.size());
  }
  const std::size_t slots = tokens * static_cast<std::size_t>(config_.top_k);
  if (!out.combined_weights.empty() && out.combined_weights.size() != slots) {
    return invalid_argument("combined_weights", "must be empty or hold T_r x K = {} values, got {}", slots,
                            out.combined_weights.size());
  }
  return Status();
}

// SPEC 5.5 ht-rank / ht-two-level: records from q arrive in ascending q, so adding them in arrival order
// is the prescribed order per token.
void MpiTransport::reduce_ht(const MpiHandle& h, const CombineInput& in, const std::vector<bf16>& back,
                             std::span<bf16> out) const {
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  std::vector<float> acc(static_cast<std::size_t>(h.num_tokens) * hidden);
  for (std::size_t i = 0; i < acc.size(); ++i) {
    const float b0 = in.bias0.empty() ? 0.0f : in.bias0[i].to_float();
    const float b1 = in.bias1.empty() ? 0.0f : in.bias1[i].to_float();
    acc[i] = b0 + b1;
  }
  const bool two_level = in.tree == CombineTree::kHtTwoLevel;
  const int per_node = two_level ? config_.ranks_per_node : 1;
  std::vector<float> node_acc(two_level ? acc.size() : 0, 0.0f);
  std::vector<std::uint8_t> touched(two_level ? static_cast<std::size_t>(h.num_tokens) : 0, 0);
  const Exchange& x = h.exchange;
  for (int node_begin = 0; node_begin < size_; node_begin += per_node) {
    for (int q = node_begin; q < node_begin + per_node; ++q) {
      for (int i = x.send_displs[q]; i < x.send_displs[q] + x.send_counts[q]; ++i) {
        const auto t = static_cast<std::size_t>(h.send_token[i]);
        const bf16* row = back.data() + static_cast<std::size_t>(i) * hidden;
        float* dst = two_level ? node_acc.data() + t * hidden : acc.data() + t * hidden;
        for (std::size_t c = 0; c < hidden; ++c) dst[c] = dst[c] + row[c].to_float();
        if (two_level) touched[t] = 1;
      }
    }
    if (!two_level) continue;
    for (std::size_t t = 0; t < touched.size(); ++t) {
      if (touched[t] == 0) continue;
      for (std::size_t c = 0; c < hidden; ++c) {
        acc[t * hidden + c] = acc[t * hidden + c] + round_to_bf16(node_acc[t * hidden + c]);
        node_acc[t * hidden + c] = 0.0f;
      }
      touched[t] = 0;
    }
  }
  for (std::size_t i = 0; i < acc.size(); ++i) out[i] = bf16::from_float(acc[i]);
}

// SPEC 5.5 ll-weighted: per token, valid slots in ascending k.
void MpiTransport::reduce_ll(const MpiHandle& h, const std::vector<bf16>& back, std::span<bf16> out) const {
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  const int k_max = config_.top_k;
  std::vector<const bf16*> slot_rows(static_cast<std::size_t>(h.num_tokens) * k_max, nullptr);
  for (std::size_t i = 0; i < h.send_token.size(); ++i) {
    slot_rows[static_cast<std::size_t>(h.send_token[i]) * k_max + h.send_slot[i]] = back.data() + i * hidden;
  }
  std::vector<float> acc(hidden);
  for (std::size_t t = 0; t < static_cast<std::size_t>(h.num_tokens); ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int k = 0; k < k_max; ++k) {
      const bf16* y = slot_rows[t * k_max + k];
      if (y == nullptr) continue;
      const float w = h.topk_weights[t * k_max + k];
      for (std::size_t c = 0; c < hidden; ++c) acc[c] = acc[c] + w * y[c].to_float();
    }
    for (std::size_t c = 0; c < hidden; ++c) out[t * hidden + c] = bf16::from_float(acc[c]);
  }
}

Status MpiTransport::combine(const DispatchHandle& handle, const CombineInput& in, const CombineOutput& out) {
  EPS_ASSIGN_OR_RETURN(const MpiHandle* h, own(handle));
  EPS_RETURN_IF_ERROR(check_combine(*h, in, out));
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  // Each received row goes back to its source, in the order it arrived (the reverse exchange).
  std::vector<bf16> send(h->recv_row.size() * hidden);
  for (std::size_t i = 0; i < h->recv_row.size(); ++i) {
    std::copy_n(in.x.begin() + static_cast<std::ptrdiff_t>(h->recv_row[i] * hidden), hidden,
                send.begin() + static_cast<std::ptrdiff_t>(i * hidden));
  }
  std::vector<bf16> back(h->send_token.size() * hidden);
  const Exchange& x = h->exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.recv_counts, x.recv_displs, combine_type_, back.data(),
                                     x.send_counts, x.send_displs, combine_type_, comm_, deadline()));
  if (in.tree == CombineTree::kLlWeighted) {
    reduce_ll(*h, back, out.out);
  } else {
    reduce_ht(*h, in, back, out.out);
  }
  for (std::size_t i = 0; i < out.combined_weights.size(); ++i) {
    out.combined_weights[i] = h->topk_idx[i] >= 0 ? h->topk_weights[i] : 0.0f;
  }
  return Status();
}

}  // namespace

Capabilities mpi_capabilities() {
  Capabilities c;
  c.layouts = {Layout::kHtRankMajor, Layout::kHtExpertMajor, Layout::kLl};
  c.combine_trees = {CombineTree::kHtRank, CombineTree::kHtTwoLevel, CombineTree::kLlWeighted};
  c.dtypes = {PayloadType::kBf16, PayloadType::kFp8};
  c.memory = {MemoryKind::kHost};
  c.ll_ordered = true;
  c.cached_dispatch = true;
  c.max_ranks = dispatch::kMaxRanks;
  c.max_experts = dispatch::kMaxExperts;
  c.max_top_k = dispatch::kMaxTopK;
  c.max_hidden = 1 << 16;  // a record (header + 2H bytes) must stay far below INT_MAX for MPI counts
  c.max_tokens_per_rank = 1 << 16;
  return c;
}

Result<std::unique_ptr<Transport>> make_mpi_transport(const TransportConfig& config) {
  int size = 0;
  int rank = 0;
  EPS_MPI_RETURN_IF_ERROR(MPI_Comm_size(config.comm, &size));
  EPS_MPI_RETURN_IF_ERROR(MPI_Comm_rank(config.comm, &rank));
  EPS_RETURN_IF_ERROR(validate_config(config, size, mpi_capabilities()));
  // Rows exchanged in one alltoallv are counted in int: R * T_max * min(K, L) must fit.
  const std::int64_t max_records = recv_capacity_rows(Layout::kHtExpertMajor, config, size) +
                                   recv_capacity_rows(Layout::kLl, config, size);
  if (max_records > std::numeric_limits<int>::max()) {
    return invalid_argument("max_tokens_per_rank", "R x T_max x K = {} rows exceed the MPI count range",
                            max_records);
  }
  // A private communicator, so that a transport's collectives never match the caller's.
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_RETURN_IF_ERROR(MPI_Comm_idup(config.comm, &comm, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, Deadline(config.timeout_seconds), [size, rank] {
    return fmt::format("MPI_Comm_idup over {} ranks (rank {})", size, rank);
  }));
  return std::unique_ptr<Transport>(std::make_unique<MpiTransport>(config, comm, rank, size));
}

}  // namespace eps::transport
