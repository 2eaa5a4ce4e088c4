#include "conformance/suite.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "impls/device/device_registry.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/problem/device_mirror.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"
#include "reference/common/version.hpp"

namespace eps::conformance {
namespace {

struct Selection {
  std::vector<std::string> transports = transport::transport_registry().names();
  bool transports_named = false;
  fabric::FabricSelection fabric;
  bool fabric_named = false;
  std::map<std::string, Status> availability;
  std::unique_ptr<device::Device> device;
  Status device_status = Status(StatusCode::kUnavailable, "no device opened yet");
  bool device_named = false;
};

Selection& selection() {
  static Selection s;
  return s;
}

// Every (layout, tree) pair of the Transport contract, in the order of the table's columns.
std::vector<std::pair<transport::Layout, transport::CombineTree>> all_contracts() {
  std::vector<std::pair<transport::Layout, transport::CombineTree>> out;
  for (transport::Layout layout :
       {transport::Layout::kHtRankMajor, transport::Layout::kHtExpertMajor, transport::Layout::kLl}) {
    for (transport::CombineTree tree : transport::trees_for(layout)) out.emplace_back(layout, tree);
  }
  return out;
}

std::string cell(const std::string& name, transport::Layout layout, transport::CombineTree tree) {
  const transport::TransportEntry* entry = transport::transport_registry().find(name);
  const transport::Capabilities caps = entry->capabilities();
  if (!caps.supports(layout) || !caps.supports(tree)) return "n/a";
  return transport_availability(name).ok() ? "run" : "unavailable";
}

transport::TransportConfig preflight_config(double timeout_seconds) {
  transport::TransportConfig config;
  config.device = selection().device.get();
  config.memory = config.device != nullptr ? transport::MemoryKind::kDevice : transport::MemoryKind::kHost;
  config.num_experts = 2 * mpi::size();
  config.top_k = 2;
  config.hidden = 128;
  config.max_tokens_per_rank = 4;
  config.timeout_seconds = timeout_seconds;
  return config;
}

}  // namespace

const std::vector<std::string>& selected_transports() { return selection().transports; }
bool transport_named(const std::string& name) {
  const Selection& s = selection();
  return s.transports_named &&
         std::find(s.transports.begin(), s.transports.end(), name) != s.transports.end();
}
void set_selected_transports(std::vector<std::string> names, bool named) {
  selection().transports = std::move(names);
  selection().transports_named = named;
}

const fabric::FabricSelection& fabric_selection() { return selection().fabric; }
bool fabric_named() { return selection().fabric_named; }
void set_fabric_selection(fabric::FabricSelection s, bool named) {
  selection().fabric = std::move(s);
  selection().fabric_named = named;
}

Result<device::Device*> selected_device() {
  if (selection().device == nullptr) return selection().device_status;
  return selection().device.get();
}
bool device_named() { return selection().device_named; }

Status open_device(const std::string& spec, bool named, double timeout_seconds) {
  selection().device_named = named;
  EPS_ASSIGN_OR_RETURN(int local_rank, problem::node_local_rank(MPI_COMM_WORLD, timeout_seconds));
  Result<std::unique_ptr<device::Device>> opened = device::make_device(spec, local_rank);
  if (!opened.ok()) {
    if (opened.status().code() != StatusCode::kUnavailable) return opened.status();
    selection().device_status = opened.status();
    return Status();
  }
  selection().device = std::move(opened).value();
  selection().device_status = Status();
  return Status();
}

const Status& transport_availability(const std::string& name) {
  static const Status kNotChecked;
  const auto& availability = selection().availability;
  const auto it = availability.find(name);
  return it == availability.end() ? kNotChecked : it->second;
}

Status preflight_transports(double timeout_seconds) {
  EPS_RETURN_IF_ERROR(fabric::validate_fabric_selection(fabric_selection()));
  for (const std::string& name : selected_transports()) {
    if (!selection().device_status.ok()) {  // no device, no transport on it
      selection().availability[name] = selection().device_status;
      continue;
    }
    Result<std::unique_ptr<transport::Transport>> made =
        transport::make_transport(name, preflight_config(timeout_seconds), fabric_selection());
    if (!made.ok() && made.status().code() != StatusCode::kUnavailable) {
      return Status(made.status().code(), fmt::format("--transport {}: {}", name, made.status().message()));
    }
    selection().availability[name] = made.status();
  }
  return Status();
}

std::string capability_table() {
  const auto contracts = all_contracts();
  std::string out =
      fmt::format("# capabilities (docs/dispatch.md 5): run = checked here, n/a = not declared\n");
  std::size_t width = 10;  // the names column fits the longest name (plugin:<name> can be long)
  for (const std::string& name : selected_transports()) width = std::max(width, name.size());
  out += fmt::format("#  {:<{}}", "transport", width);
  for (const auto& [layout, tree] : contracts) {
    out +=
        fmt::format(" {:>27}", fmt::format("{}/{}", transport::layout_name(layout), combine_tree_name(tree)));
  }
  out += "\n";
  for (const std::string& name : selected_transports()) {
    out += fmt::format("#  {:<{}}", name, width);
    for (const auto& [layout, tree] : contracts) out += fmt::format(" {:>27}", cell(name, layout, tree));
    out += "\n";
  }
  for (const std::string& name : selected_transports()) {
    const Status& available = transport_availability(name);
    if (!available.ok()) out += fmt::format("#  {} unavailable: {}\n", name, available.message());
  }
  return out;
}

SuiteCommand::SuiteCommand()
    : params_(Params::from_catalog({"strict", "timeout", "transport", "device", "fabric", "signal", "chaos",
                                    "allow-unsafe", "iface", "proxy-threads"})) {}

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
      "Exit codes (docs/errors.md 10): 0 passed, 1 a test failed on some rank, 2 usage error, 3 environment "
      "(timeout, peer failure).");
}

