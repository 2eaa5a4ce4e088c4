#include "harness/cli/cli.hpp"

#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "conformance/suite.hpp"
#include "harness/cli/bench.hpp"
#include "harness/cli/compare.hpp"
#include "harness/cli/info.hpp"
#include "harness/cli/model.hpp"
#include "harness/cli/planner.hpp"
#include "harness/cli/plot.hpp"
#include "harness/cli/ref.hpp"
#include "harness/cli/run.hpp"
#include "harness/cli/soak.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "reference/common/version.hpp"

namespace eps {

int epsuite_main(int argc, char** argv) {
  CLI::App app{"epsuite: benchmark and conformance suite for MoE expert parallelism"};
  app.set_version_flag("--version", std::string("epsuite ") + kSuiteVersion + " (git " + kGitSha + ")");
  app.require_subcommand(1);
  app.footer(
      "Run `epsuite COMMAND --help` for the flags of a command. Every flag has an EPSUITE_* environment "
      "twin; a flag wins over its twin. Exit codes (docs/errors.md 10): 0 passed, 1 conformance failure, 2 "
      "usage or "
      "configuration error, 3 environment (device, provider, peer failure, timeout).");
  add_ref_commands(app);

  conformance::SuiteCommand check_command;
  CLI::App* check = app.add_subcommand(
      "check", "Run the conformance suite in-process on every rank (mpirun -np N epsuite check)");
  check_command.bind(*check);

  InfoCommand info_command;
  CLI::App* info = app.add_subcommand("info", "Show hosts, ranks, MPI library, build options and a preset");
  info_command.bind(*info);

  BenchCommand bench_command;
  CLI::App* bench = app.add_subcommand("bench",
                                       "Measure a transport (dispatch, combine, roundtrip) or a fabric "
                                       "(fabric): mpirun -np N epsuite bench OP");
  bench_command.bind(*bench);

  PlotCommand plot_command;
  CLI::App* plot = app.add_subcommand(
      "plot", "Draw PNG/SVG figures and plots.json from results JSON (epsuite plot FILE... --out DIR)");
  plot_command.bind(*plot);

  RunCommand run_command;
  CLI::App* run = app.add_subcommand(
      "run",
      "The main job: platform, conformance, bench sweep, plots and report.md (mpirun ... epsuite run)");
  run_command.bind(*run);

  CompareCommand compare_command;
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Regression gate: compare two results files case by case (epsuite compare BASE.json NEW.json)");
  compare_command.bind(*compare);

  SoakCommand soak_command;
  CLI::App* soak = app.add_subcommand(
      "soak",
      "Chaos soak: the conformance cases under N chaos seeds, with replay lines (mpirun ... epsuite soak)");
  soak_command.bind(*soak);

  ModelCommand model_command;
  CLI::App* model = app.add_subcommand(
      "model",
      "Predict dispatch/combine at EP sizes not measured, from results (epsuite model --from FILE...)");
  model_command.bind(*model);

  PlannerCommand planner_command;
  CLI::App* planner = app.add_subcommand(
      "planner",
      "The EPLB planner as a process, without MPI (EPSUITE_EPLB_KEY=... epsuite planner --listen HOST:PORT)");
  planner_command.bind(*planner);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (mpi::launcher_rank() != 0) return e.get_exit_code() == 0 ? 0 : 2;
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // docs/errors.md 10: usage errors exit 2
  } catch (const Error& e) {
    std::fprintf(stderr, "epsuite: error: %s\n", e.what());
    return e.exit_code();
  }
  if (check->parsed()) return check_command.run(*check);
  if (info->parsed()) return info_command.run();
  if (bench->parsed()) return bench_command.run(std::vector<std::string>(argv, argv + argc));
  if (plot->parsed()) return plot_command.run();
  if (run->parsed()) return run_command.run(std::vector<std::string>(argv, argv + argc));
  if (compare->parsed()) return compare_command.run();
  if (planner->parsed()) return planner_command.run();
  if (model->parsed()) return model_command.run(std::vector<std::string>(argv, argv + argc));
  if (soak->parsed()) return soak_command.run(*soak, std::vector<std::string>(argv, argv + argc));
  return 0;
}

}  // namespace eps
