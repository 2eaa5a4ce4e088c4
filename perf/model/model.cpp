#include "perf/model/model.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "perf/bench/presets.hpp"
#include "results/statistics.hpp"

namespace eps::model {
namespace {

// What only shapes the routing (the op's bytes) or names the run, not the cost of a byte.
const std::set<std::string> kRoutingIdentity = {"preset", "workload", "seed"};

std::int64_t size_of(const CaseResult& c, const std::string& name, std::int64_t fallback) {
  for (const auto& [key, value] : c.sizes) {
    if (key == name) return value;
  }
  return fallback;
}

std::string identity_of(const std::map<std::string, std::string>& identity, const std::string& name,
                        const std::string& fallback) {
  const auto it = identity.find(name);
  return it == identity.end() ? fallback : it->second;
}

bool per_selection_mode(const std::string& mode) { return mode.rfind("ht-rank-major", 0) != 0; }

std::string series_of(const CaseResult& c) {
  std::string out = fmt::format("{}/{}/{}/{}", c.op, c.transport, c.mode, c.dtype);
  for (const auto& [key, value] : c.identity) {
    if (!kRoutingIdentity.contains(key)) out += fmt::format(" {}={}", key, value);
  }
  return out;
}

// The helper threads per rank of a case (docs/results.md 9.5): the proxy transport's proxy threads.
int helper_threads(const ResultsDocument& doc, const CaseResult& c) {
  if (c.transport != "proxy") return 0;
  const Json& threads = doc.header.config.value("proxy-threads", Json());
  return threads.is_number_integer() ? threads.get<int>() : 0;
}

// max(1, ranks x (1 + helpers) / CPUs) of the run's worst node; 1 for a case that was not oversubscribed.
double cpu_share(const ResultsDocument& doc, const CaseResult& c) {
  const Json& census = doc.header.oversubscribed;
  if (!c.oversubscribed || !census.is_object()) return 1.0;
  const double ranks = census.value("ranks", 0.0);
  const double cpus = census.value("cpus", 0.0);
  if (ranks <= 0 || cpus <= 0) return 1.0;
  return std::max(1.0, ranks * (1 + helper_threads(doc, c)) / cpus);
}

int ranks_per_node_of(const ResultsDocument& doc, int ranks) {
  const Json& resolved = doc.header.config.value("preset_resolved", Json());
  if (resolved.is_object() && resolved.value("ranks_per_node", 0) > 0) return resolved["ranks_per_node"];
  return ranks;
}

Result<TrafficShape> shape_of_case(const ResultsDocument& doc, const CaseResult& c) {
  TrafficShape s;
  s.ranks = static_cast<int>(size_of(c, "ranks", 0));
  if (s.ranks < 1) return invalid_argument("sizes.ranks", "case {} has no rank count", series_of(c));
  s.ranks_per_node = ranks_per_node_of(doc, s.ranks);
  s.experts = static_cast<int>(size_of(c, "experts", 0));
  s.top_k = static_cast<int>(size_of(c, "top_k", 0));
  s.hidden = static_cast<int>(size_of(c, "hidden", 0));
  s.tokens = static_cast<int>(size_of(c, "tokens", 0));
  s.max_tokens = static_cast<int>(size_of(c, "max_tokens", s.tokens));
  s.dtype = c.dtype == "fp8" ? dispatch::PayloadType::kFp8 : dispatch::PayloadType::kBf16;
  s.per_selection = per_selection_mode(c.mode);
  s.workload = identity_of(c.identity, "workload", "uniform");
  s.seed = std::stoull(identity_of(c.identity, "seed", "1"));
  return s;
}

const OpTraffic& of_op(const Traffic& t, const std::string& op) {
  return op == "combine" ? t.combine : t.dispatch;
}

bool intra_node_fabric(const std::string& fabric) {
  return fabric == "shm" || fabric == "copy" || fabric.rfind("ipc", 0) == 0 ||
         (fabric.size() > 4 && fabric.compare(fabric.size() - 4, 4, ":shm") == 0);
}

// A gated fit, or a withheld one whose reason is why no fit could be made at all (too few sizes, ...).
GatedFit fit_or_withhold(std::vector<FitPoint> points, const std::string& what) {
  Result<GatedFit> fit = fit_gated(std::move(points), what);
  if (fit.ok()) return *fit;
  GatedFit withheld;
  withheld.reason = fit.status().message();
  return withheld;
}

std::vector<LinkModel> fit_links(const std::vector<ModelSource>& sources) {
  // (source, fabric, measure) -> points, in first-seen order.
  std::map<std::tuple<std::size_t, std::string, std::string>, std::pair<int, std::vector<FitPoint>>> series;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    for (const CaseRecord& record : sources[i].document.cases) {
      const CaseResult& c = record.result;
      if (c.op != "fabric" || identity_of(c.identity, "chaos", "off") != "off") continue;
      const std::string fabric = c.mode == "copy" ? "copy" : identity_of(c.identity, "fabric", c.transport);
      const double x = c.mode == "put-latency" ? static_cast<double>(size_of(c, "bytes", 0)) : c.algo_bytes;
      auto& [ranks, points] = series[{i, fabric, c.mode}];
      ranks = static_cast<int>(size_of(c, "ranks", 0));
      points.push_back({x, record.stats.p50});
    }
  }
  std::vector<LinkModel> links;
  for (auto& [key, value] : series) {
    const auto& [index, fabric, measure] = key;
    LinkModel link;
    link.fabric = fabric;
    link.scope = intra_node_fabric(fabric) ? "intra-node" : "inter-node";
    link.measure = measure;
    link.ranks = value.first;
    link.source = sources[index].path;
    link.fit = fit_or_withhold(std::move(value.second), fmt::format("{} {}", fabric, measure));
    links.push_back(std::move(link));
  }
  return links;
}

struct SeriesCase {
  const ModelSource* source;
  const CaseRecord* record;
};

Result<double> busiest_bytes(const SeriesCase& sc) {
  EPS_ASSIGN_OR_RETURN(const TrafficShape shape, shape_of_case(sc.source->document, sc.record->result));
  EPS_ASSIGN_OR_RETURN(const Traffic traffic, op_traffic(shape));
  return of_op(traffic, sc.record->result.op).busiest_rank_bytes;
}

Result<OpModel> fit_op(const std::string& name, const std::vector<SeriesCase>& cases, int fit_ranks) {
  OpModel op;
  op.series = name;
  op.fit_ranks = fit_ranks;
  std::vector<FitPoint> points;
  for (const SeriesCase& sc : cases) {
    if (sc.source->validate_only || size_of(sc.record->result, "ranks", 0) != fit_ranks) continue;
    if (points.empty()) op.example = *sc.record;
    if (std::find(op.sources.begin(), op.sources.end(), sc.source->path) == op.sources.end()) {
      op.sources.push_back(sc.source->path);
    }
    EPS_ASSIGN_OR_RETURN(const double x, busiest_bytes(sc));
    points.push_back({x, sc.record->stats.p50 / cpu_share(sc.source->document, sc.record->result)});
  }
  op.cost = fit_or_withhold(std::move(points), fmt::format("{} at {} ranks", name, fit_ranks));
  return op;
}

Result<std::vector<Validation>> validate(const OpModel& op, const std::vector<SeriesCase>& cases) {
  std::vector<Validation> out;
  if (op.cost.withheld) return out;
  for (const SeriesCase& sc : cases) {
    const CaseResult& c = sc.record->result;
    const int ranks = static_cast<int>(size_of(c, "ranks", 0));
    // A case across nodes needs the inter-node term, which the one-node loop of docs/model.md 16.5 does not
    // validate: it is left out here and says so in docs/model.md.
    if (ranks_per_node_of(sc.source->document, ranks) < ranks) continue;
    Validation v;
    v.series = op.series;
    v.role = !sc.source->validate_only && ranks == op.fit_ranks ? "fit" : "validation";
    v.source = sc.source->path;
    v.preset = identity_of(c.identity, "preset", "");
    v.ranks = ranks;
    v.tokens = size_of(c, "tokens", 0);
    v.cpu_share = cpu_share(sc.source->document, c);
    v.oversubscribed = c.oversubscribed;
    EPS_ASSIGN_OR_RETURN(v.busiest_rank_bytes, busiest_bytes(sc));
    v.measured_p50_us = sc.record->stats.p50;
    v.predicted_us = v.cpu_share * op.cost.predict(v.busiest_rank_bytes);
    v.error = v.measured_p50_us > 0 ? v.predicted_us / v.measured_p50_us - 1 : 0;
    out.push_back(v);
  }
  return out;
}

Status refuse_mixed(const std::vector<ModelSource>& sources) {
  std::map<std::string, std::vector<std::string>> by_key;
  for (const ModelSource& s : sources) by_key[platform_key(s.document.header.platform)].push_back(s.path);
  if (by_key.size() <= 1) return Status();
  std::vector<std::string> groups;
  for (const auto& [key, paths] : by_key)
    groups.push_back(fmt::format("{}: {}", key, fmt::join(paths, ", ")));
  return invalid_argument("--from",
                          "the results come from {} different platforms ({}); fitting them together mixes "
                          "machines: pass --allow-mixed to do it anyway",
                          by_key.size(), fmt::join(groups, "; "));
}

Json fit_to_json(const GatedFit& fit) {
  Json ranges = Json::array();
  for (const LineFit& line : fit.ranges) {
    ranges.push_back({{"bytes_min", line.x_min},
                      {"bytes_max", line.x_max},
                      {"alpha_us", line.intercept},
                      {"us_per_byte", line.slope},
                      {"gbps", line_gbps(line)},
                      {"r2", line.r2},
                      {"residuals_us", line.residuals}});
  }
  return {{"withheld", fit.withheld},
          {"reason", fit.withheld ? Json(fit.reason) : Json(nullptr)},
          {"ranges", ranges}};
}

Json traffic_to_json(const OpTraffic& t) {
  return {{"busiest_rank_bytes", t.busiest_rank_bytes},
          {"busiest_pair_bytes", t.busiest_pair_bytes},
          {"self_bytes", t.self_bytes},
          {"intra_bytes", t.intra_bytes},
          {"inter_bytes", t.inter_bytes},
          {"busiest_rank_inter_bytes", t.busiest_rank_inter_bytes},
          {"max_peers", t.max_peers},
          {"balancedness", t.balancedness}};
}

// The inter-node put-bw link of a prediction, or the reason there is none.
Result<const LinkModel*> inter_node_link(const Model& model, const std::string& fabric) {
  std::vector<const LinkModel*> found;
  for (const LinkModel& link : model.links) {
    if (link.scope != "inter-node" || link.measure != "put-bw") continue;
    if (fabric.empty() || link.fabric == fabric) found.push_back(&link);
  }
  if (!fabric.empty() && found.empty()) {
    return invalid_argument("--fabric", "no bench fabric put-bw results of '{}' among the inputs", fabric);
  }
  if (found.size() > 1 && fabric.empty()) {
    std::vector<std::string> names;
    for (const LinkModel* link : found) names.push_back(link->fabric);
    return invalid_argument("--fabric", "several inter-node links were fitted ({}); choose one",
                            fmt::join(names, ", "));
  }
  if (found.empty()) return static_cast<const LinkModel*>(nullptr);
  return found.front();
}

}  // namespace

