// One bench harness, one small file per operation (the nccl-tests model): `epsuite bench OP` runs the
// driver (perf/bench/driver.hpp) over the table of one BenchOp.
//
// An op file (perf/bench/op_<name>.cpp) defines `void eps_register_bench_op_<name>(BenchOpRegistry&)` that
// adds one BenchOp, and perf/bench/CMakeLists.txt lists it in eps_generate_registry: adding an op is that
// file plus one word in CMake. The op file declares only what differs between operations: its inputs (a plan
// made from its flags, perf/bench/bench_flags.hpp), the timed call and the check (Measurements), the bytes it
// moves, its table's columns and cells, and the case parts only it knows. The driver owns what they share:
// options, warm-up and timed loops, the barrier before every timed iteration, the maximum over ranks,
// statistics, -c checking of every iteration, the machine's ceiling beside the op, the configuration echo,
// the table, the results cases (their identity, times, slowest rank, check, ceiling and oversubscription),
// the results JSON and the exit code.
//
// Shapes of the pieces:
//   BenchOp       name, summary, the op's own flags, and `plan`: validate the resolved flags and name the
//                 series to measure (each a transport, a fabric, ...), each made lazily and collectively.
//   BenchSeries   one series: `info` (SeriesInfo: what the header echoes, the table's columns, the case every
//                 case of the series starts from) and its points (a token count, a message size, ...), each
//                 made collectively.
//   BenchPoint    one point: one or more Measurements, the machine's ceiling when it measures one, and
//   `report`:
//                 the cells of the op's columns and the parts of its results cases.
//   Measurement   one timed thing, iteration by iteration:
//                   prepare(i, checking)  untimed: iteration i's inputs (with -c every iteration its own
//                                         payload) and, with -c, outputs poisoned (NaN) so stale ones show
//                   sync()                untimed: the barrier before a timed iteration (MPI by default)
//                   run(i)                this rank's time of the measured work in µs
//                   check(i)              untimed, with -c: mismatching elements of iteration i's outputs
//                   settle()              after the last iteration, before times are exchanged
//                 and how many iterations it runs: the driver's -w/-n, unless `iterations()` fixes them (a
//                 measurement of successive states, such as one EPLB load window of steps, none repeated)
// Iterations are numbered 0 .. warmup + iters - 1: warm-ups first, then the timed ones; with -c every one of
// them is checked. An iteration's time is the maximum over ranks (docs/architecture.md rule 7).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/json_io.hpp"
#include "impls/runtime/params.hpp"
#include "perf/bench/table.hpp"
#include "reference/common/status.hpp"
#include "results/document.hpp"

