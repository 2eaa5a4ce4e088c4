// Deliberately failing, skipping and hanging cases for selftest_driver.py, which runs them under mpirun
// and checks what rank 0 reports (docs/errors.md 10). They are DISABLED_ so that only the driver runs them.
#include <chrono>
#include <thread>

#include "impls/testing/mpi_gtest.hpp"

namespace eps {
namespace {

TEST(SelfTest, DISABLED_FailsOnTheLastRankOnly) {
  const int last = mpi::size() - 1;
  if (mpi::rank() == last) ADD_FAILURE() << "deliberate failure on rank " << last;
}

TEST(SelfTest, DISABLED_SkipsForAMissingCapability) {
  EPS_SKIP_UNAVAILABLE(/*selected=*/true, "the selftest capability is never present");
}

// Rank 0 waits in a deadline barrier that the last rank joins only after three timeouts: rank 0 must
// report the barrier and end the whole job with exit code 3 instead of hanging.
TEST(SelfTest, DISABLED_BarrierTimesOutAndEndsTheJob) {
  if (mpi::rank() == mpi::size() - 1 && mpi::size() > 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>(3 * mpitest::timeout_seconds()));
  }
  EPS_ASSERT_OK(mpi::barrier(MPI_COMM_WORLD, mpitest::test_deadline()));
}

}  // namespace
}  // namespace eps
