#include "harness/cli/model.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness/plot/plot.hpp"
#include "impls/runtime/params.hpp"
#include "perf/bench/presets.hpp"
#include "perf/model/model.hpp"
#include "reference/dispatch/expert_map.hpp"
#include "results/document.hpp"

namespace eps {
namespace {

std::vector<ParamSpec> model_param_specs() {
  std::vector<ParamSpec> s;
  s.push_back({.name = "preset",
               .kind = ParamKind::kChoice,
               .default_text = "ll-deepseek-v3",
               .help = "model: the preset whose routing is predicted at every --ep size (docs/presets.md 11)",
               .choices = preset_names()});
  s.push_back({.name = "ep",
               .kind = ParamKind::kSweep,
               .default_text = "8:1024:x2",
               .help = "model: EP sizes (ranks) to predict, a:b:xF, a:b:+S or a list",
               .int_min = 1,
               .int_max = dispatch::kMaxRanks});
  s.push_back(
      {.name = "ranks-per-node",
       .kind = ParamKind::kInteger,
       .default_text = "8",
       .help = "model: ranks per node of the predicted cluster (an EP size smaller than it is one node)",
       .int_min = 1,
       .int_max = dispatch::kMaxRanks});
  s.push_back({.name = "cpus-per-node",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help = "model: CPUs per node of the predicted cluster; ranks beyond them are time-sliced "
                       "(docs/model.md 16.3); 0 = every rank has its own CPU",
               .int_min = 0,
               .int_max = 65536});
  s.push_back({.name = "tokens",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help = "model: tokens per rank of the predictions; 0 = the preset's",
               .int_min = 0,
               .int_max = 65536});
  s.push_back({.name = "workload",
               .kind = ParamKind::kString,
               .default_text = "uniform",
               .help = "model: routing generator of the predictions (docs/numerics.md 2.3: uniform, zipf:S, "
                       "masked:P, trace:FILE, ...)"});
  s.push_back({.name = "seed",
               .kind = ParamKind::kInteger,
               .default_text = "1",
               .help = "model: routing seed of the predictions",
               .int_min = 0,
               .int_max = std::int64_t{1} << 62});
  s.push_back({.name = "fabric",
               .kind = ParamKind::kString,
               .default_text = "",
               .help = "model: the inter-node link of predictions that span nodes (a fabric of the bench "
                       "fabric inputs); unset = the only inter-node fabric fitted"});
  s.push_back({.name = "fit-ranks",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help = "model: rank count the operation cost lines are fitted on; 0 = the smallest in each "
                       "series (docs/model.md 16.3)",
               .int_min = 0,
               .int_max = dispatch::kMaxRanks});
  s.push_back({.name = "allow-mixed",
               .kind = ParamKind::kSwitch,
               .default_text = "false",
               .help = "model: fit results of different platforms together (refused by default)"});
  s.push_back({.name = "max-error",
               .kind = ParamKind::kNumber,
               .default_text = "0",
               .help =
                   "model: exit 1 when a validation point with CPU share 1 has |predicted / measured - 1| "
                   "above this fraction, or none was judged (docs/model.md 16.5); 0 = report only",
               .num_min = 0,
               .num_max = 1000});
  s.push_back(param_spec("json"));
  s.push_back({.name = "plot",
               .kind = ParamKind::kString,
               .default_text = "",
               .help = "model: directory for the prediction figures (PNG/SVG, created)"});
  return s;
}

std::string fit_text(const model::GatedFit& fit) {
  if (fit.withheld) return "withheld: " + fit.reason;
  std::vector<std::string> parts;
  for (const model::LineFit& line : fit.ranges) {
    parts.push_back(fmt::format("[{:.0f}, {:.0f}] B: {:.2f} us + B / {:.3f} GB/s (R^2 {:.3f})", line.x_min,
                                line.x_max, line.intercept, model::line_gbps(line), line.r2));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void print_model(const model::Model& m, const std::vector<model::Prediction>& predictions) {
  fmt::print("# links (bench fabric; docs/model.md 16.2)\n");
  for (const model::LinkModel& l : m.links) {
    fmt::print("#  {:<14} {:<11} {:<12} {} ranks: {}\n", l.fabric, l.scope, l.measure, l.ranks,
               fit_text(l.fit));
  }
  fmt::print("# operations (cost of the busiest rank's bytes at CPU share 1; docs/model.md 16.3)\n");
  for (const model::OpModel& o : m.ops) {
    fmt::print("#  {} at {} ranks: {}\n", o.series, o.fit_ranks, fit_text(o.cost));
  }
  fmt::print("# validation (docs/model.md 16.5)\n");
  fmt::print("# {:>10} {:>5} {:>6} {:>6} {:>12} {:>12} {:>12} {:>8}  series\n", "role", "ranks", "tokens",
             "share", "bytes", "measured", "predicted", "error");
  for (const model::Validation& v : m.validation) {
    fmt::print("  {:>10} {:>5} {:>6} {:>6.2f} {:>12.0f} {:>12.2f} {:>12.2f} {:>7.1f}%  {}\n", v.role, v.ranks,
               v.tokens, v.cpu_share, v.busiest_rank_bytes, v.measured_p50_us, v.predicted_us, 100 * v.error,
               v.series);
  }
  fmt::print("# predictions (docs/model.md 16.4)\n");
  fmt::print("# {:>5} {:>5} {:>5} {:>12} {:>12} {:>12} {:>10} {:>8} {:>6}  series\n", "ep", "nodes", "op",
             "time_us", "bytes", "inter_bytes", "GB/s", "balance", "peers");
  for (const model::Prediction& p : predictions) {
    if (p.skipped) {
      fmt::print("  {:>5} {:>5} {:>5}  skipped: {}  {}\n", p.ep, p.nodes, p.op.substr(0, 5), *p.skipped,
                 p.series);
      continue;
    }
    fmt::print("  {:>5} {:>5} {:>5} {:>12.2f} {:>12.0f} {:>12.0f} {:>10.3f} {:>8.3f} {:>6}  {}\n", p.ep,
               p.nodes, p.op.substr(0, 5), p.time_us, p.traffic.busiest_rank_bytes,
               p.traffic.busiest_rank_inter_bytes, p.gbps, p.traffic.balancedness, p.traffic.max_peers,
               p.series);
  }
}

// The verdict of --max-error (docs/model.md 16.5): only validation points that ran with CPU share 1 are
// judged; oversubscribed ones are counted and reported. Empty when every judged point is within `bound`;
// a bound that judged nothing fails too.
std::string beyond_bound(const model::Model& m, double bound) {
  int judged = 0, beyond = 0, reported = 0;
  double worst = 0;
  for (const model::Validation& v : m.validation) {
    if (v.role != "validation") continue;
    if (v.cpu_share > 1) {
      ++reported;
      continue;
    }
    ++judged;
    if (std::abs(v.error) <= bound) continue;
    ++beyond;
    worst = std::max(worst, std::abs(v.error));
  }
  fmt::print("# bound {:.0f}%: {} validation point(s) judged, {} oversubscribed point(s) reported only\n",
             100 * bound, judged, reported);
  if (judged == 0) return "no validation point ran with CPU share 1: nothing was judged";
  if (beyond == 0) return "";
  return fmt::format("{} of {} judged validation point(s) beyond {:.0f}% (worst {:.0f}%)", beyond, judged,
                     100 * bound, 100 * worst);
}

Result<int> run_model(const Params& params, const std::vector<std::string>& from,
                      const std::vector<std::string>& validate, const std::vector<std::string>& argv) {
  if (from.empty()) return invalid_argument("--from", "needs at least one results file");
  std::vector<model::ModelSource> sources;
  for (const std::string& path : from) {
    EPS_ASSIGN_OR_RETURN(ResultsDocument doc, read_results_file(path));
    sources.push_back({path, std::move(doc), false});
  }
  for (const std::string& path : validate) {
    EPS_ASSIGN_OR_RETURN(ResultsDocument doc, read_results_file(path));
    sources.push_back({path, std::move(doc), true});
  }
  model::ModelOptions options;
  options.fit_ranks = static_cast<int>(params.integer("fit-ranks"));
  options.allow_mixed = params.enabled("allow-mixed");
  EPS_ASSIGN_OR_RETURN(const model::Model fitted, model::fit_model(sources, options));
  model::PredictOptions predict;
  predict.preset = params.string("preset");
  predict.ep_sizes = params.sweep("ep").values;
  predict.ranks_per_node = static_cast<int>(params.integer("ranks-per-node"));
  predict.cpus_per_node = static_cast<int>(params.integer("cpus-per-node"));
  predict.tokens = params.integer("tokens");
  predict.workload = params.string("workload");
  predict.seed = static_cast<std::uint64_t>(params.integer("seed"));
  predict.fabric = params.string("fabric");
  EPS_ASSIGN_OR_RETURN(const std::vector<model::Prediction> predictions, model::predict(fitted, predict));
  fmt::print("# epsuite model: {} input file(s), preset {}\n{}", sources.size(), predict.preset,
             params.header_block());
  print_model(fitted, predictions);
  const std::string json_path = params.string("json");
  const std::string plot_dir = params.string("plot");
  if (!json_path.empty() || !plot_dir.empty()) {
    const RunHeader header =
        make_run_header(argv, sources.front().document.header.platform, params.to_json());
    Json document = {{"schema_version", kResultsSchemaVersion},
                     {"kind", "model"},
                     {"suite_version", header.suite_version},
                     {"git_sha", header.git_sha},
                     {"start_time", header.start_time},
                     {"argv", header.argv},
                     {"platform", header.platform},
                     {"config", header.config},
                     {"oversubscribed", nullptr},
                     {"results", Json::array()},
                     {"model", model::model_to_json(sources, fitted, predictions)}};
    const std::string written = json_path.empty() ? plot_dir + "/model.json" : json_path;
    if (!plot_dir.empty()) std::filesystem::create_directories(plot_dir);
    EPS_RETURN_IF_ERROR(write_json_file_atomic(written, document));
    if (!plot_dir.empty())
      EPS_RETURN_IF_ERROR(run_plot_helper("epsuite_model_plot.py", {"--out", plot_dir, written}));
  }
  const double bound = params.number("max-error");
  if (bound > 0) {
    const std::string beyond = beyond_bound(fitted, bound);
    if (!beyond.empty()) {
      fmt::print("# FAILED: {}\n", beyond);
      return 1;
    }
    fmt::print("# every judged validation point within {:.0f}%\n", 100 * bound);
  }
  return 0;
}

}  // namespace

ModelCommand::ModelCommand() : params_(std::make_unique<Params>(model_param_specs())) {}
ModelCommand::~ModelCommand() = default;

void ModelCommand::bind(CLI::App& app) {
  app.add_option("--from", from_,
                 "Results JSON documents (docs/results.md 9.1) of bench fabric/dispatch/combine")
      ->required();
  app.add_option(
      "--validate", validate_,
      "Results JSON documents only compared with the predictions, never fitted (docs/model.md 16.5)");
  params_->bind(app);
  app.footer(
      "Fits links (bench fabric) and operation cost lines (bench dispatch/combine at the smallest rank "
      "count), validates them on the other rank counts and predicts the preset at every --ep size "
      "(docs/model.md 16). Exit 0; 1 a validation error beyond --max-error; 2 bad input; 3 python3 missing "
      "for --plot.");
}

int ModelCommand::run(const std::vector<std::string>& argv) const {
  Result<int> code = [&]() -> Result<int> {
    EPS_RETURN_IF_ERROR(params_->resolve());
    return run_model(*params_, from_, validate_, argv);
  }();
  std::fflush(stdout);
  if (!code.ok()) {
    std::fprintf(stderr, "epsuite: error: %s\n", code.status().message().c_str());
    return code.status().exit_code();
  }
  return *code;
}

}  // namespace eps