namespace eps::bench {

// Mismatching elements of one checked iteration; `first` describes the first one ("" when none).
struct Mismatches {
  std::int64_t count = 0;
  std::string first;
};

// Warm-up and timed iterations of one measurement.
struct Iterations {
  int warmup = 0;
  int timed = 1;
};

class Measurement {
 public:
  virtual ~Measurement() = default;
  // The iterations when the measurement fixes them; nullopt (the default): the driver's -w and -n.
  virtual std::optional<Iterations> iterations() const { return std::nullopt; }
  virtual Status prepare(int iteration, bool checking) = 0;
  virtual Status sync(const Deadline& deadline);
  virtual Result<double> run(int iteration) = 0;
  virtual Result<Mismatches> check(int iteration) = 0;
  virtual Status settle() { return Status(); }
};

// The machine's ceiling beside a point (docs/results.md 9.4, perf/bench/ceiling.hpp): a Measurement the
// driver times like the op's and reports in the ceiling columns and the cases' `ceiling`.
class MachineCeiling : public Measurement {
 public:
  virtual const std::string& kind() const = 0;  // results' ceiling.kind
};

// What the driver measured for one Measurement: per-iteration times of the timed iterations (each the
// maximum over ranks), the slowest rank (largest median), and the -c outcome summed over ranks and
// iterations (nullopt without -c).
struct Measured {
  std::vector<double> times_us;
  int slowest_rank = 0;
  std::optional<CheckOutcome> check;
};

// The nearest-rank percentile p of a measurement's times (0 for none).
double percentile_us(const Measured& measured, double p);

// What a point adds to the series' base case for one results case (docs/results.md 9.1). The driver
// completes it with the times, slowest rank and check of measurement `measured`, the point's ceiling and
// the oversubscription flag.
struct CaseParts {
  std::size_t measured = 0;
  std::string mode;                                         // "" keeps the series'
  std::vector<std::pair<std::string, std::int64_t>> sizes;  // after the series'
  std::map<std::string, std::string> identity;              // beside the series'
  double algo_bytes = 0;                                    // docs/dispatch.md 5.6, of the slowest rank
  double physical_bytes = 0;
  Json extra = Json::object();  // the op's own fields (results/op_fields.hpp, docs/results.md 9.6)
};

// A point's table row (the cells of the op's columns, CellSource::kOp, in order) and its results cases.
struct PointReport {
  std::vector<Cell> cells;
  std::vector<CaseParts> cases;
};

class BenchPoint {
 public:
  virtual ~BenchPoint() = default;
  virtual std::vector<Measurement*> measurements() = 0;
  // The machine's ceiling of the point; null when it measures none.
  virtual MachineCeiling* ceiling() { return nullptr; }
  virtual PointReport report(std::span<const Measured> measured) const = 0;
};

// What a series' header echoes and what its cases share. The driver prints "# epsuite bench OP (epsuite V,
// git G) on R ranks, N node(s)" (without the nodes when `nodes` is 0), one "#  KEY  TEXT" line per `echo`
// entry, the '#' lines of the flags the op reads, `trailer` ('#' lines, e.g. the preset's), "#" and the
// table's title lines.
struct SeriesInfo {
  int nodes = 0;
  std::vector<std::pair<std::string, std::string>> echo;
  std::string trailer;
  TableLayout table;
  CaseResult base;  // op, transport, mode, dtype, sizes, identity
};

class BenchSeries {
 public:
  virtual ~BenchSeries() = default;
  virtual SeriesInfo info() const = 0;
  virtual int num_points() const = 0;
  // Collective: sets up point `index` (buffers, inputs, a first untimed exchange where the op needs one).
  virtual Result<std::unique_ptr<BenchPoint>> make_point(int index) = 0;
};

// A series the driver will make: its name and a collective factory. A factory that returns kUnavailable
// (the transport's fabric is absent here) is reported and skipped; the other series still run.
struct SeriesPlan {
  std::string name;
  std::function<Result<std::unique_ptr<BenchSeries>>()> make;
  bool named = false;  // the user asked for it by name: under --strict its unavailability fails the run
  // Threads each rank runs beside itself while the series is measured (the proxy transport's proxy threads,
  // perf/bench/oversubscription.hpp helper_threads_per_rank): they count towards oversubscription.
  int helper_threads = 0;
};

// What the driver gives an op.
struct BenchContext {
  const Params& params;  // the driver's flags and the op's own, resolved
  std::string op;
};

struct BenchOp {
  std::string_view name;
  std::string_view summary;
  // The op's own flags (the driver's are common to all). `epsuite bench` accepts every op's flags; one that
  // the chosen op does not read is refused when given on the command line (exit 2).
  std::vector<ParamSpec> (*params)() = nullptr;
  // Validates the flags (kInvalidArgument naming the flag) and returns the series and the op's part of the
  // results document's `config`.
  Result<std::vector<SeriesPlan>> (*plan)(const BenchContext& context, Json& config) = nullptr;
  // The op's measurements fix their iterations (Measurement::iterations): -n and -w are not echoed.
  bool fixed_iterations = false;
};

class BenchOpRegistry {
 public:
  void add(BenchOp op);  // a second op of one name is a programming error (std::logic_error)
  const BenchOp* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<BenchOp> ops_;
};

// Every op of this build, in registration order.
const BenchOpRegistry& bench_ops();

}  // namespace eps::bench
