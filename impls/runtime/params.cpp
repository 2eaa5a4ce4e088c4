#include "impls/runtime/params.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "impls/runtime/deadline.hpp"

namespace eps {
namespace {

std::vector<ParamSpec> make_catalog() {
  std::vector<ParamSpec> c;
  c.push_back({.name = "timeout",
               .kind = ParamKind::kNumber,
               .default_text = fmt::format("{}", kDefaultTimeoutSeconds),
               .help = "Deadline of every wait in seconds; on expiry the rank reports what it waited for "
                       "(peer, channel, expected vs observed) and the run exits 3 (docs/errors.md 10)",
               .num_min = 0.001,
               .num_max = 86400});
  c.push_back({.name = "strict",
               .kind = ParamKind::kSwitch,
               .default_text = "false",
               .help =
                   "Fail when a transport, fabric or device named on the command line is unavailable here "
                   "(docs/errors.md 10.1); without it that is reported and skipped"});
  c.push_back(
      {.name = "json",
       .kind = ParamKind::kString,
       .default_text = "",
       .help = "Also write the machine-readable output (docs/results.md 9.1) to this file, atomically; '-' = "
               "stdout"});
  c.push_back({.name = "transport",
               .kind = ParamKind::kString,
               .default_text = "all",
               .help =
                   "Transports to run: 'all' (every registered one) or a comma-separated list of registered "
                   "names (impls/transport/registry.hpp)"});
  c.push_back(
      {.name = "fabric",
       .kind = ParamKind::kString,
       .default_text = "auto",
       .help = "Fabric of the transports that use one (direct): auto (shm inside a node, the best "
               "inter-node fabric between nodes, docs/fabrics.md 6.4), shm, libfabric:shm, libfabric:tcp, "
               "libfabric:efa, libfabric:verbs, verbs:rc, verbs:efa (impls/fabric, docs/fabrics.md 6.1)"});
  c.push_back({.name = "iface",
               .kind = ParamKind::kString,
               .default_text = "",
               .help = "Network interface of socket fabrics (libfabric:tcp, also inside auto); empty = "
                       "FI_TCP_IFACE, else lo when every rank is on one node"});
  c.push_back(
      {.name = "signal",
       .kind = ParamKind::kChoice,
       .default_text = "auto",
       .help = "Signal strategy (docs/fabrics.md 6.2); auto = fabric-order on ordered fabrics, else imm-seq",
       .choices = {"auto", "fabric-order", "imm-seq", "recv-count", "sender-barrier"}});
  c.push_back(
      {.name = "chaos",
       .kind = ParamKind::kString,
       .default_text = "",
       .help =
           "Wrap the fabric in the chaos decorator (docs/fabrics.md 6.3): seed=S[,window=W,split=B,delay=D,"
           "empty=P,backpressure=P]; empty = off"});
  c.push_back(
      {.name = "device",
       .kind = ParamKind::kString,
       .default_text = "auto",
       .help =
           "Where the data path runs and the transports' buffers live (docs/devices.md): cpu (kernels "
           "on host threads), cpu-isolated (the cpu device whose device memory the host must not touch: "
           "any host access faults), cuda, hip (a GPU per rank on a node; cuda:N / hip:N pins ordinal N), "
           "or auto (a GPU when one is present, else cpu)"});
  c.push_back({.name = "proxy-threads",
               .kind = ParamKind::kInteger,
               .default_text = "4",
               .help = "CPU proxy threads per rank of the proxy transport (docs/channel.md 7.3)",
               .int_min = 1,
               .int_max = 64});
  c.push_back({.name = "allow-unsafe",
               .kind = ParamKind::kSwitch,
               .default_text = "false",
               .help = "Allow fabric-order signalling on an unordered fabric (the negative control: results "
                       "are expected to be wrong)"});
  return c;
}

std::string trim(std::string_view text) {
  std::size_t b = 0;
  std::size_t e = text.size();
  while (b < e && std::isspace(static_cast<unsigned char>(text[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(text[e - 1]))) --e;
  return std::string(text.substr(b, e - b));
}

std::optional<std::int64_t> to_integer(std::string_view text) {
  std::string t = trim(text);
  if (!t.empty() && t[0] == '+') t.erase(0, 1);
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size()) return std::nullopt;
  return v;
}

std::optional<double> to_number(std::string_view text) {
  const std::string t = trim(text);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<bool> to_switch(std::string_view text) {
  std::string t = trim(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

Status check_entry(std::string_view field, std::int64_t v, std::int64_t lo, std::int64_t hi) {
  if (v < lo || v > hi) return out_of_range(field, lo, hi, v);
  return Status();
}

Result<TokenSweep> expand_range(std::string_view text, std::string_view field, std::int64_t lo,
                                std::int64_t hi, std::string_view a_text, std::string_view b_text,
                                std::string_view step_text) {
  const auto a_value = to_integer(a_text);
  const auto b_value = to_integer(b_text);
  const auto step_value = step_text.size() > 1 ? to_integer(step_text.substr(1)) : std::nullopt;
  const bool geometric = !step_text.empty() && step_text[0] == 'x';
  const bool arithmetic = !step_text.empty() && step_text[0] == '+';
  if (!a_value || !b_value || !step_value || !(geometric || arithmetic)) {
    return invalid_argument(field, "expected a:b:xF, a:b:+S, a list or one integer in [{}, {}], got '{}'", lo,
                            hi, text);
  }
  const std::int64_t a = *a_value;
  const std::int64_t b = *b_value;
  const std::int64_t step = *step_value;
  EPS_RETURN_IF_ERROR(check_entry(field, a, lo, hi));
  EPS_RETURN_IF_ERROR(check_entry(field, b, lo, hi));
  if (a > b) return invalid_argument(field, "sweep start {} is greater than its end {}", a, b);
  if (geometric && a < 1) return invalid_argument(field, "a geometric sweep must start at >= 1, got {}", a);
  if (geometric && step < 2) return invalid_argument(field, "sweep factor must be >= 2, got x{}", step);
  if (arithmetic && step < 1) return invalid_argument(field, "sweep step must be >= 1, got +{}", step);
  TokenSweep sweep{std::string(text), {}};
  for (std::int64_t v = a;;) {
    if (sweep.values.size() == kMaxSweepValues) {
      return invalid_argument(field, "sweep '{}' has more than {} values", text, kMaxSweepValues);
    }
    sweep.values.push_back(v);
    // Stop before the next value would pass b, without computing it: v * F or v + S may not fit 64 bits.
    // b - v is exact in unsigned arithmetic because v <= b.
    const auto left = static_cast<std::uint64_t>(b) - static_cast<std::uint64_t>(v);
    if (geometric ? v > b / step : left < static_cast<std::uint64_t>(step)) break;
    v = geometric ? v * step : v + step;
  }
  return sweep;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      parts.push_back(text.substr(begin, i - begin));
      begin = i + 1;
    }
  }
  return parts;
}

std::string range_text(const ParamSpec& s) {
  switch (s.kind) {
    case ParamKind::kInteger:
    case ParamKind::kSweep:
      return fmt::format("[{}, {}]", s.int_min, s.int_max);
    case ParamKind::kNumber:
      return fmt::format("[{}, {}]", s.num_min, s.num_max);
    case ParamKind::kChoice:
      return fmt::format("{{{}}}", fmt::join(s.choices, ", "));
    case ParamKind::kSwitch:
      return "flag";
    case ParamKind::kString:
      return "";
  }
  return "";
}

std::string_view type_label(ParamKind kind) {
  switch (kind) {
    case ParamKind::kInteger:
      return "INT";
    case ParamKind::kNumber:
      return "FLOAT";
    case ParamKind::kChoice:
      return "NAME";
    case ParamKind::kSweep:
      return "SWEEP";
    case ParamKind::kSwitch:
    case ParamKind::kString:
      return "TEXT";
  }
  return "TEXT";
}

// Parses `text` for `spec`; `field` says where it came from and prefixes every error.
Result<ParamValue> parse_value(const ParamSpec& spec, std::string_view text, const std::string& field) {
  switch (spec.kind) {
    case ParamKind::kInteger: {
      const auto v = to_integer(text);
      if (!v) {
        return invalid_argument(field, "expected an integer in [{}, {}], got '{}'", spec.int_min,
                                spec.int_max, text);
      }
      EPS_RETURN_IF_ERROR(check_entry(field, *v, spec.int_min, spec.int_max));
      return ParamValue(*v);
    }
    case ParamKind::kNumber: {
      const auto v = to_number(text);
      if (!v) {
        return invalid_argument(field, "expected a number in [{}, {}], got '{}'", spec.num_min, spec.num_max,
                                text);
      }
      if (*v < spec.num_min || *v > spec.num_max) return out_of_range(field, spec.num_min, spec.num_max, *v);
      return ParamValue(*v);
    }
    case ParamKind::kChoice: {
      const std::string t = trim(text);
      if (std::find(spec.choices.begin(), spec.choices.end(), t) == spec.choices.end()) {
        return invalid_argument(field, "must be one of {{{}}}, got '{}'", fmt::join(spec.choices, ", "),
                                text);
      }
      return ParamValue(t);
    }
    case ParamKind::kSwitch: {
      const auto v = to_switch(text);
      if (!v) return invalid_argument(field, "expected 1/0, true/false, yes/no or on/off, got '{}'", text);
      return ParamValue(*v);
    }
    case ParamKind::kSweep: {
      EPS_ASSIGN_OR_RETURN(TokenSweep sweep, parse_token_sweep(text, field, spec.int_min, spec.int_max));
      return ParamValue(std::move(sweep));
    }
    case ParamKind::kString:
      return ParamValue(std::string(text));
  }
  return invalid_argument(field, "unknown parameter kind");
}

}  // namespace

std::string flag_name(const ParamSpec& spec) { return "--" + spec.name; }

std::string env_name(const ParamSpec& spec) {
  std::string env = "EPSUITE_";
  for (char ch : spec.name)
    env += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return env;
}

std::string_view source_name(ParamSource source) {
  switch (source) {
    case ParamSource::kDefault:
      return "default";
    case ParamSource::kEnvironment:
      return "env";
    case ParamSource::kFlag:
      return "flag";
  }
  return "default";
}

std::optional<std::string> process_environment(const std::string& name) {
  if (const char* value = std::getenv(name.c_str())) return std::string(value);
  return std::nullopt;
}

Result<TokenSweep> parse_token_sweep(std::string_view text, std::string_view field, std::int64_t lo,
                                     std::int64_t hi) {
  const std::string t = trim(text);
  if (t.empty()) return TokenSweep{};
  const std::vector<std::string_view> colon = split(t, ':');
  if (colon.size() == 3) return expand_range(t, field, lo, hi, colon[0], colon[1], colon[2]);
  if (colon.size() != 1) {
    return invalid_argument(field, "expected a:b:xF, a:b:+S, a list or one integer in [{}, {}], got '{}'", lo,
                            hi, t);
  }
  TokenSweep sweep{t, {}};
  for (std::string_view part : split(t, ',')) {
    const auto v = to_integer(part);
    if (!v) return invalid_argument(field, "expected an integer in [{}, {}], got '{}'", lo, hi, trim(part));
    EPS_RETURN_IF_ERROR(check_entry(field, *v, lo, hi));
    if (sweep.values.size() == kMaxSweepValues) {
      return invalid_argument(field, "list '{}' has more than {} values", t, kMaxSweepValues);
    }
    sweep.values.push_back(*v);
  }
  return sweep;
}

std::span<const ParamSpec> param_catalog() {
  static const std::vector<ParamSpec> kCatalog = make_catalog();
  return kCatalog;
}

const ParamSpec& param_spec(std::string_view name) {
  for (const ParamSpec& s : param_catalog()) {
    if (s.name == name) return s;
  }
  throw std::logic_error(fmt::format("parameter '{}' is not in the catalog", name));
}

Params::Params(std::vector<ParamSpec> specs) {
  entries_.reserve(specs.size());
  for (ParamSpec& s : specs) entries_.push_back(Entry{std::move(s), "", false, nullptr, ParamValue(), {}});
}

std::unique_ptr<Params> Params::from_catalog(std::initializer_list<std::string_view> names) {
  std::vector<ParamSpec> specs;
  for (std::string_view n : names) specs.push_back(param_spec(n));
  return std::make_unique<Params>(std::move(specs));
}

void Params::bind(CLI::App& app) {
  for (Entry& e : entries_) {
    std::string names = flag_name(e.spec);
    if (e.spec.short_flag != 0) names = fmt::format("-{},{}", e.spec.short_flag, names);
    const std::string default_shown = e.spec.default_text.empty() ? "unset" : e.spec.default_text;
    if (e.spec.kind == ParamKind::kSwitch) {
      e.option = app.add_flag(
          names, e.raw_switch,
          fmt::format("{} (default {}; env {}=1)", e.spec.help, default_shown, env_name(e.spec)));
      continue;
    }
    const std::string range = range_text(e.spec);
    e.option = app.add_option(names, e.raw,
                              fmt::format("{}.{}{} (default {}; env {})", e.spec.help,
                                          range.empty() ? "" : " ", range, default_shown, env_name(e.spec)));
    e.option->type_name(std::string(type_label(e.spec.kind)));
  }
}

Status Params::resolve(const EnvLookup& env) {
  for (Entry& e : entries_) {
    const std::string env_var = env_name(e.spec);
    std::optional<std::string> env_value = env(env_var);
    if (e.option != nullptr && e.option->count() > 0) {
      e.source = ParamSource::kFlag;
      if (e.spec.kind == ParamKind::kSwitch) {
        e.value = e.raw_switch;
        continue;
      }
      EPS_ASSIGN_OR_RETURN(e.value, parse_value(e.spec, e.raw, flag_name(e.spec)));
    } else if (env_value) {
      e.source = ParamSource::kEnvironment;
      const std::string field = fmt::format("{} (environment twin of {})", env_var, flag_name(e.spec));
      EPS_ASSIGN_OR_RETURN(e.value, parse_value(e.spec, *env_value, field));
    } else {
      e.source = ParamSource::kDefault;
      EPS_ASSIGN_OR_RETURN(e.value,
                           parse_value(e.spec, e.spec.default_text, "default of " + flag_name(e.spec)));
    }
  }
  return Status();
}

const Params::Entry& Params::entry(std::string_view name) const {
  for (const Entry& e : entries_) {
    if (e.spec.name == name) return e;
  }
  throw std::logic_error(fmt::format("parameter '{}' is not part of this command", name));
}

namespace {

template <typename T>
const T& typed(const ParamValue& value, std::string_view name) {
  if (const T* v = std::get_if<T>(&value)) return *v;
  throw std::logic_error(fmt::format("parameter '{}' read as the wrong kind (or before resolve)", name));
}

}  // namespace

std::int64_t Params::integer(std::string_view name) const {
  return typed<std::int64_t>(entry(name).value, name);
}
double Params::number(std::string_view name) const { return typed<double>(entry(name).value, name); }
const std::string& Params::string(std::string_view name) const {
  return typed<std::string>(entry(name).value, name);
}
bool Params::enabled(std::string_view name) const { return typed<bool>(entry(name).value, name); }
const TokenSweep& Params::sweep(std::string_view name) const {
  return typed<TokenSweep>(entry(name).value, name);
}
ParamSource Params::source(std::string_view name) const { return entry(name).source; }

std::string Params::value_text(const Entry& e) const {
  struct Visitor {
    std::string operator()(std::monostate) const { return "unresolved"; }
    std::string operator()(bool v) const { return v ? "on" : "off"; }
    std::string operator()(std::int64_t v) const { return fmt::format("{}", v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return v.empty() ? "\"\"" : v; }
    std::string operator()(const TokenSweep& v) const {
      return v.values.empty() ? "unset" : fmt::format("{} ({} values)", v.text, v.values.size());
    }
  };
  return std::visit(Visitor{}, e.value);
}

std::string Params::header_block() const {
  std::vector<std::string> all;
  for (const Entry& e : entries_) all.push_back(e.spec.name);
  return header_block(all);
}

Json Params::to_json() const {
  std::vector<std::string> all;
  for (const Entry& e : entries_) all.push_back(e.spec.name);
  return to_json(all);
}

namespace {

bool listed(std::span<const std::string> names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::string Params::header_block(std::span<const std::string> only) const {
  std::string out;
  for (const Entry& e : entries_) {
    if (!listed(only, e.spec.name)) continue;
    out += fmt::format("#  {:<16} {:<20} ({})\n", e.spec.name, value_text(e), source_name(e.source));
  }
  return out;
}

Json Params::to_json(std::span<const std::string> only) const {
  Json out = Json::object();
  for (const Entry& e : entries_) {
    if (!listed(only, e.spec.name)) continue;
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::monostate>) {
            out[e.spec.name] = nullptr;
          } else if constexpr (std::is_same_v<T, TokenSweep>) {
            out[e.spec.name] = v.values;
          } else {
            out[e.spec.name] = v;
          }
        },
        e.value);
  }
  return out;
}

}  // namespace eps
