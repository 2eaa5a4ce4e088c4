#include "harness/bench_command.hpp"
#include "harness/command_start.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "conformance/transport/problem.hpp"
#include "harness/bench_fabric.hpp"
#include "harness/platform.hpp"
#include "harness/presets.hpp"
#include "harness/results.hpp"
#include "harness/table.hpp"
#include "harness/version.hpp"
#include "impls/fabric/chaos/chaos_fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/transport/registry.hpp"
#include "reference/data/workload.hpp"
#include "reference/dispatch/byte_accounting.hpp"

namespace eps {
namespace {

using conformance::DispatchBuffers;
using conformance::Problem;
using conformance::ProblemShape;
using dispatch::PayloadType;
using transport::CombineTree;
using transport::Layout;

constexpr std::uint64_t kPayloadSeedOffset = 1;

// Everything a run needs, validated before anything runs or is written.
struct BenchPlan {
  std::string op;
  std::vector<std::string> transports;
  ResolvedPreset preset;
  Layout layout = Layout::kHtRankMajor;
  CombineTree tree = CombineTree::kHtRank;
  PayloadType dtype = PayloadType::kBf16;
  int hidden = 0;
  int max_tokens = 0;
  int iters = 0;
  int warmup = 0;
  bool check = false;
  std::string workload;
  std::uint64_t seed = 0;
  double timeout = kDefaultTimeoutSeconds;
  std::string fabric;  // SPEC 6: for transports that move data over a fabric
  std::string signal;
  std::string chaos;
  bool allow_unsafe = false;
};

ProblemShape shape_for(const BenchPlan& plan, int tokens) {
  ProblemShape s;
  s.ranks = plan.preset.ranks;
  s.experts = static_cast<int>(plan.preset.preset->experts);
  s.top_k = static_cast<int>(plan.preset.preset->topk);
  s.hidden = plan.hidden;
  s.max_tokens = plan.max_tokens;
  s.ranks_per_node = plan.preset.ranks_per_node;
  s.dtype = plan.dtype;
  s.tokens_per_rank = tokens;
  return s;
}

Status choose_contract(const Params& p, BenchPlan& plan) {
  if (p.string("mode") == "ll") {
    plan.layout = Layout::kLl;
    plan.tree = CombineTree::kLlWeighted;
  } else if (p.string("layout") == "expert-major") {
    plan.layout = Layout::kHtExpertMajor;
    plan.tree = CombineTree::kLlWeighted;
  } else {
    plan.layout = Layout::kHtRankMajor;
    plan.tree = plan.preset.nodes > 1 ? CombineTree::kHtTwoLevel : CombineTree::kHtRank;
  }
  const std::string& dtype = p.string("dtype");
  const std::string_view chosen =
      dtype == "preset" ? plan.preset.preset->dispatch_dtype : std::string_view(dtype);
  plan.dtype = chosen == "fp8" ? PayloadType::kFp8 : PayloadType::kBf16;
  plan.hidden = p.integer("hidden") > 0 ? static_cast<int>(p.integer("hidden"))
                                        : static_cast<int>(plan.preset.preset->hidden);
  if (plan.dtype == PayloadType::kFp8 && plan.hidden % 128 != 0) {
    return invalid_argument("--hidden", "{} is not a multiple of 128, required for fp8 payloads (SPEC 1.2)",
                            plan.hidden);
  }
  return Status();
}

Status check_tokens(const Params& p, BenchPlan& plan) {
  const std::int64_t t_max = p.integer("max-tokens") > 0 ? p.integer("max-tokens") : plan.preset.max_tokens;
  for (std::int64_t t : plan.preset.tokens.values) {
    if (t > t_max) {
      return invalid_argument("--tokens",
                              "{} tokens per rank exceed T_max = {} (--max-tokens); T_r > T_max is an "
                              "input error (SPEC 5.4)",
                              t, t_max);
    }
  }
  plan.max_tokens = static_cast<int>(t_max);
  return Status();
}

Status check_workload(const BenchPlan& plan) {
  EPS_ASSIGN_OR_RETURN(data::WorkloadSpec spec, data::parse_workload(plan.workload));
  const Status valid =
      data::validate_workload(spec, {plan.preset.ranks, static_cast<int>(plan.preset.preset->experts),
                                     static_cast<int>(plan.preset.preset->topk)});
  if (!valid.ok()) return invalid_argument("--workload", "{}", valid.message());
  return Status();
}

// The fabric flags are checked here even for transports that ignore them: a typo must not pass silently.
Status check_fabric_flags(const Params& p, BenchPlan& plan) {
  for (std::string_view name : {"sizes", "window"}) {
    if (p.source(name) == ParamSource::kFlag) {
      return invalid_argument(fmt::format("--{}", name), "is a flag of 'bench fabric', not of 'bench {}'",
                              plan.op);
    }
  }
  plan.fabric = p.string("fabric");
  plan.signal = p.string("signal");
  plan.chaos = p.string("chaos");
  plan.allow_unsafe = p.enabled("allow-unsafe");
  if (fabric::fabric_registry().find(plan.fabric, nullptr) == nullptr) {
    return invalid_argument("--fabric", "unknown fabric '{}'; registered: {}", plan.fabric,
                            fmt::join(fabric::fabric_registry().names(), ", "));
  }
  if (!plan.chaos.empty()) EPS_RETURN_IF_ERROR(fabric::parse_chaos(plan.chaos).status());
  return Status();
}

int ranks_on_first_host(const Platform& platform) {
  return static_cast<int>(
      std::count_if(platform.ranks.begin(), platform.ranks.end(),
                    [&](const RankPlatform& r) { return r.host == platform.ranks[0].host; }));
}

Result<BenchPlan> make_plan(const Params& p, const std::string& op, const Platform& platform) {
  BenchPlan plan;
  plan.op = op;
  plan.iters = static_cast<int>(p.integer("iters"));
  plan.warmup = static_cast<int>(p.integer("warmup"));
  plan.check = p.enabled("check");
  plan.workload = p.string("workload");
  plan.seed = static_cast<std::uint64_t>(p.integer("seed"));
  plan.timeout = p.number("timeout");
  EPS_ASSIGN_OR_RETURN(plan.transports, transport::select_transports(p.string("transport")));
  std::int64_t ranks_per_node = p.integer("ranks-per-node");
  if (ranks_per_node == 0) ranks_per_node = ranks_on_first_host(platform);
  EPS_ASSIGN_OR_RETURN(plan.preset, resolve_preset(p.string("preset"), mpi::size(),
                                                   static_cast<int>(ranks_per_node), p.sweep("tokens")));
  EPS_RETURN_IF_ERROR(choose_contract(p, plan));
  EPS_RETURN_IF_ERROR(check_tokens(p, plan));
  EPS_RETURN_IF_ERROR(check_workload(plan));
  EPS_RETURN_IF_ERROR(check_fabric_flags(p, plan));
  if (p.string("json") == "-") {
    return invalid_argument("--json",
                            "bench writes its results to a file (the table goes to stdout); '-' is not "
                            "supported here");
  }
  return plan;
}

// The result of one measured point.
struct Point {
  std::vector<double> times_us;  // per iteration, max over ranks
  int slowest_rank = 0;
  dispatch::Traffic traffic;  // SPEC 5.6, received by the slowest rank
  std::optional<CheckOutcome> check;
};

// The state one iteration works on: inputs, caller-owned outputs, the last handle.
struct Workspace {
  Problem problem;
  DispatchBuffers buffers;
  std::unique_ptr<transport::DispatchHandle> handle;
  std::vector<bf16> expert_y;
  std::vector<bf16> out;
};

Status run_once(transport::Transport& t, const BenchPlan& plan, Workspace& w) {
  if (plan.op != "combine") {
    EPS_ASSIGN_OR_RETURN(w.handle, t.dispatch(plan.layout, w.problem.input(), w.buffers.view()));
  }
  if (plan.op == "dispatch") return Status();
  return t.combine(*w.handle, {plan.tree, w.expert_y, {}, {}}, {w.out, {}});
}

Result<Workspace> prepare(transport::Transport& t, const BenchPlan& plan, int tokens) {
  const ProblemShape shape = shape_for(plan, tokens);
  EPS_ASSIGN_OR_RETURN(Problem problem, Problem::make(shape, plan.workload, mpi::rank(), plan.seed, 0,
                                                      plan.seed + kPayloadSeedOffset));
  Workspace w{std::move(problem), DispatchBuffers(plan.layout, shape), nullptr, {}, {}};
  // The expert outputs depend only on what arrives, which is the same every iteration: computed once,
  // outside the timed loop.
  EPS_ASSIGN_OR_RETURN(w.handle, t.dispatch(plan.layout, w.problem.input(), w.buffers.view()));
  w.expert_y = conformance::expert_outputs(shape, mpi::rank(), w.buffers, w.handle->num_recv_rows());
  w.out.assign(static_cast<std::size_t>(tokens) * plan.hidden, bf16{});
  return w;
}

dispatch::Traffic received(const BenchPlan& plan, const dispatch::DispatchPlan& problem, int rank) {
  const dispatch::ByteAccount account = dispatch::account_bytes(problem);
  // Expert-major moves one row per selection, like LL (SPEC 5.3 / 5.4); rank-major one per (r, t, q).
  const bool per_selection = plan.layout != Layout::kHtRankMajor;
  const dispatch::Traffic d = (per_selection ? account.ll_dispatch : account.ht_dispatch)[rank].recv;
  const dispatch::Traffic c = (per_selection ? account.ll_combine : account.ht_combine)[rank].recv;
  if (plan.op == "dispatch") return d;
  if (plan.op == "combine") return c;
  return {d.algo + c.algo, d.physical + c.physical};
}

Result<CheckOutcome> check_outputs(const BenchPlan& plan, const Workspace& w, const transport::Transport& t,
                                   const Deadline& deadline) {
  const int rank = mpi::rank();
  dispatch::CompareReport report;
  if (plan.op != "combine") {
    report.merge(conformance::check_dispatch(w.problem, rank, w.buffers, w.handle->num_recv_rows(),
                                             t.capabilities().ll_ordered));
  }
  if (plan.op != "dispatch") {
    EPS_ASSIGN_OR_RETURN(dispatch::CompareReport combined,
                         conformance::check_combine(w.problem, rank, plan.tree, false, w.out, {}));
    report.merge(combined);
  }
  return agree_check_outcome(report.mismatches(), report.ok() ? "" : report.to_string(), deadline);
}

Result<Point> measure(transport::Transport& t, const BenchPlan& plan, int tokens) {
  EPS_ASSIGN_OR_RETURN(Workspace w, prepare(t, plan, tokens));
  for (int i = 0; i < plan.warmup; ++i) EPS_RETURN_IF_ERROR(run_once(t, plan, w));
  std::vector<double> local(static_cast<std::size_t>(plan.iters));
  for (int i = 0; i < plan.iters; ++i) {
    EPS_RETURN_IF_ERROR(mpi::barrier(MPI_COMM_WORLD, Deadline(plan.timeout)));
    const double start = MPI_Wtime();
    EPS_RETURN_IF_ERROR(run_once(t, plan, w));
    local[i] = (MPI_Wtime() - start) * 1e6;
  }
  Point point;
  EPS_ASSIGN_OR_RETURN(RankTimes times, max_over_ranks(local, Deadline(plan.timeout)));
  point.times_us = std::move(times.times_us);
  point.slowest_rank = times.slowest_rank;
  point.traffic = received(plan, w.problem.plan(), point.slowest_rank);
  if (plan.check) {
    EPS_ASSIGN_OR_RETURN(point.check, check_outputs(plan, w, t, Deadline(plan.timeout)));
  }
  return point;
}

std::string config_block(const BenchPlan& plan, const transport::Transport& t, const Params& params,
                         const Platform& platform) {
  std::vector<std::string> hosts;
  for (const RankPlatform& r : platform.ranks) {
    if (std::find(hosts.begin(), hosts.end(), r.host) == hosts.end()) hosts.push_back(r.host);
  }
  std::string out = fmt::format("# epsuite bench {} (epsuite {}, git {}) on {} ranks, {} host(s)\n", plan.op,
                                kSuiteVersion, kGitSha, mpi::size(), hosts.size());
  out += fmt::format("#  {:<16} {}: {}\n", "transport", t.name(),
                     transport::transport_registry().find(t.name())->summary);
  out +=
      fmt::format("#  {:<16} {} dispatch, {} combine, {} payloads, H {}, T_max {}, workload {}, seed {}\n",
                  "contract", transport::layout_name(plan.layout), transport::tree_name(plan.tree),
                  transport::dtype_name(plan.dtype), plan.hidden, plan.max_tokens, plan.workload, plan.seed);
  out += fmt::format(
      "#  {:<16} MPI_Wtime per rank; {} warm-up then {} timed iterations, barrier before each; "
      "time = max over ranks\n",
      "timer", plan.warmup, plan.iters);
  out += fmt::format(
      "#  {:<16} SPEC 5.6 bytes received by the slowest rank (largest median); GB/s = bytes / p50\n",
      "bytes");
  return out + params.header_block() + preset_header_block(plan.preset);
}

CaseResult case_result(const BenchPlan& plan, const transport::Transport& t, int tokens, const Point& point) {
  CaseResult c;
  c.op = plan.op;
  c.transport = std::string(t.name());
  c.mode = fmt::format("{}/{}", transport::layout_name(plan.layout), transport::tree_name(plan.tree));
  c.dtype = std::string(transport::dtype_name(plan.dtype));
  c.sizes = {{"tokens", tokens},
             {"ranks", mpi::size()},
             {"hidden", plan.hidden},
             {"experts", plan.preset.preset->experts},
             {"top_k", plan.preset.preset->topk},
             {"max_tokens", plan.max_tokens}};
  c.times_us = point.times_us;
  c.algo_bytes = static_cast<double>(point.traffic.algo);
  c.physical_bytes = static_cast<double>(point.traffic.physical);
  c.slowest_rank = point.slowest_rank;
  c.check = point.check;
  return c;
}

TableRow table_row(int tokens, const Point& point) {
  std::vector<double> sorted = point.times_us;
  std::sort(sorted.begin(), sorted.end());
  TableRow row;
  row.tokens = tokens;
  row.bytes = point.traffic.algo;
  row.p50_us = nearest_rank_percentile(sorted, 50);
  row.p99_us = nearest_rank_percentile(sorted, 99);
  row.algo_gbps = bandwidth_gbps(static_cast<double>(point.traffic.algo), row.p50_us);
  row.physical_gbps = bandwidth_gbps(static_cast<double>(point.traffic.physical), row.p50_us);
  row.slowest_rank = point.slowest_rank;
  if (point.check) row.wrong = point.check->mismatches;
  return row;
}

Json config_json(const BenchPlan& plan, const Params& params) {
  Json config = params.to_json();
  config["op"] = plan.op;
  config["layout"] = transport::layout_name(plan.layout);
  config["tree"] = transport::tree_name(plan.tree);
  config["dtype"] = transport::dtype_name(plan.dtype);
  config["hidden"] = plan.hidden;
  config["max_tokens"] = plan.max_tokens;
  config["timer"] = "MPI_Wtime";
  config["preset_resolved"] = preset_to_json(plan.preset);
  return config;
}

// Measures every point of one transport; returns whether every checked point passed.
bool bench_transport(transport::Transport& t, const BenchPlan& plan, const Params& params,
                     const Platform& platform, ResultsWriter* writer) {
  mpi::root_print("{}", BenchTable(config_block(plan, t, params, platform)).header());
  bool passed = true;
  for (std::int64_t tokens : plan.preset.tokens.values) {
    Result<Point> point = measure(t, plan, static_cast<int>(tokens));
    if (!point.ok()) mpi::fatal(point.status());
    mpi::root_print("{}", BenchTable::row(table_row(static_cast<int>(tokens), *point)));
    if (point->check && !point->check->passed) {
      passed = false;
      mpi::root_print("# first mismatch: {}\n", point->check->first_mismatch.value_or(""));
    }
    if (writer != nullptr) {
      const Status written = writer->add_case(case_result(plan, t, static_cast<int>(tokens), *point));
      if (!written.ok()) mpi::fatal(written);
    }
  }
  return passed;
}

transport::TransportConfig transport_config(const BenchPlan& plan, double timeout) {
  transport::TransportConfig config = conformance::transport_config(shape_for(plan, 0), timeout);
  config.fabric = plan.fabric;
  config.signal = plan.signal;
  config.chaos = plan.chaos;
  config.allow_unsafe = plan.allow_unsafe;
  return config;
}

}  // namespace

Result<CheckOutcome> agree_check_outcome(std::int64_t mismatches, const std::string& first_mismatch,
                                         const Deadline& deadline) {
  const std::string mine = fmt::format("{}\n{}", mismatches, mismatches > 0 ? first_mismatch : "");
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> all, mpi::allgather_string(mine, MPI_COMM_WORLD, deadline));
  CheckOutcome outcome;
  for (const std::string& text : all) {
    const std::size_t split = text.find('\n');
    const std::int64_t n = std::stoll(text.substr(0, split));
    outcome.mismatches += n;
    if (n > 0 && !outcome.first_mismatch) outcome.first_mismatch = text.substr(split + 1);
  }
  outcome.passed = outcome.mismatches == 0;
  return outcome;
}

