// Results documents (docs/results.md 9.1): statistics against hand-computed values, atomic rewriting after
// every case, the reader's refusals (exit 2), and validation of a produced document against the JSON schema.
#include "results/document.hpp"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace eps {
namespace {

namespace fs = std::filesystem;

TEST(Summarize, OneToTenShuffled) {
  const std::vector<double> samples = {7, 3, 10, 1, 9, 2, 8, 4, 6, 5};
  Result<SummaryStats> s = summarize(samples);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->min, 1);
  EXPECT_EQ(s->max, 10);
  EXPECT_EQ(s->p10, 1);   // ceil(0.10 * 10) = 1st smallest
  EXPECT_EQ(s->p50, 5);   // ceil(0.50 * 10) = 5th smallest
  EXPECT_EQ(s->p90, 9);   // ceil(0.90 * 10) = 9th
  EXPECT_EQ(s->p99, 10);  // ceil(0.99 * 10) = ceil(9.9) = 10th
  EXPECT_EQ(s->mean, 5.5);
  // Sum of squared deviations: 2 * (4.5^2 + 3.5^2 + 2.5^2 + 1.5^2 + 0.5^2) = 2 * 41.25 = 82.5; / (n-1) = 9.
  EXPECT_DOUBLE_EQ(s->stdev, std::sqrt(82.5 / 9.0));
}

TEST(Summarize, FourSamples) {
  Result<SummaryStats> s = summarize(std::vector<double>{4, 1, 3, 2});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->p10, 1);  // ceil(0.4) = 1st
  EXPECT_EQ(s->p50, 2);  // ceil(2.0) = 2nd
  EXPECT_EQ(s->p90, 4);  // ceil(3.6) = 4th
  EXPECT_EQ(s->p99, 4);
  EXPECT_EQ(s->mean, 2.5);
  EXPECT_DOUBLE_EQ(s->stdev, std::sqrt(5.0 / 3.0));  // 2.25 + 0.25 + 0.25 + 2.25 = 5
}

TEST(Summarize, TwoHundredSamplesAndOneSample) {
  std::vector<double> v;
  for (int i = 200; i >= 1; --i) v.push_back(i);
  Result<SummaryStats> s = summarize(v);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->p10, 20);   // ceil(20) = 20th
  EXPECT_EQ(s->p50, 100);  // ceil(100) = 100th
  EXPECT_EQ(s->p90, 180);
  EXPECT_EQ(s->p99, 198);
  Result<SummaryStats> one = summarize(std::vector<double>{3.25});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, (SummaryStats{3.25, 3.25, 3.25, 3.25, 3.25, 3.25, 3.25, 0.0}));
}

TEST(Summarize, RejectsEmptyAndNonFinite) {
  EXPECT_EQ(summarize(std::vector<double>{}).status().message(),
            "times_us: needs at least one repetition, got none");
  EXPECT_EQ(summarize(std::vector<double>{1.0, NAN}).status().message(),
            "times_us[1]: must be a finite time, got nan");
}

TEST(Results, BandwidthAndTimestamp) {
  EXPECT_DOUBLE_EQ(bandwidth_gbps(1e6, 100), 10.0);  // 1e6 B / 100e-6 s = 1e10 B/s
  EXPECT_EQ(bandwidth_gbps(1e6, 0), 0.0);
  EXPECT_DOUBLE_EQ(ceiling_ratio(8.0, 10.0), 0.8);  // the copy takes 8 us where the case takes 10
  EXPECT_EQ(ceiling_ratio(0.0, 10.0), 0.0);
  EXPECT_EQ(ceiling_ratio(8.0, 0.0), 0.0);
  // 1700000000 s after the epoch = 2023-11-14 22:13:20 UTC.
  EXPECT_EQ(utc_timestamp(std::chrono::system_clock::from_time_t(1700000000)), "2023-11-14T22:13:20Z");
}

