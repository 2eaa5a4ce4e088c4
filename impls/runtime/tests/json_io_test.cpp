#include "impls/runtime/json_io.hpp"

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

namespace eps {
namespace {

TEST(JsonFields, IntegerOutOfRangeNamesFieldAndRange) {
  const Json doc = Json::parse(R"({"router": {"k": 0}})");
  JsonFields router(doc["router"], "router");
  auto k = router.integer("k", 1, 64);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(k.status().message(), "router.k: must be in [1, 64], got 0");
}

TEST(JsonFields, MissingRequiredAndFallback) {
  const Json doc = Json::parse(R"({"a": 3})");
  JsonFields f(doc, "");
  EXPECT_EQ(f.integer("b", 0, 9, 7).value(), 7);
  auto missing = f.integer("b", 0, 9);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("b: required"), std::string::npos);
  EXPECT_EQ(f.integer("a", 0, 9).value(), 3);
}

TEST(JsonFields, ChoiceListsAllowedValues) {
  const Json doc = Json::parse(R"({"gate": "relu"})");
  auto gate = JsonFields(doc, "router").choice("gate", {"softmax", "sigmoid"});
  ASSERT_FALSE(gate.ok());
  EXPECT_EQ(gate.status().message(), "router.gate: must be one of {softmax, sigmoid}, got \"relu\"");
}

TEST(JsonFields, FloatArrayRejectsNanAndAcceptsInfinityWhenAllowed) {
  auto bad = json_float_array(Json::parse(R"([1.0, "nan"])"), "logits[3]", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("logits[3][1]"), std::string::npos);
  auto inf = json_float_array(Json::parse(R"([1.5, "-inf"])"), "logits[0]", true);
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ((*inf)[0], 1.5f);
  EXPECT_TRUE(std::isinf((*inf)[1]) && (*inf)[1] < 0);
  EXPECT_FALSE(json_float_array(Json::parse(R"(["-inf"])"), "x", false).ok());
}

TEST(JsonFiles, AtomicWriteThenReadRoundTrips) {
  const std::string path = ::testing::TempDir() + "eps_json_io_test.json";
  const Json doc = {{"x", 1}, {"y", {1, 2, 3}}};
  ASSERT_TRUE(write_json_file_atomic(path, doc).ok());
  auto back = read_json_file(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, doc);
  std::remove(path.c_str());
}

TEST(JsonFiles, TruncatedFileIsAClearError) {
  const std::string path = ::testing::TempDir() + "eps_json_io_truncated.json";
  std::ofstream(path) << R"({"router": {"type": "ec")";
  auto back = read_json_file(path);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().exit_code(), 2);
  EXPECT_NE(back.status().message().find("not valid JSON"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_FALSE(read_json_file(path).ok());  // missing file
}

}  // namespace
}  // namespace eps
