#include "perf/bench/oversubscription.hpp"

#include <sched.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "impls/runtime/mpi_runtime.hpp"

namespace eps::bench {
namespace {

constexpr const char* kTestCpusVariable = "EPS_TEST_NODE_CPUS";
constexpr int kMaxTestCpus = 1 << 20;

// This rank's affinity mask as "id id ..." (a rank that cannot read its own runs on some one CPU: "-1").
std::string my_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return "-1";
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) out += fmt::format("{} ", cpu);
  }
  return out.empty() ? "-1" : out;
}

std::vector<int> parse_cpus(const std::string& text) {
  std::vector<int> cpus;
  std::istringstream in(text);
  for (int cpu = 0; in >> cpu;) cpus.push_back(cpu);
  return cpus;
}

// EPS_TEST_NODE_CPUS, when set.
Result<std::optional<int>> test_node_cpus() {
  const char* value = std::getenv(kTestCpusVariable);
  if (value == nullptr) return std::optional<int>();
  const std::string_view text(value);
  int cpus = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), cpus);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || cpus < 1 ||
      cpus > kMaxTestCpus) {
    return invalid_argument(kTestCpusVariable, "must be an integer in [1, {}], got '{}'", kMaxTestCpus, text);
  }
  return std::optional<int>(cpus);
}

std::string plural(int n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

}  // namespace

int CpuCensus::fewest_cpus_of_a_rank() const {
  int fewest = 0;
  for (const NodeCpus& node : nodes) {
    fewest = fewest == 0 ? node.fewest_cpus_of_a_rank : std::min(fewest, node.fewest_cpus_of_a_rank);
  }
  return std::max(fewest, 1);
}

Result<CpuCensus> take_cpu_census(const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(const std::optional<int> override_cpus, test_node_cpus());
  EPS_ASSIGN_OR_RETURN(const mpi::NodeLayout layout, mpi::node_layout(MPI_COMM_WORLD, deadline));
  EPS_ASSIGN_OR_RETURN(const std::vector<std::string> masks,
                       mpi::allgather_string(my_cpus(), MPI_COMM_WORLD, deadline, "CPU affinity masks"));
  EPS_ASSIGN_OR_RETURN(const std::vector<std::string> hosts, mpi::all_hosts(MPI_COMM_WORLD, deadline));
  CpuCensus census;
  census.nodes.resize(static_cast<std::size_t>(layout.nodes()));
  std::vector<std::set<int>> unions(census.nodes.size());
  for (std::size_t r = 0; r < masks.size(); ++r) {
    const auto n = static_cast<std::size_t>(layout.node_of[r]);
    NodeCpus& node = census.nodes[n];
    if (node.ranks == 0) node.host = hosts[r];
    ++node.ranks;
    const std::vector<int> cpus = parse_cpus(masks[r]);
    const int count =
        std::max(1, static_cast<int>(std::count_if(cpus.begin(), cpus.end(), [](int c) { return c >= 0; })));
    node.fewest_cpus_of_a_rank =
        node.fewest_cpus_of_a_rank == 0 ? count : std::min(node.fewest_cpus_of_a_rank, count);
    unions[n].insert(cpus.begin(), cpus.end());
  }
  for (std::size_t n = 0; n < census.nodes.size(); ++n) {
    // A rank that could not read its mask ("-1") adds one CPU of its own.
    census.nodes[n].cpus = override_cpus.value_or(static_cast<int>(unions[n].size()));
  }
  return census;
}

int helper_threads_per_rank(const std::string& transport, int proxy_threads) {
  return transport == "proxy" ? proxy_threads : 0;
}

std::optional<Oversubscription> find_oversubscription(const CpuCensus& census, int helper_threads_per_rank) {
  // The ranks alone first: that oversubscription concerns every case of the run.
  for (const int helpers_per_rank : {0, helper_threads_per_rank}) {
    std::optional<Oversubscription> worst;
    double worst_load = 1.0;  // threads per CPU; above 1 is oversubscribed
    for (const NodeCpus& node : census.nodes) {
      const int helpers = node.ranks * helpers_per_rank;
      const double load = static_cast<double>(node.ranks + helpers) / std::max(node.cpus, 1);
      if (load <= worst_load) continue;
      worst_load = load;
      worst =
          Oversubscription{node.host, static_cast<int>(census.nodes.size()), node.ranks, helpers, node.cpus};
    }
    if (worst) return worst;
  }
  return std::nullopt;
}

std::string oversubscription_line(const Oversubscription& o) {
  const std::string cpus = plural(o.cpus, "CPU") + (o.nodes > 1 ? " of node " + o.host : "");
  if (o.helper_threads == 0) {
    return fmt::format("{} on {}: timings measure the scheduler, not the transport", plural(o.ranks, "rank"),
                       cpus);
  }
  return fmt::format(
      "{} and {} {} proxy threads on {}: proxy timings measure the scheduler, not the transport",
      plural(o.ranks, "rank"), o.ranks == 1 ? "its" : "their", o.helper_threads, cpus);
}

Json oversubscription_to_json(const Oversubscription& o) {
  return Json{{"host", o.host},
              {"ranks", o.ranks},
              {"proxy_threads", o.helper_threads},
              {"cpus", o.cpus},
              {"note", oversubscription_line(o)}};
}

}  // namespace eps::bench