int validate(const std::string& document) {
  const std::string command =
      std::string(EPS_PYTHON3) + " " + EPS_RESULTS_VALIDATOR + " " + EPS_RESULTS_SCHEMA + " " + document;
  const int rc = std::system(command.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

class ResultsFile : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eps_results_test_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path(name)) << text; }

  static RunHeader header() {
    RunHeader h = make_run_header(
        {"epsuite", "bench", "dispatch", "--preset", "smoke"},
        Json{{"hostnames", {"node-a"}},
             {"ranks", {{{"rank", 0}, {"host", "node-a"}, {"device", "cpu"}, {"nic", "none"}}}},
             {"provider", "mpi"},
             {"libraries", {{"mpi", "Open MPI v4.1.4"}}},
             {"fingerprint", "0123456789abcdef"}},
        Json{{"preset", "smoke"}, {"tokens", {64, 128}}});
    return h;
  }
  static CaseResult checked_case() {
    return {"dispatch",
            "mpi",
            "ht-rank-major",
            "fp8",
            {{"tokens", 64}, {"hidden", 256}},
            {{"fabric", "none"}, {"seed", "1"}},
            {},
            {12.0, 10.0, 11.0},
            65536,
            49152,
            2,
            CheckOutcome{false, 3, "rank 1 token 5 column 7: expected 0x3f80, got 0x0000"}};
  }
  static CaseResult unchecked_case() {
    return {"combine", "mpi",  "ht-rank", "bf16", {{"tokens", 128}}, {}, {},
            {20.0},    131072, 0,         0,      std::nullopt};
  }

  fs::path dir_;
};

TEST_F(ResultsFile, WriterRewritesAfterEveryCaseAndReadsBack) {
  ResultsWriter writer(path("out.json"), header());
  ASSERT_TRUE(writer.start().ok());
  Result<ResultsDocument> empty = read_results_file(path("out.json"));
  ASSERT_TRUE(empty.ok()) << empty.status().message();
  EXPECT_TRUE(empty->cases.empty());

  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  // A run that dies now keeps the finished case on disk.
  Result<ResultsDocument> one = read_results_file(path("out.json"));
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->cases.size(), 1u);

  ASSERT_TRUE(writer.add_case(unchecked_case()).ok());
  Result<ResultsDocument> doc = read_results_file(path("out.json"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->schema_version, 1);
  EXPECT_EQ(doc->header.argv, header().argv);
  EXPECT_EQ(doc->header.config, header().config);
  EXPECT_EQ(doc->header.git_sha, header().git_sha);
  ASSERT_EQ(doc->cases.size(), 2u);
  const CaseResult& c = doc->cases[0].result;
  EXPECT_EQ(c.op, "dispatch");
  EXPECT_EQ(c.times_us, (std::vector<double>{12.0, 10.0, 11.0}));
  EXPECT_EQ(c.check, checked_case().check);
  EXPECT_EQ(c.slowest_rank, 2);
  EXPECT_EQ(c.algo_bytes, 65536);
  // Stats of {10, 11, 12}: p10 = 1st = 10, p50 = 2nd = 11, p90 = p99 = 3rd = 12, mean 11, stdev
  // sqrt((1 + 0 + 1) / 2) = 1.
  EXPECT_EQ(doc->cases[0].stats, (SummaryStats{10, 10, 11, 12, 12, 12, 11, 1}));
  EXPECT_FALSE(doc->cases[1].result.check.has_value());
  // bandwidth = bytes / p50: 65536 B / 11 us.
  EXPECT_DOUBLE_EQ(writer.document()["results"][0]["bandwidth_gbps"]["algo"].get<double>(), 65536 / 11e3);
  // Only the document is left in the directory: the temp file was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(ResultsFile, ReaderRejectsTruncatedForeignAndFutureFiles) {
  ResultsWriter writer(path("full.json"), header());
  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  const std::string text = writer.document().dump();

  write("truncated.json", text.substr(0, text.size() / 2));
  Result<ResultsDocument> truncated = read_results_file(path("truncated.json"));
  EXPECT_EQ(truncated.status().exit_code(), 2);
  EXPECT_NE(truncated.status().message().find(path("truncated.json") + ": not valid JSON"),
            std::string::npos);

  write("foreign.json", R"({"benchmarks": []})");
  EXPECT_EQ(read_results_file(path("foreign.json")).status().message(),
            path("foreign.json") + ": not an epsuite results document (no schema_version)");

  Json future = writer.document();
  future["schema_version"] = 2;
  write("future.json", future.dump());
  Result<ResultsDocument> f = read_results_file(path("future.json"));
  EXPECT_EQ(f.status().exit_code(), 2);
  EXPECT_EQ(
      f.status().message(),
      path("future.json") + ": schema_version 2 is newer than this epsuite reads (<= 1); upgrade epsuite");

  Json missing = writer.document();
  missing["results"][0]["stats"].erase("p90");
  EXPECT_EQ(parse_results(missing, "x.json").status().message(),
            "results[0].stats.p90: required number in [-1e+300, 1e+300] is missing");

  EXPECT_EQ(read_results_file(path("absent.json")).status().exit_code(), 2);
}