std::string platform_key(const Json& platform) {
  const Json topology = platform.value("topology", Json::object());
  std::set<std::string> devices, nics;
  for (const Json& rank : platform.value("ranks", Json::array())) {
    devices.insert(rank.value("device", ""));
    nics.insert(rank.value("nic", ""));
  }
  const Json identity = {{"cpu_model", platform.value("cpu_model", Json())},
                         {"memory_bytes", platform.value("memory_bytes", Json())},
                         {"cores", topology.value("cores", Json())},
                         {"pus", topology.value("pus", Json())},
                         {"numa_nodes", topology.value("numa_nodes", Json())},
                         {"libraries", platform.value("libraries", Json())},
                         {"gpus", platform.value("gpus", Json())},
                         {"devices", devices},
                         {"nics", nics}};
  std::uint64_t hash = 1469598103934665603ULL;  // FNV-1a 64
  for (const char ch : identity.dump()) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", hash);
}

Result<Model> fit_model(const std::vector<ModelSource>& sources, const ModelOptions& options) {
  if (!options.allow_mixed) EPS_RETURN_IF_ERROR(refuse_mixed(sources));
  Model model;
  model.links = fit_links(sources);
  std::map<std::string, std::vector<SeriesCase>> series;
  std::vector<std::string> order;
  for (const ModelSource& s : sources) {
    for (const CaseRecord& record : s.document.cases) {
      if (record.result.op != "dispatch" && record.result.op != "combine") continue;
      const std::string name = series_of(record.result);
      if (!series.contains(name)) order.push_back(name);
      series[name].push_back({&s, &record});
    }
  }
  if (model.links.empty() && order.empty()) {
    return invalid_argument(
        "--from", "no bench fabric, dispatch or combine case in {} file(s): nothing to fit", sources.size());
  }
  for (const std::string& name : order) {
    const std::vector<SeriesCase>& cases = series[name];
    int fit_ranks = options.fit_ranks;
    if (fit_ranks == 0) {
      fit_ranks = std::numeric_limits<int>::max();
      for (const SeriesCase& sc : cases) {
        if (sc.source->validate_only) continue;
        fit_ranks = std::min(fit_ranks, static_cast<int>(size_of(sc.record->result, "ranks", 0)));
      }
    }
    EPS_ASSIGN_OR_RETURN(OpModel op, fit_op(name, cases, fit_ranks));
    if (op.sources.empty()) continue;  // no case of this series at --fit-ranks: nothing to fit it on
    EPS_ASSIGN_OR_RETURN(std::vector<Validation> checked, validate(op, cases));
    model.validation.insert(model.validation.end(), checked.begin(), checked.end());
    model.ops.push_back(std::move(op));
  }
  return model;
}

