// `epsuite compare` end to end (docs/results.md 9.2, docs/errors.md 10 exit codes): the real binary on
// results files written by ResultsWriter, checking exact exit codes and the single error line of bad input.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "results/document.hpp"

namespace eps {
namespace {

namespace fs = std::filesystem;

const std::vector<double> kTimes = {1000, 1020, 980, 1040, 960, 1000, 1060, 940, 1020};

class CompareCli : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("eps_compare_cli_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a results file with a dispatch and a combine case; times scaled by `factor`.
  std::string write_results(const std::string& name, double factor,
                            const std::string& fingerprint = "0123456789abcdef", bool passed = true,
                            const std::string& fabric = "shm") const {
    const Json platform{{"hostnames", {"node-a"}}, {"fingerprint", fingerprint}};
    ResultsWriter writer(path(name), make_run_header({"epsuite", "bench"}, platform, Json::object()));
    EXPECT_TRUE(writer.start().ok());
    for (const char* op : {"dispatch", "combine"}) {
      CaseResult c;
      c.op = op;
      c.transport = "mpi";
      c.mode = "ht-rank-major";
      c.dtype = "bf16";
      c.sizes = {{"tokens", 128}, {"hidden", 256}};
      c.identity = {{"fabric", fabric}, {"preset", "smoke"}};
      for (double t : kTimes) c.times_us.push_back(t * factor);
      c.check =
          CheckOutcome{passed, passed ? 0 : 7, passed ? std::nullopt : std::optional<std::string>("row 3")};
      EXPECT_TRUE(writer.add_case(c).ok());
    }
    return path(name);
  }

  // Runs `epsuite compare ARGS`; returns the exit code and keeps stdout/stderr.
  int compare(const std::string& args) {
    const std::string command =
        std::string(EPSUITE) + " compare " + args + " >" + path("stdout") + " 2>" + path("stderr");
    const int status = std::system(command.c_str());
    EXPECT_TRUE(WIFEXITED(status)) << command;
    out_ = slurp(path("stdout"));
    err_ = slurp(path("stderr"));
    return WEXITSTATUS(status);
  }

  static std::string slurp(const std::string& file) {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  // Bad input: exactly one "epsuite: error:" line naming the file.
  void expect_one_error(const std::string& needle) const {
    EXPECT_EQ(err_.rfind("epsuite: error: ", 0), 0u) << err_;
    EXPECT_EQ(std::count(err_.begin(), err_.end(), '\n'), 1) << err_;
    EXPECT_NE(err_.find(needle), std::string::npos) << err_;
  }

  fs::path dir_;
  std::string out_;
  std::string err_;
};

TEST_F(CompareCli, FileWithItselfExitsZero) {
  const std::string base = write_results("base.json", 1.0);
  EXPECT_EQ(compare(base + " " + base), 0) << out_ << err_;
  EXPECT_NE(out_.find("regressions: none"), std::string::npos) << out_;
  EXPECT_NE(out_.find("unchanged: 2 of 2 matched cases"), std::string::npos) << out_;
  EXPECT_NE(out_.find("verdict: PASS"), std::string::npos) << out_;
}

// readme-command: build/epsuite compare base.json new.json
// readme-command: build/epsuite compare base.json new.json --threshold 5% --alpha 0.01
TEST_F(CompareCli, OnePointFiveTimesSlowerExitsOneListingRegressions) {
  const std::string base = write_results("base.json", 1.0);
  const std::string slow = write_results("slow.json", 1.5);
  EXPECT_EQ(compare(base + " " + slow), 1) << out_ << err_;
  EXPECT_NE(out_.find("regressions (2):"), std::string::npos) << out_;
  EXPECT_NE(out_.find("dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128 fabric=shm"), std::string::npos)
      << out_;
  EXPECT_NE(out_.find("combine/mpi/ht-rank-major/bf16 hidden=256 tokens=128 fabric=shm"), std::string::npos)
      << out_;
  EXPECT_NE(out_.find("1.500"), std::string::npos) << out_;  // the ratio column
  EXPECT_EQ(compare(base + " " + slow + " --threshold 5% --alpha 0.01"), 1) << out_ << err_;
  EXPECT_NE(out_.find("# epsuite compare: threshold 5%, alpha 0.01"), std::string::npos) << out_;
  // The reverse direction is an improvement, and improvements pass.
  EXPECT_EQ(compare(slow + " " + base), 0) << out_;
  EXPECT_NE(out_.find("improvements (2):"), std::string::npos) << out_;
}

TEST_F(CompareCli, FivePercentSlowerPassesAtTenPercentFailsAtThree) {
  const std::string base = write_results("base.json", 1.0);
  const std::string slower = write_results("slower.json", 1.05);
  EXPECT_EQ(compare(base + " " + slower), 0) << out_ << err_;
  EXPECT_EQ(compare(base + " " + slower + " --threshold 3%"), 1) << out_ << err_;
  EXPECT_EQ(compare(base + " " + slower + " --threshold 3% --alpha 0.0000001"), 0) << out_ << err_;
}

// readme-command: build/epsuite compare base.json other-machine.json --force
TEST_F(CompareCli, DifferentFingerprintExitsTwoUnlessForced) {
  const std::string base = write_results("base.json", 1.0);
  const std::string other = write_results("other.json", 1.0, "fedcba9876543210");
  EXPECT_EQ(compare(base + " " + other), 2) << out_;
  expect_one_error("fingerprints differ: BASE 0123456789abcdef vs NEW fedcba9876543210");
  EXPECT_NE(err_.find("use --force"), std::string::npos);
  EXPECT_EQ(compare(base + " " + other + " --force"), 0) << out_ << err_;
  EXPECT_NE(out_.find("fingerprints differ (--force)"), std::string::npos) << out_;
}

TEST_F(CompareCli, FailedCheckInNewExitsOne) {
  const std::string base = write_results("base.json", 1.0);
  const std::string failed = write_results("failed.json", 1.0, "0123456789abcdef", false);
  EXPECT_EQ(compare(base + " " + failed), 1) << out_ << err_;
  EXPECT_NE(out_.find("failed checks in NEW (2):"), std::string::npos) << out_;
}

// docs/results.md 9.2: the same sweep over two fabrics shares no case; a gate that compared nothing fails,
// naming the identity field that differs, and lists each file's cases; --allow-unmatched passes it.
// readme-command: build/epsuite compare shm.json tcp.json --allow-unmatched
TEST_F(CompareCli, NoCaseInCommonExitsOneNamingTheFieldsThatDiffer) {
  const std::string shm = write_results("shm.json", 1.0);
  const std::string tcp = write_results("tcp.json", 1.0, "0123456789abcdef", true, "libfabric:tcp");
  EXPECT_EQ(compare(shm + " " + tcp), 1) << out_ << err_;
  EXPECT_TRUE(err_.empty()) << err_;
  EXPECT_NE(out_.find("unchanged: 0 of 0 matched cases"), std::string::npos) << out_;
  EXPECT_NE(
      out_.find("only in BASE (2):\n  dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128 fabric=shm"),
      std::string::npos)
      << out_;
  EXPECT_NE(out_.find("only in NEW (2):\n  dispatch/mpi/ht-rank-major/bf16 hidden=256 tokens=128 "
                      "fabric=libfabric:tcp"),
            std::string::npos)
      << out_;
  EXPECT_NE(out_.find("  fabric: BASE shm; NEW libfabric:tcp\n"), std::string::npos) << out_;
  EXPECT_NE(
      out_.find("verdict: FAIL (0 regression(s), 0 failed check(s), no case matched: the files differ in "
                "fabric (--allow-unmatched passes this))"),
      std::string::npos)
      << out_;
  EXPECT_EQ(compare(shm + " " + tcp + " --allow-unmatched"), 0) << out_ << err_;
  EXPECT_NE(out_.find("verdict: PASS"), std::string::npos) << out_;
  EXPECT_NE(out_.find("only in NEW (2):"), std::string::npos) << out_;
  // --help documents the flag and the exit code.
  EXPECT_EQ(compare("--help"), 0);
  EXPECT_NE(out_.find("--allow-unmatched"), std::string::npos) << out_;
  EXPECT_NE(out_.find("no case matched"), std::string::npos) << out_;
}

TEST_F(CompareCli, BadFilesExitTwo) {
  const std::string base = write_results("base.json", 1.0);
  const std::string text = slurp(base);
  std::ofstream(path("truncated.json")) << text.substr(0, text.size() / 2);
  EXPECT_EQ(compare(base + " " + path("truncated.json")), 2);
  expect_one_error("truncated.json: not valid JSON");

  std::ofstream(path("foreign.json")) << R"({"name": "not a results file"})";
  EXPECT_EQ(compare(path("foreign.json") + " " + base), 2);
  expect_one_error("not an epsuite results document (no schema_version)");

  Json future = Json::parse(text);
  future["schema_version"] = 2;
  std::ofstream(path("future.json")) << future.dump();
  EXPECT_EQ(compare(base + " " + path("future.json")), 2);
  expect_one_error("schema_version 2 is newer than this epsuite reads");

  Json empty = Json::parse(text);
  empty["results"] = Json::array();
  std::ofstream(path("empty.json")) << empty.dump();
  EXPECT_EQ(compare(base + " " + path("empty.json")), 2);
  expect_one_error("NEW: results: empty results list, nothing to compare");

  EXPECT_EQ(compare(base + " " + path("missing.json")), 2);
  expect_one_error("missing.json: cannot open results file");

  EXPECT_EQ(compare(base + " " + base + " --threshold ten"), 2);
  expect_one_error("--threshold: expected a number or a percentage");
}

}  // namespace
}  // namespace eps
