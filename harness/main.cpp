// The `epsuite` command line. Errors are thrown once as eps::Error and become the exit codes of
// SPEC 10: 0 passed, 1 check failure or regression, 2 usage/configuration, 3 environment.
// Under mpirun every rank parses the same command line; only launcher rank 0 prints help, version and
// usage errors.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "conformance/mpi_gtest.hpp"
#include "harness/bench_command.hpp"
#include "harness/compare_command.hpp"
#include "harness/info_command.hpp"
#include "harness/plot_command.hpp"
#include "harness/ref_tool.hpp"
#include "harness/run_command.hpp"
#include "harness/version.hpp"
#include "impls/runtime/mpi_runtime.hpp"

namespace {

void add_ref_commands(CLI::App& app) {
  CLI::App* ref = app.add_subcommand("ref", "Run a reference oracle on a JSON document (see README)");
  ref->require_subcommand(1);
  for (const eps::RefTool& tool : eps::ref_tools()) {
    CLI::App* sub = ref->add_subcommand(std::string(tool.name), std::string(tool.help));
    auto in = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    sub->add_option("--in", *in, "Input JSON file")->required();
    sub->add_option("--out", *out, "Output JSON file (written atomically)")->required();
    sub->callback([tool, in, out] {
      eps::Json input = eps::value_or_throw(eps::read_json_file(*in));
      eps::Json output = eps::value_or_throw(tool.run(input));
      eps::throw_if_error(eps::write_json_file_atomic(*out, output));
    });
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"epsuite: benchmark and conformance suite for MoE expert parallelism"};
  app.set_version_flag("--version",
                       std::string("epsuite ") + eps::kSuiteVersion + " (git " + eps::kGitSha + ")");
  app.require_subcommand(1);
  app.footer(
      "Run `epsuite COMMAND --help` for the flags of a command. Every flag has an EPSUITE_* environment "
      "twin; a flag wins over its twin. Exit codes (SPEC 10): 0 passed, 1 conformance failure, 2 usage or "
      "configuration error, 3 environment (device, provider, peer failure, timeout).");
  add_ref_commands(app);

  eps::conformance::SuiteCommand check_command;
  CLI::App* check = app.add_subcommand(
      "check", "Run the conformance suite in-process on every rank (mpirun -np N epsuite check)");
  check_command.bind(*check);

  eps::InfoCommand info_command;
  CLI::App* info = app.add_subcommand("info", "Show hosts, ranks, MPI library, build options and a preset");
  info_command.bind(*info);

  eps::BenchCommand bench_command;
  CLI::App* bench = app.add_subcommand("bench",
                                       "Measure a transport (dispatch, combine, roundtrip) or a fabric "
                                       "(fabric): mpirun -np N epsuite bench OP");
  bench_command.bind(*bench);

  eps::PlotCommand plot_command;
  CLI::App* plot = app.add_subcommand(
      "plot", "Draw PNG/SVG figures and plots.json from results JSON (epsuite plot FILE... --out DIR)");
  plot_command.bind(*plot);

  eps::RunCommand run_command;
  CLI::App* run = app.add_subcommand(
      "run",
      "The main job: platform, conformance, bench sweep, plots and report.md (mpirun ... epsuite run)");
  run_command.bind(*run);

  eps::CompareCommand compare_command;
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Regression gate: compare two results files case by case (epsuite compare BASE.json NEW.json)");
  compare_command.bind(*compare);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (eps::mpi::launcher_rank() != 0) return e.get_exit_code() == 0 ? 0 : 2;
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // SPEC 10: usage errors exit 2
  } catch (const eps::Error& e) {
    std::fprintf(stderr, "epsuite: error: %s\n", e.what());
    return e.exit_code();
  }
  if (check->parsed()) return check_command.run(*check);
  if (info->parsed()) return info_command.run();
  if (bench->parsed()) return bench_command.run(std::vector<std::string>(argv, argv + argc));
  if (plot->parsed()) return plot_command.run();
  if (run->parsed()) return run_command.run(std::vector<std::string>(argv, argv + argc));
  if (compare->parsed()) return compare_command.run();
  return 0;
}
