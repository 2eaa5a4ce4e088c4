// The parameter registry (docs/architecture.md house style rule 5).
//
// Every parameter of epsuite has ONE definition, a `ParamSpec`: its name, from which the CLI flag
// (`--name`) and the environment twin (`EPSUITE_NAME`, upper case, '-' -> '_') are derived, an optional
// short flag, its kind, its default, its allowed range or choices and its help text. `param_catalog()`
// holds every suite-wide definition; a subcommand takes the ones it uses with `Params::from_catalog`.
//
// Precedence: a flag given on the command line wins over the environment twin, which wins over the
// default. `resolve` parses and validates the winning text and returns the repo error model's
// kInvalidArgument (exit 2) naming where the value came from and the allowed range:
//   "--tokens: must be in [0, 65536], got -1"
//   "EPSUITE_TIMEOUT (environment twin of --timeout): expected a number in [0.001, 86400], got 'soon'"
//
// Kinds and their text forms:
//   integer  decimal, optional sign ("-3", "4096")
//   number   a finite decimal or exponent float ("2.5", "1e-3")
//   string   any text; choice: one of `choices`, exact match
//   switch   on the command line the bare flag; in the environment 1/0, true/false, yes/no, on/off
//   sweep    token counts: "a:b:xF" (a, a*F, a*F^2, ... <= b; a >= 1, F >= 2), "a:b:+S" (a, a+S, ... <= b;
//            S >= 1), a comma list "1,2,4", or one value; every entry within [min, max], at most
//            kMaxSweepValues entries; the empty text means "not set" (the preset decides).
//
// The effective configuration is echoed as an nccl-tests-style `#` block (one line per parameter:
// name, value, where it came from) and as a flat JSON object name -> typed value (sweeps as arrays).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace eps {

enum class ParamKind { kInteger, kNumber, kString, kChoice, kSwitch, kSweep };

struct ParamSpec {
  std::string name = {};  // "tokens" -> --tokens, EPSUITE_TOKENS
  ParamKind kind = ParamKind::kString;
  std::string default_text = {};  // parsed like user input; must itself be valid
  std::string help = {};
  std::int64_t int_min = 0;  // integer and sweep kinds
  std::int64_t int_max = 0;
  double num_min = 0;  // number kind
  double num_max = 0;
  std::vector<std::string> choices = {};  // choice kind
  char short_flag = 0;                    // e.g. 'n' for -n
};

std::string flag_name(const ParamSpec& spec);  // "--tokens"
std::string env_name(const ParamSpec& spec);   // "EPSUITE_TOKENS"

inline constexpr std::size_t kMaxSweepValues = 4096;

struct TokenSweep {
  std::string text;                  // as given
  std::vector<std::int64_t> values;  // expanded, in the order of the text; empty = not set
};

// Parses a sweep; errors are prefixed with `field` and name the allowed range [lo, hi].
Result<TokenSweep> parse_token_sweep(std::string_view text, std::string_view field, std::int64_t lo,
                                     std::int64_t hi);

// monostate: not resolved yet.
using ParamValue = std::variant<std::monostate, bool, std::int64_t, double, std::string, TokenSweep>;
enum class ParamSource { kDefault, kEnvironment, kFlag };
std::string_view source_name(ParamSource source);  // "default", "env", "flag"

// Environment lookup; the default reads the process environment (std::getenv).
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
std::optional<std::string> process_environment(const std::string& name);

// Every suite-wide parameter definition.
std::span<const ParamSpec> param_catalog();
// The catalog entry `name`; throws std::logic_error for a name not in the catalog (a programming error).
const ParamSpec& param_spec(std::string_view name);

// A set of parameters bound to one (sub)command. Not copyable: CLI11 keeps pointers into it.
class Params {
 public:
  explicit Params(std::vector<ParamSpec> specs);
  static std::unique_ptr<Params> from_catalog(std::initializer_list<std::string_view> names);
  Params(const Params&) = delete;
  Params& operator=(const Params&) = delete;

  // Adds one option per parameter to `app`; its help text states range, default and environment twin.
  void bind(CLI::App& app);
  // Picks flag > environment > default for every parameter, parses and validates it.
  Status resolve(const EnvLookup& env = process_environment);

  // Typed access after a successful resolve(); the wrong kind or an unknown name throws std::logic_error.
  std::int64_t integer(std::string_view name) const;
  double number(std::string_view name) const;
  const std::string& string(std::string_view name) const;  // string and choice kinds
  bool enabled(std::string_view name) const;               // switch kind
  const TokenSweep& sweep(std::string_view name) const;
  ParamSource source(std::string_view name) const;
  // Whether this command has the parameter (shared readers of optional parameters ask first).
  bool defines(std::string_view name) const;

  // "#  timeout          60                    (default)\n" for every parameter, in definition order; with
  // `only`, for those parameters only.
  std::string header_block() const;
  std::string header_block(std::span<const std::string> only) const;
  // {"timeout": 60.0, "strict": false, "tokens": [64, 128, 256], ...}; with `only`, those parameters only.
  Json to_json() const;
  Json to_json(std::span<const std::string> only) const;

 private:
  struct Entry {
    ParamSpec spec;
    std::string raw;          // the flag's text, written by CLI11
    bool raw_switch = false;  // the switch flag, written by CLI11
    CLI::Option* option = nullptr;
    ParamValue value;
    ParamSource source = ParamSource::kDefault;
  };
  const Entry& entry(std::string_view name) const;
  std::string value_text(const Entry& entry) const;

  std::vector<Entry> entries_;
};

}  // namespace eps