Result<std::vector<Prediction>> predict(const Model& model, const PredictOptions& options) {
  EPS_ASSIGN_OR_RETURN(const Preset* preset, find_preset(options.preset));
  EPS_ASSIGN_OR_RETURN(const LinkModel* inter, inter_node_link(model, options.fabric));
  const std::int64_t tokens = options.tokens > 0 ? options.tokens : preset->tokens_per_rank;
  std::map<std::pair<int, bool>, Result<Traffic>> cache;  // (EP size, per selection) -> traffic
  std::vector<Prediction> out;
  for (const OpModel& op : model.ops) {
    if (op.cost.withheld) continue;
    const CaseResult& example = op.example.result;
    const bool per_selection = per_selection_mode(example.mode);
    for (const std::int64_t ep64 : options.ep_sizes) {
      const int ep = static_cast<int>(ep64);
      Prediction p;
      p.series = op.series;
      p.op = example.op;
      p.ep = ep;
      p.ranks_per_node = std::min(options.ranks_per_node, ep);
      p.nodes = (ep + p.ranks_per_node - 1) / p.ranks_per_node;
      p.tokens = tokens;
      const Result<ResolvedPreset> resolved =
          resolve_preset(options.preset, ep, p.ranks_per_node, TokenSweep{"", {tokens}});
      if (!resolved.ok()) {
        p.skipped = resolved.status().message();
        out.push_back(p);
        continue;
      }
      auto cached = cache.find({ep, per_selection});
      if (cached == cache.end()) {
        TrafficShape shape;
        shape.ranks = ep;
        shape.ranks_per_node = p.ranks_per_node;
        shape.experts = static_cast<int>(preset->experts);
        shape.top_k = static_cast<int>(preset->topk);
        shape.hidden = static_cast<int>(preset->hidden);
        shape.tokens = static_cast<int>(tokens);
        shape.max_tokens = static_cast<int>(tokens);
        shape.dtype =
            preset->dispatch_dtype == "fp8" ? dispatch::PayloadType::kFp8 : dispatch::PayloadType::kBf16;
        shape.per_selection = per_selection;
        shape.workload = options.workload;
        shape.seed = options.seed;
        cached = cache.emplace(std::make_pair(ep, per_selection), op_traffic(shape)).first;
      }
      if (!cached->second.ok()) {
        p.skipped = cached->second.status().message();
        out.push_back(p);
        continue;
      }
      p.traffic = of_op(*cached->second, example.op);
      const int helpers = example.transport == "proxy" ? 1 : 0;
      p.cpu_share =
          options.cpus_per_node > 0
              ? std::max(1.0, static_cast<double>(p.ranks_per_node) * (1 + helpers) / options.cpus_per_node)
              : 1.0;
      if (p.nodes > 1) {
        if (inter == nullptr) {
          p.skipped = fmt::format(
              "EP {} spans {} nodes of {} ranks, but no inter-node link was fitted (feed bench fabric "
              "results of the inter-node fabric)",
              ep, p.nodes, p.ranks_per_node);
          out.push_back(p);
          continue;
        }
        if (inter->fit.withheld) {
          p.skipped = fmt::format("the inter-node link fit is withheld: {}", inter->fit.reason);
          out.push_back(p);
          continue;
        }
        p.inter_us = inter->fit.predict(p.traffic.busiest_rank_inter_bytes);
      }
      p.time_us = p.cpu_share * op.cost.predict(p.traffic.busiest_rank_bytes) + p.inter_us;
      p.gbps = bandwidth_gbps(p.traffic.busiest_rank_bytes, p.time_us);
      out.push_back(p);
    }
  }
  return out;
}

