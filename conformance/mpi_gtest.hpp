// The MPI-aware GoogleTest runner of the conformance suite (`epsuite check`, ctest `*_np<n>` entries).
//
// Every rank runs the same tests in the same order (a shuffle seed is taken from rank 0). Rank 0 alone
// prints and writes --gtest_output (XML or JSON): the other ranks' default result printer and output
// writer are removed. After each test every rank's failures and skips (file, line, message) are gathered
// to rank 0 over a private duplicate of MPI_COMM_WORLD (so a test's own collectives never match the
// harness's) and re-raised there, naming rank and host: "[rank 1, host h] <message>" at the original
// file and line, so rank 0's report covers every rank. The exit code of the process is the maximum over
// ranks (SPEC 10). The gather is bounded by --timeout; a rank that does not arrive ends the job (exit 3).
//
// Capability-based skips: `EPS_SKIP_UNLESS(cond, reason)` skips the current test with the condition and
// the reason; under --strict it fails instead. Environment errors inside a test (a timeout, a failed MPI
// call) cannot be survived by the other ranks: `EPS_ASSERT_OK(status)` ends the job through mpi::fatal
// for kEnvironment, and fails the test for any other error.
//
// `SuiteCommand` is the command line shared by `epsuite check` and the ctest executables: it binds
// --strict and --timeout (harness/params.hpp) and accepts GoogleTest's own --gtest_* flags.
#pragma once

#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "harness/params.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/transport.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps::conformance {

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
                                                 const Deadline& deadline);
// Adds one GoogleTest failure (or skip) per record to the current test, at the record's file and line,
// with the message "[rank r, host h] message".
void reraise_failures(const std::vector<RankFailure>& failures);

bool strict();
void set_strict(bool strict);
// The --timeout of this run, in seconds, and a fresh deadline with it.
double timeout_seconds();
void set_timeout_seconds(double seconds);
inline Deadline test_deadline() { return Deadline(timeout_seconds()); }
// The --transport of this run, validated against the registry: the transports the transport suite
// (conformance/transport) instantiates its cases for ("all" until set).
const std::vector<std::string>& selected_transports();
void set_selected_transports(std::vector<std::string> names);

// --fabric, --signal, --chaos, --allow-unsafe of this run: what fabric transports (direct) are created with.
struct FabricSelection {
  std::string fabric = "shm";
  std::string signal = "auto";
  std::string chaos;
  bool allow_unsafe = false;
};
const FabricSelection& fabric_selection();
void set_fabric_selection(FabricSelection selection);
// Applies the selection to a transport configuration.
void apply_fabric_selection(transport::TransportConfig& config);
// Collective: creates every selected transport once at a small shape, so that an invalid combination
// (an unknown fabric, a bad --chaos, fabric-order on an unordered fabric without --allow-unsafe) is refused
// before any test runs (kInvalidArgument). A transport that cannot run here (kEnvironment) is reported on
// rank 0 and left for the tests to skip.
Status preflight_transports(double timeout_seconds);

// Runs every registered test with `gtest_flags` (each "--gtest_..."); MPI must be initialized. Returns
// this rank's result (0 passed, 1 failed); combine ranks with mpi::finalize.
int run_tests(const std::vector<std::string>& gtest_flags);

class SuiteCommand {
 public:
  SuiteCommand();
  // Adds --strict, --timeout and the acceptance of --gtest_* flags to `app`, and help for them.
  void bind(CLI::App& app);
  // After `app` parsed: initializes MPI, resolves the parameters, prints the `#` header on rank 0, runs
  // the suite and returns the exit code agreed over ranks (MPI finalized).
  int run(CLI::App& app);

 private:
  std::unique_ptr<Params> params_;
};

}  // namespace eps::conformance

#define EPS_SKIP_UNLESS(cond, reason)                                                    \
  switch (0)                                                                             \
  case 0:                                                                                \
  default:                                                                               \
    if (cond) {                                                                          \
    } else if (::eps::conformance::strict()) {                                           \
      GTEST_FAIL() << "--strict: required capability missing (" #cond "): " << (reason); \
    } else                                                                               \
      GTEST_SKIP() << "capability missing (" #cond "): " << (reason)

#define EPS_ASSERT_OK(expr)                                                                                  \
  do {                                                                                                       \
    const ::eps::Status eps_assert_status_ = (expr);                                                         \
    if (eps_assert_status_.code() == ::eps::StatusCode::kEnvironment) ::eps::mpi::fatal(eps_assert_status_); \
    ASSERT_TRUE(eps_assert_status_.ok()) << #expr << ": " << eps_assert_status_.message();                   \
  } while (0)
