#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reference/data/workload.hpp"

namespace eps::data {
namespace {

using Json = nlohmann::json;

constexpr std::int64_t kMaxTraceExperts = 1 << 20;

// Ids in [-1, num_experts) (upper bound only when known) and no valid id twice within the token.
Status check_token_ids(std::span<const std::int32_t> ids, int num_experts, std::string_view where) {
  for (std::size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < -1 || (num_experts > 0 && ids[k] >= num_experts)) {
      if (num_experts > 0)
        return invalid_argument(where, "slot {}: expert id must be in [-1, {}], got {}", k, num_experts - 1,
                                ids[k]);
      return invalid_argument(where, "slot {}: expert id must be >= -1, got {}", k, ids[k]);
    }
    for (std::size_t j = 0; j < k; ++j) {
      if (ids[k] >= 0 && ids[j] == ids[k]) {
        return invalid_argument(where, "expert {} appears in slots {} and {} of one token", ids[k], j, k);
      }
    }
  }
  return Status();
}

Result<std::int64_t> json_int(const Json& value, std::string_view where, std::int64_t lo, std::int64_t hi) {
  if (!value.is_number_integer()) return invalid_argument(where, "expected an integer in [{}, {}]", lo, hi);
  const auto v = value.get<std::int64_t>();
  if (v < lo || v > hi) return out_of_range(where, lo, hi, v);
  return v;
}

Status parse_json_rank(const Json& tokens, const std::string& where, int num_experts, int top_k,
                       std::vector<std::int32_t>& out) {
  if (!tokens.is_array()) return invalid_argument(where, "expected an array of tokens");
  std::vector<std::int32_t> ids(static_cast<std::size_t>(top_k));
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::string token_where = fmt::format("{}[{}]", where, t);
    if (!tokens[t].is_array() || tokens[t].size() != static_cast<std::size_t>(top_k)) {
      return invalid_argument(token_where, "expected an array of top_k = {} expert ids", top_k);
    }
    for (int k = 0; k < top_k; ++k) {
      EPS_ASSIGN_OR_RETURN(
          const std::int64_t id,
          json_int(tokens[t][k], fmt::format("{}[{}]", token_where, k), -1, num_experts - 1));
      ids[k] = static_cast<std::int32_t>(id);
    }
    EPS_RETURN_IF_ERROR(check_token_ids(ids, num_experts, token_where));
    out.insert(out.end(), ids.begin(), ids.end());
  }
  return Status();
}

// Splits one CSV line into integer fields.
Result<std::vector<std::int64_t>> csv_fields(std::string_view line, std::string_view where) {
  std::vector<std::int64_t> fields;
  std::size_t begin = 0;
  while (begin <= line.size()) {
    std::size_t end = line.find(',', begin);
    if (end == std::string_view::npos) end = line.size();
    std::string_view field = line.substr(begin, end - begin);
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t' || field.back() == '\r'))
      field.remove_suffix(1);
    std::int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
    if (field.empty() || ec != std::errc() || ptr != field.data() + field.size()) {
      return invalid_argument(where, "field {} must be an integer, got '{}'", fields.size() + 1, field);
    }
    fields.push_back(value);
    begin = end + 1;
  }
  return fields;
}

struct CsvRow {
  std::int64_t rank;
  std::int64_t token;
  std::vector<std::int32_t> ids;
};

Result<RoutingTrace> assemble_csv(std::vector<CsvRow> rows, int top_k, std::string_view source) {
  RoutingTrace trace;
  trace.top_k = top_k;
  std::int64_t num_ranks = 0;
  for (const CsvRow& row : rows) num_ranks = std::max(num_ranks, row.rank + 1);
  std::vector<std::vector<const CsvRow*>> by_rank(static_cast<std::size_t>(num_ranks));
  for (const CsvRow& row : rows) by_rank[row.rank].push_back(&row);
  trace.ranks.resize(static_cast<std::size_t>(num_ranks));
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    auto& list = by_rank[r];
    std::sort(list.begin(), list.end(), [](const CsvRow* a, const CsvRow* b) { return a->token < b->token; });
    for (std::size_t t = 0; t < list.size(); ++t) {
      if (list[t]->token != static_cast<std::int64_t>(t)) {
        return invalid_argument(
            source, "rank {}: tokens must be exactly 0..{} once each, found token {} at sorted position {}",
            r, list.size() - 1, list[t]->token, t);
      }
      trace.ranks[r].insert(trace.ranks[r].end(), list[t]->ids.begin(), list[t]->ids.end());
    }
  }
  return trace;
}

}  // namespace

Result<RoutingTrace> parse_trace_json(std::string_view text, std::string_view source) {
  const Json doc = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return invalid_argument(source, "not valid JSON");
  if (!doc.is_object()) return invalid_argument(source, "expected an object with num_experts, top_k, ranks");
  const std::string src(source);
  for (const char* key : {"num_experts", "top_k", "ranks"}) {
    if (!doc.contains(key)) return invalid_argument(fmt::format("{}: {}", src, key), "missing");
  }
  RoutingTrace trace;
  EPS_ASSIGN_OR_RETURN(const std::int64_t experts,
                       json_int(doc["num_experts"], src + ": num_experts", 1, kMaxTraceExperts));
  trace.num_experts = static_cast<int>(experts);
  EPS_ASSIGN_OR_RETURN(const std::int64_t top_k, json_int(doc["top_k"], src + ": top_k", 1, experts));
  trace.top_k = static_cast<int>(top_k);
  const Json& ranks = doc["ranks"];
  if (!ranks.is_array()) return invalid_argument(src + ": ranks", "expected an array (one entry per rank)");
  trace.ranks.resize(ranks.size());
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    EPS_RETURN_IF_ERROR(parse_json_rank(ranks[r], fmt::format("{}: ranks[{}]", src, r), trace.num_experts,
                                        trace.top_k, trace.ranks[r]));
  }
  return trace;
}