Result<RankTimes> max_over_ranks(const std::vector<double>& local, const Deadline& deadline) {
  const auto iters = static_cast<std::ptrdiff_t>(local.size());
  std::vector<double> all(local.size() * static_cast<std::size_t>(mpi::size()));
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_RETURN_IF_ERROR(MPI_Iallgather(local.data(), static_cast<int>(local.size()), MPI_DOUBLE, all.data(),
                                         static_cast<int>(local.size()), MPI_DOUBLE, MPI_COMM_WORLD,
                                         &request));
  EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline, [] {
    return fmt::format("MPI_Iallgather of bench times over {} ranks (rank {})", mpi::size(), mpi::rank());
  }));
  RankTimes out;
  out.times_us.assign(local.size(), 0.0);
  double worst_median = -1.0;
  for (int r = 0; r < mpi::size(); ++r) {
    std::vector<double> mine(all.begin() + r * iters, all.begin() + (r + 1) * iters);
    for (std::size_t i = 0; i < mine.size(); ++i) out.times_us[i] = std::max(out.times_us[i], mine[i]);
    std::sort(mine.begin(), mine.end());
    const double median = nearest_rank_percentile(mine, 50);
    if (median > worst_median) {
      worst_median = median;
      out.slowest_rank = r;
    }
  }
  return out;
}

