// The bench driver: `epsuite bench OP` over the BenchOp table of perf/bench/bench_op.hpp.
//
// For every series of the op (a transport, a fabric, ...) and every point of it, for every measurement of
// the point: -w warm-up and -n timed iterations (or those the measurement fixes, Measurement::iterations),
// identical on every rank, each prepared untimed, preceded by the measurement's barrier, timed by the
// measurement (MPI_Wtime), and with -c checked bit-exactly (every iteration its own payload, outputs
// poisoned before it). An iteration's time is the maximum over ranks;
// the slowest rank is the one with the largest median (lowest rank on ties). Rank 0 prints the series
// header and one row per point to stdout; --json FILE gets the results document (docs/results.md
// 9.1), rewritten atomically after every point.
//
// Oversubscription (docs/results.md 9.5, perf/bench/oversubscription.hpp): before the first series the
// driver takes the CPU census; when the ranks, or the ranks and the helper threads of a planned series,
// outnumber a node's CPUs, rank 0 prints one line ("# oversubscribed: 4 ranks on 2 CPUs: timings measure the
// scheduler, not the transport"), the results document's `oversubscribed` holds it and every case measured
// that way has `oversubscribed` true.
//
// Every series says what its header echoes and what its cases share (SeriesInfo, bench_op.hpp); the driver
// prints the header (the first line, the echo, the flags the op reads, the op's trailer, the column titles),
// formats each point's row (the op's cells and the driver's: the ceiling's p50, GB/s and ratio, the slowest
// rank, #wrong = the mismatches of the point's measurements summed, N/A without -c) and completes each case
// of the point (the series' base case and the point's parts, then times, slowest rank, check, ceiling,
// oversubscription). The identity and echo of a series on a transport are the driver's too
// (transport_series_case, transport_echo).
//
// Outcomes (docs/errors.md 10.1): bad flags exit 2 before anything runs or is written; a series whose
// factory returns kUnavailable is reported once and skipped while the others run (exit 3 at the end only
// under --strict when the user named it); a -c mismatch makes the exit code 1; a failure while measuring
// (a timeout, a peer failure) ends the job with exit 3.
#pragma once

#include <string>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/runtime/deadline.hpp"
#include "impls/runtime/json_io.hpp"
#include "impls/runtime/params.hpp"
#include "impls/transport/transport.hpp"
#include "perf/bench/bench_op.hpp"
#include "results/document.hpp"

namespace eps::bench {

// The driver's own flags, common to every op: -n/--iters, -w/--warmup, -c/--check, --seed, --json,
// --timeout, --strict.
std::vector<ParamSpec> driver_param_specs();
// Every flag `epsuite bench` accepts: the driver's and every registered op's (each name once).
std::vector<ParamSpec> bench_param_specs();

struct BenchRequest {
  std::string op;
  std::vector<std::string> argv;   // stored in the results document
  Json platform = Json::object();  // docs/results.md 9.1 platform block
};

struct BenchOutcome {
  int exit_code = 0;
  std::vector<CaseResult> cases;         // every measured case (rank 0 and the others alike)
  std::vector<std::string> unavailable;  // "name: reason" of every skipped series
};

// Measures `request.op` with `params` (bench_param_specs(), resolved). Collective; MPI must be initialized
// and stays so. The exit code is agreed over ranks.
BenchOutcome run_bench(const Params& params, const BenchRequest& request);

// The timing rule of every op: every rank's per-iteration times (the same count on every rank) are gathered;
// times_us[i] = the maximum over ranks of iteration i; slowest_rank = the rank with the largest median
// (nearest rank), the lowest such rank on ties. Collective over MPI_COMM_WORLD.
Result<Measured> max_over_ranks(const std::vector<double>& local, const Deadline& deadline);

// The case every case of a series on `transport` starts from (docs/results.md 9.3): op, transport, and the
// identity of the transport (fabric, signal, chaos, ...) with the device's backend, the staging, the seed and
// the preset. The op adds mode, dtype, sizes and its own identity entries.
CaseResult transport_series_case(std::string op, const transport::Transport& transport,
                                 const device::Device& device, std::uint64_t seed, std::string_view preset);

// The echo lines of a series on `transport`: "transport" (name: summary), "path" (when it differs from the
// name) and "device" (its description and the staging, then `device_note`).
std::vector<std::pair<std::string, std::string>> transport_echo(const transport::Transport& transport,
                                                                const device::Device& device,
                                                                std::string_view device_note = "");

// The -c rule of every op: every rank's mismatch count (and, when it has any, the text of its first one)
// gathered; the outcome sums the counts and keeps the lowest failing rank's text. Collective.
Result<CheckOutcome> agree_check_outcome(const Mismatches& local, const Deadline& deadline);

}  // namespace eps::bench
