#include "harness/cli/soak.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include "conformance/suite.hpp"
#include "harness/cli/command_start.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/fabric/signal/signal_strategy.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/registry.hpp"
#include "reference/common/version.hpp"
#include "reference/data/philox.hpp"

namespace eps {
namespace {

// Counter word 3 of the soak's draws: apart from the chaos decorator's own stream keyed by the same seed.
constexpr std::uint32_t kSoakStream = 0x50A4'0000u;
constexpr std::string_view kNegativeControlSuite = "NegativeControl";
constexpr std::string_view kWrongRoundsProperty = "negative_control_wrong_rounds";
const std::vector<std::string> kSafeSignals = {"imm-seq", "recv-count", "sender-barrier"};
// Failing cases printed with their messages; beyond that only their replay lines, and beyond kMaxReplays
// only the counts (a soak of a deliberately broken strategy fails every seed).
constexpr std::int64_t kMaxDetailed = 10;
constexpr std::int64_t kMaxReplays = 200;
constexpr int kMaxMessageLines = 4;
constexpr int kMaxPartsShown = 3;
constexpr std::size_t kMaxSeedsListed = 20;
// The decorator's decisions are seeded, but which of them a poll meets depends on how the ranks interleave.
constexpr const char* kReplayNote =
    "soak: a replay line reruns the same case under the same chaos options; the ranks' interleaving is not "
    "recorded, so a failure that does not show at once may need --gtest_repeat=20 added\n";

std::vector<ParamSpec> soak_param_specs() {
  std::vector<ParamSpec> specs;
  specs.push_back(
      {.name = "seeds",
       .kind = ParamKind::kInteger,
       .default_text = "100",
       .help = "Chaos seeds to run (seed i is first-seed + i; each runs every selected case once)",
       .int_min = 1,
       .int_max = 1'000'000});
  specs.push_back({.name = "first-seed",
                   .kind = ParamKind::kInteger,
                   .default_text = "1",
                   .help = "The first chaos seed (a replay of seed S: --first-seed S --seeds 1)",
                   .int_min = 0,
                   .int_max = std::int64_t{1} << 62});
  specs.push_back({.name = "progress-every",
                   .kind = ParamKind::kInteger,
                   .default_text = "100",
                   .help = "Rank 0 prints one progress line every this many seeds",
                   .int_min = 1,
                   .int_max = 1'000'000});
  ParamSpec transport = param_spec("transport");
  transport.default_text = "direct,proxy";
  specs.push_back(std::move(transport));
  specs.push_back(param_spec("fabric"));
  specs.push_back(
      {.name = "signal",
       .kind = ParamKind::kString,
       .default_text = "safe",
       .help =
           "Signal strategies (docs/fabrics.md 6.2), one per seed in turn: a comma-separated list of auto, "
           "imm-seq, recv-count, sender-barrier, fabric-order, or 'safe' (imm-seq, recv-count, "
           "sender-barrier: those safe on an unordered fabric). fabric-order needs --allow-unsafe and "
           "must fail (a soak that can fail)"});
  for (std::string_view name : {"allow-unsafe", "device", "iface", "proxy-threads", "strict", "timeout",
                                "allow-fallback", "require-fabric", "repeat-check"}) {
    specs.push_back(param_spec(name));
  }
  return specs;
}

Result<std::vector<std::string>> parse_signals(const std::string& text) {
  const std::vector<std::string>& known = fabric::signal_strategy_names();
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const std::vector<std::string> names = item == "safe" ? kSafeSignals : std::vector<std::string>{item};
    for (const std::string& name : names) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        return invalid_argument("--signal", "must be 'safe' or a comma-separated list of {{{}}}, got '{}'",
                                fmt::join(known, ", "), item);
      }
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  if (out.empty()) return invalid_argument("--signal", "names no strategy, got '{}'", text);
  return out;
}

std::string first_lines(const std::string& text, int lines) {
  std::string out;
  std::stringstream in(text);
  std::string line;
  for (int n = 0; std::getline(in, line); ++n) {
    if (n == lines) return out + "    ...\n";
    out += "    " + line + "\n";
  }
  return out;
}

std::string seed_list(const std::vector<std::uint64_t>& seeds) {
  std::string out;
  for (std::size_t i = 0; i < seeds.size() && i < kMaxSeedsListed; ++i) {
    out += fmt::format("{}{}", i == 0 ? "" : ", ", seeds[i]);
  }
  if (seeds.size() > kMaxSeedsListed) out += fmt::format(", ... ({} in all)", seeds.size());
  return out.empty() ? "none" : out;
}

// What stays fixed over the run, and what the listener needs to set and to replay a seed.
struct SoakPlan {
  std::uint64_t first_seed = 1;
  std::int64_t seeds = 0;
  std::int64_t progress_every = 100;
  std::vector<std::string> signals;
  std::vector<std::string> transports;
  fabric::FabricSelection base;  // fabric, allow-unsafe, iface, proxy threads; signal and chaos per seed
  bool fabric_named = false;
  std::string replay_command;  // "mpirun -np R EXE check"
  std::string replay_extra;    // the non-default flags a replay needs too (" --device cpu --timeout 30")
};

struct SoakTally {
  int cases_per_seed = -1;  // tests matching the filter (known at the first iteration)
  std::int64_t seeds_done = 0;
  std::int64_t cases_run = 0;
  std::int64_t unavailable = 0;
  std::string first_unavailable;
  std::int64_t mismatches = 0;
  std::vector<std::uint64_t> failing_seeds;
  std::int64_t controls_run = 0;
  std::int64_t controls_caught = 0;
  std::vector<std::uint64_t> missed_seeds;
  double seconds = 0;
};

// Sets each iteration's chaos and signal on every rank; on rank 0, counts and prints (after the runner has
// re-raised the other ranks' failures: it is appended before the runner's listeners).
class SoakListener : public testing::EmptyTestEventListener {
 public:
  SoakListener(const SoakPlan& plan, SoakTally& tally)
      : plan_(plan), tally_(tally), start_(std::chrono::steady_clock::now()) {}

