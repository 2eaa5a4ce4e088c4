#include "impls/transport/mpi/mpi_transport.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/data_path/data_path.hpp"
#include "impls/transport/frame/frame.hpp"

namespace eps::transport {
namespace {

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

// Records are those of data_path/records.hpp, unpadded: rank-major rows carry the whole routing of the token
// (the receiver derives its local indices and the weights); expert-major and LL rows carry one slot.
class MpiProtocol final : public Protocol {
 public:
  MpiProtocol(const TransportConfig& config, DataPath& data_path, int rank, int size);
  ~MpiProtocol() override;
  // The record datatypes of every exchange.
  Status commit_types();

  std::string_view name() const override { return "mpi"; }
  WireBytes wire_bytes() const override { return wire_; }
  std::unique_ptr<RoutedHandle> make_handle() const override { return std::make_unique<MpiHandle>(); }
  Status dispatch(RoutedHandle& handle, const DispatchInput& input, const DispatchOutput& output) override;
  Status dispatch_cached(const RoutedHandle& handle, const DispatchInput& input,
                         const DispatchOutput& output) override;
  Status combine(const RoutedHandle& handle, const CombineInput& input, const CombineOutput& output) override;

 private:
  Deadline deadline() const { return Deadline(config_.timeout_seconds); }
  const RecordFormat& format(Layout layout) const {
    return layout == Layout::kHtRankMajor ? rank_format_
           : layout == Layout::kLl        ? ll_format_
                                          : expert_format_;
  }
  MPI_Datatype record_type(Layout layout) const {
    return layout == Layout::kHtRankMajor ? rank_type_ : slot_type_;
  }

  Status exchange_counts(MpiHandle& h);
  void plan_receives(MpiHandle& h) const;
  Status move_payload(const MpiHandle& h, const DispatchInput& input, const DispatchOutput& output);
  Status write_counts(const MpiHandle& h, const DispatchOutput& output);
  // Adds the elements of `counts` to and from other ranks, `bytes` each, to wire_.
  void count_wire(std::span<const int> send_counts, std::span<const int> recv_counts, std::size_t bytes);

  TransportConfig config_;
  DataPath& data_path_;
  int rank_;
  int size_;
  MPI_Comm comm_;
  int local_experts_;
  RecordFormat rank_format_, expert_format_, ll_format_;
  MPI_Datatype rank_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype slot_type_ = MPI_DATATYPE_NULL;
  MPI_Datatype combine_type_ = MPI_DATATYPE_NULL;
  WireBytes wire_;
};

MpiProtocol::MpiProtocol(const TransportConfig& config, DataPath& data_path, int rank, int size)
    : config_(config),
      data_path_(data_path),
      rank_(rank),
      size_(size),
      comm_(config.comm),
      local_experts_(config.num_experts / size),
      rank_format_(record_format(Layout::kHtRankMajor, config, 1)),
      expert_format_(record_format(Layout::kHtExpertMajor, config, 1)),
      ll_format_(record_format(Layout::kLl, config, 1)) {}

Status MpiProtocol::commit_types() {
  const std::pair<MPI_Datatype*, std::size_t> types[] = {{&rank_type_, rank_format_.stride},
                                                         {&slot_type_, ll_format_.stride},
                                                         {&combine_type_, 2 * std::size_t(config_.hidden)}};
  for (const auto& [type, bytes] : types) {
    EPS_MPI_CHECK(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, type));
    EPS_MPI_CHECK(MPI_Type_commit(type));
  }
  return Status();
}

MpiProtocol::~MpiProtocol() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (MPI_Datatype* type : {&rank_type_, &slot_type_, &combine_type_}) {
    if (*type != MPI_DATATYPE_NULL) MPI_Type_free(type);
  }
  MPI_Comm_free(&comm_);
}

void MpiProtocol::count_wire(std::span<const int> send_counts, std::span<const int> recv_counts,
                             std::size_t bytes) {
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    wire_.sent += send_counts[static_cast<std::size_t>(q)] * static_cast<std::int64_t>(bytes);
    wire_.received += recv_counts[static_cast<std::size_t>(q)] * static_cast<std::int64_t>(bytes);
  }
}

