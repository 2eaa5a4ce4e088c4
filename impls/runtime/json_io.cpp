#include "impls/runtime/json_io.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace eps {

Result<Json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return invalid_argument("--in", "cannot open '{}': {}", path, std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  Json document = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    // Parse again with exceptions only to get the byte position of the error for the message.
    try {
      const Json reparsed = Json::parse(buffer.str());
      return invalid_argument(path, "not valid JSON ({} bytes)", reparsed.dump().size());
    } catch (const Json::parse_error& e) {
      return invalid_argument(path, "not valid JSON (byte {}): {}", e.byte, e.what());
    }
    return invalid_argument(path, "not valid JSON");
  }
  return document;
}

Status write_text_file_atomic(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) return invalid_argument("--out", "cannot write '{}': {}", temp, std::strerror(errno));
    out << text;
    out.flush();
    if (!out) {
      std::remove(temp.c_str());
      return Status(StatusCode::kEnvironment, fmt::format("writing '{}' failed", temp));
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(temp.c_str());
    return invalid_argument("--out", "cannot rename '{}' to '{}': {}", temp, path, std::strerror(err));
  }
  return Status();
}

Status write_json_file_atomic(const std::string& path, const Json& document) {
  return write_text_file_atomic(path, document.dump(1) + "\n");
}

namespace {

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

const char* type_name(const Json& value) { return value.type_name(); }

}  // namespace

Status JsonFields::expect_object() const {
  if (!object_.is_object()) {
    return invalid_argument(path_.empty() ? "input" : path_, "expected a JSON object, got {}",
                            type_name(object_));
  }
  return Status();
}

Status JsonFields::only_known(const std::vector<std::string>& known, std::string_view owner) const {
  for (const auto& [key, value] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return invalid_argument(field(key), "unknown field for {} (known: {})", owner, fmt::join(known, ", "));
    }
  }
  return Status();
}

bool JsonFields::has(std::string_view key) const {
  return object_.is_object() && object_.contains(key) && !object_.at(std::string(key)).is_null();
}

std::string JsonFields::field(std::string_view key) const { return join_path(path_, key); }

Result<const Json*> JsonFields::member(std::string_view key) const {
  if (!has(key)) return invalid_argument(field(key), "required field is missing");
  return &object_.at(std::string(key));
}

Result<std::int64_t> JsonFields::integer(std::string_view key, std::int64_t lo, std::int64_t hi,
                                         std::optional<std::int64_t> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    return invalid_argument(field(key), "required integer in [{}, {}] is missing", lo, hi);
  }
  const Json& value = object_.at(std::string(key));
  std::int64_t v = 0;
  if (value.is_number_integer()) {
    v = value.get<std::int64_t>();
  } else if (value.is_number_float() && std::nearbyint(value.get<double>()) == value.get<double>() &&
             std::fabs(value.get<double>()) < 9.0e15) {
    v = static_cast<std::int64_t>(value.get<double>());
  } else {
    return invalid_argument(field(key), "expected an integer in [{}, {}], got {}", lo, hi, value.dump());
  }
  if (v < lo || v > hi) return out_of_range(field(key), lo, hi, v);
  return v;
}

Result<double> JsonFields::number(std::string_view key, double lo, double hi,
                                  std::optional<double> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    return invalid_argument(field(key), "required number in [{}, {}] is missing", lo, hi);
  }
  const Json& value = object_.at(std::string(key));
  if (!value.is_number()) {
    return invalid_argument(field(key), "expected a number in [{}, {}], got {}", lo, hi, value.dump());
  }
  const double v = value.get<double>();
  if (!(v >= lo && v <= hi)) return out_of_range(field(key), lo, hi, v);
  return v;
}

Result<bool> JsonFields::boolean(std::string_view key, std::optional<bool> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    return invalid_argument(field(key), "required boolean is missing");
  }
  const Json& value = object_.at(std::string(key));
  if (!value.is_boolean())
    return invalid_argument(field(key), "expected true or false, got {}", value.dump());
  return value.get<bool>();
}

Result<std::string> JsonFields::string(std::string_view key, std::optional<std::string> fallback) const {
  if (!has(key)) {
    if (fallback) return *fallback;
    return invalid_argument(field(key), "required string is missing");
  }
  const Json& value = object_.at(std::string(key));
  if (!value.is_string()) return invalid_argument(field(key), "expected a string, got {}", value.dump());
  return value.get<std::string>();
}

Result<std::string> JsonFields::choice(std::string_view key, const std::vector<std::string>& allowed,
                                       std::optional<std::string> fallback) const {
  EPS_ASSIGN_OR_RETURN(std::string v, string(key, fallback));
  for (const auto& a : allowed) {
    if (a == v) return v;
  }
  return invalid_argument(field(key), "must be one of {{{}}}, got \"{}\"", fmt::join(allowed, ", "), v);
}

Result<std::vector<float>> json_float_array(const Json& array, const std::string& path, bool allow_infinity) {
  if (!array.is_array())
    return invalid_argument(path, "expected an array of numbers, got {}", type_name(array));
  std::vector<float> out;
  out.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    const Json& v = array[i];
    if (v.is_number()) {
      out.push_back(static_cast<float>(v.get<double>()));
    } else if (allow_infinity && v.is_string() && (v == "-inf" || v == "inf" || v == "+inf")) {
      const float inf = std::numeric_limits<float>::infinity();
      out.push_back(v == "-inf" ? -inf : inf);
    } else if (v.is_string() && (v == "nan" || v == "NaN")) {
      return invalid_argument(fmt::format("{}[{}]", path, i), "NaN is not allowed (docs/numerics.md 1.3)");
    } else {
      return invalid_argument(fmt::format("{}[{}]", path, i), "expected a number, got {}", v.dump());
    }
  }
  return out;
}

Result<std::vector<std::vector<float>>> json_float_matrix(const Json& array, const std::string& path,
                                                          std::size_t columns, bool allow_infinity) {
  if (!array.is_array()) return invalid_argument(path, "expected an array of rows, got {}", type_name(array));
  std::vector<std::vector<float>> rows;
  rows.reserve(array.size());
  for (std::size_t i = 0; i < array.size(); ++i) {
    const std::string row_path = fmt::format("{}[{}]", path, i);
    EPS_ASSIGN_OR_RETURN(std::vector<float> row, json_float_array(array[i], row_path, allow_infinity));
    if (columns != 0 && row.size() != columns) {
      return invalid_argument(row_path, "expected {} values, got {}", columns, row.size());
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace eps