  void OnTestIterationStart(const testing::UnitTest& unit, int iteration) override {
    seed_ = plan_.first_seed + static_cast<std::uint64_t>(iteration);
    signal_ = plan_.signals[seed_ % plan_.signals.size()];  // so --first-seed S --seeds 1 reruns seed S
    chaos_ = soak_chaos(seed_).to_string();
    fabric::FabricSelection selection = plan_.base;
    selection.signal = signal_;
    selection.chaos = chaos_;
    conformance::set_fabric_selection(selection, plan_.fabric_named);
    if (iteration == 0 && mpi::is_root()) {
      tally_.cases_per_seed = unit.test_to_run_count();
      mpi::root_print("# soak: {} seeds from {}, seed S with signal S mod {} of {}, {} cases per seed\n#\n",
                      plan_.seeds, plan_.first_seed, plan_.signals.size(), fmt::join(plan_.signals, ", "),
                      tally_.cases_per_seed);
    }
  }

  void OnTestEnd(const testing::TestInfo& info) override {
    if (!mpi::is_root()) return;
    const testing::TestResult& result = *info.result();
    const bool control = info.test_suite_name() == kNegativeControlSuite;
    if (result.Skipped()) {
      if (tally_.unavailable++ == 0 && result.total_part_count() > 0) {
        tally_.first_unavailable = result.GetTestPartResult(0).message();
      }
      return;
    }
    if (control) {
      bool recorded = false;
      for (int p = 0; p < result.test_property_count(); ++p) {
        recorded = recorded || result.GetTestProperty(p).key() == kWrongRoundsProperty;
      }
      if (!recorded && result.Passed()) return;  // not run here (needs direct and R >= 2)
      ++tally_.controls_run;
      if (result.Passed()) {
        ++tally_.controls_caught;
        return;
      }
      if (tally_.missed_seeds.empty() || tally_.missed_seeds.back() != seed_)
        tally_.missed_seeds.push_back(seed_);
      report(info, "NEGATIVE CONTROL MISSED", "direct");
      return;
    }
    ++tally_.cases_run;
    if (!result.Failed()) return;
    ++tally_.mismatches;
    if (tally_.failing_seeds.empty() || tally_.failing_seeds.back() != seed_) {
      tally_.failing_seeds.push_back(seed_);
    }
    report(info, "FAILED", case_transport(info));
  }

