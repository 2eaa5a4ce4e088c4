// Every parameter parser: the registry (impls/runtime/params.hpp: each flag of param_catalog() given as its
// EPSUITE_* twin, the --tokens sweep) and the small option parsers beside it (--tag, compare's --threshold
// and --alpha fractions, routing schedules, replica rules, combine trees, logits sources, expert kernels,
// planner addresses and keys). The first byte picks the parser (and, for the registry, the parameter), the
// rest is the text. Properties: a rejected text is bad input naming the parameter; an accepted value printed
// back in its own syntax parses to the same value; sweep values lie in range, at most kMaxSweepValues.
#include <algorithm>
#include <cctype>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fuzz/fuzz_util.hpp"
#include "harness/platform/platform.hpp"
#include "impls/layer/planner/planner.hpp"
#include "impls/runtime/params.hpp"
#include "reference/eplb/replica_rule.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/layer/combine.hpp"
#include "reference/layer/moe_layer.hpp"
#include "reference/routing/schedule.hpp"
#include "results/regression_gate.hpp"

namespace {

void check_rejected(const eps::Status& status) {
  EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(status), status.message());
}

// Every suite-wide definition, plus the shapes of the subcommands' own ones (bench's --tokens sweep in
// [0, 65536], bench fabric's --sizes sweep in [1, 2^24], a count in [0, 65536]) and the widest ranges the
// registry allows, so that the integer and sweep arithmetic meets its limits.
const std::vector<eps::ParamSpec>& specs() {
  static const std::vector<eps::ParamSpec> all = [] {
    std::vector<eps::ParamSpec> s(eps::param_catalog().begin(), eps::param_catalog().end());
    using eps::ParamKind;
    constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
    s.push_back({.name = "tokens", .kind = ParamKind::kSweep, .int_min = 0, .int_max = 65536});
    s.push_back({.name = "sizes",
                 .kind = ParamKind::kSweep,
                 .default_text = "8:2097152:x4",
                 .int_min = 1,
                 .int_max = 1 << 24});
    s.push_back({.name = "wide-sweep", .kind = ParamKind::kSweep, .int_min = kMin, .int_max = kMax});
    s.push_back({.name = "window",
                 .kind = ParamKind::kInteger,
                 .default_text = "64",
                 .int_min = 1,
                 .int_max = 65536});
    s.push_back({.name = "wide-integer",
                 .kind = ParamKind::kInteger,
                 .default_text = "0",
                 .int_min = kMin,
                 .int_max = kMax});
    s.push_back(
        {.name = "ratio", .kind = ParamKind::kNumber, .default_text = "0.5", .num_min = 0, .num_max = 1});
    return s;
  }();
  return all;
}

// One parameter given as its environment twin, then its resolved value printed back.
void check_registry(std::uint8_t selector, std::string_view text) {
  const eps::ParamSpec& spec = specs()[selector % specs().size()];
  const std::string env = eps::env_name(spec);
  const auto lookup = [&](const std::string& value) {
    return [&env, value](const std::string& name) -> std::optional<std::string> {
      return name == env ? std::optional<std::string>(value) : std::nullopt;
    };
  };
  eps::Params params({spec});
  const eps::Status status = params.resolve(lookup(std::string(text)));
  if (!status.ok()) return check_rejected(status);
  const eps::Json value = params.to_json()[spec.name];
  std::string printed;
  switch (spec.kind) {
    case eps::ParamKind::kInteger:
      printed = fmt::format("{}", params.integer(spec.name));
      break;
    case eps::ParamKind::kNumber:
      printed = fmt::format("{}", params.number(spec.name));
      break;
    case eps::ParamKind::kString:
    case eps::ParamKind::kChoice:
      printed = params.string(spec.name);
      break;
    case eps::ParamKind::kSwitch:
      printed = params.enabled(spec.name) ? "1" : "0";
      break;
    case eps::ParamKind::kSweep: {
      const eps::TokenSweep& sweep = params.sweep(spec.name);
      EPS_FUZZ_CHECK(sweep.values.size() <= eps::kMaxSweepValues, sweep.text);
      for (const std::int64_t v : sweep.values)
        EPS_FUZZ_CHECK(v >= spec.int_min && v <= spec.int_max, fmt::format("{}: {}", sweep.text, v));
      printed = fmt::format("{}", fmt::join(sweep.values, ","));
      break;
    }
  }
  eps::Params again({spec});
  const eps::Status reparsed = again.resolve(lookup(printed));
  EPS_FUZZ_CHECK(reparsed.ok(), fmt::format("{}={}: {}", env, printed, reparsed.message()));
  EPS_FUZZ_CHECK(again.to_json()[spec.name] == value,
                 fmt::format("{}: {} became {}", env, value.dump(), again.to_json()[spec.name].dump()));
  (void)params.header_block();
}

