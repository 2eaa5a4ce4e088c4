// parse_chaos and ChaosOptions (impls/fabric/chaos/chaos_fabric.hpp, docs/fabrics.md 6.3): the --chaos
// spelling, every key's range with the message the header promises, and the malformed inputs.
#include <gtest/gtest.h>

#include <string>

#include "impls/fabric/chaos/chaos_fabric.hpp"

namespace eps::fabric {
namespace {

ChaosOptions parse_ok(const std::string& spec) {
  Result<ChaosOptions> r = parse_chaos(spec);
  EXPECT_TRUE(r.ok()) << spec << ": " << r.status().message();
  return r.ok() ? *r : ChaosOptions{};
}

std::string parse_error(const std::string& spec) {
  Result<ChaosOptions> r = parse_chaos(spec);
  EXPECT_FALSE(r.ok()) << spec << " was accepted";
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << spec;
  return r.status().message();
}

TEST(ChaosSpec, SeedAloneKeepsTheDefaults) {
  const ChaosOptions o = parse_ok("seed=42");
  EXPECT_EQ(o.seed, 42u);
  EXPECT_EQ(o.window, 8);
  EXPECT_EQ(o.split, 4096u);
  EXPECT_EQ(o.delay, 4);
  EXPECT_EQ(o.empty, 10);
  EXPECT_EQ(o.backpressure, 5);
  EXPECT_FALSE(o.zero());
}

TEST(ChaosSpec, EveryKeyInAnyOrder) {
  const ChaosOptions o =
      parse_ok("backpressure=3,empty=0,delay=1024,split=64,window=1024,seed=18446744073709551615");
  EXPECT_EQ(o.seed, 18446744073709551615ull);
  EXPECT_EQ(o.window, 1024);
  EXPECT_EQ(o.split, 64u);
  EXPECT_EQ(o.delay, 1024);
  EXPECT_EQ(o.empty, 0);
  EXPECT_EQ(o.backpressure, 3);
}

TEST(ChaosSpec, ToStringRoundTrips) {
  const ChaosOptions o = parse_ok("seed=9,window=3,split=0,delay=2,empty=90,backpressure=90");
  EXPECT_EQ(o.to_string(), "seed=9,window=3,split=0,delay=2,empty=90,backpressure=90");
  const ChaosOptions again = parse_ok(o.to_string());
  EXPECT_EQ(again.to_string(), o.to_string());
  EXPECT_EQ(ChaosOptions{}.to_string(), "seed=1,window=8,split=4096,delay=4,empty=10,backpressure=5");
}

TEST(ChaosSpec, ZeroMeansNoPerturbation) {
  EXPECT_TRUE(parse_ok("seed=5,window=0,split=0,delay=0,empty=0,backpressure=0").zero());
  EXPECT_FALSE(parse_ok("seed=5,window=0,split=0,delay=0,empty=0,backpressure=1").zero());
  EXPECT_FALSE(parse_ok("seed=5,window=0,split=64,delay=0,empty=0,backpressure=0").zero());
}

TEST(ChaosSpec, RangesNameTheKeyAndTheRange) {
  EXPECT_EQ(parse_error("seed=1,window=5000"), "--chaos: window must be in [0, 1024], got 5000");
  EXPECT_EQ(parse_error("seed=1,window=-1"), "--chaos: window must be in [0, 1024], got -1");
  EXPECT_EQ(parse_error("seed=1,delay=1025"), "--chaos: delay must be in [0, 1024], got 1025");
  EXPECT_EQ(parse_error("seed=1,empty=91"), "--chaos: empty must be in [0, 90], got 91");
  EXPECT_EQ(parse_error("seed=1,backpressure=100"), "--chaos: backpressure must be in [0, 90], got 100");
  EXPECT_EQ(parse_error("seed=1,split=63"), "--chaos: split must be 0 or in [64, 16777215], got 63");
  EXPECT_EQ(parse_error("seed=1,split=16777216"),
            "--chaos: split must be 0 or in [64, 16777215], got 16777216");
  // The boundaries themselves are accepted.
  EXPECT_EQ(parse_ok("seed=1,split=16777215").split, 16777215u);
  EXPECT_EQ(parse_ok("seed=1,empty=90").empty, 90);
  EXPECT_EQ(parse_ok("seed=1,window=0").window, 0);
}

TEST(ChaosSpec, NonNumericValues) {
  EXPECT_EQ(parse_error("seed=1,window=abc"), "--chaos: window must be an integer, got 'abc'");
  EXPECT_EQ(parse_error("seed=1,delay=4x"), "--chaos: delay must be an integer, got '4x'");
  EXPECT_EQ(parse_error("seed=1,empty="), "--chaos: empty must be an integer, got ''");
  EXPECT_EQ(parse_error("seed=-3"),
            "--chaos: seed must be an integer in [0, 18446744073709551615], got '-3'");
  EXPECT_EQ(parse_error("seed=18446744073709551616"),
            "--chaos: seed must be an integer in [0, 18446744073709551615], got '18446744073709551616'");
}

TEST(ChaosSpec, UnknownKeyListsTheKeys) {
  EXPECT_EQ(parse_error("seed=1,x=2"),
            "--chaos: unknown key 'x'; keys: seed, window, split, delay, empty, backpressure");
  EXPECT_EQ(parse_error("Seed=1"),
            "--chaos: unknown key 'Seed'; keys: seed, window, split, delay, empty, backpressure");
}

TEST(ChaosSpec, SeedIsRequired) {
  EXPECT_EQ(parse_error(""), "--chaos: seed is required (e.g. seed=1), got ''");
  EXPECT_EQ(parse_error("window=3"), "--chaos: seed is required (e.g. seed=1), got 'window=3'");
}

TEST(ChaosSpec, MalformedPairs) {
  EXPECT_NE(parse_error("seed").find("malformed pair 'seed'"), std::string::npos);
  EXPECT_NE(parse_error("seed=1,").find("malformed pair ''"), std::string::npos);
  EXPECT_NE(parse_error(",seed=1").find("malformed pair ''"), std::string::npos);
  EXPECT_NE(parse_error("seed=1,,window=2").find("malformed pair ''"), std::string::npos);
  EXPECT_NE(parse_error("=1").find("malformed pair '=1'"), std::string::npos);
  EXPECT_NE(parse_error("seed=1;window=2").find("seed must be an integer"), std::string::npos);
  EXPECT_EQ(parse_error("seed=1,window=2,window=3"), "--chaos: key 'window' given twice");
}

}  // namespace
}  // namespace eps::fabric
