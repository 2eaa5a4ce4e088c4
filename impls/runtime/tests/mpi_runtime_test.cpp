// The MPI plumbing of the harness, tested under mpirun at every registered rank count (docs/errors.md 10):
// bootstrap, deadline barrier, alltoallv with a deadline, wait_until diagnostics, MPI error reports,
// exit-code agreement, and the gathering / re-raising of other ranks' failures on rank 0.
#include <gtest/gtest-spi.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"

namespace eps {
namespace {

int world_rank() {
  int r = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = -1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

TEST(MpiRuntime, RankSizeAndHostsMatchTheLauncher) {
  EXPECT_TRUE(mpi::initialized());
  EXPECT_EQ(mpi::rank(), world_rank());
  EXPECT_EQ(mpi::size(), world_size());
  EXPECT_EQ(mpi::is_root(), world_rank() == 0);
  // The launcher's own view is an independent oracle (mpirun of Open MPI exports these).
  if (const char* size = std::getenv("OMPI_COMM_WORLD_SIZE")) {
    EXPECT_EQ(mpi::size(), std::atoi(size));
  }
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK")) {
    EXPECT_EQ(mpi::rank(), std::atoi(rank));
  }
  EXPECT_EQ(mpi::launcher_rank(), std::getenv("OMPI_COMM_WORLD_RANK") ? mpi::rank() : 0);

  int provided = 0;
  MPI_Query_thread(&provided);
  EXPECT_EQ(provided, MPI_THREAD_MULTIPLE);

  Result<std::vector<int>> ranks =
      mpi::allgather_int(mpi::rank() * 10 + 3, MPI_COMM_WORLD, mpitest::test_deadline());
  EPS_ASSERT_OK(ranks.status());
  ASSERT_EQ(ranks->size(), static_cast<std::size_t>(mpi::size()));
  for (int r = 0; r < mpi::size(); ++r) EXPECT_EQ((*ranks)[r], r * 10 + 3);

  Result<std::vector<std::string>> hosts = mpi::all_hosts(MPI_COMM_WORLD, mpitest::test_deadline());
  EPS_ASSERT_OK(hosts.status());
  ASSERT_EQ(hosts->size(), static_cast<std::size_t>(mpi::size()));
  EXPECT_FALSE(mpi::host().empty());
  EXPECT_EQ((*hosts)[mpi::rank()], mpi::host());
  EXPECT_EQ(mpi::where(), "host " + mpi::host() + ", rank " + std::to_string(mpi::rank()));
}

// Rank 0 of each node publishes a flag in node-shared memory only after a delay, then enters the
// barrier; a barrier that did not wait for it would let the others read 0.
TEST(MpiRuntime, DeadlineBarrierWaitsForEveryRank) {
  MPI_Comm node = MPI_COMM_NULL;
  EPS_MPI_CHECK_OR_ABORT(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int node_rank = 0;
  MPI_Comm_rank(node, &node_rank);
  int* flag = nullptr;
  MPI_Win window = MPI_WIN_NULL;
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_allocate_shared(node_rank == 0 ? sizeof(int) : 0, sizeof(int), MPI_INFO_NULL,
                                                 node, &flag, &window));
  MPI_Aint bytes = 0;
  int unit = 0;
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_shared_query(window, 0, &bytes, &unit, &flag));
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_lock_all(MPI_MODE_NOCHECK, window));
  if (node_rank == 0) *flag = 0;
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_sync(window));
  EPS_ASSERT_OK(mpi::barrier(node, mpitest::test_deadline()));
  if (node_rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    *flag = 12345;
    EPS_MPI_CHECK_OR_ABORT(MPI_Win_sync(window));
  }
  EPS_ASSERT_OK(mpi::barrier(node, mpitest::test_deadline()));
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_sync(window));
  EXPECT_EQ(*flag, 12345) << "left the barrier before node rank 0 entered it";
  EPS_ASSERT_OK(mpi::barrier(node, mpitest::test_deadline()));
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_unlock_all(window));
  EPS_MPI_CHECK_OR_ABORT(MPI_Win_free(&window));
  EPS_MPI_CHECK_OR_ABORT(MPI_Comm_free(&node));
}

// splitmix64: an independent seeded generator for the payload (no harness code involved).
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t payload(int src, int dst, int i) {
  return splitmix64(0x5eedULL ^ (std::uint64_t(src) << 40) ^ (std::uint64_t(dst) << 20) ^ std::uint64_t(i));
}

// Elements rank src sends to rank dst: 0..3, including zero-sized and self messages.
int count(int src, int dst) { return (src + 2 * dst) % 4; }

