#include "harness/cli/run.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "conformance/suite.hpp"
#include "harness/cli/command_start.hpp"
#include "harness/cli/step_log.hpp"
#include "harness/platform/platform.hpp"
#include "harness/plot/plot.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/json_io.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "impls/transport/registry.hpp"
#include "perf/bench/driver.hpp"
#include "perf/bench/oversubscription.hpp"
#include "perf/bench/presets.hpp"
#include "reference/common/version.hpp"
#include "results/op_fields.hpp"

namespace eps {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOps[] = {"dispatch", "combine", "roundtrip"};
constexpr const char* kModes[] = {"ht", "ll"};
constexpr int kSteps = 6;

// The layer step's benches (docs/layer.md 4.4): the preset's stack with token choice, then with expert choice
// over a denoising trajectory (mask ratios 0 .. 1 at the preset's tokens per rank) under its k schedule and
// under the static k, so that the report shows how a schedule moves load and time.
struct LayerBench {
  const char* name;
  const char* router;
  const char* schedule;
  const char* mask_ratio;
  bool trajectory;  // one token count (the preset's), every mask ratio
};
constexpr LayerBench kLayerBenches[] = {{"tc", "tc", "preset", "0.5", false},
                                        {"ec", "ec", "preset", "0:1:0.25", true},
                                        {"ec-static", "ec", "static", "0:1:0.25", true}};

// "layer ec: 0 wrong; 1234 tokens/s at mask ratio 0 .. 3456 at 1 (mpi)" from the cases of one layer bench.
std::string layer_summary(const LayerBench& bench, const bench::BenchOutcome& outcome) {
  std::int64_t wrong = 0;
  std::map<double, double> best_rate;  // mask ratio -> the best transport's tokens/s
  for (const CaseResult& c : outcome.cases) {
    if (c.check) wrong += c.check->mismatches;
    const double ratio = c.extra.value(op_field::kMaskRatio, 0.0);
    best_rate[ratio] = std::max(best_rate[ratio], c.extra.value(op_field::kTokensPerS, 0.0));
  }
  std::string line = fmt::format("layer {}: ", bench.name);
  if (best_rate.empty()) return line + "nothing measured";
  if (best_rate.size() == 1) {
    line += fmt::format("{:.0f} tokens/s", best_rate.begin()->second);
  } else {
    line += fmt::format("{:.0f} tokens/s at mask ratio {} .. {:.0f} at {}", best_rate.begin()->second,
                        best_rate.begin()->first, best_rate.rbegin()->second, best_rate.rbegin()->first);
  }
  return line + fmt::format(" (best transport); {} wrong", wrong);
}

// The EPLB step (docs/eplb.md 8.6): a few load windows of the preset's stack under the drift workload, the
// deepseek policy against the static placement as the baseline, every step checked, on the first selected
// transport in the LL layout (which every transport declares). 12 steps in windows of 2 give the planner time
// for two rebalances.
constexpr const char* kEplbPolicies = "deepseek,static";
constexpr const char* kEplbBaseline = "static";
constexpr const char* kEplbSteps = "12";
constexpr const char* kEplbInterval = "2";

// "eplb: deepseek β 0.93 vs static 0.71, 0 wrong, 2 rebalances" from the cases of the EPLB bench: per policy
// the mean realized β of the windows after the first (window 0 runs the initial static placement under every
// policy), and the switches of the first policy that is not the baseline.
std::string eplb_summary(const bench::BenchOutcome& outcome) {
  std::map<std::string, std::vector<double>> later;  // policy -> realized β of windows 1, 2, ...
  std::map<std::string, double> first;               // policy -> realized β of window 0
  std::map<std::string, std::int64_t> switches;
  std::vector<std::string> order;
  std::int64_t wrong = 0;
  for (const CaseResult& c : outcome.cases) {
    if (c.check) wrong += c.check->mismatches;
    const std::string policy = c.extra.value(op_field::kPolicy, std::string());
    if (std::find(order.begin(), order.end(), policy) == order.end()) order.push_back(policy);
    const double beta = c.extra.contains(op_field::kBalancedness)
                            ? c.extra[op_field::kBalancedness].value(op_field::kRealized, 0.0)
                            : 0.0;
    if (c.extra.value(op_field::kWindow, 0) == 0) {
      first[policy] = beta;
    } else {
      later[policy].push_back(beta);
    }
    switches[policy] += c.extra.value(op_field::kSwitches, std::int64_t{0});
  }
  if (order.empty()) return "eplb: nothing measured";
  const auto mean_beta = [&](const std::string& policy) {
    const std::vector<double>& v = later[policy];
    return v.empty() ? first[policy]
                     : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  };
  std::vector<std::string> parts;
  for (const std::string& policy : order) {
    parts.push_back(fmt::format("{}{} {:.2f}", policy, parts.empty() ? " β" : "", mean_beta(policy)));
  }
  const auto planned =
      std::find_if(order.begin(), order.end(), [](const std::string& p) { return p != kEplbBaseline; });
  const std::string& shown = planned != order.end() ? *planned : order.front();
  return fmt::format("eplb: {}, {} wrong, {} rebalances", fmt::join(parts, " vs "), wrong, switches[shown]);
}

std::vector<ParamSpec> run_param_specs() {
  std::vector<ParamSpec> specs;
  for (std::string_view name :
       {"transport", "timeout", "strict", "device", "fabric", "signal", "chaos", "allow-unsafe", "iface",
        "proxy-threads", "allow-fallback", "require-fabric"}) {
    specs.push_back(param_spec(name));
  }
  for (ParamSpec& spec : preset_param_specs()) specs.push_back(std::move(spec));
  specs.push_back({.name = "out",
                   .kind = ParamKind::kString,
                   .default_text = "epsuite-out",
                   .help =
                       "Directory for info.json, conformance.xml, bench-*.json, plots/, logs/ and report.md; "
                       "must be new or empty (the default is relative to the current directory and ignored "
                       "by git in the repository's root)"});
  specs.push_back({.name = "force",
                   .kind = ParamKind::kSwitch,
                   .default_text = "false",
                   .help = "Replace --out when it holds an earlier run (it has info.json)"});
  specs.push_back(
      {.name = "verbose",
       .kind = ParamKind::kSwitch,
       .default_text = "false",
       .help = "Also print every step's log (configuration, capability table, test output, tables)"});
  // -n / -w are bench's own definitions, with defaults sized for a whole run (>= 9 repetitions feed the
  // docs/results.md 9.2 gate).
  for (ParamSpec& spec : bench::driver_param_specs()) {
    if (spec.name == "iters") spec.default_text = "9";
    if (spec.name == "warmup") spec.default_text = "2";
    if (spec.name == "iters" || spec.name == "warmup") specs.push_back(std::move(spec));
  }
  return specs;
}

// The bench parameters of one op/mode: this run's values where it sets them, the process environment
// (EPSUITE_*) for the rest, then the bench defaults.
Result<std::unique_ptr<Params>> bench_params(const Params& run, const std::string& mode,
                                             const std::string& json,
                                             const std::map<std::string, std::string>& overrides = {}) {
  std::map<std::string, std::string> values = {
      {"transport", run.string("transport")},
      {"preset", run.string("preset")},
      {"timeout", fmt::format("{}", run.number("timeout"))},
      {"strict", run.enabled("strict") ? "true" : "false"},
      {"ranks-per-node", fmt::format("{}", run.integer("ranks-per-node"))},
      {"iters", fmt::format("{}", run.integer("iters"))},
      {"warmup", fmt::format("{}", run.integer("warmup"))},
      {"check", "true"},
      {"mode", mode},
      {"json", json},
      {"device", run.string("device")},
      {"fabric", run.string("fabric")},
      {"signal", run.string("signal")},
      {"chaos", run.string("chaos")},
      {"allow-unsafe", run.enabled("allow-unsafe") ? "true" : "false"},
      {"iface", run.string("iface")},
      {"proxy-threads", std::to_string(run.integer("proxy-threads"))},
      {"allow-fallback", run.enabled("allow-fallback") ? "true" : "false"},
      {"require-fabric", run.string("require-fabric")}};
  if (run.source("tokens") != ParamSource::kDefault) values["tokens"] = run.sweep("tokens").text;
  for (const auto& [name, value] : overrides) values[name] = value;
  std::vector<ParamSpec> specs = bench::bench_param_specs();
  std::map<std::string, std::string> by_env;
  for (const ParamSpec& spec : specs) {
    if (auto it = values.find(spec.name); it != values.end()) by_env[env_name(spec)] = it->second;
  }
  auto params = std::make_unique<Params>(std::move(specs));
  EPS_RETURN_IF_ERROR(params->resolve([&by_env](const std::string& name) -> std::optional<std::string> {
    if (auto it = by_env.find(name); it != by_env.end()) return it->second;
    return process_environment(name);
  }));
  return params;
}

// --out must be new or empty, so that no earlier file enters this run's report; --force replaces an earlier
// run directory, never an arbitrary one.
Status make_out_dir(const fs::path& out, bool force) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) {
    if (!force) {
      return invalid_argument("--out",
                              "'{}' exists and is not empty; choose a new directory, or pass --force to "
                              "replace an earlier run",
                              out.string());
    }
    if (!fs::exists(out / "info.json")) {
      return invalid_argument("--force", "'{}' holds no earlier run (no info.json); refusing to delete it",
                              out.string());
    }
    fs::remove_all(out, ec);
    if (ec) return invalid_argument("--out", "cannot remove '{}': {}", out.string(), ec.message());
  }
  fs::create_directories(out / "plots", ec);
  if (!ec) fs::create_directories(out / "logs", ec);
  if (ec) return invalid_argument("--out", "cannot create '{}': {}", out.string(), ec.message());
  return Status();
}

