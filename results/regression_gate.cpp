#include "results/regression_gate.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

namespace eps {
std::string case_key(const CaseResult& c) {
  std::vector<std::pair<std::string, std::int64_t>> sizes = c.sizes;
  std::sort(sizes.begin(), sizes.end());
  std::string key = fmt::format("{}/{}/{}/{}", c.op, c.transport, c.mode, c.dtype);
  for (const auto& [name, value] : sizes) key += fmt::format(" {}={}", name, value);
  for (const auto& [name, value] : c.identity) key += fmt::format(" {}={}", name, value);  // sorted: a map
  return key;
}

Result<double> parse_fraction(std::string_view text, std::string_view field) {
  const bool percent = !text.empty() && text.back() == '%';
  const std::string_view digits = percent ? text.substr(0, text.size() - 1) : text;
  double value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || !std::isfinite(value)) {
    return invalid_argument(field, "expected a number or a percentage such as 10%, got '{}'", text);
  }
  return percent ? value / 100.0 : value;
}

std::size_t GateResult::count(Verdict verdict) const {
  return static_cast<std::size_t>(std::count_if(
      cases.begin(), cases.end(), [&](const CaseComparison& c) { return c.verdict == verdict; }));
}

int GateResult::exit_code() const {
  return count(Verdict::kRegression) > 0 || !failed_checks.empty() || nothing_matched() ? 1 : 0;
}

namespace {

Result<std::string> fingerprint_of(const ResultsDocument& doc, const std::string& which) {
  const Json& platform = doc.header.platform;
  if (!platform.contains("fingerprint") || !platform.at("fingerprint").is_string()) {
    return invalid_argument(which + ": platform.fingerprint", "required string is missing");
  }
  return platform.at("fingerprint").get<std::string>();
}

Result<std::map<std::string, const CaseRecord*>> index_cases(const ResultsDocument& doc,
                                                             const std::string& which) {
  if (doc.cases.empty())
    return invalid_argument(which + ": results", "empty results list, nothing to compare");
  std::map<std::string, const CaseRecord*> index;
  for (std::size_t i = 0; i < doc.cases.size(); ++i) {
    const CaseResult& c = doc.cases[i].result;
    if (c.times_us.empty()) {
      return invalid_argument(fmt::format("{}: results[{}].times_us", which, i),
                              "needs at least one repetition");
    }
    if (!index.emplace(case_key(c), &doc.cases[i]).second) {
      return invalid_argument(fmt::format("{}: results[{}]", which, i), "duplicate case {}", case_key(c));
    }
  }
  return index;
}

// Every identity field of a case (docs/results.md 9.3) as field -> value text.
std::map<std::string, std::string> identity_fields(const CaseResult& c) {
  std::map<std::string, std::string> fields = {
      {"op", c.op}, {"transport", c.transport}, {"mode", c.mode}, {"dtype", c.dtype}};
  for (const auto& [name, value] : c.sizes) fields[name] = std::to_string(value);
  for (const auto& [name, value] : c.identity) fields[name] = value;
  return fields;
}

// The fields whose sets of values differ between the documents; a case without a field the other document
// has counts as "(none)".
std::vector<IdentityDifference> identity_differences(const ResultsDocument& base,
                                                     const ResultsDocument& next) {
  using Fields = std::map<std::string, std::string>;
  std::set<std::string> names;
  std::vector<Fields> base_fields, new_fields;
  for (const CaseRecord& r : base.cases) base_fields.push_back(identity_fields(r.result));
  for (const CaseRecord& r : next.cases) new_fields.push_back(identity_fields(r.result));
  for (const auto* side : {&base_fields, &new_fields}) {
    for (const Fields& fields : *side) {
      for (const auto& [name, value] : fields) names.insert(name);
    }
  }
  const auto values_of = [&names](const std::vector<Fields>& side) {
    std::map<std::string, std::set<std::string>> values;
    for (const Fields& fields : side) {
      for (const std::string& name : names) {
        const auto it = fields.find(name);
        values[name].insert(it == fields.end() ? "(none)" : it->second);
      }
    }
    return values;
  };
  const auto in_base = values_of(base_fields), in_new = values_of(new_fields);
  std::vector<IdentityDifference> out;
  for (const std::string& name : names) {
    const std::set<std::string>& b = in_base.at(name);
    const std::set<std::string>& n = in_new.at(name);
    if (b != n) out.push_back({name, {b.begin(), b.end()}, {n.begin(), n.end()}});
  }
  return out;
}

std::string oversubscribed_note(const ResultsDocument& doc) {
  const Json& o = doc.header.oversubscribed;
  return o.is_object() ? o.value("note", std::string()) : std::string();
}

Result<CaseComparison> compare_case(const std::string& key, const CaseResult& base, const CaseResult& next,
                                    const GateOptions& options) {
  CaseComparison out;
  out.key = key;
  EPS_ASSIGN_OR_RETURN(SummaryStats base_stats, summarize(base.times_us));
  EPS_ASSIGN_OR_RETURN(SummaryStats new_stats, summarize(next.times_us));
  out.base_median = base_stats.p50;
  out.new_median = new_stats.p50;
  if (out.base_median > 0) {
    out.ratio = out.new_median / out.base_median;
  } else {
    out.ratio = out.new_median > 0 ? INFINITY : 1.0;
  }
  EPS_ASSIGN_OR_RETURN(out.test, mann_whitney_u(base.times_us, next.times_us));
  const bool significant = out.test.p_value < options.alpha;
  if (significant && out.ratio > 1.0 + options.threshold) out.verdict = Verdict::kRegression;
  if (significant && out.ratio < 1.0 - options.threshold) out.verdict = Verdict::kImprovement;
  return out;
}

}  // namespace

