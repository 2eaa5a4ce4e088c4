// `epsuite bench dispatch|combine|roundtrip`: measures a transport (impls/transport) on a preset's shapes
// and prints an nccl-tests-style `#` table (harness/table.hpp); `--json FILE` writes SPEC 9.1 results
// (harness/results.hpp) after every measured point. `epsuite bench fabric` measures a fabric's raw puts
// instead (harness/bench_fabric.hpp).
//
// Per transport (--transport: 'all' or a list) and per swept token count T (every rank has T tokens;
// --tokens, else the preset's sweep), with routing from a seeded workload generator (--workload) and
// seeded payloads (SPEC 2):
//   dispatch   times Transport::dispatch (a fresh one each iteration: counts and payload);
//   combine    dispatches once, then times Transport::combine of the expert outputs;
//   roundtrip  times dispatch followed by combine.
// --mode ht uses the HT layout of --layout (rank-major with the ht-rank tree, or ht-two-level when
// --ranks-per-node makes more than one node; expert-major with ll-weighted); --mode ll uses the LL layout
// and ll-weighted.
//
// Measurement discipline (ARCHITECTURE.md rule 7): -w warm-up iterations, then -n timed iterations, the
// same counts on every rank; a deadline barrier before each timed iteration; each rank times its call with
// MPI_Wtime; an iteration's time is the maximum over ranks. Columns: p50 / p99 (nearest rank) of those
// times in µs; bytes = SPEC 5.6 algo bytes received by the slowest rank (the rank with the largest median
// time; roundtrip counts dispatch plus combine); algo and physical GB/s = that rank's bytes / p50. -c
// checks the last iteration's outputs on every rank bit-exactly against reference/dispatch (#wrong =
// mismatching elements summed over ranks; exit 1 when any).
//
// Fabrics (SPEC 6): --fabric, --signal, --chaos and --allow-unsafe go into every transport's
// TransportConfig (transports that move no data over a fabric ignore them) and are echoed in the table's
// `#` block and the JSON config. A transport factory's kInvalidArgument (e.g. fabric-order signalling on an
// unordered fabric without --allow-unsafe) exits 2 with its message, its kEnvironment (the fabric cannot
// run here) exits 3.
//
// Bad input is refused before anything runs or is written (exit 2, one message naming the flag): an
// unknown preset or transport or workload or fabric, a malformed --chaos, a flag out of range, a swept T
// above T_max (--max-tokens), a hidden size that is not a multiple of 128 with fp8, a rank count the
// preset cannot use, a flag of `bench fabric` (--sizes, --window).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness/params.hpp"
#include "harness/platform.hpp"
#include "harness/results.hpp"
#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

// The bench-only parameters (name, flag, EPSUITE_* twin, default, range, help); the suite-wide ones
// (timeout, preset, tokens, ranks-per-node, json, transport) come from param_catalog().
std::vector<ParamSpec> bench_param_specs();

// Every parameter of `epsuite bench`: bench_param_specs() plus the suite-wide ones.
std::vector<ParamSpec> bench_command_specs();

// The timing rule every bench op shares (ARCHITECTURE.md rule 7): every rank's per-iteration times
// (`local`, the same count on every rank) are gathered over MPI_COMM_WORLD within `deadline`;
// times_us[i] = the maximum over ranks of iteration i; slowest_rank = the rank with the largest median
// (nearest rank), the lowest such rank on ties. Collective.
struct RankTimes {
  std::vector<double> times_us;
  int slowest_rank = 0;
};
Result<RankTimes> max_over_ranks(const std::vector<double>& local, const Deadline& deadline);

// The -c rule every bench op shares: every rank's mismatch count (and, when it has any, the text of its
// first one) gathered over MPI_COMM_WORLD; the outcome sums the counts and keeps the lowest failing
// rank's text. Collective.
Result<CheckOutcome> agree_check_outcome(std::int64_t mismatches, const std::string& first_mismatch,
                                         const Deadline& deadline);

// Measures `op` ("dispatch", "combine" or "roundtrip") with resolved `params` (bench_command_specs())
// on every selected transport, or the fabric for op "fabric" (run_bench_fabric): prints the table on
// rank 0 and writes --json when set. MPI must be initialized and `platform` discovered; MPI stays
// initialized. Returns the exit code agreed over ranks (0 ok, 1 -c found wrong results, 2 bad input,
// 3 a transport or fabric that cannot run here); failures while measuring end the job (SPEC 10).
int run_bench(const Params& params, const std::string& op, const Platform& platform,
              const std::vector<std::string>& argv);

class BenchCommand {
 public:
  BenchCommand();
  void bind(CLI::App& app);
  // After parsing: initializes MPI, validates, measures, finalizes; returns the exit code agreed over ranks.
  int run(const std::vector<std::string>& argv);

 private:
  std::unique_ptr<Params> params_;
  std::string op_;
  std::vector<std::string> tags_;
};

}  // namespace eps
