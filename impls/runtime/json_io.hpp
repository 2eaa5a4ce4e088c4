// JSON files and fields for the CLI edge. Reading names the file and the parse position on failure;
// writing is atomic (temp file + rename, docs/results.md 9.1). Field accessors name the full field path and
// the allowed range in every error (docs/errors.md 10), e.g. "router.k: must be in [1, 64], got 0".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "reference/common/status.hpp"

namespace eps {

using Json = nlohmann::json;

Result<Json> read_json_file(const std::string& path);
Status write_json_file_atomic(const std::string& path, const Json& document);
// Writes `text` to `path` atomically.
Status write_text_file_atomic(const std::string& path, const std::string& text);

// Typed, range-checked access to the members of one JSON object. `path` is the object's own field path
// ("" for the document root, "router" for a nested object) and prefixes every error.
class JsonFields {
 public:
  JsonFields(const Json& object, std::string path) : object_(object), path_(std::move(path)) {}

  // The object itself must be a JSON object.
  Status expect_object() const;
  // Every member must be one of `known`: "path.key: unknown field for <owner> (known: a, b, ...)".
  Status only_known(const std::vector<std::string>& known, std::string_view owner) const;
  bool has(std::string_view key) const;
  std::string field(std::string_view key) const;  // "path.key"

  Result<std::int64_t> integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                               std::optional<std::int64_t> fallback = std::nullopt) const;
  Result<double> number(std::string_view key, double lo, double hi,
                        std::optional<double> fallback = std::nullopt) const;
  Result<bool> boolean(std::string_view key, std::optional<bool> fallback = std::nullopt) const;
  // A string that must be one of `allowed`.
  Result<std::string> choice(std::string_view key, const std::vector<std::string>& allowed,
                             std::optional<std::string> fallback = std::nullopt) const;
  Result<std::string> string(std::string_view key, std::optional<std::string> fallback = std::nullopt) const;
  // A member that must be present (any type); returns it with its path.
  Result<const Json*> member(std::string_view key) const;

 private:
  const Json& object_;
  std::string path_;
};

// Converts a JSON array of numbers to floats ("field[i]: expected a number" on failure). JSON has no
// NaN; "-inf" / "inf" strings are accepted where allow_infinity.
Result<std::vector<float>> json_float_array(const Json& array, const std::string& path, bool allow_infinity);
Result<std::vector<std::vector<float>>> json_float_matrix(const Json& array, const std::string& path,
                                                          std::size_t columns, bool allow_infinity);

}  // namespace eps