// --tags: one tag per line.
void check_tags(std::string_view text) {
  std::vector<std::string> tags;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find('\n', begin), text.size());
    tags.emplace_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  const auto parsed = eps::parse_tags(tags);
  if (!parsed.ok()) return check_rejected(parsed.status());
  std::vector<std::string> printed;
  for (const auto& [key, value] : *parsed) printed.push_back(key + "=" + value);
  const auto again = eps::parse_tags(printed);
  EPS_FUZZ_CHECK(again.ok() && *again == *parsed, fmt::format("{}", fmt::join(printed, " ")));
}

void check_fraction(std::string_view text) {
  const auto parsed = eps::parse_fraction(text, "--threshold");
  if (!parsed.ok()) return check_rejected(parsed.status());
  EPS_FUZZ_CHECK(std::isfinite(*parsed), fmt::format("{}", *parsed));
  const std::string printed = fmt::format("{}", *parsed);
  const auto again = eps::parse_fraction(printed, "--threshold");
  EPS_FUZZ_CHECK(again.ok() && *again == *parsed, printed);
}

void check_schedule(std::string_view text) {
  const auto parsed = eps::routing::parse_schedule(text);
  if (!parsed.ok()) return check_rejected(parsed.status());
  std::string printed(eps::routing::schedule_name(parsed->kind));
  if (parsed->sigma != 0.0f) printed += fmt::format(":{}", parsed->sigma);
  const auto again = eps::routing::parse_schedule(printed);
  EPS_FUZZ_CHECK(again.ok() && again->kind == parsed->kind && again->sigma == parsed->sigma, printed);
}

// The name parsers whose accepted names are their printed names.
void check_names(std::string_view text) {
  if (const auto rule = eps::eplb::parse_replica_rule(text); !rule.ok()) {
    check_rejected(rule.status());
  } else {
    EPS_FUZZ_CHECK(text == "modulo" || text == "local-first", std::string(text));
  }
  if (const auto tree = eps::parse_combine_tree("combine", text); !tree.ok()) {
    check_rejected(tree.status());
  } else {
    EPS_FUZZ_CHECK(eps::combine_tree_name(*tree) == text, std::string(text));
  }
  if (const auto logits = eps::parse_logits_source("logits", text); !logits.ok()) {
    check_rejected(logits.status());
  } else {
    EPS_FUZZ_CHECK(eps::logits_source_name(*logits) == text, std::string(text));
  }
  if (const auto kernel = eps::parse_expert_kernel("kernel", text); !kernel.ok()) {
    check_rejected(kernel.status());
  } else {
    EPS_FUZZ_CHECK(eps::expert_kernel_name(*kernel) == text, std::string(text));
  }
}

void check_address(std::string_view text) {
  const auto parsed = eps::planner::parse_address("--listen", text, 0);
  if (!parsed.ok()) return check_rejected(parsed.status());
  EPS_FUZZ_CHECK(!parsed->first.empty() && parsed->second >= 0 && parsed->second <= 65535, std::string(text));
  const std::string printed = eps::planner::format_address(parsed->first, parsed->second);
  const auto again = eps::planner::parse_address("--listen", printed, 0);
  EPS_FUZZ_CHECK(again.ok() && *again == *parsed, fmt::format("{} -> {}", text, printed));
}

// EPSUITE_EPLB_KEY as hex (the @FILE form reads files and is not fuzzed).
void check_key(std::string_view text) {
  if (!text.empty() && text.front() == '@') return;
  const auto key = eps::planner::PlannerKey::from_text(text);
  if (!key.ok()) {
    EPS_FUZZ_CHECK(eps::fuzz::is_bad_input(key.status()), key.status().message());
    // Key material (16 or more hex digits of it) must never reach a message.
    const std::string_view probe = text.substr(0, 16);
    const bool hex = probe.size() == 16 && std::all_of(probe.begin(), probe.end(), [](char c) {
                       return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                     });
    EPS_FUZZ_CHECK(!hex || key.status().message().find(probe) == std::string::npos,
                   "the error message quotes the key");
    return;
  }
  EPS_FUZZ_CHECK(key->bytes().size() >= eps::planner::kMinKeyBytes, "short key accepted");
  std::string hex;
  for (const unsigned char b : key->bytes()) hex += fmt::format("{:02x}", b);
  const auto again = eps::planner::PlannerKey::from_text(hex);
  EPS_FUZZ_CHECK(again.ok() && again->bytes() == key->bytes(), "hex round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t selector = data[0];
  const std::string_view text = eps::fuzz::text_of(data + 1, size - 1);
  switch (selector % 8) {
    case 0:
    case 1:
      return check_registry(selector / 8, text), 0;
    case 2:
      return check_tags(text), 0;
    case 3:
      return check_fraction(text), 0;
    case 4:
      return check_schedule(text), 0;
    case 5:
      return check_names(text), 0;
    case 6:
      return check_address(text), 0;
    default:
      return check_key(text), 0;
  }
}
