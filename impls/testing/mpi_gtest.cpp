#include "impls/testing/mpi_gtest.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <random>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "impls/runtime/params.hpp"

namespace eps::mpitest {
namespace {

struct RunState {
  bool strict = false;
  double timeout_seconds = kDefaultTimeoutSeconds;
  MPI_Comm comm = MPI_COMM_NULL;   // the harness's private duplicate of MPI_COMM_WORLD
  std::vector<RankFailure> local;  // this rank's failures and skips in the current test
};

RunState& run_state() {
  static RunState state;
  return state;
}

std::string encode(const std::vector<RankFailure>& failures) {
  nlohmann::json out = nlohmann::json::array();
  for (const RankFailure& f : failures) out.push_back({f.rank, f.host, f.file, f.line, f.message, f.skipped});
  return out.dump();
}

Result<std::vector<RankFailure>> decode(const std::string& text, int from_rank) {
  const nlohmann::json in = nlohmann::json::parse(text, nullptr, false);
  const std::string what = fmt::format("failure records from rank {}", from_rank);
  if (!in.is_array()) return Status(StatusCode::kEnvironment, what + " are not a JSON array");
  std::vector<RankFailure> out;
  for (const nlohmann::json& r : in) {
    const bool valid = r.is_array() && r.size() == 6 && r[0].is_number_integer() && r[1].is_string() &&
                       r[2].is_string() && r[3].is_number_integer() && r[4].is_string() && r[5].is_boolean();
    if (!valid) return Status(StatusCode::kEnvironment, what + " hold a malformed record");
    out.push_back({r[0].get<int>(), r[1].get<std::string>(), r[2].get<std::string>(), r[3].get<int>(),
                   r[4].get<std::string>(), r[5].get<bool>()});
  }
  return out;
}

// Records this rank's failures and skips. GoogleTest forbids a listener that handles OnTestPartResult
// to raise failures, so re-raising lives in FailureReraiser.
class FailureRecorder : public testing::EmptyTestEventListener {
 public:
  void OnTestStart(const testing::TestInfo&) override { run_state().local.clear(); }
  void OnTestPartResult(const testing::TestPartResult& result) override {
    // Rank 0's own results are in its report already.
    if (result.passed() || mpi::is_root()) return;
    run_state().local.push_back({mpi::rank(), mpi::host(),
                                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                                 result.message(), result.skipped()});
  }
};

// GoogleTest calls OnTestEnd of later listeners first, so this runs before the result printer and the
// report writer look at the test.
class FailureReraiser : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    Result<std::vector<RankFailure>> all =
        gather_failures(run_state().local, run_state().comm, test_deadline(),
                        fmt::format("{}.{}", info.test_suite_name(), info.name()));
    if (!all.ok()) mpi::fatal(all.status());
    if (!mpi::is_root()) return;
    // A skip rank 0 reported already (the same environment everywhere) is not repeated once per rank.
    const testing::TestResult* own = testing::UnitTest::GetInstance()->current_test_info()->result();
    std::erase_if(*all, [own](const RankFailure& f) { return f.skipped && own->Skipped(); });
    reraise_failures(*all);
  }
};

// --gtest_shuffle with no seed picks one from the clock; every rank must run the same order.
Status agree_on_shuffle_seed() {
  if (!GTEST_FLAG_GET(shuffle)) return Status();
  int seed = GTEST_FLAG_GET(random_seed);
  if (mpi::is_root() && seed == 0) {
    seed = static_cast<int>(std::chrono::steady_clock::now().time_since_epoch().count() % 99999) + 1;
  }
  EPS_ASSIGN_OR_RETURN(std::vector<int> seeds, mpi::allgather_int(seed, run_state().comm, test_deadline()));
  GTEST_FLAG_SET(random_seed, seeds[0]);
  return Status();
}

}  // namespace

Result<std::vector<RankFailure>> gather_failures(const std::vector<RankFailure>& local, MPI_Comm comm,
                                                 const Deadline& deadline, std::string_view test) {
  EPS_ASSIGN_OR_RETURN(
      std::vector<std::string> texts,
      mpi::allgather_string(encode(local), comm, deadline, fmt::format("the results of test {}", test)));
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::vector<RankFailure> all;
  if (rank != 0) return all;
  for (std::size_t r = 0; r < texts.size(); ++r) {
    EPS_ASSIGN_OR_RETURN(std::vector<RankFailure> records, decode(texts[r], static_cast<int>(r)));
    all.insert(all.end(), records.begin(), records.end());
  }
  return all;
}

