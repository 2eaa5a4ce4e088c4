// The `epsuite` command line. Errors are thrown once as eps::Error and become the exit codes of
// SPEC 10: 0 passed, 1 check failure or regression, 2 usage/configuration, 3 environment.
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/ref_tool.hpp"
#include "harness/version.hpp"

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
  app.set_version_flag("--version", std::string("epsuite ") + eps::kSuiteVersion);
  app.require_subcommand(1);
  add_ref_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;  // SPEC 10: usage errors exit 2
  } catch (const eps::Error& e) {
    std::fprintf(stderr, "epsuite: error: %s\n", e.what());
    return e.exit_code();
  }
  return 0;
}