  void OnTestIterationEnd(const testing::UnitTest&, int iteration) override {
    tally_.seeds_done = iteration + 1;
    tally_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (tally_.seeds_done % plan_.progress_every != 0 || tally_.seeds_done == plan_.seeds) return;
    mpi::root_print(
        "soak: {}/{} seeds ({}..{}): {} cases, {} mismatches, negative controls {}/{} caught, {:.1f} s\n",
        tally_.seeds_done, plan_.seeds, plan_.first_seed, seed_, tally_.cases_run, tally_.mismatches,
        tally_.controls_caught, tally_.controls_run, tally_.seconds);
  }

 private:
  // The transport a case instantiates for (its parameter name starts with it), else every selected one.
  std::string case_transport(const testing::TestInfo& info) const {
    const std::string_view name = info.name();
    const std::size_t slash = name.rfind('/');
    if (slash != std::string_view::npos) {
      const std::string_view param = name.substr(slash + 1);
      for (const std::string& t : plan_.transports) {
        if (param.starts_with(t + "_")) return t;
      }
    }
    return fmt::format("{}", fmt::join(plan_.transports, ","));
  }

  void report(const testing::TestInfo& info, std::string_view what, const std::string& transport) {
    const std::int64_t failures =
        tally_.mismatches + static_cast<std::int64_t>(tally_.controls_run - tally_.controls_caught);
    if (failures > kMaxReplays) return;
    const std::string name = fmt::format("{}.{}", info.test_suite_name(), info.name());
    std::string text =
        fmt::format("soak: {} seed {} (signal {}, chaos {}): {}\n", what, seed_, signal_, chaos_, name);
    if (failures <= kMaxDetailed) {
      const testing::TestResult& result = *info.result();
      int shown = 0;
      for (int p = 0; p < result.total_part_count() && shown < kMaxPartsShown; ++p) {
        const testing::TestPartResult& part = result.GetTestPartResult(p);
        if (!part.failed()) continue;
        ++shown;
        text += fmt::format("  {}:{}:\n{}", part.file_name() ? part.file_name() : "unknown",
                            part.line_number(), first_lines(part.message(), kMaxMessageLines));
      }
    }
    text +=
        fmt::format("  replay: {} --transport {} --fabric {} --signal {} --chaos {}{}{} --gtest_filter={}\n",
                    plan_.replay_command, transport, plan_.base.fabric, signal_, chaos_, plan_.replay_extra,
                    signal_ == "fabric-order" ? " --allow-unsafe" : "", name);
    if (failures == kMaxReplays) text += "soak: further failures are counted, not printed\n";
    mpi::root_print("{}", text);
  }

  const SoakPlan& plan_;
  SoakTally& tally_;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t seed_ = 0;
  std::string signal_;
  std::string chaos_;
};

// The flags besides transport, fabric, signal and chaos that a replay needs to run the same way.
std::string replay_extra(const Params& params) {
  std::string out;
  for (const char* name : {"device", "iface", "proxy-threads", "timeout", "require-fabric"}) {
    if (params.source(name) == ParamSource::kDefault) continue;
    if (std::string_view(name) == "proxy-threads") {
      out += fmt::format(" --{} {}", name, params.integer(name));
    } else if (std::string_view(name) == "timeout") {
      out += fmt::format(" --{} {}", name, params.number(name));
    } else {
      out += fmt::format(" --{} {}", name, params.string(name));
    }
  }
  if (params.enabled("strict")) out += " --strict";
  if (params.enabled("allow-fallback")) out += " --allow-fallback";
  if (params.enabled("repeat-check")) out += " --repeat-check";
  return out;
}

}  // namespace

