// The signal carried by the last data put (docs/fabrics.md 6.2): in a combine and a cached dispatch the
// receiver knows every count from the handle, so under fabric-order and imm-seq the direct and proxy
// transports put no signal record to a peer they send data to; its last data put carries the signal. A
// counting fabric around shm counts the puts of one fresh dispatch, one cached dispatch and one combine under
// every strategy: exactly one put fewer per peer with data under fabric-order and imm-seq, none fewer under
// recv-count and sender-barrier, and the wire bytes lose exactly those signal records. Every output is
// checked bit-exactly against reference/dispatch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/direct/direct_transport.hpp"
#include "impls/transport/proxy/proxy_transport.hpp"
#include "reference/dispatch/layout.hpp"

namespace eps::problem {
namespace {

using transport::CombineTree;
using transport::Layout;

// Forwards everything to `inner` and counts the puts it posted (proxy threads post concurrently).
class CountingFabric final : public fabric::Fabric {
 public:
  CountingFabric(std::unique_ptr<fabric::Fabric> inner, std::shared_ptr<std::atomic<std::int64_t>> puts)
      : inner_(std::move(inner)), puts_(std::move(puts)) {}

  std::string name() const override { return inner_->name(); }
  std::string describe() const override { return inner_->describe(); }
  bool ordered() const override { return inner_->ordered(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  fabric::FabricLimits limits() const override { return inner_->limits(); }
  std::string memory_registration() const override { return inner_->memory_registration(); }
  Result<fabric::Region> allocate(std::size_t bytes) override { return inner_->allocate(bytes); }
  Result<fabric::Region> adopt(std::span<std::byte> memory) override { return inner_->adopt(memory); }
  Status validate(const fabric::PutOp& op) const override { return inner_->validate(op); }
  Result<bool> try_put(const fabric::PutOp& op) override {
    Result<bool> posted = inner_->try_put(op);
    if (posted.ok() && *posted) ++*puts_;
    return posted;
  }
  Status atomic_support() const override { return inner_->atomic_support(); }
  Status validate(const fabric::AtomicOp& op) const override { return inner_->validate(op); }
  Result<bool> try_atomic_add(const fabric::AtomicOp& op) override { return inner_->try_atomic_add(op); }
  Result<std::size_t> poll(std::span<fabric::Completion> out) override { return inner_->poll(out); }
  Status quiet(const Deadline& deadline) override { return inner_->quiet(deadline); }
  Status flush(const Deadline& deadline) override { return inner_->flush(deadline); }
  Status barrier(const Deadline& deadline) override { return inner_->barrier(deadline); }

 private:
  std::unique_ptr<fabric::Fabric> inner_;
  std::shared_ptr<std::atomic<std::int64_t>> puts_;
};

// Puts this rank posted and wire bytes it counted in one operation.
struct OpCount {
  std::int64_t puts = 0;
  std::int64_t sent = 0;
  std::int64_t received = 0;
};

struct Counts {
  OpCount dispatch, cached, combine;
};

struct Case {
  const char* transport;
  Layout layout;
  CombineTree tree;
  const char* workload;
};

constexpr const char* kStrategies[] = {"fabric-order", "imm-seq", "recv-count", "sender-barrier"};

bool signal_on_last_data_put(const std::string& strategy) {
  return strategy == "fabric-order" || strategy == "imm-seq";
}

Result<std::unique_ptr<transport::Transport>> make_counted(const Case& c, const ProblemShape& shape,
                                                           const std::string& strategy,
                                                           std::shared_ptr<std::atomic<std::int64_t>> puts) {
  fabric::FabricSelection selection;
  selection.fabric = "shm";
  selection.signal = strategy;
  EPS_ASSIGN_OR_RETURN(std::unique_ptr<fabric::Fabric> inner,
                       fabric::make_fabric(selection, MPI_COMM_WORLD, mpitest::timeout_seconds()));
  auto counting = std::make_unique<CountingFabric>(std::move(inner), std::move(puts));
  const transport::TransportConfig config = transport_config(shape, mpitest::timeout_seconds());
  if (std::string(c.transport) == "proxy")
    return transport::make_proxy_transport_over(config, selection, std::move(counting));
  return transport::make_direct_transport_over(config, selection, std::move(counting));
}

// One fresh dispatch, one cached dispatch with new payloads and one combine, each checked against the
// reference and counted.
Counts run_counted(const Case& c, const std::string& strategy) {
  Counts counts;
  const int rank = mpi::rank();
  const ProblemShape shape = default_shape(mpi::size(), c.workload, dispatch::PayloadType::kBf16);
  auto puts = std::make_shared<std::atomic<std::int64_t>>(0);
  Result<std::unique_ptr<transport::Transport>> made = make_counted(c, shape, strategy, puts);
  EXPECT_TRUE(made.ok()) << made.status().message();
  if (!made.ok()) return counts;
  transport::Transport& t = **made;
  const auto count = [&](OpCount& into, const transport::WireBytes& before) {
    into.puts = puts->exchange(0);
    into.sent = t.wire_bytes().sent - before.sent;
    into.received = t.wire_bytes().received - before.received;
  };
  puts->store(0);  // setup posts nothing today, but counts start at the operations

  Result<Problem> problem = Problem::make(shape, c.workload, rank, 41, 0, 42);
  EXPECT_TRUE(problem.ok()) << problem.status().message();
  if (!problem.ok()) return counts;
  DispatchBuffers buffers(c.layout, shape);
  transport::WireBytes before = t.wire_bytes();
  Result<std::unique_ptr<transport::DispatchHandle>> handle =
      t.dispatch(c.layout, problem->input(), buffers.view());
  EXPECT_TRUE(handle.ok()) << handle.status().message();
  if (!handle.ok()) return counts;
  count(counts.dispatch, before);
  const std::int64_t rows = (*handle)->num_recv_rows();
  const dispatch::MismatchReport dispatched = check_dispatch(*problem, rank, buffers, rows, true);
  EXPECT_TRUE(dispatched.ok()) << strategy << " dispatch: " << dispatched.to_string();

  Result<Problem> renewed = Problem::make(shape, c.workload, rank, 41, 0, 777);
  EXPECT_TRUE(renewed.ok()) << renewed.status().message();
  if (!renewed.ok()) return counts;
  DispatchBuffers cached(c.layout, shape);
  before = t.wire_bytes();
  const Status cached_status = t.dispatch_cached(**handle, renewed->input(), cached.view());
  EXPECT_TRUE(cached_status.ok()) << cached_status.message();
  count(counts.cached, before);
  const dispatch::MismatchReport again = check_dispatch(*renewed, rank, cached, rows, true);
  EXPECT_TRUE(again.ok()) << strategy << " cached dispatch: " << again.to_string();

  const std::vector<bf16> y = expert_outputs(shape, rank, buffers, rows);
  const int tokens = problem->plan().num_tokens(rank);
  std::vector<bf16> out(static_cast<std::size_t>(tokens) * shape.hidden, bf16::from_bits(0x7fc1));
  std::vector<float> weights(static_cast<std::size_t>(tokens) * shape.top_k, std::nanf("1"));
  const bool ht = c.tree != CombineTree::kLlWeighted;
  const transport::CombineInput in{c.tree, y, ht ? problem->bias0() : std::span<const bf16>{},
                                   ht ? problem->bias1() : std::span<const bf16>{}};
  before = t.wire_bytes();
  const Status combine_status = t.combine(**handle, in, {out, weights});
  EXPECT_TRUE(combine_status.ok()) << combine_status.message();
  count(counts.combine, before);
  Result<dispatch::MismatchReport> combined = check_combine(*problem, rank, c.tree, ht, out, weights);
  EXPECT_TRUE(combined.ok()) << combined.status().message();
  if (combined.ok()) {
    EXPECT_TRUE(combined->ok()) << strategy << " combine: " << combined->to_string();
  }
  return counts;
}

// [R][R]: the tokens rank s dispatches to rank q, from the reference layout of the problem.
std::vector<std::vector<int>> tokens_sent(const Case& c, const ProblemShape& shape) {
  const Problem problem = value_or_throw(Problem::make(shape, c.workload, mpi::rank(), 41, 0, 42));
  std::vector<std::vector<int>> sent;
  for (int s = 0; s < shape.ranks; ++s)
    sent.push_back(value_or_throw(dispatch::expected_layout(problem.plan(), s)).num_tokens_per_rank);
  return sent;
}

class SignalOnLastDataPut : public ::testing::TestWithParam<Case> {};

TEST_P(SignalOnLastDataPut, SavesOnePutPerPeerWithDataUnderFabricOrderAndImmSeq) {
  const Case& c = GetParam();
  const int rank = mpi::rank();
  const int size = mpi::size();
  const ProblemShape shape = default_shape(size, c.workload, dispatch::PayloadType::kBf16);
  const std::int64_t record_bytes = 4 * static_cast<std::int64_t>(size + shape.experts / size);
  // Peers this rank dispatches to (and hears back from in the combine), and peers that dispatch to it (and
  // that it answers in the combine).
  std::int64_t peers_out = 0;
  std::int64_t peers_in = 0;
  const std::vector<std::vector<int>> sent = tokens_sent(c, shape);
  for (int q = 0; q < size; ++q) {
    if (q == rank) continue;
    peers_out += sent[static_cast<std::size_t>(rank)][static_cast<std::size_t>(q)] > 0 ? 1 : 0;
    peers_in += sent[static_cast<std::size_t>(q)][static_cast<std::size_t>(rank)] > 0 ? 1 : 0;
  }
  Result<std::vector<int>> all_peers_in =
      mpi::allgather_int(static_cast<int>(peers_in), MPI_COMM_WORLD, mpitest::test_deadline());
  EPS_ASSERT_OK(all_peers_in.status());
  int streams_with_data = 0;
  for (int n : *all_peers_in) streams_with_data += n;
  if (size > 1) {
    ASSERT_GT(streams_with_data, 0) << "the workload sends no rows between ranks";
  }

  std::map<std::string, Counts> by;
  for (const char* strategy : kStrategies) by[strategy] = run_counted(c, strategy);
  const Counts& barrier = by["sender-barrier"];
  // A combine posts one put of rows to each peer it answers and one signal record to every peer (R - 1 +
  // peers_in puts), less the records whose signal its data puts carry.
  EXPECT_EQ(barrier.combine.puts, size - 1 + peers_in);
  for (const char* strategy : kStrategies) {
    const Counts& s = by[strategy];
    const bool saves = signal_on_last_data_put(strategy);
    SCOPED_TRACE(fmt::format("{} {} on rank {}", c.transport, strategy, rank));
    EXPECT_EQ(s.combine.puts, barrier.combine.puts - (saves ? peers_in : 0));
    EXPECT_EQ(s.combine.sent, barrier.combine.sent - (saves ? peers_in * record_bytes : 0));
    EXPECT_EQ(s.combine.received, barrier.combine.received - (saves ? peers_out * record_bytes : 0));
    // A fresh dispatch needs every record (the receiver learns its counts there); the cached one does not.
    EXPECT_EQ(s.cached.puts, s.dispatch.puts - (saves ? peers_out : 0));
    EXPECT_EQ(s.cached.sent, s.dispatch.sent - (saves ? peers_out * record_bytes : 0));
    EXPECT_EQ(s.cached.received, s.dispatch.received - (saves ? peers_in * record_bytes : 0));
  }
}

constexpr Case kCases[] = {
    {"direct", Layout::kHtRankMajor, CombineTree::kHtRank, "uniform"},
    {"direct", Layout::kLl, CombineTree::kLlWeighted, "zero-token-ranks"},
    {"proxy", Layout::kHtRankMajor, CombineTree::kHtTwoLevel, "zero-token-ranks"},
    {"proxy", Layout::kLl, CombineTree::kLlWeighted, "uniform"},
};

INSTANTIATE_TEST_SUITE_P(Transports, SignalOnLastDataPut, ::testing::ValuesIn(kCases), [](const auto& info) {
  return std::string(info.param.transport) + "_" + std::to_string(info.index);
});

}  // namespace
}  // namespace eps::problem