std::vector<ParamSpec> bench_param_specs() {
  std::vector<ParamSpec> s;
  s.push_back({.name = "iters",
               .kind = ParamKind::kInteger,
               .default_text = "20",
               .help = "Timed iterations per point (identical on every rank)",
               .int_min = 1,
               .int_max = 100000,
               .short_flag = 'n'});
  s.push_back({.name = "warmup",
               .kind = ParamKind::kInteger,
               .default_text = "5",
               .help = "Warm-up iterations per point, not timed",
               .int_min = 0,
               .int_max = 100000,
               .short_flag = 'w'});
  s.push_back(
      {.name = "check",
       .kind = ParamKind::kSwitch,
       .default_text = "false",
       .help = "Check the last iteration bit-exactly against reference/dispatch (#wrong; exit 1 on any)",
       .short_flag = 'c'});
  s.push_back({.name = "mode",
               .kind = ParamKind::kChoice,
               .default_text = "ht",
               .help = "ht: high-throughput layouts (SPEC 5.2/5.3); ll: low-latency layout (SPEC 5.4)",
               .choices = {"ht", "ll"}});
  s.push_back(
      {.name = "layout",
       .kind = ParamKind::kChoice,
       .default_text = "rank-major",
       .help = "HT layout: rank-major (ht-rank or ht-two-level combine) or expert-major (ll-weighted)",
       .choices = {"rank-major", "expert-major"}});
  s.push_back({.name = "dtype",
               .kind = ParamKind::kChoice,
               .default_text = "preset",
               .help = "Dispatch payload type; 'preset' = the preset's dispatch dtype",
               .choices = {"preset", "bf16", "fp8"}});
  s.push_back({.name = "hidden",
               .kind = ParamKind::kInteger,
               .default_text = "0",
               .help = "Hidden size H; 0 = the preset's (fp8 needs a multiple of 128)",
               .int_min = 0,
               .int_max = 65536});
  s.push_back(
      {.name = "max-tokens",
       .kind = ParamKind::kInteger,
       .default_text = "0",
       .help = "T_max, the largest tokens per rank a call may pass (LL buffers); 0 = the largest swept count",
       .int_min = 0,
       .int_max = 65536});
  s.push_back(
      {.name = "workload",
       .kind = ParamKind::kString,
       .default_text = "uniform",
       .help =
           "Routing generator of SPEC 2.3 (uniform, zipf:S, hot:E,P, all-to-one, spread, masked:P, ...)"});
  s.push_back({.name = "seed",
               .kind = ParamKind::kInteger,
               .default_text = "1",
               .help = "Seed of routing and payloads (SPEC 2.1)",
               .int_min = 0,
               .int_max = std::int64_t{1} << 62});
  for (ParamSpec& spec : bench_fabric_param_specs()) s.push_back(std::move(spec));
  return s;
}

