// docs/eplb.md 8.7: the key and the frames of the planner protocol.
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "impls/layer/planner/planner.hpp"
#include "impls/layer/planner/tests/planner_test_util.hpp"

namespace eps::planner {
namespace {

using testing::frame_of;
using testing::kTestKeyHex;
using testing::other_key;
using testing::shows_test_key;
using testing::test_key;

std::string key_error(std::string_view text) {
  auto key = PlannerKey::from_text(text);
  EXPECT_FALSE(key.ok());
  return key.ok() ? "" : key.status().message();
}

TEST(PlannerKey, ParsesHexInEitherCase) {
  const PlannerKey lower = test_key();
  ASSERT_EQ(lower.bytes().size(), 32u);
  EXPECT_EQ(lower.bytes()[0], 0x01);
  EXPECT_EQ(lower.bytes()[7], 0xef);
  std::string upper(kTestKeyHex);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(PlannerKey::from_text(upper).value().bytes(), lower.bytes());
}

// Errors name the variable and say what is wrong, never a digit of the value.
TEST(PlannerKey, BadKeysNameTheVariableNotTheValue) {
  const std::string short_key(kTestKeyHex.substr(0, 62));
  const std::string too_short = key_error(short_key);
  EXPECT_EQ(too_short, "EPSUITE_EPLB_KEY: must hold at least 32 bytes (64 hex digits), got 62 hex digits");
  std::string not_hex(kTestKeyHex);
  not_hex[10] = 'g';
  EXPECT_EQ(key_error(not_hex), "EPSUITE_EPLB_KEY: character 11 is not a hex digit (expected hex, or @FILE)");
  EXPECT_EQ(key_error(std::string(kTestKeyHex) + "a"),
            "EPSUITE_EPLB_KEY: has an odd number (65) of hex digits");
  for (const std::string& message : {too_short, key_error(not_hex)}) EXPECT_FALSE(shows_test_key(message));
}

TEST(PlannerKey, ReadsAtFileWithTrailingWhitespace) {
  const std::string path = ::testing::TempDir() + "planner_key_test.hex";
  std::ofstream(path) << kTestKeyHex << "\n  \n";
  EXPECT_EQ(PlannerKey::from_text("@" + path).value().bytes(), test_key().bytes());
  const std::string missing = key_error("@" + path + ".absent");
  EXPECT_EQ(missing.rfind("EPSUITE_EPLB_KEY: cannot read the key file", 0), 0u) << missing;
}

TEST(PlannerKey, FromEnvironment) {
  ASSERT_EQ(::unsetenv("EPSUITE_EPLB_KEY"), 0);
  const auto absent = PlannerKey::from_environment();
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(absent.status().message().rfind("EPSUITE_EPLB_KEY: is not set", 0), 0u);
  ASSERT_EQ(::setenv("EPSUITE_EPLB_KEY", std::string(kTestKeyHex).c_str(), 1), 0);
  EXPECT_EQ(PlannerKey::from_environment().value().bytes(), test_key().bytes());
  ASSERT_EQ(::unsetenv("EPSUITE_EPLB_KEY"), 0);
}

TEST(PlannerKey, RandomKeysDiffer) {
  const PlannerKey a = PlannerKey::random().value();
  const PlannerKey b = PlannerKey::random().value();
  EXPECT_EQ(a.bytes().size(), kMinKeyBytes);
  EXPECT_NE(a.bytes(), b.bytes());
}

TEST(Frame, RoundTrip) {
  const PlannerKey key = test_key();
  const std::string body = R"({"type":"staged","request":1,"step":2})";
  const auto frame = frame_of(key, Direction::kToPlanner, 1, body);
  ASSERT_EQ(frame.size(), kFrameHeaderBytes + kMinFrameLength + body.size());
  EXPECT_EQ(frame[0], kMinFrameLength + body.size());  // little-endian length
  EXPECT_EQ(frame[4], 1);                              // little-endian counter
  FrameReader reader(key, Direction::kToPlanner);
  reader.append(frame.data(), frame.size());
  EXPECT_EQ(reader.next().value(), body);
  EXPECT_EQ(reader.next().value(), std::nullopt);
  EXPECT_FALSE(reader.mid_frame());
}

// Bytes arrive one at a time: each body comes out exactly when its last byte arrived, in order.
TEST(Frame, ReaderTakesBytesOneByOne) {
  const PlannerKey key = test_key();
  const std::vector<std::pair<std::uint64_t, std::string>> frames = {{1, "{}"}, {2, "second"}, {9, ""}};
  FrameReader reader(key, Direction::kFromPlanner);
  std::vector<std::string> bodies;
  for (const auto& [counter, body] : frames) {
    const auto bytes = frame_of(key, Direction::kFromPlanner, counter, body);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      reader.append(&bytes[i], 1);
      auto next = reader.next();
      ASSERT_TRUE(next.ok()) << next.status().message();
      EXPECT_EQ(next->has_value(), i + 1 == bytes.size()) << "byte " << i;
      if (next->has_value()) bodies.push_back(**next);
      EXPECT_EQ(reader.mid_frame(), i + 1 < bytes.size());
    }
  }
  EXPECT_EQ(bodies, (std::vector<std::string>{"{}", "second", ""}));
}

std::string rejection(const PlannerKey& key, Direction direction, const std::vector<unsigned char>& bytes) {
  FrameReader reader(key, direction);
  reader.append(bytes.data(), bytes.size());
  for (;;) {
    auto next = reader.next();
    if (!next.ok()) {
      EXPECT_EQ(next.status().code(), StatusCode::kInvalidArgument);
      return next.status().message();
    }
    if (!next->has_value()) return "accepted";
  }
}

TEST(Frame, RejectsBadMacs) {
  const PlannerKey key = test_key();
  const auto good = frame_of(key, Direction::kToPlanner, 1, "{\"type\":\"plan\"}");
  auto zero_mac = good;
  std::fill(zero_mac.begin() + 12, zero_mac.begin() + 44, 0);
  EXPECT_EQ(rejection(key, Direction::kToPlanner, zero_mac), "frame: bad MAC");
  EXPECT_EQ(rejection(key, Direction::kToPlanner, frame_of(other_key(), Direction::kToPlanner, 1, "{}")),
            "frame: bad MAC");
  auto tampered = good;
  tampered.back() ^= 0x01;
  EXPECT_EQ(rejection(key, Direction::kToPlanner, tampered), "frame: bad MAC");
  auto counter_changed = good;
  counter_changed[4] = 2;
  EXPECT_EQ(rejection(key, Direction::kToPlanner, counter_changed), "frame: bad MAC");
  // A frame the planner sent, reflected back to it.
  EXPECT_EQ(rejection(key, Direction::kToPlanner, frame_of(key, Direction::kFromPlanner, 1, "{}")),
            "frame: bad MAC");
}

TEST(Frame, RejectsCountersThatDoNotIncrease) {
  const PlannerKey key = test_key();
  auto replay = frame_of(key, Direction::kToPlanner, 1, "{}");
  const auto again = replay;
  replay.insert(replay.end(), again.begin(), again.end());
  EXPECT_EQ(rejection(key, Direction::kToPlanner, replay), "frame: counter 1 does not increase past 1");
  EXPECT_EQ(rejection(key, Direction::kToPlanner, frame_of(key, Direction::kToPlanner, 0, "{}")),
            "frame: counter 0 does not increase past 0");
  auto backwards = frame_of(key, Direction::kToPlanner, 5, "{}");
  const auto older = frame_of(key, Direction::kToPlanner, 4, "{}");
  backwards.insert(backwards.end(), older.begin(), older.end());
  EXPECT_EQ(rejection(key, Direction::kToPlanner, backwards), "frame: counter 4 does not increase past 5");
}

// The length is judged from its 4 bytes alone: an oversize frame is refused before any body arrives.
TEST(Frame, RejectsLengthsOutsideTheBounds) {
  const PlannerKey key = test_key();
  const std::uint32_t oversize = kMaxFrameBytes + 1;
  const std::vector<unsigned char> header = {
      static_cast<unsigned char>(oversize), static_cast<unsigned char>(oversize >> 8),
      static_cast<unsigned char>(oversize >> 16), static_cast<unsigned char>(oversize >> 24)};
  EXPECT_EQ(rejection(key, Direction::kToPlanner, header),
            "frame: frame length 16777217 exceeds the 16 MiB cap");
  EXPECT_EQ(rejection(key, Direction::kToPlanner, {39, 0, 0, 0}),
            "frame: frame length 39 is below the 40-byte minimum");
  const auto too_big = encode_frame(key, Direction::kToPlanner, 1, std::string(kMaxFrameBytes, 'x'));
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kInvalidArgument);
}