void reraise_failures(const std::vector<RankFailure>& failures) {
  for (const RankFailure& f : failures) {
    const std::string message = fmt::format("[rank {}, host {}] {}", f.rank, f.host, f.message);
    const auto type = f.skipped ? testing::TestPartResult::kSkip : testing::TestPartResult::kNonFatalFailure;
    testing::internal::AssertHelper(type, f.file.c_str(), f.line, message.c_str()) = testing::Message();
  }
}

bool strict() { return run_state().strict; }
void set_strict(bool strict) { run_state().strict = strict; }
double timeout_seconds() { return run_state().timeout_seconds; }
void set_timeout_seconds(double seconds) { run_state().timeout_seconds = seconds; }

int run_tests(const std::vector<std::string>& gtest_flags,
              const std::function<void(testing::TestEventListeners&)>& add_listeners) {
  RunState& s = run_state();
  if (s.comm == MPI_COMM_NULL) {
    Result<MPI_Comm> dup = mpi::comm_dup(MPI_COMM_WORLD, test_deadline());
    if (!dup.ok()) mpi::fatal(dup.status());
    s.comm = *dup;
  }
  std::vector<std::string> args = {"epsuite-check"};
  args.insert(args.end(), gtest_flags.begin(), gtest_flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  testing::InitGoogleTest(&argc, argv.data());
  const Status seeded = agree_on_shuffle_seed();
  if (!seeded.ok()) mpi::fatal(seeded);

  testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
  if (!mpi::is_root()) {
    delete listeners.Release(listeners.default_result_printer());
    delete listeners.Release(listeners.default_xml_generator());
    // Listing prints from inside RUN_ALL_TESTS; rank 0's list is the list.
    if (GTEST_FLAG_GET(list_tests)) return 0;
  }
  if (add_listeners) add_listeners(listeners);
  listeners.Append(new FailureRecorder);
  listeners.Append(new FailureReraiser);
  return RUN_ALL_TESTS() == 0 ? 0 : 1;
}

TestCounts last_test_counts() {
  const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
  TestCounts counts{unit.successful_test_count(), unit.failed_test_count(), unit.skipped_test_count(), {}};
  for (int s = 0; s < unit.total_test_suite_count(); ++s) {
    const testing::TestSuite& suite = *unit.GetTestSuite(s);
    for (int t = 0; t < suite.total_test_count(); ++t) {
      const testing::TestInfo& test = *suite.GetTestInfo(t);
      if (test.result()->Failed())
        counts.failed_tests.push_back(fmt::format("{}.{}", suite.name(), test.name()));
    }
  }
  return counts;
}

int test_main(int argc, char** argv) {
  CLI::App app{"epsuite MPI test (MPI-aware GoogleTest; run under mpirun)"};
  std::unique_ptr<Params> params = Params::from_catalog({"strict", "timeout"});
  params->bind(app);
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (mpi::launcher_rank() != 0) return e.get_exit_code() == 0 ? 0 : 2;
    return app.exit(e) == 0 ? 0 : 2;  // docs/errors.md 10: usage errors exit 2
  }
  const Status initialized = mpi::init(nullptr, nullptr);
  if (!initialized.ok()) mpi::fatal(initialized);
  Status status = params->resolve();
  for (const std::string& arg : app.remaining()) {
    if (status.ok() && !arg.starts_with("--gtest_")) {
      status = invalid_argument(arg, "unknown argument (GoogleTest flags start with --gtest_)");
    }
  }
  const double timeout = status.ok() ? params->number("timeout") : kDefaultTimeoutSeconds;
  const int agreed = mpi::agree_exit_code(status, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  set_strict(params->enabled("strict"));
  set_timeout_seconds(timeout);
  const int result = run_tests(app.remaining());  // before the deadline of the final agreement starts
  return mpi::finalize(result, Deadline(timeout));
}

}  // namespace eps::mpitest
