#include "impls/transport/mpi/mpi_transport.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/transport_common.hpp"

namespace eps::transport {
namespace {

// Record headers. Rank-major rows carry the whole routing of the token (the receiver derives its local
// indices and the weights); expert-major and LL rows carry one slot (16 bytes, the size of DeepEP's LL
// message header that docs/dispatch.md 5.6 counts).
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

// RoutedHandle plus what the alltoallv exchange needs.
class MpiHandle final : public RoutedHandle {
 public:
  Exchange exchange;
  std::vector<std::int64_t> recv_row;  // per received record: its row in recv_x / packed_recv_x
  std::vector<int> per_expert_count;   // [R, L] records received from r for local expert l
};

class MpiTransport final : public RoutedTransport {
 public:
  MpiTransport(const TransportConfig& config, MPI_Comm comm, int rank, int size);
  ~MpiTransport() override;
  // The record datatypes of every exchange.
  Status commit_types();

  std::string_view name() const override { return "mpi"; }

 private:
  std::unique_ptr<RoutedHandle> make_handle() const override { return std::make_unique<MpiHandle>(); }
  Status run_dispatch(RoutedHandle& handle, const DispatchInput& input,
                      const DispatchOutput& output) override;
  Status run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& input,
                             const DispatchOutput& output) override;
  Status run_combine(const RoutedHandle& handle, const CombineInput& input,
                     const CombineOutput& output) override;

  Deadline deadline() const { return Deadline(config_.timeout_seconds); }
  std::size_t record_bytes(Layout layout) const;
  MPI_Datatype record_type(Layout layout) const {
    return layout == Layout::kHtRankMajor ? rank_type_ : slot_type_;
  }

  Status exchange_counts(MpiHandle& h);
  void plan_receives(MpiHandle& h) const;
  Status move_payload(const MpiHandle& h, const DispatchInput& input, const DispatchOutput& output);
  Status pack(const MpiHandle& h, const DispatchInput& input, std::vector<std::byte>& send) const;
  Status unpack(const MpiHandle& h, const std::vector<std::byte>& recv, const DispatchOutput& output) const;
  void write_counts(const MpiHandle& h, const DispatchOutput& output) const;

  MPI_Comm comm_;
  int local_experts_;
  std::size_t row_bytes_;
  int num_scales_;
  MPI_Datatype rank_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype slot_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype combine_type_ = MPI_DATATYPE_NULL;
  // Adds the elements of `counts` to and from other ranks, `bytes` each, to wire_.
  void count_wire(std::span<const int> send_counts, std::span<const int> recv_counts, std::size_t bytes);
};

MpiTransport::MpiTransport(const TransportConfig& config, MPI_Comm comm, int rank, int size)
    : RoutedTransport(config, mpi_capabilities(), rank, size),
      comm_(comm),
      local_experts_(config.num_experts / size),
      row_bytes_(dispatch::payload_row_bytes(config.dtype, config.hidden)),
      num_scales_(dispatch::payload_num_scales(config.dtype, config.hidden)) {
  config_.comm = comm;
}

Status MpiTransport::commit_types() {
  const std::pair<MPI_Datatype*, std::size_t> types[] = {{&rank_type_, record_bytes(Layout::kHtRankMajor)},
                                                         {&slot_type_, record_bytes(Layout::kLl)},
                                                         {&combine_type_, 2 * std::size_t(config_.hidden)}};
  for (const auto& [type, bytes] : types) {
    EPS_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, type));
    EPS_MPI_CHECK(MPI_Type_commit(type));
  }
  return Status();
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Datatype* type : {&rank_type_, &slot_type_, &combine_type_}) {
    if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
  }
  MPI_Comm_free(&comm_);
}

void MpiTransport::count_wire(std::span<const int> send_counts, std::span<const int> recv_counts,
                              std::size_t bytes) {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    wire_.sent += send_counts[static_cast<std::size_t>(q)] * static_cast<std::int64_t>(bytes);
    wire_.received += recv_counts[static_cast<std::size_t>(q)] * static_cast<std::int64_t>(bytes);
  }
}

std::size_t MpiTransport::record_bytes(Layout layout) const {
  const std::size_t header =
      layout == Layout::kHtRankMajor ? rank_major_header_bytes(config_.top_k) : sizeof(SlotHeader);
  return header + row_bytes_ + 4 * static_cast<std::size_t>(num_scales_);
}