TEST(MpiRuntime, AlltoallvWithDeadlineMovesSeededData) {
  const int me = mpi::rank();
  const int n = mpi::size();
  std::vector<int> send_counts(n), send_displs(n), recv_counts(n), recv_displs(n);
  for (int q = 0; q < n; ++q) {
    send_counts[q] = count(me, q);
    recv_counts[q] = count(q, me);
    if (q > 0) {
      send_displs[q] = send_displs[q - 1] + send_counts[q - 1];
      recv_displs[q] = recv_displs[q - 1] + recv_counts[q - 1];
    }
  }
  std::vector<std::uint64_t> send(send_displs[n - 1] + send_counts[n - 1]);
  for (int q = 0; q < n; ++q) {
    for (int i = 0; i < send_counts[q]; ++i) send[send_displs[q] + i] = payload(me, q, i);
  }
  std::vector<std::uint64_t> recv(recv_displs[n - 1] + recv_counts[n - 1], 0);
  EPS_ASSERT_OK(mpi::alltoallv(send.data(), send_counts, send_displs, MPI_UINT64_T, recv.data(), recv_counts,
                               recv_displs, MPI_UINT64_T, MPI_COMM_WORLD, mpitest::test_deadline()));
  for (int q = 0; q < n; ++q) {
    for (int i = 0; i < recv_counts[q]; ++i) {
      EXPECT_EQ(recv[recv_displs[q] + i], payload(q, me, i)) << "from rank " << q << ", element " << i;
    }
  }
}

TEST(MpiRuntime, AlltoallvRejectsCountsOfTheWrongLength) {
  const std::vector<int> too_long(mpi::size() + 1, 0);
  const std::vector<int> right(mpi::size(), 0);
  const Status s = mpi::alltoallv(nullptr, too_long, right, MPI_BYTE, nullptr, right, right, MPI_BYTE,
                                  MPI_COMM_WORLD, mpitest::test_deadline());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "send_counts: must have one entry per rank (" + std::to_string(mpi::size()) +
                             "), got " + std::to_string(mpi::size() + 1));
}

TEST(Deadline, WaitUntilExpiresAndReportsWhatItWaitedFor) {
  int polls = 0;
  const int peer = (mpi::rank() + 1) % mpi::size();
  const auto start = std::chrono::steady_clock::now();
  const Status s = wait_until(
      Deadline(0.05),
      [&] {
        ++polls;
        return false;
      },
      [&] { return describe_counter_wait(peer, 2, 64, static_cast<std::uint64_t>(12)); });
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);  // exit code 3 (docs/errors.md 10)
  EXPECT_EQ(s.exit_code(), 3);
  EXPECT_EQ(s.message(), "timed out after 0.050 s waiting for peer " + std::to_string(peer) +
                             ", channel 2: counter expected 64, observed 12");
  EXPECT_GE(elapsed, 0.05);
  EXPECT_GT(polls, 1);
}

TEST(Deadline, WaitUntilReturnsOnceThePredicateHolds) {
  int polls = 0;
  bool described = false;
  const Status s = wait_until(
      Deadline(30), [&] { return ++polls == 5; },
      [&] {
        described = true;
        return std::string("never");
      });
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(polls, 5);
  EXPECT_FALSE(described);
  // An already-true condition wins over an expired deadline.
  EXPECT_TRUE(wait_until(
                  Deadline(0), [] { return true; }, [] { return std::string(); })
                  .ok());
  EXPECT_TRUE(Deadline(0).expired());
  EXPECT_DOUBLE_EQ(Deadline(-1).budget_seconds(), 0.0);
}

TEST(MpiRuntime, CheckNamesCallFileLineHostAndRank) {
  int value = 7;
  // MPI_ERRORS_RETURN is set by mpi::init, so an invalid destination comes back as a code.
  const int rc = MPI_Send(&value, 1, MPI_INT, mpi::size() + 5, 0, MPI_COMM_WORLD);
  ASSERT_NE(rc, MPI_SUCCESS);
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, text, &length);
  const Status s = mpi::check(rc, "MPI_Send", "/some/dir/transport.cpp", 42);
  EXPECT_EQ(s.code(), StatusCode::kEnvironment);
  EXPECT_EQ(s.message(), "MPI_Send failed at transport.cpp:42 on host " + mpi::host() + ", rank " +
                             std::to_string(mpi::rank()) + ": " + std::string(text, length));
  EXPECT_TRUE(mpi::check(MPI_SUCCESS, "MPI_Send", "x.cpp", 1).ok());

  const auto returning = [&]() -> Status {
    EPS_MPI_CHECK(MPI_Send(&value, 1, MPI_INT, -7, 0, MPI_COMM_WORLD));
    return Status();
  };
  const Status macro = returning();
  EXPECT_EQ(macro.code(), StatusCode::kEnvironment);
  EXPECT_NE(macro.message().find("MPI_Send(&value, 1, MPI_INT, -7, 0, MPI_COMM_WORLD) failed at "
                                 "mpi_runtime_test.cpp:"),
            std::string::npos)
      << macro.message();

  const RankError error(invalid_argument("--tokens", "bad"), "node-a", 3);
  EXPECT_STREQ(error.what(), "host node-a, rank 3: --tokens: bad");
  EXPECT_EQ(error.exit_code(), 2);
  EXPECT_EQ(error.host(), "node-a");
  EXPECT_EQ(error.rank(), 3);
}