std::vector<ParamSpec> bench_command_specs() {
  std::vector<ParamSpec> specs;
  for (std::string_view name : {"transport", "preset", "tokens", "ranks-per-node", "json", "timeout",
                                "fabric", "signal", "chaos", "allow-unsafe"}) {
    specs.push_back(param_spec(name));
  }
  for (ParamSpec& s : bench_param_specs()) specs.push_back(std::move(s));
  return specs;
}

BenchCommand::BenchCommand() : params_(std::make_unique<Params>(bench_command_specs())) {}

void BenchCommand::bind(CLI::App& app) {
  app.add_option(
         "op", op_,
         "What to time: dispatch, combine (of a dispatch made once), roundtrip, or fabric (raw puts of "
         "--fabric against a shared-memory copy)")
      ->required()
      ->check(CLI::IsMember({"dispatch", "combine", "roundtrip", "fabric"}));
  params_->bind(app);
  app.add_option("--tag", tags_,
                 "User tag key=value stored under platform.tags of the results (repeatable; not part of the "
                 "fingerprint)");
  app.footer(
      "Prints an nccl-tests-style table (rank 0): tokens per rank, bytes (SPEC 5.6 algo bytes of the slowest "
      "rank), "
      "p50/p99 time in us (max over ranks per iteration, MPI_Wtime), algo and physical GB/s, slowest rank, "
      "#wrong "
      "(with -c). --fabric/--signal/--chaos/--allow-unsafe configure transports that move data over a "
      "fabric. "
      "'bench fabric --fabric NAME' prints per message size (--sizes) put GB/s (a --window of puts), put "
      "latency (half a ping-pong) and the GB/s of a shared-memory memcpy of the same bytes. Exit codes (SPEC "
      "10): 0 ok, 1 -c found wrong results, 2 bad input, 3 environment.");
}