fabric::ChaosOptions soak_chaos(std::uint64_t seed) {
  const data::PhiloxKey key{{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}};
  const data::PhiloxBlock a = data::philox4x32_10(data::PhiloxCounter{{0, 0, 0, kSoakStream}}, key);
  const data::PhiloxBlock b = data::philox4x32_10(data::PhiloxCounter{{1, 0, 0, kSoakStream}}, key);
  fabric::ChaosOptions options;
  options.seed = seed;
  options.window = kSoakWindowMin + static_cast<int>(a.v[0] % (kSoakWindowMax - kSoakWindowMin + 1));
  options.split = kSoakSplitMin + a.v[1] % (kSoakSplitMax - kSoakSplitMin + 1);
  options.delay = static_cast<int>(a.v[2] % (kSoakDelayMax + 1));
  options.empty = static_cast<int>(a.v[3] % (kSoakEmptyMax + 1));
  options.backpressure = static_cast<int>(b.v[0] % (kSoakBackpressureMax + 1));
  return options;
}

SoakCommand::SoakCommand() : params_(std::make_unique<Params>(soak_param_specs())) {}

void SoakCommand::bind(CLI::App& app) {
  params_->bind(app);
  app.allow_extras();
  app.footer(fmt::format(
      "Without --gtest_filter=PATTERN the soak runs:\n  {}\n"
      "Chaos per seed S (docs/soak.md): seed=S, window in [{}, {}], split in [{}, {}], delay in [0, "
      "{}], "
      "empty in [0, {}], backpressure in [0, {}], drawn from S alone. A failing case prints its replay "
      "command (epsuite check ... --chaos ... --gtest_filter=CASE).\n"
      "Exit codes (docs/errors.md 10): 0 no mismatch and every negative control caught, 1 a mismatch or a "
      "missed negative control, 2 usage error, 3 environment (timeout, peer failure).",
      kSoakDefaultFilter, kSoakWindowMin, kSoakWindowMax, kSoakSplitMin, kSoakSplitMax, kSoakDelayMax,
      kSoakEmptyMax, kSoakBackpressureMax));
}

