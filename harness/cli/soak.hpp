// `epsuite soak --seeds N [--first-seed S] [--transport T,...] [--fabric F] [--signal safe|S,...]
// [--gtest_filter=PATTERN]` (docs/soak.md): the conformance suites of `epsuite check`, run in-process on
// every rank once per chaos seed, each time over a differently configured chaos fabric (docs/fabrics.md 6.3).
//
// Seeds and what varies. Seed i of the run is s = first-seed + i (i = 0 .. N-1). Its chaos options come from
// `soak_chaos(s)` alone: window, split, delay, empty and backpressure drawn from Philox keyed by s inside the
// ranges below, so every rank derives the same options without communicating and a failure replays from the
// printed spec. Seed s runs with signal strategy s mod |signals| of --signal (default `safe`: imm-seq,
// recv-count and sender-barrier, the strategies that are safe on an unordered fabric), so each strategy gets
// every |signals|-th seed and --first-seed s --seeds 1 reruns seed s as it ran. The options are installed by
// a GoogleTest listener at OnTestIterationStart of
// --gtest_repeat iteration i (conformance::set_fabric_selection; every fabric transport a case creates reads
// it), i.e. between iterations, never during a test.
//
// Cases. By default a small fast subset: the transport contract (dispatch + combine, cached dispatch) on
// every declared contract with bf16 uniform routing, LL fp8 with every token sent to one rank, two-level HT
// with zero-token ranks, one MoE layer scenario (expert choice, LL) over the selected transports (default
// direct and proxy), plus the negative control (NegativeControl.FabricOrderOnTheChaosFabricIsCaught, which
// runs fabric-order under the seed's chaos and must be caught failing). --gtest_filter=PATTERN replaces the
// subset (other --gtest_* flags are refused: the soak sets --gtest_repeat itself).
//
// Output (rank 0): the `#` configuration block and capability table of `epsuite check`, one progress line
// every --progress-every seeds, a block per failing case (seed, signal, chaos spec, the first messages, and
// the exact replay command `mpirun -np R EPSUITE check --transport T --fabric F --signal S --chaos
// seed=...,window=...,split=...,delay=...,empty=...,backpressure=... --gtest_filter=CASE`), and a summary:
// seeds, cases run, unavailable, mismatches, negative controls caught / run, wall time, verdict. A timeout
// or peer failure inside a case ends the run with exit 3 and the transport's error, which names the chaos
// spec (docs/errors.md 10).
//
// Exit code (docs/errors.md 10): 0 no mismatch and every negative control that ran was caught; 1 a case
// failed under some seed or a negative control passed; 2 bad input (a flag out of range, an unknown
// transport, signal or argument, fabric-order without --allow-unsafe, a filter that matches no case); 3
// environment.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "impls/fabric/chaos/chaos_fabric.hpp"
#include "impls/runtime/params.hpp"

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

// The ranges soak_chaos draws from (all within parse_chaos's limits). They are the region where fabric-order
// is reliably broken within the negative control's 64 rounds, so that every seed proves its own teeth:
// measured at R = 2 over shm, a window below 8, split off, a delay above 8 polls or backpressure above 20%
// (especially together) let fabric-order survive 64 rounds in some runs (window 2, split 0, delay 32,
// backpressure 50: caught 0 of 15). docs/soak.md lists them.
inline constexpr int kSoakWindowMin = 8;
inline constexpr int kSoakWindowMax = 64;
inline constexpr std::size_t kSoakSplitMin = 64;  // split is always on
inline constexpr std::size_t kSoakSplitMax = 8192;
inline constexpr int kSoakDelayMax = 8;          // polls
inline constexpr int kSoakEmptyMax = 50;         // per cent
inline constexpr int kSoakBackpressureMax = 20;  // per cent

// The chaos options of soak seed `seed`: a pure function of the seed (the same on every rank and every run).
fabric::ChaosOptions soak_chaos(std::uint64_t seed);

// The cases a soak runs without --gtest_filter (see above).
inline constexpr const char* kSoakDefaultFilter =
    "Transports/TransportContract.*_bf16_uniform:"
    "Transports/TransportContract.*_ll_ll_weighted_fp8_all_to_one:"
    "Transports/TransportContract.*_ht_two_level_bf16_zero_token_ranks:"
    "Transports/LayerConformance.*_ll_bf16_ec_linear_reverse:"
    "NegativeControl.*";

class SoakCommand {
 public:
  SoakCommand();
  // Adds the soak's flags (--seeds, --first-seed, --progress-every, --signal as a list, and the selection
  // flags of `epsuite check`) and the acceptance of --gtest_filter.
  void bind(CLI::App& app);
  // After `app` parsed: initializes MPI, validates, preflights, runs the seeds and returns the exit code
  // agreed over ranks (MPI finalized). `argv[0]` names the executable in the replay lines.
  int run(CLI::App& app, const std::vector<std::string>& argv);

 private:
  std::unique_ptr<Params> params_;
};

}  // namespace eps