int SuiteCommand::run(CLI::App& app) {
  fabric::load_fabric_libraries();  // before MPI_Init: fabric_registry.hpp says why
  const Status initialized = mpi::init(nullptr, nullptr);
  if (!initialized.ok()) mpi::fatal(initialized);
  Status status = params_->resolve();
  std::vector<std::string> gtest_flags = app.remaining();
  for (const std::string& arg : gtest_flags) {
    if (status.ok() && !arg.starts_with("--gtest_")) {
      status = invalid_argument(
          app.get_name(), "unknown argument '{}' (see --help; GoogleTest flags start with --gtest_)", arg);
    }
  }
  Result<std::vector<std::string>> transports =
      transport::select_transports(status.ok() ? params_->string("transport") : std::string("all"));
  if (status.ok() && !transports.ok()) status = transports.status();
  const double timeout = status.ok() ? params_->number("timeout") : kDefaultTimeoutSeconds;
  int agreed = mpi::agree_exit_code(status, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  mpitest::set_strict(params_->enabled("strict"));
  mpitest::set_timeout_seconds(timeout);
  set_selected_transports(std::move(transports).value(), params_->string("transport") != "all");
  set_fabric_selection(fabric::fabric_selection_from(*params_),
                       params_->source("fabric") != ParamSource::kDefault);
  const Status opened =
      open_device(params_->string("device"), params_->source("device") != ParamSource::kDefault, timeout);
  agreed = mpi::agree_exit_code(opened, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  const Result<device::Device*> device = selected_device();
  mpi::root_print("# epsuite {} (git {}) conformance suite on {} ranks\n{}# device (rank 0): {}\n#\n",
                  kSuiteVersion, kGitSha, mpi::size(), params_->header_block(),
                  device.ok() ? (*device)->describe() : "unavailable: " + device.status().message());
  const Status usable = preflight_transports(timeout);
  agreed = mpi::agree_exit_code(usable, Deadline(timeout));
  if (agreed != 0) return mpi::finalize(agreed, Deadline(timeout));
  mpi::root_print("{}", capability_table());
  // The final agreement's deadline must start after the tests ran (argument order is unspecified).
  const int result = mpitest::run_tests(gtest_flags);
  return mpi::finalize(result, Deadline(timeout));
}

}  // namespace eps::conformance