// Record counts per key (destination, or global expert) come from the send plan (start_dispatch).
Status MpiTransport::exchange_counts(MpiHandle& h) {
  std::vector<int> counts_per_key(h.key_begin.size() - 1);
  for (std::size_t key = 0; key < counts_per_key.size(); ++key)
    counts_per_key[key] = h.key_begin[key + 1] - h.key_begin[key];
  const int per_peer = static_cast<int>(counts_per_key.size()) / size_;
  h.per_expert_count.assign(counts_per_key.size(), 0);
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Ialltoall(counts_per_key.data(), per_peer, MPI_INT, h.per_expert_count.data(), per_peer,
                              MPI_INT, comm_, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline(), [this] {
    return fmt::format("MPI_Ialltoall of dispatch counts over {} ranks (rank {})", size_, rank_);
  }));
  std::vector<int> all_per_rank(static_cast<std::size_t>(size_) * size_);
  EPS_MPI_CHECK(MPI_Iallgather(h.layout_info.num_tokens_per_rank.data(), size_, MPI_INT, all_per_rank.data(),
                               size_, MPI_INT, comm_, &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline(), [this] {
    return fmt::format("MPI_Iallgather of tokens per rank over {} ranks (rank {})", size_, rank_);
  }));
  h.layout_info.rank_prefix_matrix = rank_prefix_matrix(size_, all_per_rank);
  // The two count exchanges: per_peer ints to and from every other rank, then R ints gathered from each.
  const std::vector<int> per_peer_ints(static_cast<std::size_t>(size_), per_peer);
  count_wire(per_peer_ints, per_peer_ints, sizeof(int));
  const std::vector<int> row_ints(static_cast<std::size_t>(size_), size_);
  count_wire(row_ints, row_ints, sizeof(int));
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

// Headers on the host, payload rows and scales by the row-copy kernel (transport_common.hpp).
Status MpiTransport::pack(const MpiHandle& h, const DispatchInput& in, std::vector<std::byte>& send) const {
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t header = record_bytes(h.kind) - row_bytes_ - 4 * static_cast<std::size_t>(num_scales_);
  const int k_max = config_.top_k;
  send.resize(h.send_token.size() * rec);
  if (send.empty()) return Status();
  for (std::size_t i = 0; i < h.send_token.size(); ++i) {
    std::byte* at = send.data() + i * rec;
    const int t = h.send_token[i];
    const std::size_t routing = static_cast<std::size_t>(t) * k_max;
    if (h.kind == Layout::kHtRankMajor) {
      put(at, static_cast<std::int32_t>(t));
      std::memcpy(at + 4, h.topk_idx.data() + routing, 4 * static_cast<std::size_t>(k_max));
      std::memcpy(at + 4 + 4 * k_max, h.topk_weights.data() + routing, 4 * static_cast<std::size_t>(k_max));
    } else {
      const int k = h.send_slot[i];
      put(at, SlotHeader{t, k, h.topk_idx[routing + k], h.topk_weights[routing + k]});
    }
  }
  const auto records = static_cast<std::int64_t>(h.send_token.size());
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), send.data() + header, rec, in.x.data(), row_bytes_, row_bytes_,
                                records, h.send_rows));
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), send.data() + header + row_bytes_, rec,
                                reinterpret_cast<const std::byte*>(in.x_scales.data()), 4 * num_scales_,
                                4 * num_scales_, records, h.send_rows));
  return kernels().synchronize();
}

Status MpiTransport::unpack(const MpiHandle& h, const std::vector<std::byte>& recv,
                            const DispatchOutput& out) const {
  const std::size_t rec = record_bytes(h.kind);
  const std::size_t header = rec - row_bytes_ - 4 * static_cast<std::size_t>(num_scales_);
  const int k_max = config_.top_k;
  if (h.recv_row.empty()) return Status();
  for (std::size_t i = 0; i < h.recv_row.size(); ++i) {
    const std::byte* at = recv.data() + i * rec;
    const auto row = static_cast<std::size_t>(h.recv_row[i]);
    if (h.kind == Layout::kHtRankMajor) {
      std::int32_t idx[dispatch::kMaxTopK];
      float weights[dispatch::kMaxTopK];
      std::memcpy(idx, at + 4, 4 * static_cast<std::size_t>(k_max));
      std::memcpy(weights, at + 4 + 4 * k_max, 4 * static_cast<std::size_t>(k_max));
      localize_routing(config_, size_, rank_, idx, weights, out.recv_topk_idx.data() + row * k_max,
                       out.recv_topk_weights.data() + row * k_max);
    } else {
      const auto slot = get<SlotHeader>(at);
      if (h.kind == Layout::kLl) {
        out.src_info[row] = slot.token;
      } else {
        out.recv_weights[row] = slot.weight;
      }
    }
  }
  const auto records = static_cast<std::int64_t>(h.recv_row.size());
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), out.recv_x.data(), row_bytes_, recv.data() + header, rec,
                                row_bytes_, records, {}, h.recv_row));
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), reinterpret_cast<std::byte*>(out.recv_x_scales.data()),
                                4 * num_scales_, recv.data() + header + row_bytes_, rec, 4 * num_scales_,
                                records, {}, h.recv_row));
  return kernels().synchronize();
}

