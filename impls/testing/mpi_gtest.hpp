// The MPI-aware GoogleTest runner: the test-support library under every MPI test of epsuite (the
// conformance suite of `epsuite check`, the ctest `*_np<n>` entries, the MPI tests of impls/).
//
// Every rank runs the same tests in the same order (a shuffle seed is taken from rank 0). Rank 0 alone
// prints and writes --gtest_output (XML or JSON): the other ranks' default result printer and output
// writer are removed. After each test every rank's failures and skips (file, line, message) are gathered
// to rank 0 over a private duplicate of MPI_COMM_WORLD (so a test's own collectives never match the
// runner's) and re-raised there, naming rank and host: "[rank 1, host h] <message>" at the original
// file and line, so rank 0's report covers every rank. A skip that rank 0 saw too is not repeated per
// rank. The exit code of the process is the maximum over ranks (docs/errors.md 10). The gather is bounded
// by --timeout; a rank that does not arrive ends the job (exit 3).
//
// Outcomes (docs/errors.md 10.1): a test passes, fails, or is skipped as `unavailable` (hardware, provider
// or device absent). `EPS_SKIP_UNAVAILABLE(selected, reason)` skips; under --strict it fails instead, but
// only when the missing thing was selected by the user. Environment errors inside a test (a timeout, a
// peer failure, a failed MPI call) cannot be survived by the other ranks: `EPS_ASSERT_OK(status)` ends the
// job through mpi::fatal for kEnvironment, and fails the test for any other error.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace eps::mpitest {

struct RankFailure {
  int rank = 0;
  std::string host;
  std::string file;
  int line = 0;
  std::string message;
  bool skipped = false;  // a skip, not a failure
  friend bool operator==(const RankFailure&, const RankFailure&) = default;
};

// Collective over `comm`: rank 0 receives every rank's `local` records in rank order (its own
// included); the other ranks receive an empty list. kEnvironment on timeout.
Result<std::vector<RankFailure>> gather_failures(const std::vector<RankFailure>& local, MPI_Comm comm,
                                                 const Deadline& deadline, std::string_view test = "?");
// Adds one GoogleTest failure (or skip) per record to the current test, at the record's file and line,
// with the message "[rank r, host h] message".
void reraise_failures(const std::vector<RankFailure>& failures);

bool strict();
void set_strict(bool strict);
// The --timeout of this run, in seconds, and a fresh deadline with it.
double timeout_seconds();
void set_timeout_seconds(double seconds);
inline Deadline test_deadline() { return Deadline(timeout_seconds()); }

// Runs every registered test with `gtest_flags` (each "--gtest_..."); MPI must be initialized. Returns
// this rank's result (0 passed, 1 failed); combine ranks with mpi::finalize.
//
// `add_listeners` (optional) is called on every rank after GoogleTest parsed the flags and before the runner
// appends its own listeners, so that a listener it appends (e.g. `epsuite soak`'s, which changes the fabric
// selection per --gtest_repeat iteration) gets OnTestIterationStart before any test and OnTestEnd /
// OnTestIterationEnd after the other ranks' failures were re-raised on rank 0. It may also release rank 0's
// default result printer.
int run_tests(const std::vector<std::string>& gtest_flags,
              const std::function<void(testing::TestEventListeners&)>& add_listeners = {});

// The outcome counts of the last run_tests, as rank 0 reports them (other ranks' failures included).
struct TestCounts {
  int passed = 0;
  int failed = 0;
  int skipped = 0;                        // unavailable here (with the reason in the report)
  std::vector<std::string> failed_tests;  // "Suite.Name" of each failed test
};
TestCounts last_test_counts();

// main() of an MPI test executable: MPI init, --strict, --timeout S and --gtest_* flags, run_tests, and
// the exit code agreed over ranks.
int test_main(int argc, char** argv);

}  // namespace eps::mpitest

// Skips the current test as `unavailable` (docs/errors.md 10.1); under --strict it fails instead when
// `selected` says the user asked for the missing transport, fabric or device by name.
#define EPS_SKIP_UNAVAILABLE(selected, reason)                                     \
  switch (0)                                                                       \
  case 0:                                                                          \
  default:                                                                         \
    if (::eps::mpitest::strict() && (selected)) {                                  \
      GTEST_FAIL() << "--strict: a selected backend is unavailable: " << (reason); \
    } else                                                                         \
      GTEST_SKIP() << "unavailable: " << (reason)

#define EPS_ASSERT_OK(expr)                                                                                  \
  do {                                                                                                       \
    const ::eps::Status eps_assert_status_ = (expr);                                                         \
    if (eps_assert_status_.code() == ::eps::StatusCode::kEnvironment) ::eps::mpi::fatal(eps_assert_status_); \
    ASSERT_TRUE(eps_assert_status_.ok()) << #expr << ": " << eps_assert_status_.message();                   \
  } while (0)
