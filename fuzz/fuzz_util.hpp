// What every fuzz target shares (docs/fuzzing.md): a property check that aborts, so that libFuzzer keeps the
// input as a crash like any sanitizer report, and the JSON reading of the CLI edge (impls/runtime/json_io.cpp
// parses without exceptions; a document that does not parse is rejected before any parser sees it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "reference/common/status.hpp"

namespace eps::fuzz {

[[noreturn]] inline void property_failed(const char* file, int line, const char* condition,
                                         const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n  %s\n", file, line, condition, detail.c_str());
  std::abort();
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

inline nlohmann::json parse_json(std::string_view text) {
  return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// A rejected input is bad input (kInvalidArgument, exit 2, docs/errors.md 10) with a message naming the
// field.
inline bool is_bad_input(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument && !status.message().empty();
}

}  // namespace eps::fuzz

#define EPS_FUZZ_CHECK(condition, detail)                                                     \
  do {                                                                                        \
    if (!(condition)) ::eps::fuzz::property_failed(__FILE__, __LINE__, #condition, (detail)); \
  } while (0)
