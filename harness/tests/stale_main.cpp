// `epsuite` with the test-only `stale` transport registered (conformance/tests/stale_transport.hpp).
#include "conformance/tests/stale_transport.hpp"
#include "harness/cli/cli.hpp"

int main(int argc, char** argv) {
  eps::conformance::register_stale_transport();
  return eps::epsuite_main(argc, argv);
}
