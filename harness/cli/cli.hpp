// The `epsuite` command line: one subcommand per file of harness/cli/ (bench, check, compare, info, planner,
// plot, ref, run, soak). Errors are thrown once as eps::Error and become the exit codes of docs/errors.md 10:
// 0 passed, 1 check failure or regression, 2 usage or configuration, 3 environment. Under mpirun every rank
// parses the same command line; only launcher rank 0 prints help, version and usage errors.
#pragma once

namespace eps {

// The whole command line; returns the process exit code. A test executable may register extra backends
// (transport::register_test_transport) and then call it.
int epsuite_main(int argc, char** argv);

}  // namespace eps
