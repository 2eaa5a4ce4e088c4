// Oversubscription (docs/results.md 9.5): whether the ranks of a run, plus the threads each keeps running
// beside itself (the proxy transport's --proxy-threads CPU proxy threads, docs/channel.md), outnumber the
// CPUs they may run on, node by node. When they do, the operating system time-slices them, and a bench's
// times measure its scheduler rather than the transport.
//
// The census (collective over MPI_COMM_WORLD): every rank reads its CPU affinity (sched_getaffinity); a node
// is the set of ranks of the MPI shared-memory split (mpi::node_layout), and its CPUs are the union of its
// ranks' affinity masks: ranks on one node share them. `EPS_TEST_NODE_CPUS=N` (for tests only, so that a test
// can produce both outcomes on any machine) replaces every node's CPU count by N.
//
// A run is oversubscribed on a node when ranks × (1 + helper threads per rank) > CPUs. The node reported is
// the one with the most threads per CPU (the lowest node on ties).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "impls/runtime/deadline.hpp"
#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"

namespace eps::bench {

struct NodeCpus {
  std::string host;  // of the node's lowest rank
  int ranks = 0;
  int cpus = 0;                   // the union of its ranks' affinity masks (or EPS_TEST_NODE_CPUS)
  int fewest_cpus_of_a_rank = 0;  // the smallest affinity mask of one of its ranks (never overridden)
};

struct CpuCensus {
  std::vector<NodeCpus> nodes;  // ordered by their lowest rank
  // The smallest affinity mask of any rank (a rank that cannot read its own counts 1).
  int fewest_cpus_of_a_rank() const;
};

// Collective over MPI_COMM_WORLD (every wait bounded by `deadline`). kInvalidArgument when EPS_TEST_NODE_CPUS
// is not an integer in [1, 1048576].
Result<CpuCensus> take_cpu_census(const Deadline& deadline);

// The threads a rank of `transport` runs beside itself: the proxy transport's `proxy_threads`, else 0.
int helper_threads_per_rank(const std::string& transport, int proxy_threads);

struct Oversubscription {
  std::string host;
  int nodes = 1;           // nodes of the census (the line names the host when there are several)
  int ranks = 0;           // on that node
  int helper_threads = 0;  // on that node, all its ranks' together (0 when the ranks alone are too many)
  int cpus = 0;
};

// The worst oversubscribed node when every rank runs `helper_threads_per_rank` beside itself; nullopt when
// no node is. When the ranks alone are too many, the helpers are left out (helper_threads = 0).
std::optional<Oversubscription> find_oversubscription(const CpuCensus& census, int helper_threads_per_rank);

// The one line bench, run and report.md print, e.g. "4 ranks on 2 CPUs: timings measure the scheduler, not
// the transport", or "2 ranks and their 8 proxy threads on 2 CPUs: proxy timings measure the scheduler, not
// the transport"; " of node HOST" follows the CPUs when the run spans several nodes.
std::string oversubscription_line(const Oversubscription& o);

// The results document's `oversubscribed` object (docs/results.md 9.5): host, ranks, proxy_threads, cpus and
// the line as `note`.
Json oversubscription_to_json(const Oversubscription& o);

}  // namespace eps::bench