int BenchCommand::run(const std::vector<std::string>& argv) {
  CommandStart start = start_command(*params_, tags_);
  Status status = start.status;
  const double timeout = start.timeout_seconds;
  int code = mpi::agree_exit_code(status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));

  Result<Platform> platform = discover_platform(Deadline(timeout));
  if (!platform.ok()) mpi::fatal(platform.status());
  platform->tags = start.tags;
  return mpi::finalize(run_bench(*params_, op_, *platform, argv), Deadline(timeout));
}

int run_bench(const Params& params, const std::string& op, const Platform& platform,
              const std::vector<std::string>& argv) {
  if (op == "fabric") return run_bench_fabric(params, platform, argv);
  const double timeout = params.number("timeout");
  Status status;
  Result<BenchPlan> plan = make_plan(params, op, platform);
  int code = mpi::agree_exit_code(plan.status(), Deadline(timeout));
  if (code != 0) return code;

  std::vector<std::unique_ptr<transport::Transport>> transports;
  for (const std::string& name : plan->transports) {
    Result<std::unique_ptr<transport::Transport>> t =
        transport::make_transport(name, transport_config(*plan, timeout));
    code = mpi::agree_exit_code(t.status(), Deadline(timeout));
    if (code != 0) return code;
    transports.push_back(std::move(t).value());
  }

  std::optional<ResultsWriter> writer;
  const std::string& json_path = params.string("json");
  if (mpi::is_root() && !json_path.empty()) {
    writer.emplace(json_path, make_run_header(argv, platform_to_json(platform), config_json(*plan, params)));
    status = writer->start();
  }
  code = mpi::agree_exit_code(status, Deadline(timeout));
  if (code != 0) return code;

  bool passed = true;
  for (auto& t : transports)
    passed = bench_transport(*t, *plan, params, platform, writer ? &*writer : nullptr) && passed;
  return mpi::agree_exit_code(
      passed ? Status() : Status(StatusCode::kCheckFailed, "bench -c found wrong results"),
      Deadline(timeout));
}

}  // namespace eps
