// The `epsuite` executable (harness/cli/cli.hpp).
#include "harness/cli/cli.hpp"

int main(int argc, char** argv) { return eps::epsuite_main(argc, argv); }
