#include "harness/cli/bench.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "harness/cli/command_start.hpp"
#include "harness/platform/platform.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/driver.hpp"

namespace eps {

BenchCommand::BenchCommand() : params_(std::make_unique<Params>(bench::bench_param_specs())) {}

void BenchCommand::bind(CLI::App& app) {
  std::string ops;
  for (const std::string& name : bench::bench_ops().names()) {
    ops += fmt::format("{}{} ({})", ops.empty() ? "" : ", ", name, bench::bench_ops().find(name)->summary);
  }
  app.add_option("op", op_, "What to time: " + ops)
      ->required()
      ->check(CLI::IsMember(bench::bench_ops().names()));
  params_->bind(app);
  add_tag_option(app, tags_);
  app.footer(
      "Prints an nccl-tests-style table per series (rank 0): one row per point with p50/p99 (max over "
      "ranks per iteration, MPI_Wtime), bytes and GB/s (docs/dispatch.md 5.6), the slowest rank and #wrong "
      "(with -c). Flags of another op are refused. Exit codes (docs/errors.md 10): 0 ok, 1 -c found wrong "
      "results, 2 bad input, 3 environment.");
}

int BenchCommand::run(const std::vector<std::string>& argv) {
  CommandStart start = start_command(*params_, tags_);
  const double timeout = start.timeout_seconds;
  const int code = mpi::agree_exit_code(start.status, Deadline(timeout));
  if (code != 0) return mpi::finalize(code, Deadline(timeout));
  Result<Platform> platform = discover_platform(Deadline(timeout), params_->string("device"));
  if (!platform.ok()) mpi::fatal(platform.status());
  platform->tags = start.tags;
  const Status preflight =
      record_fabric_preflight(fabric::fabric_selection_from(*params_), timeout, *platform);
  const int refused = mpi::agree_exit_code(preflight, Deadline(timeout));
  if (refused != 0) return mpi::finalize(refused, Deadline(timeout));
  const bench::BenchRequest request{op_, argv, platform_to_json(*platform)};
  const int result = bench::run_bench(*params_, request).exit_code;
  return mpi::finalize(result, Deadline(timeout));  // the final deadline starts after the run
}

}  // namespace eps