Result<RoutingTrace> parse_trace_csv(std::string_view text, std::string_view source) {
  std::vector<CsvRow> rows;
  int top_k = 0;
  std::size_t line_number = 0;
  bool first_content = true;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const bool header = first_content && line.starts_with("rank");
    first_content = false;
    if (header) continue;
    const std::string where = fmt::format("{}:{}", source, line_number);
    EPS_ASSIGN_OR_RETURN(std::vector<std::int64_t> fields, csv_fields(line, where));
    if (fields.size() < 3)
      return invalid_argument(where, "expected rank,token,id0[,id1...], got {} fields", fields.size());
    const int k = static_cast<int>(fields.size() - 2);
    if (top_k == 0) top_k = k;
    if (k != top_k)
      return invalid_argument(where, "expected {} expert ids like the first line, got {}", top_k, k);
    if (fields[0] < 0 || fields[0] > 65535)
      return out_of_range<std::int64_t>(where + ": rank", 0, 65535, fields[0]);
    if (fields[1] < 0 || fields[1] > kMaxTokensPerRank) {
      return out_of_range<std::int64_t>(where + ": token", 0, kMaxTokensPerRank, fields[1]);
    }
    CsvRow row{fields[0], fields[1], {}};
    for (int j = 0; j < k; ++j) {
      if (fields[2 + j] < -1 || fields[2 + j] >= kMaxTraceExperts) {
        return out_of_range<std::int64_t>(fmt::format("{}: id{}", where, j), -1, kMaxTraceExperts - 1,
                                          fields[2 + j]);
      }
      row.ids.push_back(static_cast<std::int32_t>(fields[2 + j]));
    }
    EPS_RETURN_IF_ERROR(check_token_ids(row.ids, 0, where));
    rows.push_back(std::move(row));
  }
  if (rows.empty()) return invalid_argument(source, "no token lines (expected rank,token,id0,id1,...)");
  return assemble_csv(std::move(rows), top_k, source);
}

Result<RoutingTrace> load_trace(const std::string& path) {
  const bool json = path.ends_with(".json");
  if (!json && !path.ends_with(".csv")) {
    return invalid_argument("trace:FILE", "'{}' must end in .json or .csv", path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return invalid_argument("trace:FILE", "cannot open '{}': {}", path, std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  return json ? parse_trace_json(text, path) : parse_trace_csv(text, path);
}

std::string trace_to_json(const RoutingTrace& trace) {
  Json ranks = Json::array();
  for (const auto& ids : trace.ranks) {
    Json tokens = Json::array();
    for (std::size_t i = 0; i < ids.size(); i += static_cast<std::size_t>(trace.top_k)) {
      tokens.push_back(Json(std::vector<std::int32_t>(ids.begin() + i, ids.begin() + i + trace.top_k)));
    }
    ranks.push_back(std::move(tokens));
  }
  const Json doc = {{"num_experts", trace.num_experts}, {"top_k", trace.top_k}, {"ranks", std::move(ranks)}};
  return doc.dump() + "\n";
}

std::string trace_to_csv(const RoutingTrace& trace) {
  std::string out = "rank,token";
  for (int k = 0; k < trace.top_k; ++k) out += fmt::format(",id{}", k);
  out += "\n";
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    for (std::size_t i = 0; i < trace.ranks[r].size(); i += static_cast<std::size_t>(trace.top_k)) {
      out += fmt::format("{},{}", r, i / trace.top_k);
      for (int k = 0; k < trace.top_k; ++k) out += fmt::format(",{}", trace.ranks[r][i + k]);
      out += "\n";
    }
  }
  return out;
}

Result<RoutingTrace> trace_from_routings(int num_experts, std::span<const Routing> per_rank) {
  if (num_experts < 1) return out_of_range<std::int64_t>("num_experts", 1, kMaxTraceExperts, num_experts);
  if (per_rank.empty()) return invalid_argument("per_rank", "needs at least one rank");
  RoutingTrace trace;
  trace.num_experts = num_experts;
  trace.top_k = per_rank[0].top_k;
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const Routing& routing = per_rank[r];
    if (routing.top_k != trace.top_k) {
      return invalid_argument(fmt::format("per_rank[{}].top_k", r), "must equal rank 0's {}, got {}",
                              trace.top_k, routing.top_k);
    }
    for (std::size_t i = 0; i < routing.topk_idx.size(); i += static_cast<std::size_t>(trace.top_k)) {
      EPS_RETURN_IF_ERROR(check_token_ids(std::span(routing.topk_idx).subspan(i, trace.top_k), num_experts,
                                          fmt::format("per_rank[{}] token {}", r, i / trace.top_k)));
    }
    trace.ranks.push_back(routing.topk_idx);
  }
  return trace;
}

}  // namespace eps::data