// Per-expert counts, LL ranges and expert-major padding: functions of the counts alone.
void MpiTransport::write_counts(const MpiHandle& h, const DispatchOutput& out) const {
  const int local = local_experts_;
  const int align = config_.expert_alignment;
  if (h.kind == Layout::kHtRankMajor) {
    count_rank_major(config_, size_, h.num_rows, out);
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
    for (std::int64_t row = segment + real; row < segment + aligned;
         ++row) {  // zero padding (docs/dispatch.md 5.3)
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
  EPS_RETURN_IF_ERROR(pack(h, in, send));
  std::vector<std::byte> recv(static_cast<std::size_t>(h.exchange.total_recv()) * record_bytes(h.kind));
  const Exchange& x = h.exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.send_counts, x.send_displs, record_type(h.kind),
                                     recv.data(), x.recv_counts, x.recv_displs, record_type(h.kind), comm_,
                                     deadline()));
  count_wire(x.send_counts, x.recv_counts, record_bytes(h.kind));
  EPS_RETURN_IF_ERROR(unpack(h, recv, out));
  write_counts(h, out);
  return Status();
}

Status MpiTransport::run_dispatch(RoutedHandle& handle, const DispatchInput& in, const DispatchOutput& out) {
  auto& h = static_cast<MpiHandle&>(handle);
  EPS_RETURN_IF_ERROR(exchange_counts(h));
  plan_receives(h);
  return move_payload(h, in, out);
}

Status MpiTransport::run_cached_dispatch(const RoutedHandle& handle, const DispatchInput& in,
                                         const DispatchOutput& out) {
  return move_payload(static_cast<const MpiHandle&>(handle), in, out);
}

Status MpiTransport::run_combine(const RoutedHandle& handle, const CombineInput& in,
                                 const CombineOutput& out) {
  const auto* h = &static_cast<const MpiHandle&>(handle);
  const auto hidden = static_cast<std::size_t>(config_.hidden);
  // Each received row goes back to its source, in the order it arrived (the reverse exchange).
  std::vector<bf16> send(h->recv_row.size() * hidden);
  EPS_RETURN_IF_ERROR(copy_rows(kernels(), reinterpret_cast<std::byte*>(send.data()), 2 * hidden,
                                reinterpret_cast<const std::byte*>(in.x.data()), 2 * hidden, 2 * hidden,
                                static_cast<std::int64_t>(h->recv_row.size()), h->recv_row));
  EPS_RETURN_IF_ERROR(kernels().synchronize());
  std::vector<bf16> back(h->send_token.size() * hidden);
  const Exchange& x = h->exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.recv_counts, x.recv_displs, combine_type_, back.data(),
                                     x.send_counts, x.send_displs, combine_type_, comm_, deadline()));
  count_wire(x.recv_counts, x.send_counts, 2 * static_cast<std::size_t>(config_.hidden));
  // Record i came back as row i of `back`.
  if (in.tree == CombineTree::kLlWeighted) {
    const int k_max = config_.top_k;
    std::vector<std::int64_t> slot_rows(static_cast<std::size_t>(h->num_tokens) * k_max, -1);
    for (std::size_t i = 0; i < h->send_token.size(); ++i)
      slot_rows[static_cast<std::size_t>(h->send_token[i]) * k_max + h->send_slot[i]] =
          static_cast<std::int64_t>(i);
    return reduce_ll(kernels(), config_, h->num_tokens, h->topk_weights, back.data(), slot_rows, out.out);
  }
  std::vector<int> peer_begin(x.send_displs);
  peer_begin.push_back(x.total_send());
  std::vector<std::int64_t> record_rows(h->send_token.size());
  std::iota(record_rows.begin(), record_rows.end(), std::int64_t{0});
  return reduce_ht(kernels(), config_, size_, h->num_tokens, in.tree, peer_begin, h->send_token, back.data(),
                   record_rows, in.bias0, in.bias1, out.out);
}

}  // namespace

Capabilities mpi_capabilities() {
  Capabilities c;
  c.layouts = {Layout::kHtRankMajor, Layout::kHtExpertMajor, Layout::kLl};
  c.combine_trees = {CombineTree::kHtRank, CombineTree::kHtTwoLevel, CombineTree::kLlWeighted};
  c.dtypes = {PayloadType::kBf16, PayloadType::kFp8};
  c.memory = {MemoryKind::kHost, MemoryKind::kDevice};
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
  EPS_MPI_CHECK(MPI_Comm_size(config.comm, &size));
  EPS_MPI_CHECK(MPI_Comm_rank(config.comm, &rank));
  EPS_RETURN_IF_ERROR(validate_config(config, size, mpi_capabilities()));
  // Rows exchanged in one alltoallv are counted in int: R * T_max * min(K, L) must fit.
  const std::int64_t max_records = recv_capacity_rows(Layout::kHtExpertMajor, config, size) +
                                   recv_capacity_rows(Layout::kLl, config, size);
  if (max_records > std::numeric_limits<int>::max()) {
    return invalid_argument("max_tokens_per_rank", "R x T_max x K = {} rows exceed the MPI count range",
                            max_records);
  }
  // A private communicator, so that a transport's collectives never match the caller's.
  EPS_ASSIGN_OR_RETURN(MPI_Comm comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto transport = std::make_unique<MpiTransport>(config, comm, rank, size);
  EPS_RETURN_IF_ERROR(transport->commit_types());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace eps::transport