TEST(Frame, ReaderStaysFailed) {
  const PlannerKey key = test_key();
  FrameReader reader(key, Direction::kToPlanner);
  const auto bad = frame_of(other_key(), Direction::kToPlanner, 1, "{}");
  reader.append(bad.data(), bad.size());
  EXPECT_FALSE(reader.next().ok());
  const auto good = frame_of(key, Direction::kToPlanner, 2, "{}");
  reader.append(good.data(), good.size());
  EXPECT_FALSE(reader.next().ok());
}

TEST(Address, ParsesHostAndPort) {
  EXPECT_EQ(parse_address("--listen", "127.0.0.1:5000").value(),
            std::make_pair(std::string("127.0.0.1"), 5000));
  EXPECT_EQ(parse_address("--listen", "[::1]:80").value(), std::make_pair(std::string("::1"), 80));
  // Found by fuzz_params: "[[a]]:1" was read as host "[a]", printed as "[a]:1" and read back as "a".
  EXPECT_EQ(parse_address("--listen", "[[a]]:1").status().message(),
            "--listen: expected HOST:PORT or [IPV6]:PORT, got \"[[a]]:1\"");
  EXPECT_FALSE(parse_address("--listen", "a]:1").ok());
  EXPECT_EQ(parse_address("--listen", "localhost:0", 0).value(), std::make_pair(std::string("localhost"), 0));
  EXPECT_EQ(parse_address("--listen", "localhost:0").status().message(),
            "--listen port: must be in [1, 65535], got 0");
  EXPECT_EQ(parse_address("--listen", "nohost").status().message(),
            "--listen: expected HOST:PORT, got \"nohost\"");
  EXPECT_EQ(parse_address("--listen", "h:12x").status().message(),
            "--listen: expected HOST:PORT with a numeric port, got \"h:12x\"");
  EXPECT_EQ(format_address("::1", 80), "[::1]:80");
}

}  // namespace
}  // namespace eps::planner
