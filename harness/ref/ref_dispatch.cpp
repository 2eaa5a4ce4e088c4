#include "harness/ref/ref_dispatch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "reference/dispatch/byte_accounting.hpp"
#include "reference/dispatch/dispatch_plan.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/expert_map.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"

namespace eps {
namespace {

using dispatch::DispatchConfig;
using dispatch::DispatchPlan;
using dispatch::ExpertMap;
using dispatch::PayloadType;
using dispatch::RankRouting;

const std::vector<std::string> kInputKeys = {
    "num_ranks",           "num_experts",      "top_k",    "hidden", "dtype", "ranks",
    "max_tokens_per_rank", "expert_alignment", "placement"};
const std::vector<std::string> kRankKeys = {"topk_idx", "topk_weights"};
const std::vector<std::string> kPlacementKeys = {"phy2log", "log2phy"};

constexpr int kDefaultHidden = 128;
// The LL index of one rank holds L·R·T_max rows (reference/dispatch/ll_dispatch.hpp), so the layouts of all
// R ranks hold R·P·T_max (P = R·L); this tool builds and writes them all, and refuses inputs beyond 2^24
// rows.
constexpr std::int64_t kMaxLayoutRows = std::int64_t{1} << 24;

struct DispatchInput {
  DispatchConfig config;
  std::vector<RankRouting> routing;
  std::optional<ExpertMap> placement;
};

// ---------------------------------------------------------------------------------------------------------
// Reading the input.

std::string item(const std::string& path, std::size_t i) { return fmt::format("{}[{}]", path, i); }

Result<int> int_field(const JsonFields& f, std::string_view key, int lo, int hi,
                      std::optional<int> fallback = std::nullopt) {
  std::optional<std::int64_t> wide;
  if (fallback) wide = *fallback;
  EPS_ASSIGN_OR_RETURN(const std::int64_t value, f.integer(key, lo, hi, wide));
  return static_cast<int>(value);
}

Result<const Json*> array_member(const JsonFields& f, std::string_view key, std::string_view what) {
  EPS_ASSIGN_OR_RETURN(const Json* value, f.member(key));
  if (!value->is_array())
    return invalid_argument(f.field(key), "expected {}, got {}", what, value->type_name());
  return value;
}

// An integer that fits an int; the range of its meaning is checked where it is used.
Result<int> int_entry(const Json& value, const std::string& field, std::string_view what) {
  constexpr double kLo = std::numeric_limits<int>::min();
  constexpr double kHi = std::numeric_limits<int>::max();
  if (!value.is_number_integer() || value.get<double>() < kLo || value.get<double>() > kHi) {
    return invalid_argument(field, "expected {}, got {}", what, value.dump());
  }
  return value.get<int>();
}

Result<std::vector<int>> int_array(const Json& value, const std::string& path, std::string_view what) {
  if (!value.is_array())
    return invalid_argument(path, "expected an array of {}, got {}", what, value.type_name());
  std::vector<int> out;
  out.reserve(value.size());
  for (std::size_t i = 0; i < value.size(); ++i) {
    EPS_ASSIGN_OR_RETURN(const int v, int_entry(value[i], item(path, i), what));
    out.push_back(v);
  }
  return out;
}

Status read_shape(const JsonFields& f, DispatchConfig& c) {
  EPS_ASSIGN_OR_RETURN(c.num_ranks, int_field(f, "num_ranks", 1, dispatch::kMaxRanks));
  EPS_ASSIGN_OR_RETURN(c.num_experts, int_field(f, "num_experts", 1, dispatch::kMaxExperts));
  EPS_ASSIGN_OR_RETURN(c.top_k, int_field(f, "top_k", 1, dispatch::kMaxTopK));
  EPS_ASSIGN_OR_RETURN(c.hidden, int_field(f, "hidden", 1, dispatch::kMaxHidden, kDefaultHidden));
  EPS_ASSIGN_OR_RETURN(const std::string dtype, f.choice("dtype", {"bf16", "fp8"}, "bf16"));
  c.dtype = dtype == "fp8" ? PayloadType::kFp8 : PayloadType::kBf16;
  EPS_ASSIGN_OR_RETURN(c.expert_alignment,
                       int_field(f, "expert_alignment", 1, dispatch::kMaxExpertAlignment, 1));
  return Status();
}

Status check_row_length(const Json& row, const std::string& path, int top_k) {
  if (!row.is_array()) {
    return invalid_argument(path, "expected an array of top_k = {} entries, got {}", top_k, row.type_name());
  }
  if (row.size() != static_cast<std::size_t>(top_k)) {
    return invalid_argument(path, "expected top_k = {} entries, got {}", top_k, row.size());
  }
  return Status();
}

// Expert ids in [-1, E) are DispatchPlan::make's check (docs/dispatch.md 5); here only their type.
Status append_experts(const Json& row, const std::string& path, const DispatchConfig& c,
                      std::vector<int>& out) {
  EPS_RETURN_IF_ERROR(check_row_length(row, path, c.top_k));
  const std::string what = fmt::format("an expert id in [-1, {}]", c.num_experts - 1);
  for (std::size_t k = 0; k < row.size(); ++k) {
    EPS_ASSIGN_OR_RETURN(const int expert, int_entry(row[k], item(path, k), what));
    out.push_back(expert);
  }
  return Status();
}

// JSON has no NaN, so "nan" spells one: the weight of a masked slot is never read and may hold anything
// (docs/dispatch.md 5); a NaN on a valid slot is DispatchPlan::make's error.
Result<float> weight_of(const Json& value, const std::string& field) {
  if (value == "nan" || value == "NaN") return std::numeric_limits<float>::quiet_NaN();
  constexpr double kMax = std::numeric_limits<float>::max();
  if (!value.is_number() || !(std::fabs(value.get<double>()) <= kMax)) {
    return invalid_argument(field, "must be a number in [{}, {}] (fp32) or \"nan\", got {}", -kMax, kMax,
                            value.dump());
  }
  return static_cast<float>(value.get<double>());
}

Status append_weights(const Json& row, const std::string& path, int top_k, std::vector<float>& out) {
  EPS_RETURN_IF_ERROR(check_row_length(row, path, top_k));
  for (std::size_t k = 0; k < row.size(); ++k) {
    EPS_ASSIGN_OR_RETURN(const float weight, weight_of(row[k], item(path, k)));
    out.push_back(weight);
  }
  return Status();
}

Result<RankRouting> read_rank(const Json& value, int rank, const DispatchConfig& c) {
  const std::string path = fmt::format("ranks[{}]", rank);
  const JsonFields f(value, path);
  EPS_RETURN_IF_ERROR(f.expect_object());
  EPS_RETURN_IF_ERROR(JsonFields(value, path).only_known(kRankKeys, "a rank"));
  EPS_ASSIGN_OR_RETURN(const Json* idx,
                       array_member(f, "topk_idx", "an array of T_r rows of top_k expert ids"));
  EPS_ASSIGN_OR_RETURN(const Json* weights,
                       array_member(f, "topk_weights", "an array of T_r rows of top_k weights"));
  if (weights->size() != idx->size()) {
    return invalid_argument(f.field("topk_weights"), "must have as many rows as topk_idx ({}), got {}",
                            idx->size(), weights->size());
  }
  RankRouting routing;
  routing.num_tokens = static_cast<int>(idx->size());
  for (std::size_t t = 0; t < idx->size(); ++t) {
    EPS_RETURN_IF_ERROR(append_experts((*idx)[t], item(f.field("topk_idx"), t), c, routing.topk_idx));
    EPS_RETURN_IF_ERROR(
        append_weights((*weights)[t], item(f.field("topk_weights"), t), c.top_k, routing.topk_weights));
  }
  return routing;
}

Result<std::vector<RankRouting>> read_ranks(const JsonFields& f, const DispatchConfig& c) {
  EPS_ASSIGN_OR_RETURN(const Json* ranks, array_member(f, "ranks", "an array of num_ranks rank objects"));
  if (ranks->size() != static_cast<std::size_t>(c.num_ranks)) {
    return invalid_argument("ranks", "expected num_ranks = {} rank objects, got {}", c.num_ranks,
                            ranks->size());
  }
  std::vector<RankRouting> routing;
  for (int r = 0; r < c.num_ranks; ++r) {
    EPS_ASSIGN_OR_RETURN(RankRouting rank, read_rank((*ranks)[r], r, c));
    routing.push_back(std::move(rank));
  }
  return routing;
}

// The default T_max is the largest T_r, kept in range so that a too-long rank surfaces as
// DispatchPlan::make's T_r > T_max error (docs/dispatch.md 5.4) on that rank.
Status read_max_tokens(const JsonFields& f, const std::vector<RankRouting>& routing, DispatchConfig& c) {
  int largest = 0;
  for (const RankRouting& rank : routing) largest = std::max(largest, rank.num_tokens);
  EPS_ASSIGN_OR_RETURN(c.max_tokens_per_rank,
                       int_field(f, "max_tokens_per_rank", 0, dispatch::kMaxTokensPerRank,
                                 std::min(largest, dispatch::kMaxTokensPerRank)));
  return Status();
}

// ExpertMap names the fields of one placement ("phy2log[3]"); in the document they live under "placement".
Status under_placement(const Status& status) {
  return Status(status.code(), "placement." + status.message());
}

Result<std::vector<std::vector<int>>> read_log2phy(const JsonFields& p, int num_experts) {
  if (!p.has("log2phy")) return std::vector<std::vector<int>>();
  EPS_ASSIGN_OR_RETURN(const Json* value, array_member(p, "log2phy", "an array of E rows of slot ids"));
  // An empty log2phy would mean "ascending slot order" to ExpertMap; in the document it is a missing row.
  if (value->size() != static_cast<std::size_t>(num_experts)) {
    return invalid_argument(p.field("log2phy"), "must have one row per expert ({}), got {}", num_experts,
                            value->size());
  }
  std::vector<std::vector<int>> rows;
  for (std::size_t e = 0; e < value->size(); ++e) {
    EPS_ASSIGN_OR_RETURN(std::vector<int> row,
                         int_array((*value)[e], item(p.field("log2phy"), e), "a slot id or -1"));
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::optional<ExpertMap>> read_placement(const JsonFields& f, const DispatchConfig& c) {
  if (!f.has("placement")) return std::optional<ExpertMap>();
  EPS_ASSIGN_OR_RETURN(const Json* value, f.member("placement"));
  const JsonFields p(*value, "placement");
  EPS_RETURN_IF_ERROR(p.expect_object());
  EPS_RETURN_IF_ERROR(JsonFields(*value, "placement").only_known(kPlacementKeys, "the placement"));
  EPS_ASSIGN_OR_RETURN(const Json* phy2log_json, p.member("phy2log"));
  EPS_ASSIGN_OR_RETURN(const std::vector<int> phy2log,
                       int_array(*phy2log_json, p.field("phy2log"), "an expert id"));
  EPS_ASSIGN_OR_RETURN(const std::vector<std::vector<int>> log2phy, read_log2phy(p, c.num_experts));
  Result<ExpertMap> map = ExpertMap::make_replicated(c.num_ranks, c.num_experts, phy2log, log2phy);
  if (!map.ok()) return under_placement(map.status());
  return std::optional<ExpertMap>(std::move(map).value());
}

Result<DispatchInput> read_input(const Json& input) {
  const JsonFields f(input, "");
  EPS_RETURN_IF_ERROR(f.expect_object());
  EPS_RETURN_IF_ERROR(JsonFields(input, "").only_known(kInputKeys, "the dispatch input"));
  DispatchInput in;
  EPS_RETURN_IF_ERROR(read_shape(f, in.config));
  EPS_ASSIGN_OR_RETURN(in.routing, read_ranks(f, in.config));
  EPS_RETURN_IF_ERROR(read_max_tokens(f, in.routing, in.config));
  EPS_ASSIGN_OR_RETURN(in.placement, read_placement(f, in.config));
  return in;
}

// DispatchPlan::make names its C++ inputs: the routing of rank r is "routing[r]" there and "ranks[r]" in the
// document, where T_r ("routing[r].num_tokens") is the number of rows of ranks[r].topk_idx.
Status in_document_terms(const Status& status, const DispatchConfig& c, const std::vector<int>& num_tokens) {
  constexpr std::string_view kRouting = "routing[";
  const std::string& message = status.message();
  if (!message.starts_with(kRouting)) return status;
  const std::size_t close = message.find(']');
  const int rank = std::atoi(message.substr(kRouting.size(), close - kRouting.size()).c_str());
  const std::string rest = message.substr(close + 1);
  if (rest.starts_with(".num_tokens:") && rank >= 0 && rank < c.num_ranks) {
    return invalid_argument(
        fmt::format("ranks[{}].topk_idx", rank),
        "has T_{} = {} rows, must have at most max_tokens_per_rank = {} (docs/dispatch.md 5.4)", rank,
        num_tokens[rank], c.max_tokens_per_rank);
  }
  return Status(status.code(), fmt::format("ranks[{}]{}", rank, rest));
}

Result<DispatchPlan> make_plan(DispatchInput in) {
  std::vector<int> num_tokens;
  for (const RankRouting& rank : in.routing) num_tokens.push_back(rank.num_tokens);
  Result<DispatchPlan> plan = DispatchPlan::make(in.config, std::move(in.routing), std::move(in.placement));
  if (!plan.ok()) return in_document_terms(plan.status(), in.config, num_tokens);
  return plan;
}

Status check_output_size(const DispatchPlan& plan) {
  const std::int64_t ranks = plan.num_ranks();
  const std::int64_t slots = plan.expert_map().num_slots();
  if (ranks * slots > kMaxLayoutRows) {
    return invalid_argument(
        "num_ranks", "R·P = {}·{} must be at most 2^24 (num_tokens_per_expert of every rank)", ranks, slots);
  }
  const std::int64_t max_tokens = kMaxLayoutRows / (ranks * slots);
  const int t_max = plan.config().max_tokens_per_rank;
  if (t_max > max_tokens) {
    return invalid_argument(
        "max_tokens_per_rank",
        "must be in [0, {}] for R = {}, P = {}: the LL layouts of all ranks hold R·P·T_max "
        "rows, at most 2^24 in this tool; got {}",
        max_tokens, ranks, slots, t_max);
  }
  const std::int64_t max_alignment = 1 + kMaxLayoutRows / slots;
  if (plan.config().expert_alignment > max_alignment) {
    return invalid_argument(
        "expert_alignment",
        "must be in [1, {}] for P = {}: expert-major padding adds up to P·(expert_alignment - 1) "
        "rows over all ranks, at most 2^24 in this tool; got {}",
        max_alignment, slots, plan.config().expert_alignment);
  }
  return Status();
}

// ---------------------------------------------------------------------------------------------------------
// Writing the output: every number below is read from a reference/dispatch result.

// The shortest decimal that reads back as the same float, so weights stay exact and readable.
Json json_float(float value) { return std::strtod(fmt::format("{}", value).c_str(), nullptr); }

Json float_array(std::span<const float> values) {
  Json out = Json::array();
  for (float v : values) out.push_back(json_float(v));
  return out;
}

template <typename T>
Json matrix(std::span<const T> flat, std::size_t columns) {
  Json rows = Json::array();
  for (std::size_t begin = 0; begin < flat.size(); begin += columns) {
    const std::span<const T> row = flat.subspan(begin, columns);
    rows.push_back(std::vector<int>(row.begin(), row.end()));
  }
  return rows;
}

Json placement_json(const ExpertMap& map) {
  std::vector<int> phy2log;
  for (int p = 0; p < map.num_slots(); ++p) phy2log.push_back(map.logical_expert(p));
  Json log2phy = Json::array();
  for (int e = 0; e < map.num_experts(); ++e) {
    const std::span<const int> replicas = map.replicas(e);
    log2phy.push_back(std::vector<int>(replicas.begin(), replicas.end()));
  }
  return Json{{"phy2log", phy2log}, {"log2phy", std::move(log2phy)}};
}

Json config_json(const DispatchPlan& plan) {
  const DispatchConfig& c = plan.config();
  std::vector<int> num_tokens;
  for (int r = 0; r < plan.num_ranks(); ++r) num_tokens.push_back(plan.num_tokens(r));
  return Json{{"num_ranks", c.num_ranks},
              {"num_experts", c.num_experts},
              {"top_k", c.top_k},
              {"hidden", c.hidden},
              {"dtype", c.dtype == PayloadType::kFp8 ? "fp8" : "bf16"},
              {"max_tokens_per_rank", c.max_tokens_per_rank},
              {"expert_alignment", c.expert_alignment},
              {"num_tokens", num_tokens},
              {"num_slots", plan.expert_map().num_slots()},
              {"num_local_experts", plan.num_local_experts()},
              {"placement", placement_json(plan.expert_map())}};
}

Result<Json> layout_json(const DispatchPlan& plan, int rank) {
  EPS_ASSIGN_OR_RETURN(const dispatch::DispatchLayout layout, dispatch::expected_layout(plan, rank));
  return Json{{"rank", rank},
              {"num_tokens_per_rank", layout.num_tokens_per_rank},
              {"num_tokens_per_expert", layout.num_tokens_per_expert},
              {"is_token_in_rank", matrix(std::span<const std::uint8_t>(layout.is_token_in_rank),
                                          static_cast<std::size_t>(plan.num_ranks()))}};
}

Result<Json> rank_major_json(const DispatchPlan& plan, int rank) {
  EPS_ASSIGN_OR_RETURN(const dispatch::RankMajorIndex index, dispatch::rank_major_index(plan, rank));
  const auto top_k = static_cast<std::size_t>(plan.top_k());
  const std::span<const int> idx(index.recv_topk_idx);
  const std::span<const float> weights(index.recv_topk_weights);
  Json rows = Json::array();
  for (std::size_t i = 0; i < index.num_rows(); ++i) {
    const std::span<const int> row_idx = idx.subspan(i * top_k, top_k);
    rows.push_back({{"src_rank", index.sources[i].rank},
                    {"src_token", index.sources[i].token},
                    {"recv_topk_idx", std::vector<int>(row_idx.begin(), row_idx.end())},
                    {"recv_topk_weights", float_array(weights.subspan(i * top_k, top_k))}});
  }
  return Json{{"rank", rank},
              {"rows", std::move(rows)},
              {"num_recv_tokens_per_expert", index.num_recv_tokens_per_expert}};
}

// Local expert l of rank q is global slot q·L + l (reference/dispatch/expert_map.hpp).
Json local_expert_json(const DispatchPlan& plan, int rank, int local) {
  const int slot = rank * plan.num_local_experts() + local;
  return Json{{"local_expert", local}, {"slot", slot}, {"expert", plan.expert_map().logical_expert(slot)}};
}

Json expert_major_row_json(const dispatch::ExpertMajorRow& row) {
  if (row.source.rank < 0) return Json{{"padding", true}};
  return Json{{"src_rank", row.source.rank},
              {"src_token", row.source.token},
              {"k", row.slot},
              {"weight", json_float(row.weight)}};
}

Result<Json> expert_major_json(const DispatchPlan& plan, int rank) {
  EPS_ASSIGN_OR_RETURN(const dispatch::ExpertMajorIndex index, dispatch::expert_major_index(plan, rank));
  Json experts = Json::array();
  for (int l = 0; l < plan.num_local_experts(); ++l) {
    Json expert = local_expert_json(plan, rank, l);
    const int begin = index.segment_begin[l];
    const int end = index.segment_begin[l + 1];
    Json rows = Json::array();
    for (int i = begin; i < end; ++i) rows.push_back(expert_major_row_json(index.rows[i]));
    expert["count"] = index.counts[l];
    expert["segment_begin"] = begin;
    expert["segment_length"] = end - begin;
    expert["rows"] = std::move(rows);
    experts.push_back(std::move(expert));
  }
  return Json{{"rank", rank}, {"num_rows", index.segment_begin.back()}, {"experts", std::move(experts)}};
}

// The rows of local expert l, block by block: a block's source rank is the block's, its token is src_info.
Json ll_rows_json(const DispatchPlan& plan, const dispatch::LlIndex& index, int local) {
  const int num_ranks = plan.num_ranks();
  Json rows = Json::array();
  for (int r = 0; r < num_ranks; ++r) {
    const dispatch::LlRange range = index.layout_range[static_cast<std::size_t>(local) * num_ranks + r];
    for (int i = range.begin; i < range.begin + range.count; ++i) {
      const std::size_t row = static_cast<std::size_t>(local) * index.capacity + static_cast<std::size_t>(i);
      const int token = index.src_info[row];
      const int k = index.src_slot[row];
      rows.push_back({{"src_rank", r},
                      {"src_token", token},
                      {"k", k},
                      {"weight", json_float(plan.topk_weights(r, token)[k])},
                      {"src_info", token}});
    }
  }
  return rows;
}

Result<Json> ll_json(const DispatchPlan& plan, int rank) {
  EPS_ASSIGN_OR_RETURN(const dispatch::LlIndex index, dispatch::ll_index(plan, rank));
  const int num_ranks = plan.num_ranks();
  Json experts = Json::array();
  for (int l = 0; l < plan.num_local_experts(); ++l) {
    Json expert = local_expert_json(plan, rank, l);
    Json ranges = Json::array();
    for (int r = 0; r < num_ranks; ++r) {
      const dispatch::LlRange range = index.layout_range[static_cast<std::size_t>(l) * num_ranks + r];
      ranges.push_back({range.begin, range.count});
    }
    expert["packed_recv_count"] = index.packed_recv_count[l];
    expert["layout_range"] = std::move(ranges);
    expert["rows"] = ll_rows_json(plan, index, l);
    experts.push_back(std::move(expert));
  }
  return Json{{"rank", rank}, {"capacity", index.capacity}, {"experts", std::move(experts)}};
}

Json traffic_json(const dispatch::RankTraffic& t) {
  return Json{{"recv", {{"algo", t.recv.algo}, {"physical", t.recv.physical}}},
              {"send", {{"algo", t.send.algo}, {"physical", t.send.physical}}}};
}

Json bytes_json(const DispatchPlan& plan) {
  const dispatch::ByteAccount account = dispatch::account_bytes(plan);
  Json ranks = Json::array();
  for (int r = 0; r < plan.num_ranks(); ++r) {
    ranks.push_back({{"rank", r},
                     {"ht_dispatch", traffic_json(account.ht_dispatch[r])},
                     {"ht_combine", traffic_json(account.ht_combine[r])},
                     {"ll_dispatch", traffic_json(account.ll_dispatch[r])},
                     {"ll_combine", traffic_json(account.ll_combine[r])}});
  }
  return ranks;
}

Json row_bytes_json(const DispatchPlan& plan) {
  const PayloadType dtype = plan.config().dtype;
  return Json{{"ht_dispatch", dispatch::ht_dispatch_row_bytes(dtype, plan.hidden())},
              {"ll_dispatch", dispatch::ll_dispatch_message_bytes(dtype, plan.hidden())},
              {"combine", dispatch::combine_row_bytes(plan.hidden())}};
}

// One array entry per rank, from a per-rank reference result.
Result<Json> per_rank(const DispatchPlan& plan, Result<Json> (*entry)(const DispatchPlan&, int)) {
  Json out = Json::array();
  for (int r = 0; r < plan.num_ranks(); ++r) {
    EPS_ASSIGN_OR_RETURN(Json value, entry(plan, r));
    out.push_back(std::move(value));
  }
  return out;
}

}  // namespace

Result<Json> run_ref_dispatch(const Json& input) {
  EPS_ASSIGN_OR_RETURN(DispatchInput in, read_input(input));
  EPS_ASSIGN_OR_RETURN(const DispatchPlan plan, make_plan(std::move(in)));
  EPS_RETURN_IF_ERROR(check_output_size(plan));
  Json out = config_json(plan);
  out["rank_prefix_matrix"] = matrix(std::span<const int>(dispatch::rank_prefix_matrix(plan)),
                                     static_cast<std::size_t>(plan.num_ranks()));
  EPS_ASSIGN_OR_RETURN(out["layout"], per_rank(plan, &layout_json));
  EPS_ASSIGN_OR_RETURN(out["ht_rank_major"], per_rank(plan, &rank_major_json));
  EPS_ASSIGN_OR_RETURN(out["ht_expert_major"], per_rank(plan, &expert_major_json));
  EPS_ASSIGN_OR_RETURN(out["ll"], per_rank(plan, &ll_json));
  out["row_bytes"] = row_bytes_json(plan);
  out["bytes"] = bytes_json(plan);
  return out;
}

}  // namespace eps