// "dispatch ht: direct fastest, 2.71x mpi at 256 tokens; 0 wrong" from the cases of one bench.
std::string bench_summary(const std::string& op, const std::string& mode,
                          const bench::BenchOutcome& outcome) {
  std::int64_t tokens = -1;
  for (const CaseResult& c : outcome.cases) {
    for (const auto& [name, value] : c.sizes) {
      if (name == "tokens") tokens = std::max(tokens, value);
    }
  }
  std::map<std::string, double> p50;  // at the largest token count
  std::int64_t wrong = 0;
  for (const CaseResult& c : outcome.cases) {
    if (c.check) wrong += c.check->mismatches;
    const bool largest = std::any_of(c.sizes.begin(), c.sizes.end(), [&](const auto& s) {
      return s.first == "tokens" && s.second == tokens;
    });
    if (!largest) continue;
    std::vector<double> sorted = c.times_us;
    std::sort(sorted.begin(), sorted.end());
    p50[c.transport] = nearest_rank_percentile(sorted, 50);
  }
  std::string line = fmt::format("{} {}: ", op, mode);
  if (p50.empty()) return line + "nothing measured";
  const auto best =
      std::min_element(p50.begin(), p50.end(), [](auto& a, auto& b) { return a.second < b.second; });
  line += fmt::format("{} fastest ({:.1f} us at {} tokens)", best->first, best->second, tokens);
  if (p50.count("mpi") > 0 && best->first != "mpi")
    line += fmt::format(", {:.2f}x mpi", p50["mpi"] / best->second);
  return line + fmt::format("; {} wrong", wrong);
}

