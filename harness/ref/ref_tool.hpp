// Reference tools: `epsuite ref NAME --in IN.json --out OUT.json` runs one reference oracle of
// `reference/` on a JSON document so that users can check their own implementations against it.
// Each tool is a pure function from the input document to the output document; a bad field yields a
// Status naming the field and its allowed range (exit 2, nothing written).
#pragma once

#include <span>
#include <string_view>

#include "impls/runtime/json_io.hpp"

namespace eps {

struct RefTool {
  std::string_view name;
  std::string_view help;
  Result<Json> (*run)(const Json& input);
};

// Every registered tool, in the order `epsuite ref --help` lists them.
std::span<const RefTool> ref_tools();

}  // namespace eps
