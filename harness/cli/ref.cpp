#include "harness/cli/ref.hpp"

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "harness/ref/ref_tool.hpp"
#include "impls/runtime/json_io.hpp"

namespace eps {

void add_ref_commands(CLI::App& app) {
  CLI::App* ref = app.add_subcommand("ref", "Run a reference oracle on a JSON document (see README)");
  ref->require_subcommand(1);
  for (const RefTool& tool : ref_tools()) {
    CLI::App* sub = ref->add_subcommand(std::string(tool.name), std::string(tool.help));
    auto in = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    sub->add_option("--in", *in, "Input JSON file")->required();
    sub->add_option("--out", *out, "Output JSON file (written atomically)")->required();
    sub->callback([tool, in, out] {
      const Json input = value_or_throw(read_json_file(*in));
      const Json output = value_or_throw(tool.run(input));
      throw_if_error(write_json_file_atomic(*out, output));
    });
  }
}

}  // namespace eps