class RunJob {
 public:
  RunJob(const Params& params, const std::vector<std::string>& argv, std::map<std::string, std::string> tags,
         double timeout)
      : params_(params), argv_(argv), tags_(std::move(tags)), timeout_(timeout), out_(params.string("out")) {}

  // Flags, selection, preflight, preset and --out, agreed over ranks before anything runs.
  int prepare() {
    Status status = select();
    if (status.ok() && mpi::is_root()) status = make_out_dir(out_, params_.enabled("force"));
    return mpi::agree_exit_code(status, Deadline(timeout_));
  }

  int run() {
    step_platform();
    if (!platform_) return worst_;
    step_conformance();
    step_bench();
    step_layer();
    step_eplb();
    step_report();
    mpi::root_print("epsuite run: {} (exit {}); report {}\n", worst_ == 0 ? "PASS" : "FAIL", worst_,
                    (out_ / "report.md").string());
    return worst_;
  }

 private:
  Status select() {
    EPS_ASSIGN_OR_RETURN(std::vector<std::string> names,
                         transport::select_transports(params_.string("transport")));
    conformance::set_selected_transports(names, params_.string("transport") != "all");
    conformance::set_fabric_selection(fabric::fabric_selection_from(params_),
                                      params_.source("fabric") != ParamSource::kDefault);
    EPS_RETURN_IF_ERROR(conformance::open_device(
        params_.string("device"), params_.source("device") != ParamSource::kDefault, timeout_));
    EPS_RETURN_IF_ERROR(conformance::preflight_transports(timeout_));
    EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout nodes, mpi::node_layout(MPI_COMM_WORLD, Deadline(timeout_)));
    nodes_ = nodes.nodes();
    // SPEC 14.2: nodes of different sizes run as they are; the platform line names their sizes.
    node_sizes_ = nodes.ranks_per_node() == 0 ? fmt::format(" of {} ranks", nodes.sizes_text()) : "";
    EPS_ASSIGN_OR_RETURN(const ResolvedPreset preset, resolve_preset_flags(params_, nodes));
    preset_tokens_ = preset.preset->tokens_per_rank;
    eplb_transport_ = names.empty() ? std::string("mpi") : names.front();
    // docs/results.md 9.5: the ranks, and the proxy's threads where the proxy transport runs, against the
    // CPUs.
    EPS_ASSIGN_OR_RETURN(const bench::CpuCensus census, bench::take_cpu_census(Deadline(timeout_)));
    int helpers = 0;
    for (const std::string& name : names) {
      helpers = std::max(
          helpers, bench::helper_threads_per_rank(name, static_cast<int>(params_.integer("proxy-threads"))));
    }
    oversubscribed_ = bench::find_oversubscription(census, helpers);
    return Status();
  }

  StepLog log(const std::string& step) const {
    return StepLog(out_ / "logs" / (step + ".log"), params_.enabled("verbose"));
  }

  void agree(const Status& status) {
    worst_ = std::max(worst_, mpi::agree_exit_code(status, Deadline(timeout_)));
  }

  void step_platform() {
    Result<Platform> platform = discover_platform(Deadline(timeout_), params_.string("device"));
    if (!platform.ok()) mpi::fatal(platform.status());
    platform->tags = tags_;
    const int refused = mpi::agree_exit_code(
        record_fabric_preflight(fabric::fabric_selection_from(params_), timeout_, *platform),
        Deadline(timeout_));
    if (refused != 0) {
      worst_ = std::max(worst_, refused);
      return;
    }
    Status written;
    {
      StepLog step = log("platform");
      mpi::root_print("# epsuite {} (git {}) run\n{}", kSuiteVersion, kGitSha, params_.header_block());
      if (mpi::is_root()) {
        const Json info{
            {"suite_version", kSuiteVersion},
            {"git_sha", kGitSha},
            {"platform", platform_to_json(*platform)},
            {"config", params_.to_json()},
            {"oversubscribed", oversubscribed_ ? bench::oversubscription_to_json(*oversubscribed_) : Json()}};
        written = write_json_file_atomic((out_ / "info.json").string(), info);
      }
    }
    agree(written);
    std::vector<std::string> hosts;
    for (const RankPlatform& r : platform->ranks) {
      if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
    }
    mpi::root_print("[1/{}] platform: {} ranks on {} node(s){} ({}), {}, fingerprint {} -> {}\n", kSteps,
                    mpi::size(), nodes_, node_sizes_, fmt::join(hosts, ", "), platform->node.cpu_model,
                    platform_fingerprint(*platform).substr(0, 8), (out_ / "info.json").string());
    mpi::root_print("  fabric: {}\n", fabric::describe_preflight(*platform->fabric));
    if (oversubscribed_) {
      mpi::root_print("  oversubscribed: {}\n", bench::oversubscription_line(*oversubscribed_));
    }
    platform_ = std::move(platform).value();
  }

  void step_conformance() {
    mpitest::set_strict(params_.enabled("strict"));
    mpitest::set_timeout_seconds(timeout_);
    int failed = 0;
    {
      StepLog step = log("conformance");
      mpi::root_print("{}", conformance::capability_table());
      failed = mpitest::run_tests(
          {"--gtest_output=xml:" + (out_ / "conformance.xml").string(), "--gtest_color=no"});
    }
    agree(failed == 0 ? Status() : Status(StatusCode::kCheckFailed, "conformance: some tests failed"));
    const mpitest::TestCounts counts = mpitest::last_test_counts();
    mpi::root_print("[2/{}] conformance: {} passed, {} failed, {} unavailable here -> {}\n", kSteps,
                    counts.passed, counts.failed, counts.skipped, (out_ / "conformance.xml").string());
    for (const std::string& test : counts.failed_tests) {
      mpi::root_print("  problem: {} failed (details in {})\n", test,
                      (out_ / "logs" / "conformance.log").string());
    }
  }

  // One bench of a step: `op` in `mode` with this run's parameters and `overrides`, its tables in the step's
  // log, its results in `file` (kept for the plots when written); the worst exit code so far is kept.
  // nullopt when the parameters were refused (agreed as the run's exit code).
  std::optional<bench::BenchOutcome> run_step_bench(
      const std::string& step_log, const std::string& op, const std::string& mode, const std::string& file,
      const std::map<std::string, std::string>& overrides = {}) {
    Result<std::unique_ptr<Params>> params = bench_params(params_, mode, file, overrides);
    agree(params.status());
    if (!params.ok()) return std::nullopt;
    bench::BenchOutcome outcome;
    {
      StepLog step = log(step_log);
      outcome = bench::run_bench(**params, {op, argv_, platform_to_json(*platform_)});
    }
    worst_ = std::max(worst_, outcome.exit_code);
    if (fs::exists(file)) bench_files_.push_back(file);
    return outcome;
  }

  static void print_problems(const bench::BenchOutcome& outcome) {
    for (const std::string& problem : outcome.unavailable) mpi::root_print("  problem: {}\n", problem);
  }

  void step_bench() {
    for (const char* op : kOps) {
      for (const char* mode : kModes) {
        const std::string file = (out_ / fmt::format("bench-{}-{}.json", op, mode)).string();
        const std::optional<bench::BenchOutcome> outcome = run_step_bench("bench", op, mode, file);
        if (!outcome) continue;
        mpi::root_print("[3/{}] bench {} -> {}\n", kSteps, bench_summary(op, mode, *outcome), file);
        print_problems(*outcome);
      }
    }
  }

  void step_layer() {
    for (const LayerBench& layer : kLayerBenches) {
      const std::string file = (out_ / fmt::format("bench-layer-{}.json", layer.name)).string();
      std::map<std::string, std::string> overrides = {
          {"router", layer.router}, {"schedule", layer.schedule}, {"mask-ratio", layer.mask_ratio}};
      if (layer.trajectory) overrides["tokens"] = std::to_string(preset_tokens_);
      const std::optional<bench::BenchOutcome> outcome =
          run_step_bench("layer", "layer", "ht", file, overrides);
      if (!outcome) continue;
      mpi::root_print("[4/{}] {} -> {}\n", kSteps, layer_summary(layer, *outcome), file);
      print_problems(*outcome);
    }
  }

  void step_eplb() {
    if (!node_sizes_.empty()) {
      // README "Not yet": bench eplb's local-first rule and move accounting count uniform nodes.
      mpi::root_print("[5/{}] eplb: not run: nodes{} differ in size (bench eplb needs nodes of one size)\n",
                      kSteps, node_sizes_);
      return;
    }
    const std::string file = (out_ / "bench-eplb.json").string();
    const std::map<std::string, std::string> overrides = {{"transport", eplb_transport_},
                                                          {"policy", kEplbPolicies},
                                                          {"workload", "drift"},
                                                          {"steps", kEplbSteps},
                                                          {"lb-interval", kEplbInterval}};
    const std::optional<bench::BenchOutcome> outcome = run_step_bench("eplb", "eplb", "ll", file, overrides);
    if (!outcome) return;
    mpi::root_print("[5/{}] {} -> {}\n", kSteps, eplb_summary(*outcome), file);
    print_problems(*outcome);
  }

  void step_report() {
    Status status;
    {
      StepLog step = log("report");
      if (mpi::is_root()) {
        status = bench_files_.empty() ? Status() : plot_results(bench_files_, (out_ / "plots").string());
        const Status report = write_run_report(out_.string());
        if (status.ok()) status = report;
      }
    }
    agree(status);
    mpi::root_print("[6/{}] report: plots in {}, report {}\n", kSteps, (out_ / "plots").string(),
                    (out_ / "report.md").string());
  }

  const Params& params_;
  const std::vector<std::string>& argv_;
  std::map<std::string, std::string> tags_;
  double timeout_;
  fs::path out_;
  int nodes_ = 1;
  std::string node_sizes_;  // " of 2, 1 ranks" when the nodes differ in size, else empty
  std::int64_t preset_tokens_ = 0;
  std::string eplb_transport_;                             // the EPLB step's: the first selected transport
  std::optional<bench::Oversubscription> oversubscribed_;  // docs/results.md 9.5
  int worst_ = 0;
  std::optional<Platform> platform_;
  std::vector<std::string> bench_files_;
};

}  // namespace

RunCommand::RunCommand() : params_(std::make_unique<Params>(run_param_specs())) {}

void RunCommand::bind(CLI::App& app) {
  params_->bind(app);
  add_tag_option(app, tags_);
  app.footer(
      "Runs platform discovery, the conformance suite, a checked bench sweep (dispatch, combine, "
      "roundtrip; HT and LL) of every selected transport, checked MoE layer steps, a short checked EPLB run "
      "(deepseek against static), plots and report.md into --out, printing one line "
      "per step; the details go to --out/logs/ (--verbose prints them too). Exit codes (docs/errors.md 10): "
      "the largest of the steps' codes.");
}

int RunCommand::run(const std::vector<std::string>& argv) {
  CommandStart start = start_command(*params_, tags_);
  const double timeout = start.timeout_seconds;
  int code = mpi::agree_exit_code(start.status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  RunJob job(*params_, argv, start.tags, timeout);
  code = job.prepare();
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  code = job.run();
  return mpi::finalize(code, Deadline(timeout));
}

}  // namespace eps