TEST(MpiRuntime, ExitCodeIsTheMaximumOverRanks) {
  const int last = mpi::size() - 1;
  // Only the last rank fails; it alone prints (to stderr) and every rank gets its code.
  const Status local = mpi::rank() == last
                           ? invalid_argument("selftest", "deliberate error of the exit-code agreement test")
                           : Status();
  EXPECT_EQ(mpi::agree_exit_code(local, mpitest::test_deadline()), 2);
  EXPECT_EQ(mpi::agree_exit_code(Status(), mpitest::test_deadline()), 0);
  const Status environment(StatusCode::kEnvironment, "deliberate environment error of the agreement test");
  // Rank 0 reports 3, the last rank 2 (at R = 1 rank 0 reports 3 alone): the maximum is 3 everywhere.
  EXPECT_EQ(mpi::agree_exit_code(mpi::rank() == 0 ? environment : local, mpitest::test_deadline()), 3);
}

mpitest::RankFailure record(int rank, int k) {
  return {rank,
          "host-" + std::to_string(rank),
          "rank" + std::to_string(rank) + ".cpp",
          100 * rank + k,
          "failure " + std::to_string(k) + " of rank " + std::to_string(rank),
          k % 2 == 1};
}

TEST(FailureGather, RootReceivesEveryRanksRecordsInRankOrder) {
  std::vector<mpitest::RankFailure> local;
  for (int k = 0; k <= mpi::rank(); ++k) local.push_back(record(mpi::rank(), k));
  Result<std::vector<mpitest::RankFailure>> all =
      mpitest::gather_failures(local, MPI_COMM_WORLD, mpitest::test_deadline());
  EPS_ASSERT_OK(all.status());
  if (!mpi::is_root()) {
    EXPECT_TRUE(all->empty());
    return;
  }
  std::vector<mpitest::RankFailure> expected;
  for (int r = 0; r < mpi::size(); ++r) {
    for (int k = 0; k <= r; ++k) expected.push_back(record(r, k));
  }
  // Rank r contributes r + 1 records: R (R + 1) / 2 in all.
  ASSERT_EQ(all->size(), static_cast<std::size_t>(mpi::size() * (mpi::size() + 1) / 2));
  EXPECT_EQ(*all, expected);
}

TEST(FailureGather, ReraiseAddsOneResultPerRecordAtItsLocation) {
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    mpitest::reraise_failures({{1, "node-a", "dispatch_test.cpp", 77, "expected 3, got 4", false},
                               {2, "node-b", "fabric_test.cpp", 9, "no RDMA device", true}});
  }
  ASSERT_EQ(results.size(), 2);
  EXPECT_EQ(results.GetTestPartResult(0).type(), testing::TestPartResult::kNonFatalFailure);
  EXPECT_STREQ(results.GetTestPartResult(0).file_name(), "dispatch_test.cpp");
  EXPECT_EQ(results.GetTestPartResult(0).line_number(), 77);
  EXPECT_STREQ(results.GetTestPartResult(0).message(), "[rank 1, host node-a] expected 3, got 4");
  EXPECT_EQ(results.GetTestPartResult(1).type(), testing::TestPartResult::kSkip);
  EXPECT_STREQ(results.GetTestPartResult(1).message(), "[rank 2, host node-b] no RDMA device");
}

void needs_backend(bool present, bool selected) {
  if (!present) {
    EPS_SKIP_UNAVAILABLE(selected, "no RDMA device on this host");
  }
}

// docs/errors.md 10.1: an absent backend skips with its reason; --strict fails only for a selected one.
TEST(FailureGather, UnavailableSkipsWithItsReasonAndStrictFailsOnlyWhatWasSelected) {
  const bool was_strict = mpitest::strict();
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    mpitest::set_strict(false);
    needs_backend(true, true);
    needs_backend(false, true);
    mpitest::set_strict(true);
    needs_backend(false, false);
    needs_backend(false, true);
  }
  mpitest::set_strict(was_strict);
  ASSERT_EQ(results.size(), 3);
  EXPECT_EQ(results.GetTestPartResult(0).type(), testing::TestPartResult::kSkip);
  EXPECT_STREQ(results.GetTestPartResult(0).message(), "unavailable: no RDMA device on this host");
  EXPECT_EQ(results.GetTestPartResult(1).type(), testing::TestPartResult::kSkip);
  EXPECT_EQ(results.GetTestPartResult(2).type(), testing::TestPartResult::kFatalFailure);
  EXPECT_STREQ(results.GetTestPartResult(2).message(),
               "Failed\n--strict: a selected backend is unavailable: no RDMA device on this host");
}

// A rank's index on its node counts the lower ranks of the same node only (hand-built layouts: two nodes of
// interleaved ranks, and one node).
TEST(NodeLayout, LocalIndexCountsTheLowerRanksOfTheSameNode) {
  const mpi::NodeLayout interleaved{{0, 1, 0, 1, 1}, {2, 3}};
  const std::vector<int> expected{0, 0, 1, 1, 2};
  for (int r = 0; r < 5; ++r)
    EXPECT_EQ(interleaved.local_index(r), expected[static_cast<std::size_t>(r)]) << r;
  const mpi::NodeLayout one{{0, 0, 0}, {3}};
  EXPECT_EQ(one.local_index(2), 2);
}

}  // namespace
}  // namespace eps