// Record counts per key (destination, or global expert) come from the send plan (routing.hpp).
Status MpiProtocol::exchange_counts(MpiHandle& h) {
  const std::vector<int>& key_begin = h.sends.key_begin;
  std::vector<int> counts_per_key(key_begin.size() - 1);
  for (std::size_t key = 0; key < counts_per_key.size(); ++key)
    counts_per_key[key] = key_begin[key + 1] - key_begin[key];
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
void MpiProtocol::plan_receives(MpiHandle& h) const {
  const Exchange& x = h.exchange;
  const Layout kind = h.sends.layout;
  h.recv_row.assign(static_cast<std::size_t>(x.total_recv()), 0);
  if (kind == Layout::kHtRankMajor) {
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
    std::int64_t row = kind == Layout::kLl ? l * capacity : segment;
    for (int r = 0; r < size_; ++r) {
      next[static_cast<std::size_t>(r) * local + l] = row;
      row += count(r, l);
    }
    const std::int64_t real = row - (kind == Layout::kLl ? l * capacity : segment);
    const int align = config_.expert_alignment;
    segment += (real + align - 1) / align * align;
    h.num_rows += kind == Layout::kLl ? real : (real + align - 1) / align * align;
  }
  std::size_t i = 0;
  for (int r = 0; r < size_; ++r) {
    for (int l = 0; l < local; ++l) {
      for (int n = 0; n < count(r, l); ++n)
        h.recv_row[i++] = next[static_cast<std::size_t>(r) * local + l] + n;
    }
  }
}

// Per-expert counts, LL ranges and expert-major padding: functions of the counts alone.
Status MpiProtocol::write_counts(const MpiHandle& h, const DispatchOutput& out) {
  const int local = local_experts_;
  const int align = config_.expert_alignment;
  const Layout kind = h.sends.layout;
  if (kind == Layout::kHtRankMajor) {
    count_rank_major(config_, size_, h.num_rows, out);
    return Status();
  }
  std::int64_t segment = 0;
  for (int l = 0; l < local; ++l) {
    int real = 0;
    for (int r = 0; r < size_; ++r) {
      const int n = h.per_expert_count[static_cast<std::size_t>(r) * local + l];
      if (kind == Layout::kLl) out.layout_range[static_cast<std::size_t>(l) * size_ + r] = LlRange{real, n};
      real += n;
    }
    if (kind == Layout::kLl) {
      out.packed_recv_count[l] = real;
      continue;
    }
    const int aligned = (real + align - 1) / align * align;
    out.num_recv_tokens_per_expert[l] = aligned;
    EPS_RETURN_IF_ERROR(data_path_.zero_rows(out, segment + real, aligned - real));  // docs/dispatch.md 5.3
    segment += aligned;
  }
  return Status();
}

// Packs every record, exchanges them in one alltoallv, unpacks each to its row (plan_receives).
Status MpiProtocol::move_payload(const MpiHandle& h, const DispatchInput& in, const DispatchOutput& out) {
  const Layout kind = h.sends.layout;
  const RecordFormat& f = format(kind);
  std::vector<std::byte> send(static_cast<std::size_t>(h.sends.records()) * f.stride);
  EPS_RETURN_IF_ERROR(data_path_.pack_records(f, h.sends, in, 0, h.sends.records(), send.data()));
  EPS_RETURN_IF_ERROR(data_path_.finish());
  std::vector<std::byte> recv(static_cast<std::size_t>(h.exchange.total_recv()) * f.stride);
  const Exchange& x = h.exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.send_counts, x.send_displs, record_type(kind),
                                     recv.data(), x.recv_counts, x.recv_displs, record_type(kind), comm_,
                                     deadline()));
  count_wire(x.send_counts, x.recv_counts, f.stride);
  EPS_RETURN_IF_ERROR(data_path_.unpack_records(f, recv.data(), static_cast<std::int64_t>(h.recv_row.size()),
                                                RowTarget{0, h.recv_row}, out));
  EPS_RETURN_IF_ERROR(data_path_.finish());
  return write_counts(h, out);
}

Status MpiProtocol::dispatch(RoutedHandle& handle, const DispatchInput& in, const DispatchOutput& out) {
  auto& h = static_cast<MpiHandle&>(handle);
  EPS_RETURN_IF_ERROR(exchange_counts(h));
  plan_receives(h);
  return move_payload(h, in, out);
}

Status MpiProtocol::dispatch_cached(const RoutedHandle& handle, const DispatchInput& in,
                                    const DispatchOutput& out) {
  return move_payload(static_cast<const MpiHandle&>(handle), in, out);
}

Status MpiProtocol::combine(const RoutedHandle& handle, const CombineInput& in, const CombineOutput& out) {
  const auto& h = static_cast<const MpiHandle&>(handle);
  const auto row = 2 * static_cast<std::size_t>(config_.hidden);
  // Each received row goes back to its source, in the order it arrived (the reverse exchange).
  std::vector<std::byte> send(h.recv_row.size() * row);
  EPS_RETURN_IF_ERROR(data_path_.copy_rows(send.data(), row, reinterpret_cast<const std::byte*>(in.x.data()),
                                           row, row, static_cast<std::int64_t>(h.recv_row.size()),
                                           h.recv_row));
  EPS_RETURN_IF_ERROR(data_path_.finish());
  std::vector<bf16> back(static_cast<std::size_t>(h.sends.records()) * config_.hidden);
  const Exchange& x = h.exchange;
  EPS_RETURN_IF_ERROR(mpi::alltoallv(send.data(), x.recv_counts, x.recv_displs, combine_type_, back.data(),
                                     x.send_counts, x.send_displs, combine_type_, comm_, deadline()));
  count_wire(x.recv_counts, x.send_counts, row);
  // Record i came back as row i of `back`.
  const SendPlan& p = h.sends;
  std::vector<std::int64_t> record_rows(static_cast<std::size_t>(p.records()));
  std::iota(record_rows.begin(), record_rows.end(), std::int64_t{0});
  const CombineIndex index =
      in.tree == CombineTree::kLlWeighted
          ? ll_combine_index(config_.top_k, p.num_tokens, p.record_token, p.record_slot, record_rows)
          : ht_combine_index(size_, config_.nodes.node_of, p.num_tokens, p.destination_begin, p.record_token,
                             record_rows);
  return data_path_.reduce(in.tree, p, index, back.data(), in.bias0, in.bias1, out.out);
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
  TransportConfig own = config;
  EPS_ASSIGN_OR_RETURN(own.comm, mpi::comm_dup(config.comm, Deadline(config.timeout_seconds)));
  auto data_path = std::make_unique<DataPath>(own, rank, size);
  auto protocol = std::make_unique<MpiProtocol>(own, *data_path, rank, size);
  EPS_RETURN_IF_ERROR(protocol->commit_types());
  return make_framed_transport(own, mpi_capabilities(), rank, size, std::move(data_path),
                               std::move(protocol));
}

}  // namespace eps::transport
