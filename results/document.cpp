#include "results/document.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "reference/common/version.hpp"
#include "results/op_fields.hpp"

namespace eps {

std::string utc_timestamp(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

RunHeader make_run_header(std::vector<std::string> argv, Json platform, Json config) {
  return RunHeader{
      kSuiteVersion,       kGitSha,          utc_timestamp(std::chrono::system_clock::now()), std::move(argv),
      std::move(platform), std::move(config)};
}

namespace {

Json stats_to_json(const SummaryStats& s) {
  return Json{{"min", s.min}, {"p10", s.p10}, {"p50", s.p50},   {"p90", s.p90},
              {"p99", s.p99}, {"max", s.max}, {"mean", s.mean}, {"stdev", s.stdev}};
}

Json header_to_json(const RunHeader& h) {
  return Json{{"schema_version", kResultsSchemaVersion},
              {"suite_version", h.suite_version},
              {"git_sha", h.git_sha},
              {"start_time", h.start_time},
              {"argv", h.argv},
              {"platform", h.platform},
              {"config", h.config},
              {"oversubscribed", h.oversubscribed},
              {"results", Json::array()}};
}

}  // namespace

Result<Json> case_to_json(const CaseResult& c) {
  EPS_ASSIGN_OR_RETURN(SummaryStats stats, summarize(c.times_us));
  if (c.algo_bytes < 0 || c.physical_bytes < 0) {
    return invalid_argument("bytes", "must be >= 0, got algo {} and physical {}", c.algo_bytes,
                            c.physical_bytes);
  }
  Json sizes = Json::object();
  for (const auto& [name, value] : c.sizes) sizes[name] = value;
  Json check = nullptr;
  if (c.check) {
    check =
        Json{{"passed", c.check->passed},
             {"mismatches", c.check->mismatches},
             {"first_mismatch", c.check->first_mismatch ? Json(*c.check->first_mismatch) : Json(nullptr)}};
  }
  Json out{{"op", c.op},
           {"transport", c.transport},
           {"mode", c.mode},
           {"dtype", c.dtype},
           {"sizes", sizes},
           {"identity", c.identity},
           {"times_us", c.times_us},
           {"stats", stats_to_json(stats)},
           {"bytes", {{"algo", c.algo_bytes}, {"physical", c.physical_bytes}}},
           {"bandwidth_gbps",
            {{"algo", bandwidth_gbps(c.algo_bytes, stats.p50)},
             {"physical", bandwidth_gbps(c.physical_bytes, stats.p50)}}},
           {"slowest_rank", c.slowest_rank},
           {"check", check},
           {"oversubscribed", c.oversubscribed}};
  if (c.ceiling) {
    if (!(c.ceiling->us >= 0) || c.ceiling->kind.empty()) {
      return invalid_argument("ceiling", "needs us >= 0 and a kind, got us {} and kind '{}'", c.ceiling->us,
                              c.ceiling->kind);
    }
    out["ceiling"] = Json{{"us", c.ceiling->us},
                          {"gbps", bandwidth_gbps(c.algo_bytes, c.ceiling->us)},
                          {"ratio", ceiling_ratio(c.ceiling->us, stats.p50)},
                          {"kind", c.ceiling->kind}};
  }
  if (const Status fields = check_op_fields(c.op, c.extra); !fields.ok()) {
    throw std::logic_error(fmt::format(
        "results: a case of op '{}' with a bad op field, a programming error: {}", c.op, fields.message()));
  }
  if (c.extra.is_object()) {
    for (const auto& [key, value] : c.extra.items()) out[key] = value;
  }
  return out;
}

ResultsWriter::ResultsWriter(std::string path, RunHeader header)
    : path_(std::move(path)), document_(header_to_json(header)) {}

Status ResultsWriter::start() { return write_json_file_atomic(path_, document_); }

Status ResultsWriter::add_case(const CaseResult& result) {
  EPS_ASSIGN_OR_RETURN(Json c, case_to_json(result));
  document_["results"].push_back(std::move(c));
  return write_json_file_atomic(path_, document_);
}

namespace {

Result<std::vector<std::string>> string_array(const Json& value, const std::string& field) {
  if (!value.is_array())
    return invalid_argument(field, "expected an array of strings, got {}", value.type_name());
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (!value[i].is_string()) return invalid_argument(fmt::format("{}[{}]", field, i), "expected a string");
    out.push_back(value[i].get<std::string>());
  }
  return out;
}

// `times` (already read) give p10 for files of builds that did not write it (the minimum when there are
// none).
Result<SummaryStats> parse_stats(const Json& value, const std::string& field, std::span<const double> times) {
  JsonFields f(value, field);
  EPS_RETURN_IF_ERROR(f.expect_object());
  constexpr double kBig = 1e300;
  SummaryStats s;
  EPS_ASSIGN_OR_RETURN(s.min, f.number("min", -kBig, kBig));
  if (f.has("p10")) {
    EPS_ASSIGN_OR_RETURN(s.p10, f.number("p10", -kBig, kBig));
  } else if (times.empty()) {
    s.p10 = s.min;
  } else {
    EPS_ASSIGN_OR_RETURN(const SummaryStats from_times, summarize(times));
    s.p10 = from_times.p10;
  }
  EPS_ASSIGN_OR_RETURN(s.p50, f.number("p50", -kBig, kBig));
  EPS_ASSIGN_OR_RETURN(s.p90, f.number("p90", -kBig, kBig));
  EPS_ASSIGN_OR_RETURN(s.p99, f.number("p99", -kBig, kBig));
  EPS_ASSIGN_OR_RETURN(s.max, f.number("max", -kBig, kBig));
  EPS_ASSIGN_OR_RETURN(s.mean, f.number("mean", -kBig, kBig));
  EPS_ASSIGN_OR_RETURN(s.stdev, f.number("stdev", 0, kBig));
  return s;
}

Result<std::optional<CheckOutcome>> parse_check(const JsonFields& parent, const Json& value) {
  if (value.is_null()) return std::optional<CheckOutcome>();
  JsonFields f(value, parent.field("check"));
  EPS_RETURN_IF_ERROR(f.expect_object());
  CheckOutcome c;
  EPS_ASSIGN_OR_RETURN(c.passed, f.boolean("passed"));
  EPS_ASSIGN_OR_RETURN(c.mismatches, f.integer("mismatches", 0, INT64_MAX));
  if (f.has("first_mismatch")) {
    EPS_ASSIGN_OR_RETURN(std::string first, f.string("first_mismatch"));
    c.first_mismatch = std::move(first);
  }
  return std::optional<CheckOutcome>(std::move(c));
}

// gbps and ratio are derived (case_to_json): they are checked for range, and not kept.
Result<Ceiling> parse_ceiling(const Json& value, const std::string& field) {
  JsonFields f(value, field);
  EPS_RETURN_IF_ERROR(f.expect_object());
  Ceiling c;
  EPS_ASSIGN_OR_RETURN(c.us, f.number("us", 0, 1e300));
  EPS_RETURN_IF_ERROR(f.number("gbps", 0, 1e300).status());
  EPS_RETURN_IF_ERROR(f.number("ratio", 0, 1e300).status());
  EPS_ASSIGN_OR_RETURN(c.kind, f.string("kind"));
  if (c.kind != "shm-copy" && c.kind != "fabric") {
    return invalid_argument(f.field("kind"), "must be 'shm-copy' or 'fabric', got '{}'", c.kind);
  }
  return c;
}

Result<CaseRecord> parse_case(const Json& value, const std::string& field) {
  JsonFields f(value, field);
  EPS_RETURN_IF_ERROR(f.expect_object());
  CaseRecord record;
  CaseResult& c = record.result;
  EPS_ASSIGN_OR_RETURN(c.op, f.string("op"));
  EPS_ASSIGN_OR_RETURN(c.transport, f.string("transport"));
  EPS_ASSIGN_OR_RETURN(c.mode, f.string("mode"));
  EPS_ASSIGN_OR_RETURN(c.dtype, f.string("dtype"));
  EPS_ASSIGN_OR_RETURN(const Json* sizes, f.member("sizes"));
  JsonFields size_fields(*sizes, f.field("sizes"));
  EPS_RETURN_IF_ERROR(size_fields.expect_object());
  for (const auto& [name, v] : sizes->items()) {
    EPS_ASSIGN_OR_RETURN(std::int64_t n, size_fields.integer(name, 0, INT64_MAX));
    c.sizes.emplace_back(name, n);
  }
  if (f.has("identity")) {
    EPS_ASSIGN_OR_RETURN(const Json* identity, f.member("identity"));
    JsonFields identity_fields(*identity, f.field("identity"));
    EPS_RETURN_IF_ERROR(identity_fields.expect_object());
    for (const auto& [name, v] : identity->items()) {
      EPS_ASSIGN_OR_RETURN(c.identity[name], identity_fields.string(name));
    }
  }
  EPS_ASSIGN_OR_RETURN(const Json* times, f.member("times_us"));
  if (!times->is_array()) return invalid_argument(f.field("times_us"), "expected an array of numbers");
  for (std::size_t i = 0; i < times->size(); ++i) {
    if (!(*times)[i].is_number()) {
      return invalid_argument(fmt::format("{}[{}]", f.field("times_us"), i), "expected a number");
    }
    c.times_us.push_back((*times)[i].get<double>());
  }
  EPS_ASSIGN_OR_RETURN(const Json* stats, f.member("stats"));
  EPS_ASSIGN_OR_RETURN(record.stats, parse_stats(*stats, f.field("stats"), c.times_us));
  EPS_ASSIGN_OR_RETURN(const Json* bytes, f.member("bytes"));
  JsonFields byte_fields(*bytes, f.field("bytes"));
  EPS_ASSIGN_OR_RETURN(c.algo_bytes, byte_fields.number("algo", 0, 1e300));
  EPS_ASSIGN_OR_RETURN(c.physical_bytes, byte_fields.number("physical", 0, 1e300));
  EPS_ASSIGN_OR_RETURN(std::int64_t slowest, f.integer("slowest_rank", 0, 1 << 24));
  c.slowest_rank = static_cast<int>(slowest);
  if (!value.contains("check")) return invalid_argument(f.field("check"), "required field is missing");
  EPS_ASSIGN_OR_RETURN(c.check, parse_check(f, value.at("check")));
  if (f.has("ceiling")) {
    EPS_ASSIGN_OR_RETURN(const Json* ceiling, f.member("ceiling"));
    EPS_ASSIGN_OR_RETURN(c.ceiling, parse_ceiling(*ceiling, f.field("ceiling")));
  }
  EPS_ASSIGN_OR_RETURN(c.oversubscribed, f.boolean("oversubscribed", false));
  return record;
}

}  // namespace

Result<ResultsDocument> parse_results(const Json& document, const std::string& path) {
  if (!document.is_object() || !document.contains("schema_version")) {
    return invalid_argument(path, "not an epsuite results document (no schema_version)");
  }
  JsonFields f(document, "");
  ResultsDocument doc;
  const Json& version = document.at("schema_version");
  if (!version.is_number_integer()) {
    return invalid_argument(path, "schema_version must be an integer, got {}", version.dump());
  }
  if (version.get<std::int64_t>() > kResultsSchemaVersion) {
    return invalid_argument(path,
                            "schema_version {} is newer than this epsuite reads (<= {}); upgrade epsuite",
                            version.get<std::int64_t>(), kResultsSchemaVersion);
  }
  EPS_ASSIGN_OR_RETURN(std::int64_t v, f.integer("schema_version", 1, kResultsSchemaVersion));
  doc.schema_version = static_cast<int>(v);
  RunHeader& h = doc.header;
  EPS_ASSIGN_OR_RETURN(h.suite_version, f.string("suite_version"));
  EPS_ASSIGN_OR_RETURN(h.git_sha, f.string("git_sha"));
  EPS_ASSIGN_OR_RETURN(h.start_time, f.string("start_time"));
  EPS_ASSIGN_OR_RETURN(const Json* argv, f.member("argv"));
  EPS_ASSIGN_OR_RETURN(h.argv, string_array(*argv, "argv"));
  EPS_ASSIGN_OR_RETURN(const Json* platform, f.member("platform"));
  EPS_RETURN_IF_ERROR(JsonFields(*platform, "platform").expect_object());
  h.platform = *platform;
  EPS_ASSIGN_OR_RETURN(const Json* config, f.member("config"));
  EPS_RETURN_IF_ERROR(JsonFields(*config, "config").expect_object());
  h.config = *config;
  if (f.has("oversubscribed")) {
    EPS_ASSIGN_OR_RETURN(const Json* oversubscribed, f.member("oversubscribed"));
    if (!oversubscribed->is_null()) {
      JsonFields o(*oversubscribed, "oversubscribed");
      EPS_RETURN_IF_ERROR(o.expect_object());
      EPS_RETURN_IF_ERROR(o.string("note").status());
    }
    h.oversubscribed = *oversubscribed;
  }
  EPS_ASSIGN_OR_RETURN(const Json* results, f.member("results"));
  if (!results->is_array())
    return invalid_argument("results", "expected an array, got {}", results->type_name());
  for (std::size_t i = 0; i < results->size(); ++i) {
    EPS_ASSIGN_OR_RETURN(CaseRecord record, parse_case((*results)[i], fmt::format("results[{}]", i)));
    doc.cases.push_back(std::move(record));
  }
  return doc;
}

Result<ResultsDocument> read_results_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument(path, "cannot open results file: {}", std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const Json document = Json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) {
    return invalid_argument(path, "not valid JSON ({} bytes; truncated or not a results file)",
                            buffer.str().size());
  }
  return parse_results(document, path);
}

}  // namespace eps