Result<GateResult> run_regression_gate(const ResultsDocument& base, const ResultsDocument& next,
                                       const GateOptions& options) {
  if (!(options.threshold >= 0 && options.threshold <= 10)) {
    return invalid_argument("--threshold", "must be in [0%, 1000%], got {}%", options.threshold * 100);
  }
  if (!(options.alpha > 0 && options.alpha <= 1)) {
    return invalid_argument("--alpha", "must be in (0, 1], got {}", options.alpha);
  }
  GateResult out;
  EPS_ASSIGN_OR_RETURN(out.base_fingerprint, fingerprint_of(base, "BASE"));
  EPS_ASSIGN_OR_RETURN(out.new_fingerprint, fingerprint_of(next, "NEW"));
  if (out.base_fingerprint != out.new_fingerprint && !options.force) {
    return invalid_argument("fingerprint",
                            "fingerprints differ: BASE {} vs NEW {}; the platforms are not the same "
                            "(docs/results.md 9.2); use --force to compare anyway",
                            out.base_fingerprint, out.new_fingerprint);
  }
  EPS_ASSIGN_OR_RETURN(auto base_index, index_cases(base, "BASE"));
  EPS_ASSIGN_OR_RETURN(auto new_index, index_cases(next, "NEW"));
  for (const CaseRecord& record : next.cases) {
    const std::string key = case_key(record.result);
    if (record.result.check && !record.result.check->passed) out.failed_checks.push_back(key);
    const auto match = base_index.find(key);
    if (match == base_index.end()) {
      out.only_in_new.push_back(key);
      continue;
    }
    EPS_ASSIGN_OR_RETURN(CaseComparison c, compare_case(key, match->second->result, record.result, options));
    out.cases.push_back(std::move(c));
    out.oversubscribed_in_base += match->second->result.oversubscribed ? 1 : 0;
    out.oversubscribed_in_new += record.result.oversubscribed ? 1 : 0;
  }
  for (const CaseRecord& record : base.cases) {
    const std::string key = case_key(record.result);
    if (!new_index.contains(key)) out.only_in_base.push_back(key);
  }
  out.identity_differences = identity_differences(base, next);
  out.allow_unmatched = options.allow_unmatched;
  out.base_oversubscribed_note = oversubscribed_note(base);
  out.new_oversubscribed_note = oversubscribed_note(next);
  return out;
}