int SoakCommand::run(CLI::App& app, const std::vector<std::string>& argv) {
  CommandStart start = start_command(*params_, {});
  Status status = start.status;
  std::string filter = kSoakDefaultFilter;
  for (const std::string& arg : app.remaining()) {
    if (!status.ok()) break;
    if (arg.starts_with("--gtest_filter=")) {
      filter = arg.substr(std::string_view("--gtest_filter=").size());
    } else {
      status = invalid_argument(arg,
                                "unknown argument (see epsuite soak --help; of the GoogleTest flags the soak "
                                "takes only --gtest_filter=PATTERN, it sets --gtest_repeat itself)");
    }
  }
  SoakPlan plan;
  if (status.ok()) {
    Result<std::vector<std::string>> transports = transport::select_transports(params_->string("transport"));
    Result<std::vector<std::string>> signals = parse_signals(params_->string("signal"));
    if (!transports.ok()) status = transports.status();
    if (status.ok() && !signals.ok()) status = signals.status();
    if (status.ok()) {
      plan.transports = std::move(transports).value();
      plan.signals = std::move(signals).value();
      plan.first_seed = static_cast<std::uint64_t>(params_->integer("first-seed"));
      plan.seeds = params_->integer("seeds");
      plan.progress_every = params_->integer("progress-every");
      plan.base.fabric = params_->string("fabric");
      plan.base.allow_unsafe = params_->enabled("allow-unsafe");
      plan.base.iface = params_->string("iface");
      plan.base.proxy_threads = static_cast<int>(params_->integer("proxy-threads"));
      plan.base.allow_fallback = params_->enabled("allow-fallback");
      plan.base.require_fabric = params_->string("require-fabric");
      plan.fabric_named = params_->source("fabric") != ParamSource::kDefault;
      plan.replay_command =
          fmt::format("mpirun -np {} {} check", mpi::size(), argv.empty() ? "epsuite" : argv[0]);
      plan.replay_extra = replay_extra(*params_);
    }
    // Every strategy over a chaos fabric, so fabric-order without --allow-unsafe is refused here (exit 2).
    for (const std::string& signal : plan.signals) {
      if (!status.ok()) break;
      fabric::FabricSelection selection = plan.base;
      selection.signal = signal;
      selection.chaos = soak_chaos(plan.first_seed).to_string();
      status = fabric::validate_fabric_selection(selection);
    }
  }
  const double timeout = start.timeout_seconds;
  int agreed = mpi::agree_exit_code(status, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));

  mpitest::set_strict(params_->enabled("strict"));
  mpitest::set_timeout_seconds(timeout);
  conformance::set_selected_transports(plan.transports,
                                       params_->source("transport") != ParamSource::kDefault);
  fabric::FabricSelection first = plan.base;
  first.signal = plan.signals.front();
  first.chaos = soak_chaos(plan.first_seed).to_string();
  conformance::set_fabric_selection(first, plan.fabric_named);
  conformance::set_repeat_check(params_->enabled("repeat-check"));
  const Status opened = conformance::open_device(params_->string("device"),
                                                 params_->source("device") != ParamSource::kDefault, timeout);
  agreed = mpi::agree_exit_code(opened, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  const Result<device::Device*> device = conformance::selected_device();
  mpi::root_print("# epsuite {} (git {}) chaos soak on {} ranks\n{}# device (rank 0): {}\n#\n", kSuiteVersion,
                  kGitSha, mpi::size(), params_->header_block(),
                  device.ok() ? (*device)->describe() : "unavailable: " + device.status().message());
  const Status usable = conformance::preflight_transports(timeout);
  agreed = mpi::agree_exit_code(usable, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  mpi::root_print("{}# cases: --gtest_filter={}\n", conformance::capability_table(), filter);

  SoakTally tally;
  const int tests = mpitest::run_tests(
      {fmt::format("--gtest_repeat={}", plan.seeds), "--gtest_filter=" + filter, "--gtest_color=no"},
      [&plan, &tally](testing::TestEventListeners& listeners) {
        // The soak prints its own lines; GoogleTest's per-test lines would be seeds x cases long.
        if (mpi::is_root()) delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new SoakListener(plan, tally));
      });
  if (testing::UnitTest::GetInstance()->test_to_run_count() == 0) {
    const Status none = invalid_argument("--gtest_filter", "'{}' matches no case here", filter);
    return mpi::finalize(mpi::agree_exit_code(none, Deadline(timeout)), Deadline(timeout));
  }
  if (!mpi::is_root()) return mpi::finalize(tests, Deadline(timeout));

  const bool missed = tally.controls_caught != tally.controls_run;
  const int code = std::max(tests, tally.mismatches > 0 || missed ? 1 : 0);
  const std::string unavailable =
      tally.unavailable == 0 ? ""
                             : fmt::format(" (first: {})", tally.first_unavailable.substr(
                                                               0, tally.first_unavailable.find('\n')));
  std::string controls =
      tally.controls_run == 0
          ? "soak: negative controls not run (they need the direct transport and R >= 2)\n"
          : fmt::format(
                "soak: negative controls caught {}/{} ({:.1f}%){}\n", tally.controls_caught,
                tally.controls_run,
                100.0 * static_cast<double>(tally.controls_caught) / static_cast<double>(tally.controls_run),
                missed ? fmt::format(", missed in seeds {}", seed_list(tally.missed_seeds)) : "");
  mpi::root_print(
      "soak: seeds {} ({}..{}), signals {}, transports {}, fabric {}, R = {}\n"
      "soak: cases run {}, unavailable {}{}, mismatches {} in {} seeds{}\n{}"
      "soak: wall {:.1f} s, {:.3f} s per seed\n{}"
      "epsuite soak: {} (exit {})\n",
      tally.seeds_done, plan.first_seed, plan.first_seed + static_cast<std::uint64_t>(tally.seeds_done) - 1,
      fmt::join(plan.signals, ","), fmt::join(plan.transports, ","), plan.base.fabric, mpi::size(),
      tally.cases_run, tally.unavailable, unavailable, tally.mismatches, tally.failing_seeds.size(),
      tally.failing_seeds.empty() ? "" : fmt::format(" ({})", seed_list(tally.failing_seeds)), controls,
      tally.seconds, tally.seeds_done > 0 ? tally.seconds / static_cast<double>(tally.seeds_done) : 0.0,
      code == 0 ? "" : kReplayNote, code == 0 ? "PASS" : "FAIL", code);
  return mpi::finalize(code, Deadline(timeout));
}

}  // namespace eps
