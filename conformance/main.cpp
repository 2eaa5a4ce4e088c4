// main() of the ctest conformance executables (library eps_conformance_main): the same command line as
// `epsuite check` (--strict, --timeout, --gtest_* flags), over the tests linked into the executable.
#include <CLI/CLI.hpp>

#include "conformance/suite.hpp"
#include "impls/runtime/mpi_runtime.hpp"

int main(int argc, char** argv) {
  CLI::App app{"epsuite conformance tests (MPI-aware GoogleTest; run under mpirun)"};
  eps::conformance::SuiteCommand command;
  command.bind(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (eps::mpi::launcher_rank() != 0) return e.get_exit_code() == 0 ? 0 : 2;
    return app.exit(e) == 0 ? 0 : 2;  // docs/errors.md 10: usage errors exit 2
  }
  return command.run(app);
}
