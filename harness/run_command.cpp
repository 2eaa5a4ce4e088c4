#include "harness/run_command.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include <CLI/CLI.hpp>

#include "conformance/mpi_gtest.hpp"
#include "harness/bench_command.hpp"
#include "harness/command_start.hpp"
#include "harness/json_io.hpp"
#include "harness/platform.hpp"
#include "harness/plot_command.hpp"
#include "harness/presets.hpp"
#include "harness/version.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"

namespace eps {
namespace {

constexpr const char* kOps[] = {"dispatch", "combine", "roundtrip"};
constexpr const char* kModes[] = {"ht", "ll"};

std::vector<ParamSpec> run_param_specs() {
  std::vector<ParamSpec> specs;
  for (std::string_view name : {"transport", "preset", "tokens", "ranks-per-node", "timeout", "strict",
                                "fabric", "signal", "chaos", "allow-unsafe"}) {
    specs.push_back(param_spec(name));
  }
  specs.push_back({.name = "out",
                   .kind = ParamKind::kString,
                   .default_text = "results/local",
                   .help = "Directory for info.json, conformance.xml, bench-*.json, plots/ and report.md"});
  // -n / -w are bench's own definitions, with defaults sized for a whole run (>= 9 repetitions feed the
  // SPEC 9.2 gate).
  for (ParamSpec& spec : bench_param_specs()) {
    if (spec.name == "iters") spec.default_text = "9";
    if (spec.name == "warmup") spec.default_text = "2";
    if (spec.name == "iters" || spec.name == "warmup") specs.push_back(std::move(spec));
  }
  return specs;
}

// The bench parameters of one op/mode: this run's values where it sets them, the process environment
// (EPSUITE_*) for the rest, then the bench defaults.
Result<std::unique_ptr<Params>> bench_params(const Params& run, const std::string& mode,
                                             const std::string& json_path) {
  std::map<std::string, std::string> values = {
      {"transport", run.string("transport")},
      {"preset", run.string("preset")},
      {"timeout", fmt::format("{}", run.number("timeout"))},
      {"ranks-per-node", fmt::format("{}", run.integer("ranks-per-node"))},
      {"iters", fmt::format("{}", run.integer("iters"))},
      {"warmup", fmt::format("{}", run.integer("warmup"))},
      {"check", "true"},
      {"mode", mode},
      {"json", json_path},
      {"fabric", run.string("fabric")},
      {"signal", run.string("signal")},
      {"chaos", run.string("chaos")},
      {"allow-unsafe", run.enabled("allow-unsafe") ? "true" : "false"}};
  if (run.source("tokens") != ParamSource::kDefault) values["tokens"] = run.sweep("tokens").text;
  std::vector<ParamSpec> specs = bench_command_specs();
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

Status write_info(const std::string& path, const Platform& platform, const Params& run) {
  Json info{{"suite_version", kSuiteVersion},
            {"git_sha", kGitSha},
            {"platform", platform_to_json(platform)},
            {"config", run.to_json()}};
  return write_json_file_atomic(path, info);
}

Status make_out_dir(const std::string& out) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(out) / "plots", ec);
  if (ec) return invalid_argument("--out", "cannot create '{}': {}", out, ec.message());
  return Status();
}

}  // namespace

RunCommand::RunCommand() : params_(std::make_unique<Params>(run_param_specs())) {}

void RunCommand::bind(CLI::App& app) {
  params_->bind(app);
  app.add_option("--tag", tags_,
                 "User tag key=value stored under platform.tags of the results (repeatable; not part of the "
                 "fingerprint)");
  app.footer(
      "Runs platform discovery, the conformance suite, a checked bench sweep (dispatch, combine, roundtrip; "
      "HT and LL) of every selected transport, plots and report.md into --out. Exit codes (SPEC 10): the "
      "largest of the steps' codes.");
}

int RunCommand::run(const std::vector<std::string>& argv) {
  CommandStart start = start_command(*params_, tags_);
  Status status = start.status;
  const double timeout = start.timeout_seconds;
  if (status.ok()) {
    Result<std::vector<std::string>> transports = transport::select_transports(params_->string("transport"));
    status = transports.status();
    if (transports.ok()) conformance::set_selected_transports(*transports);
  }
  if (status.ok()) {  // --fabric/--signal/--chaos: an invalid combination is refused up front (exit 2)
    conformance::set_fabric_selection({params_->string("fabric"), params_->string("signal"),
                                       params_->string("chaos"), params_->enabled("allow-unsafe")});
    status = conformance::preflight_transports(timeout);
  }
  if (status.ok()) {  // refuse a preset this rank count cannot run before doing anything (exit 2)
    const auto ranks_per_node = static_cast<int>(params_->integer("ranks-per-node"));  // 0: one node
    status = resolve_preset(params_->string("preset"), mpi::size(),
                            ranks_per_node == 0 ? mpi::size() : ranks_per_node, params_->sweep("tokens"))
                 .status();
  }
  if (status.ok() && mpi::is_root()) status = make_out_dir(params_->string("out"));
  int code = mpi::agree_exit_code(status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  const std::filesystem::path out(params_->string("out"));

  mpi::root_print("[1/4] platform -> {}\n", (out / "info.json").string());
  Result<Platform> platform = discover_platform(Deadline(timeout));
  if (!platform.ok()) mpi::fatal(platform.status());
  platform->tags = start.tags;
  status = mpi::is_root() ? write_info((out / "info.json").string(), *platform, *params_) : Status();
  int worst = mpi::agree_exit_code(status, Deadline(timeout));

  mpi::root_print("[2/4] conformance -> {}\n", (out / "conformance.xml").string());
  conformance::set_strict(params_->enabled("strict"));
  conformance::set_timeout_seconds(timeout);
  // The exit-code agreement self-test prints deliberate errors by design; ctest and `epsuite check` run it.
  const int failed =
      conformance::run_tests({"--gtest_output=xml:" + (out / "conformance.xml").string(), "--gtest_brief=1",
                              "--gtest_filter=-MpiRuntime.ExitCodeIsTheMaximumOverRanks"});
  worst = std::max(
      worst, mpi::agree_exit_code(
                 failed == 0 ? Status() : Status(StatusCode::kCheckFailed, "conformance: some tests failed"),
                 Deadline(timeout)));

  std::vector<std::string> bench_files;
  for (const char* op : kOps) {
    for (const char* mode : kModes) {
      const std::string file = (out / fmt::format("bench-{}-{}.json", op, mode)).string();
      mpi::root_print("[3/4] bench {} --mode {} -> {}\n", op, mode, file);
      Result<std::unique_ptr<Params>> params = bench_params(*params_, mode, file);
      code = mpi::agree_exit_code(params.status(), Deadline(timeout));
      worst = std::max(worst, code != 0 ? code : run_bench(**params, op, *platform, argv));
      if (std::filesystem::exists(file)) bench_files.push_back(file);
    }
  }

  mpi::root_print("[4/4] plots and report -> {}\n", (out / "report.md").string());
  status = Status();
  if (mpi::is_root()) {
    status = bench_files.empty() ? Status() : plot_results(bench_files, (out / "plots").string());
    const Status report = write_run_report(out.string());
    if (status.ok()) status = report;
  }
  worst = std::max(worst, mpi::agree_exit_code(status, Deadline(timeout)));
  mpi::root_print("epsuite run: results in {} (exit {})\n", out.string(), worst);
  return mpi::finalize(worst, Deadline(timeout));
}

}  // namespace eps
