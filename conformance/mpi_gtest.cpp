#include "conformance/mpi_gtest.hpp"

#include <chrono>
#include <cstdio>
#include <random>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "harness/version.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/transport/registry.hpp"

namespace eps::conformance {
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
  void OnTestEnd(const testing::TestInfo&) override {
    Result<std::vector<RankFailure>> all =
        gather_failures(run_state().local, run_state().comm, test_deadline());
    if (!all.ok()) mpi::fatal(all.status());
    if (mpi::is_root()) reraise_failures(*all);
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
                                                 const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> texts, mpi::allgather_string(encode(local), comm, deadline));
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

int run_tests(const std::vector<std::string>& gtest_flags) {
  RunState& s = run_state();
  if (s.comm == MPI_COMM_NULL) EPS_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &s.comm));
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
  listeners.Append(new FailureRecorder);
  listeners.Append(new FailureReraiser);
  return RUN_ALL_TESTS() == 0 ? 0 : 1;
}

static std::vector<std::string>& transport_selection() {
  static std::vector<std::string> names = transport::transport_registry().names();
  return names;
}
const std::vector<std::string>& selected_transports() { return transport_selection(); }
void set_selected_transports(std::vector<std::string> names) { transport_selection() = std::move(names); }

static FabricSelection& fabric_selection_storage() {
  static FabricSelection selection;
  return selection;
}
const FabricSelection& fabric_selection() { return fabric_selection_storage(); }
void set_fabric_selection(FabricSelection selection) { fabric_selection_storage() = std::move(selection); }

void apply_fabric_selection(transport::TransportConfig& config) {
  const FabricSelection& f = fabric_selection();
  config.fabric = f.fabric;
  config.signal = f.signal;
  config.chaos = f.chaos;
  config.allow_unsafe = f.allow_unsafe;
}

Status preflight_transports(double timeout_seconds) {
  for (const std::string& name : selected_transports()) {
    transport::TransportConfig config;
    config.num_experts = 2 * mpi::size();
    config.top_k = 2;
    config.hidden = 128;
    config.max_tokens_per_rank = 4;
    config.timeout_seconds = timeout_seconds;
    apply_fabric_selection(config);
    Result<std::unique_ptr<transport::Transport>> made = transport::make_transport(name, config);
    if (made.ok()) continue;
    if (made.status().code() != StatusCode::kEnvironment) {
      return Status(made.status().code(), fmt::format("--transport {}: {}", name, made.status().message()));
    }
    mpi::root_print("# {}: cannot run here, its tests will be skipped: {}\n", name, made.status().message());
  }
  return Status();
}

SuiteCommand::SuiteCommand()
    : params_(Params::from_catalog(
          {"strict", "timeout", "transport", "fabric", "signal", "chaos", "allow-unsafe"})) {}

void SuiteCommand::bind(CLI::App& app) {
  params_->bind(app);
  app.allow_extras();
  app.footer(
      "GoogleTest flags are passed through (rank 0 prints and writes the report):\n"
      "  --gtest_filter=PATTERN          run only the tests matching PATTERN (':'-separated, '-' negates)\n"
      "  --gtest_output=xml:FILE|json:FILE  write a report covering every rank's failures\n"
      "  --gtest_list_tests              list the tests and exit\n"
      "  --gtest_repeat=N                run the suite N times\n"
      "  --gtest_shuffle                 shuffle the order (same order on every rank)\n"
      "  --gtest_random_seed=N           seed of --gtest_shuffle\n"
      "  --gtest_brief=1                 print only failures\n"
      "  --gtest_also_run_disabled_tests run DISABLED_ tests too\n"
      "Exit codes (SPEC 10): 0 passed, 1 a test failed on some rank, 2 usage error, 3 environment "
      "(timeout, peer failure).");
}

int SuiteCommand::run(CLI::App& app) {
  fabric::load_fabric_libraries();  // before MPI_Init: fabric_registry.hpp says why
  const Status initialized = mpi::init(nullptr, nullptr);
  if (!initialized.ok()) mpi::fatal(initialized);
  Status status = params_->resolve();
  std::vector<std::string> gtest_flags = app.remaining();
  for (const std::string& arg : gtest_flags) {
    if (status.ok() && arg.rfind("--gtest_", 0) != 0) {
      status = invalid_argument(app.get_name(),
                                "unknown argument '{}' (see --help; GoogleTest flags start with "
                                "--gtest_)",
                                arg);
    }
  }
  Result<std::vector<std::string>> transports =
      transport::select_transports(status.ok() ? params_->string("transport") : std::string("all"));
  if (status.ok() && !transports.ok()) status = transports.status();
  const double timeout = status.ok() ? params_->number("timeout") : kDefaultTimeoutSeconds;
  const int agreed = mpi::agree_exit_code(status, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  set_strict(params_->enabled("strict"));
  set_timeout_seconds(timeout);
  set_selected_transports(std::move(transports).value());
  set_fabric_selection({params_->string("fabric"), params_->string("signal"), params_->string("chaos"),
                        params_->enabled("allow-unsafe")});
  const int usable = mpi::agree_exit_code(preflight_transports(timeout), Deadline(timeout));
  if (usable != 0) return mpi::finalize(usable, Deadline(timeout));
  mpi::root_print("# epsuite {} (git {}) conformance suite on {} ranks\n{}#\n", kSuiteVersion, kGitSha,
                  mpi::size(), params_->header_block());
  return mpi::finalize(run_tests(gtest_flags), Deadline(timeout));
}

}  // namespace eps::conformance
