// `epsuite ref NAME --in IN.json --out OUT.json`: one subcommand per reference tool
// (harness/ref/ref_tool.hpp).
#pragma once

namespace CLI {
class App;
}  // namespace CLI

namespace eps {

// Adds `ref` and its subcommands; each runs in its parse callback and throws eps::Error on failure.
void add_ref_commands(CLI::App& app);

}  // namespace eps
