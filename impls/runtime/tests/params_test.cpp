// The parameter registry: precedence flag > environment > default, ranges, environment parsing errors,
// sweeps and the echo formats (docs/architecture.md rule 5; docs/errors.md 10 exit code 2 for bad input).
#include "impls/runtime/params.hpp"

#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

namespace eps {
namespace {

ParamSpec tokens_spec() {
  return {.name = "tokens",
          .kind = ParamKind::kInteger,
          .default_text = "128",
          .help = "Tokens per rank",
          .int_min = 0,
          .int_max = 65536};
}

ParamSpec timeout_spec() {
  return {.name = "timeout",
          .kind = ParamKind::kNumber,
          .default_text = "60",
          .help = "Seconds",
          .num_min = 0.001,
          .num_max = 86400};
}

ParamSpec preset_spec() {
  return {.name = "preset",
          .kind = ParamKind::kChoice,
          .default_text = "smoke",
          .help = "Preset",
          .choices = {"smoke", "ht-deepseek-v3"}};
}

ParamSpec strict_spec() {
  return {.name = "strict", .kind = ParamKind::kSwitch, .default_text = "false", .help = "Strict"};
}

ParamSpec sweep_spec() {
  return {.name = "sizes",
          .kind = ParamKind::kSweep,
          .default_text = "",
          .help = "Sweep",
          .int_min = 0,
          .int_max = 65536};
}

using Env = std::map<std::string, std::string>;

EnvLookup lookup(Env env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

// Binds `specs`, parses `command_line`, resolves against `env`.
Status run(Params& params, const std::string& command_line, const Env& env = {}) {
  CLI::App app;
  params.bind(app);
  app.parse(command_line, false);
  return params.resolve(lookup(env));
}

TEST(Params, NamesDeriveFlagAndEnvironmentTwin) {
  ParamSpec spec = tokens_spec();
  spec.name = "ranks-per-node";
  EXPECT_EQ(flag_name(spec), "--ranks-per-node");
  EXPECT_EQ(env_name(spec), "EPSUITE_RANKS_PER_NODE");
}

TEST(Params, FlagWinsOverEnvironmentWhichWinsOverDefault) {
  Params defaults({tokens_spec()});
  ASSERT_TRUE(run(defaults, "").ok());
  EXPECT_EQ(defaults.integer("tokens"), 128);
  EXPECT_EQ(defaults.source("tokens"), ParamSource::kDefault);

  Params from_env({tokens_spec()});
  ASSERT_TRUE(run(from_env, "", {{"EPSUITE_TOKENS", "256"}}).ok());
  EXPECT_EQ(from_env.integer("tokens"), 256);
  EXPECT_EQ(from_env.source("tokens"), ParamSource::kEnvironment);

  Params from_flag({tokens_spec()});
  ASSERT_TRUE(run(from_flag, "--tokens 512", {{"EPSUITE_TOKENS", "256"}}).ok());
  EXPECT_EQ(from_flag.integer("tokens"), 512);
  EXPECT_EQ(from_flag.source("tokens"), ParamSource::kFlag);
}

TEST(Params, ProcessEnvironmentIsTheDefaultLookup) {
  ::setenv("EPSUITE_TIMEOUT", "2.5", 1);
  Params params({timeout_spec()});
  CLI::App app;
  params.bind(app);
  app.parse("", false);
  const Status s = params.resolve();
  ::unsetenv("EPSUITE_TIMEOUT");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(params.number("timeout"), 2.5);
  EXPECT_EQ(params.source("timeout"), ParamSource::kEnvironment);
}

TEST(Params, OutOfRangeFlagNamesFlagAndRange) {
  Params params({tokens_spec()});
  const Status s = run(params, "--tokens=-1");
  EXPECT_EQ(s.exit_code(), 2);
  EXPECT_EQ(s.message(), "--tokens: must be in [0, 65536], got -1");

  Params high({tokens_spec()});
  EXPECT_EQ(run(high, "--tokens 65537").message(), "--tokens: must be in [0, 65536], got 65537");
  Params edge({tokens_spec()});
  ASSERT_TRUE(run(edge, "--tokens 65536").ok());
  EXPECT_EQ(edge.integer("tokens"), 65536);
}

TEST(Params, EnvironmentErrorsNameTheTwinAndTheFlag) {
  Params bad_text({tokens_spec()});
  const Status s = run(bad_text, "", {{"EPSUITE_TOKENS", "12x"}});
  EXPECT_EQ(s.exit_code(), 2);
  EXPECT_EQ(s.message(),
            "EPSUITE_TOKENS (environment twin of --tokens): expected an integer in [0, 65536], got '12x'");

  Params bad_range({tokens_spec()});
  EXPECT_EQ(run(bad_range, "", {{"EPSUITE_TOKENS", "70000"}}).message(),
            "EPSUITE_TOKENS (environment twin of --tokens): must be in [0, 65536], got 70000");

  Params bad_number({timeout_spec()});
  EXPECT_EQ(
      run(bad_number, "", {{"EPSUITE_TIMEOUT", "soon"}}).message(),
      "EPSUITE_TIMEOUT (environment twin of --timeout): expected a number in [0.001, 86400], got 'soon'");

  Params nan({timeout_spec()});
  EXPECT_EQ(run(nan, "", {{"EPSUITE_TIMEOUT", "nan"}}).exit_code(), 2);

  Params bad_switch({strict_spec()});
  EXPECT_EQ(run(bad_switch, "", {{"EPSUITE_STRICT", "maybe"}}).message(),
            "EPSUITE_STRICT (environment twin of --strict): expected 1/0, true/false, yes/no or on/off, got "
            "'maybe'");

  // A bad environment value is not reached when the flag is given.
  Params shadowed({tokens_spec()});
  EXPECT_TRUE(run(shadowed, "--tokens 3", {{"EPSUITE_TOKENS", "12x"}}).ok());
}

TEST(Params, NumbersChoicesAndSwitches) {
  Params params({timeout_spec(), preset_spec(), strict_spec()});
  ASSERT_TRUE(run(params, "--timeout 1e-3 --preset ht-deepseek-v3", {{"EPSUITE_STRICT", "Yes"}}).ok());
  EXPECT_EQ(params.number("timeout"), 0.001);
  EXPECT_EQ(params.string("preset"), "ht-deepseek-v3");
  EXPECT_TRUE(params.enabled("strict"));

  Params flag({strict_spec()});
  ASSERT_TRUE(run(flag, "--strict", {{"EPSUITE_STRICT", "0"}}).ok());
  EXPECT_TRUE(flag.enabled("strict"));
  Params off({strict_spec()});
  ASSERT_TRUE(run(off, "", {{"EPSUITE_STRICT", "off"}}).ok());
  EXPECT_FALSE(off.enabled("strict"));

  Params bad_choice({preset_spec()});
  EXPECT_EQ(run(bad_choice, "--preset tiny").message(),
            "--preset: must be one of {smoke, ht-deepseek-v3}, got 'tiny'");
  Params zero({timeout_spec()});
  EXPECT_EQ(run(zero, "--timeout 0").message(), "--timeout: must be in [0.001, 86400], got 0");
}

TEST(Params, TokenSweeps) {
  const auto values = [](std::string_view text) {
    Result<TokenSweep> s = parse_token_sweep(text, "--tokens", 0, 65536);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? s->values : std::vector<std::int64_t>{};
  };
  EXPECT_EQ(values("64:256:x2"), (std::vector<std::int64_t>{64, 128, 256}));
  EXPECT_EQ(values("64:300:x2"), (std::vector<std::int64_t>{64, 128, 256}));
  EXPECT_EQ(values("1:100:x10"), (std::vector<std::int64_t>{1, 10, 100}));
  EXPECT_EQ(values("1:10:+3"), (std::vector<std::int64_t>{1, 4, 7, 10}));
  EXPECT_EQ(values("0:2:+1"), (std::vector<std::int64_t>{0, 1, 2}));
  EXPECT_EQ(values("1, 2,4"), (std::vector<std::int64_t>{1, 2, 4}));
  EXPECT_EQ(values("8"), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(values(""), (std::vector<std::int64_t>{}));

  const auto error = [](std::string_view text) {
    Result<TokenSweep> s = parse_token_sweep(text, "--tokens", 0, 65536);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().exit_code(), 2);
    return s.status().message();
  };
  EXPECT_EQ(error("1:70000:x2"), "--tokens: must be in [0, 65536], got 70000");
  EXPECT_EQ(error("1,-1"), "--tokens: must be in [0, 65536], got -1");
  EXPECT_EQ(error("0:8:x2"), "--tokens: a geometric sweep must start at >= 1, got 0");
  EXPECT_EQ(error("8:4:x2"), "--tokens: sweep start 8 is greater than its end 4");
  EXPECT_EQ(error("1:8:x1"), "--tokens: sweep factor must be >= 2, got x1");
  EXPECT_EQ(error("1:8:+0"), "--tokens: sweep step must be >= 1, got +0");
  EXPECT_EQ(error("1:8:y2"),
            "--tokens: expected a:b:xF, a:b:+S, a list or one integer in [0, 65536], got '1:8:y2'");
  EXPECT_EQ(error("1:8"),
            "--tokens: expected a:b:xF, a:b:+S, a list or one integer in [0, 65536], got '1:8'");
  EXPECT_EQ(error("1,,2"), "--tokens: expected an integer in [0, 65536], got ''");
  EXPECT_EQ(error("0:65536:+1"), "--tokens: sweep '0:65536:+1' has more than 4096 values");
}

// Found by fuzz/fuzz_params (fuzz/regressions/fuzz_params/): the step after the last value overflowed int64
// (v * F, v + S; undefined behaviour) instead of ending the sweep.
TEST(Params, TokenSweepStepsBeyondInt64EndTheSweep) {
  const auto values = [](std::string_view text, std::int64_t lo, std::int64_t hi) {
    Result<TokenSweep> s = parse_token_sweep(text, "--tokens", lo, hi);
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? s->values : std::vector<std::int64_t>{};
  };
  EXPECT_EQ(values("8:2048:x3333333333333333332", 0, 65536), (std::vector<std::int64_t>{8}));
  EXPECT_EQ(values("2:65536:x4611686018427387904", 0, 65536), (std::vector<std::int64_t>{2}));
  EXPECT_EQ(values("65536:65536:+9223372036854775807", 0, 65536), (std::vector<std::int64_t>{65536}));
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(values("-9223372036854775808:9223372036854775807:+9223372036854775807", kMin, kMax),
            (std::vector<std::int64_t>{kMin, -1, kMax - 1}));
  EXPECT_EQ(values("4611686018427387904:9223372036854775807:x2", kMin, kMax),
            (std::vector<std::int64_t>{std::int64_t{1} << 62}));
}

TEST(Params, SweepParameterThroughTheCommandLine) {
  Params params({sweep_spec()});
  ASSERT_TRUE(run(params, "--sizes 64:256:x2").ok());
  EXPECT_EQ(params.sweep("sizes").values, (std::vector<std::int64_t>{64, 128, 256}));
  EXPECT_EQ(params.sweep("sizes").text, "64:256:x2");
  Params bad({sweep_spec()});
  EXPECT_EQ(run(bad, "", {{"EPSUITE_SIZES", "4:2:x2"}}).message(),
            "EPSUITE_SIZES (environment twin of --sizes): sweep start 4 is greater than its end 2");
}

TEST(Params, EchoesTheEffectiveConfiguration) {
  Params params({timeout_spec(), tokens_spec(), preset_spec(), strict_spec(), sweep_spec()});
  ASSERT_TRUE(
      run(params, "--tokens 512 --strict", {{"EPSUITE_TIMEOUT", "2.5"}, {"EPSUITE_SIZES", "1:4:x2"}}).ok());
  // "#  " + name padded to 16 + " " + value padded to 20 + " (" + source + ")".
  EXPECT_EQ(params.header_block(),
            "#  timeout          2.5                  (env)\n"
            "#  tokens           512                  (flag)\n"
            "#  preset           smoke                (default)\n"
            "#  strict           on                   (flag)\n"
            "#  sizes            1:4:x2 (3 values)    (env)\n");
  EXPECT_EQ(params.to_json().dump(),
            R"({"preset":"smoke","sizes":[1,2,4],"strict":true,"timeout":2.5,"tokens":512})");
}

TEST(Params, HelpStatesRangeDefaultAndEnvironmentTwin) {
  Params params({tokens_spec(), strict_spec()});
  CLI::App app{"test"};
  params.bind(app);
  const std::string help = app.help();
  EXPECT_NE(help.find("--tokens"), std::string::npos);
  EXPECT_NE(help.find("Tokens per rank. [0, 65536] (default 128; env EPSUITE_TOKENS)"), std::string::npos)
      << help;
  EXPECT_NE(help.find("Strict (default false; env EPSUITE_STRICT=1)"), std::string::npos) << help;
}

TEST(Params, CatalogDefaultsAreValidAndNamesUnique) {
  std::vector<ParamSpec> specs(param_catalog().begin(), param_catalog().end());
  ASSERT_FALSE(specs.empty());
  std::set<std::string> names;
  std::set<std::string> envs;
  for (const ParamSpec& s : specs) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_TRUE(envs.insert(env_name(s)).second) << s.name;
    EXPECT_FALSE(s.help.empty()) << s.name;
  }
  Params all(specs);
  const Status s = run(all, "");
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(all.number("timeout"), 60.0);  // docs/errors.md 10 default deadline
  EXPECT_EQ(all.string("fabric"), "auto");
  EXPECT_THROW(param_spec("no-such-parameter"), std::logic_error);
  EXPECT_THROW((void)all.integer("timeout"), std::logic_error);  // wrong kind
}

}  // namespace
}  // namespace eps