TEST_F(ResultsFile, CeilingIsWrittenWithGbpsAndRatioAndReadBack) {
  CaseResult c = checked_case();
  c.ceiling = Ceiling{5.5, "shm-copy"};
  ResultsWriter writer(path("out.json"), header());
  ASSERT_TRUE(writer.add_case(c).ok());
  ASSERT_TRUE(writer.add_case(unchecked_case()).ok());
  const Json& written = writer.document()["results"][0]["ceiling"];
  EXPECT_EQ(written["us"].get<double>(), 5.5);
  EXPECT_DOUBLE_EQ(written["gbps"].get<double>(), 65536 / 5.5e3);  // algo bytes / ceiling us
  EXPECT_DOUBLE_EQ(written["ratio"].get<double>(), 5.5 / 11.0);    // ceiling us / p50 of {10, 11, 12}
  EXPECT_EQ(written["kind"], "shm-copy");
  EXPECT_EQ(writer.document()["results"][0]["stats"]["p10"].get<double>(), 10.0);
  EXPECT_FALSE(writer.document()["results"][1].contains("ceiling"));
  Result<ResultsDocument> doc = read_results_file(path("out.json"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->cases[0].result.ceiling, c.ceiling);
  EXPECT_FALSE(doc->cases[1].result.ceiling.has_value());
  EXPECT_EQ(validate(path("out.json")), 0) << "needs python3-jsonschema (ci/setup)";

  Json bad_kind = writer.document();
  bad_kind["results"][0]["ceiling"]["kind"] = "guess";
  EXPECT_EQ(parse_results(bad_kind, "x.json").status().message(),
            "results[0].ceiling.kind: must be 'shm-copy' or 'fabric', got 'guess'");
  write("bad_kind.json", bad_kind.dump());
  EXPECT_EQ(validate(path("bad_kind.json")), 1);
  Json negative = writer.document();
  negative["results"][0]["ceiling"]["ratio"] = -0.5;
  EXPECT_EQ(parse_results(negative, "x.json").status().message(),
            "results[0].ceiling.ratio: must be in [0, 1e+300], got -0.5");
  c.ceiling = Ceiling{1.0, ""};
  EXPECT_EQ(case_to_json(c).status().message(), "ceiling: needs us >= 0 and a kind, got us 1 and kind ''");
}

TEST_F(ResultsFile, FilesOfOlderBuildsReadWithoutCeilingOrP10) {
  ResultsWriter writer(path("out.json"), header());
  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  Json older = writer.document();
  older["results"][0]["stats"].erase("p10");
  Result<ResultsDocument> doc = parse_results(older, "old.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_FALSE(doc->cases[0].result.ceiling.has_value());
  EXPECT_EQ(doc->cases[0].stats.p10, 10.0);  // from times_us {12, 10, 11}: the 1st smallest
  write("old.json", older.dump());
  EXPECT_EQ(validate(path("old.json")), 0) << "needs python3-jsonschema (ci/setup)";
}

// docs/results.md 9.5: the document's `oversubscribed` object and each case's flag are written, read back and
// schema-valid; files of older builds (neither key) read as not oversubscribed; a malformed one is refused.
TEST_F(ResultsFile, OversubscriptionIsWrittenAndReadBack) {
  RunHeader h = header();
  h.oversubscribed = Json{{"host", "node-a"},
                          {"ranks", 4},
                          {"proxy_threads", 0},
                          {"cpus", 2},
                          {"note", "4 ranks on 2 CPUs: timings measure the scheduler, not the transport"}};
  ResultsWriter writer(path("out.json"), h);
  CaseResult c = checked_case();
  c.oversubscribed = true;
  ASSERT_TRUE(writer.add_case(c).ok());
  ASSERT_TRUE(writer.add_case(unchecked_case()).ok());
  EXPECT_EQ(writer.document()["oversubscribed"], h.oversubscribed);
  EXPECT_EQ(writer.document()["results"][0]["oversubscribed"], true);
  EXPECT_EQ(writer.document()["results"][1]["oversubscribed"], false);
  EXPECT_EQ(validate(path("out.json")), 0) << "needs python3-jsonschema (ci/setup)";
  Result<ResultsDocument> doc = read_results_file(path("out.json"));
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->header.oversubscribed, h.oversubscribed);
  EXPECT_TRUE(doc->cases[0].result.oversubscribed);
  EXPECT_FALSE(doc->cases[1].result.oversubscribed);

  Json older = writer.document();
  older.erase("oversubscribed");
  older["results"][0].erase("oversubscribed");
  Result<ResultsDocument> old_doc = parse_results(older, "old.json");
  ASSERT_TRUE(old_doc.ok()) << old_doc.status().message();
  EXPECT_TRUE(old_doc->header.oversubscribed.is_null());
  EXPECT_FALSE(old_doc->cases[0].result.oversubscribed);

  Json bad = writer.document();
  bad["results"][0]["oversubscribed"] = "yes";
  EXPECT_EQ(parse_results(bad, "x.json").status().message(),
            "results[0].oversubscribed: expected true or false, got \"yes\"");
  write("bad.json", bad.dump());
  EXPECT_EQ(validate(path("bad.json")), 1);
  Json no_note = writer.document();
  no_note["oversubscribed"].erase("note");
  EXPECT_FALSE(parse_results(no_note, "x.json").ok());
  write("no_note.json", no_note.dump());
  EXPECT_EQ(validate(path("no_note.json")), 1);
}

TEST_F(ResultsFile, ReaderIgnoresUnknownKeys) {
  ResultsWriter writer(path("out.json"), header());
  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  Json extended = writer.document();
  extended["future_field"] = {{"x", 1}};
  extended["results"][0]["energy_joules"] = 3.5;
  Result<ResultsDocument> doc = parse_results(extended, "x.json");
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  EXPECT_EQ(doc->cases.size(), 1u);
}

// docs/results.md 9.6: an op's declared fields are schema-valid; a key the schema does not declare for the
// case's op is not (the writer refuses to write one: op_fields_test.cpp).
TEST_F(ResultsFile, OpFieldsAreDeclaredByTheSchema) {
  CaseResult layer = unchecked_case();
  layer.op = "layer";
  layer.extra = Json{
      {"tokens_per_s", 1000.0},
      {"phases_us", {{"route", 1.0}, {"dispatch", 2.0}, {"expert", 3.0}, {"combine", 4.0}, {"shared", 5.0}}}};
  ResultsWriter writer(path("layer.json"), header());
  ASSERT_TRUE(writer.add_case(layer).ok());
  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  EXPECT_EQ(validate(path("layer.json")), 0) << "needs python3-jsonschema (ci/setup)";
  Json undeclared = writer.document();
  undeclared["results"][0]["tokens_per_second"] = 3.0;
  write("undeclared.json", undeclared.dump());
  EXPECT_EQ(validate(path("undeclared.json")), 1);
  Json foreign_op = writer.document();
  foreign_op["results"][1]["tokens_per_s"] = 3.0;  // a layer field on a dispatch case
  write("foreign_op.json", foreign_op.dump());
  EXPECT_EQ(validate(path("foreign_op.json")), 1);
}

TEST_F(ResultsFile, ProducedDocumentIsValidAgainstTheSchema) {
  ResultsWriter writer(path("valid.json"), header());
  ASSERT_TRUE(writer.add_case(checked_case()).ok());
  ASSERT_TRUE(writer.add_case(unchecked_case()).ok());
  EXPECT_EQ(validate(path("valid.json")), 0) << "needs python3-jsonschema (ci/setup)";

  // The validator can fail: a document missing a statistic and with a negative mismatch count.
  Json broken = writer.document();
  broken["results"][0]["stats"].erase("p99");
  broken["results"][0]["check"]["mismatches"] = -1;
  write("broken.json", broken.dump());
  EXPECT_EQ(validate(path("broken.json")), 1);
  Json future = writer.document();
  future["schema_version"] = 2;
  write("future.json", future.dump());
  EXPECT_EQ(validate(path("future.json")), 1);
}

}  // namespace
}  // namespace eps