Json model_to_json(const std::vector<ModelSource>& sources, const Model& model,
                   const std::vector<Prediction>& predictions) {
  Json inputs = Json::array();
  for (const ModelSource& s : sources) {
    inputs.push_back({{"path", s.path},
                      {"role", s.validate_only ? "validation" : "fit"},
                      {"fingerprint", s.document.header.platform.value("fingerprint", "")},
                      {"platform_key", platform_key(s.document.header.platform)},
                      {"start_time", s.document.header.start_time},
                      {"cases", s.document.cases.size()}});
  }
  Json links = Json::array();
  for (const LinkModel& l : model.links) {
    Json j = fit_to_json(l.fit);
    j.update({{"fabric", l.fabric},
              {"scope", l.scope},
              {"measure", l.measure},
              {"ranks", l.ranks},
              {"source", l.source}});
    links.push_back(j);
  }
  Json ops = Json::array();
  for (const OpModel& o : model.ops) {
    Json j = fit_to_json(o.cost);
    j.update({{"series", o.series},
              {"op", o.example.result.op},
              {"transport", o.example.result.transport},
              {"mode", o.example.result.mode},
              {"dtype", o.example.result.dtype},
              {"fit_ranks", o.fit_ranks},
              {"sources", o.sources}});
    ops.push_back(j);
  }
  Json validation = Json::array();
  std::map<std::string, double> worst;
  for (const Validation& v : model.validation) {
    validation.push_back({{"series", v.series},
                          {"role", v.role},
                          {"source", v.source},
                          {"preset", v.preset},
                          {"ranks", v.ranks},
                          {"tokens", v.tokens},
                          {"cpu_share", v.cpu_share},
                          {"oversubscribed", v.oversubscribed},
                          {"busiest_rank_bytes", v.busiest_rank_bytes},
                          {"measured_p50_us", v.measured_p50_us},
                          {"predicted_us", v.predicted_us},
                          {"error", v.error}});
    if (v.role == "validation") worst[v.series] = std::max(worst[v.series], std::abs(v.error));
  }
  Json predicted = Json::array();
  for (const Prediction& p : predictions) {
    Json j = {{"series", p.series},
              {"op", p.op},
              {"ep", p.ep},
              {"ranks_per_node", p.ranks_per_node},
              {"nodes", p.nodes},
              {"tokens", p.tokens},
              {"skipped", p.skipped ? Json(*p.skipped) : Json(nullptr)}};
    if (!p.skipped) {
      j.update({{"time_us", p.time_us},
                {"cpu_share", p.cpu_share},
                {"inter_us", p.inter_us},
                {"gbps", p.gbps},
                {"traffic", traffic_to_json(p.traffic)}});
    }
    predicted.push_back(j);
  }
  return {{"inputs", inputs},         {"links", links},       {"ops", ops},
          {"validation", validation}, {"worst_error", worst}, {"predictions", predicted}};
}

}  // namespace eps::model