namespace {

std::string case_rows(const GateResult& comparison, Verdict verdict) {
  std::string out;
  for (const CaseComparison& c : comparison.cases) {
    if (c.verdict != verdict) continue;
    out += fmt::format("  {:>12.2f} {:>12.2f} {:>8.3f} {:>10.3g} {:>6}  {}\n", c.base_median, c.new_median,
                       c.ratio, c.test.p_value, c.test.exact ? "exact" : "normal", c.key);
  }
  return out;
}

std::string section(const GateResult& comparison, Verdict verdict, std::string_view title) {
  const std::size_t n = comparison.count(verdict);
  if (n == 0) return fmt::format("{}: none\n", title);
  return fmt::format("{} ({}):\n  {:>12} {:>12} {:>8} {:>10} {:>6}  {}\n{}", title, n, "base p50 us",
                     "new p50 us", "ratio", "p-value", "test", "case", case_rows(comparison, verdict));
}

std::string key_list(std::string_view title, const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  std::string out = fmt::format("{} ({}):\n", title, keys.size());
  for (const std::string& key : keys) out += "  " + key + "\n";
  return out;
}

// "a, b, c" of at most kShown values, then "(N more)".
std::string value_list(const std::vector<std::string>& values) {
  constexpr std::size_t kShown = 6;
  if (values.size() <= kShown) return fmt::format("{}", fmt::join(values, ", "));
  return fmt::format("{}, ... ({} more)", fmt::join(values.begin(), values.begin() + kShown, ", "),
                     values.size() - kShown);
}

// Why nothing matched: the fields whose values differ, one line each.
std::string unmatched_section(const GateResult& comparison) {
  if (!comparison.cases.empty()) return "";
  if (comparison.identity_differences.empty()) {
    return "no case matched: every identity field takes the same values in both files, but in other "
           "combinations\n";
  }
  std::string out = "no case matched; identity fields that differ (docs/results.md 9.3):\n";
  for (const IdentityDifference& d : comparison.identity_differences) {
    out +=
        fmt::format("  {}: BASE {}; NEW {}\n", d.field, value_list(d.base_values), value_list(d.new_values));
  }
  return out;
}

// "# warning: NEW: 12 of 12 matched cases ran oversubscribed (4 ranks on 2 CPUs: ...)"; "" when none did.
std::string oversubscription_warning(std::string_view which, std::size_t oversubscribed, std::size_t matched,
                                     const std::string& note) {
  if (oversubscribed == 0) return "";
  return fmt::format("# warning: {}: {} of {} matched cases ran oversubscribed{} (docs/results.md 9.5)\n",
                     which, oversubscribed, matched, note.empty() ? "" : " (" + note + ")");
}

std::string verdict_line(const GateResult& comparison) {
  std::string reasons = fmt::format("{} regression(s), {} failed check(s)",
                                    comparison.count(Verdict::kRegression), comparison.failed_checks.size());
  if (comparison.cases.empty()) {
    std::vector<std::string> fields;
    for (const IdentityDifference& d : comparison.identity_differences) fields.push_back(d.field);
    reasons += fields.empty()
                   ? std::string(", no case matched")
                   : fmt::format(", no case matched: the files differ in {}", fmt::join(fields, ", "));
    reasons +=
        comparison.allow_unmatched ? " (allowed by --allow-unmatched)" : " (--allow-unmatched passes this)";
  }
  return fmt::format("verdict: {} ({})\n", comparison.exit_code() == 0 ? "PASS" : "FAIL", reasons);
}

}  // namespace

std::string regression_gate_report(const GateResult& comparison, const GateOptions& options) {
  std::string out = fmt::format("# epsuite compare: threshold {:g}%, alpha {:g}, two-sided Mann-Whitney U\n",
                                options.threshold * 100, options.alpha);
  if (comparison.base_fingerprint == comparison.new_fingerprint) {
    out += fmt::format("# fingerprint {}\n", comparison.base_fingerprint);
  } else {
    out += fmt::format("# fingerprints differ (--force): BASE {} NEW {}\n", comparison.base_fingerprint,
                       comparison.new_fingerprint);
  }
  out += oversubscription_warning("BASE", comparison.oversubscribed_in_base, comparison.cases.size(),
                                  comparison.base_oversubscribed_note);
  out += oversubscription_warning("NEW", comparison.oversubscribed_in_new, comparison.cases.size(),
                                  comparison.new_oversubscribed_note);
  out += section(comparison, Verdict::kRegression, "regressions");
  out += section(comparison, Verdict::kImprovement, "improvements");
  out += fmt::format("unchanged: {} of {} matched cases\n", comparison.count(Verdict::kUnchanged),
                     comparison.cases.size());
  out += key_list("only in BASE", comparison.only_in_base);
  out += key_list("only in NEW", comparison.only_in_new);
  out += key_list("failed checks in NEW", comparison.failed_checks);
  out += unmatched_section(comparison);
  out += verdict_line(comparison);
  return out;
}

}  // namespace eps
