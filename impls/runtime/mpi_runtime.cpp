#include "impls/runtime/mpi_runtime.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace eps {

RankError::RankError(Status status, std::string host, int rank)
    : Error(Status(status.code(), fmt::format("host {}, rank {}: {}", host, rank, status.message()))),
      host_(std::move(host)),
      rank_(rank) {}

namespace mpi {
namespace {

struct State {
  bool initialized = false;
  int rank = 0;
  int size = 1;
  std::string host;
};

State& state() {
  static State s;
  return s;
}

std::string local_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown-host";
  return name;
}

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

std::string error_string(int rc) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<std::size_t>(length));
}

}  // namespace

Status init(int* argc, char*** argv) {
  State& s = state();
  if (s.initialized) return Status();
  int already = 0;
  MPI_Initialized(&already);
  int provided = MPI_THREAD_SINGLE;
  if (!already) {
    const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("MPI_Init_thread failed on host {}: {}", local_hostname(), rc));
    }
  } else {
    MPI_Query_thread(&provided);
  }
  s.initialized = true;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.size);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  s.host =
      MPI_Get_processor_name(name, &length) == MPI_SUCCESS ? std::string(name, length) : local_hostname();
  if (provided < MPI_THREAD_MULTIPLE) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("the MPI library provides thread level {} on {}; epsuite needs "
                              "MPI_THREAD_MULTIPLE ({})",
                              provided, where(), MPI_THREAD_MULTIPLE));
  }
  return Status();
}

bool initialized() { return state().initialized; }
int rank() { return state().rank; }
int size() { return state().size; }
bool is_root() { return rank() == 0; }

const std::string& host() {
  State& s = state();
  if (s.host.empty()) s.host = local_hostname();
  return s.host;
}

std::string where() { return fmt::format("host {}, rank {}", host(), rank()); }

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::atoi(value);
  }
  return 0;
}

std::string library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "unknown";
  std::string version(text, static_cast<std::size_t>(length));
  version = version.substr(0, version.find('\n'));
  while (!version.empty() && (version.back() == '\0' || version.back() == ' ')) version.pop_back();
  return version;
}

Status check(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return Status();
  return Status(StatusCode::kEnvironment, fmt::format("{} failed at {}:{} on {}: {}", call, basename_of(file),
                                                      line, where(), error_string(rc)));
}

void fatal(const Status& status) {
  const int code = status.ok() ? 1 : status.exit_code();
  std::fflush(stdout);
  std::fprintf(stderr, "epsuite: error on %s: %s\n", where().c_str(), status.message().c_str());
  std::fflush(stderr);
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized() && !finalized) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

void throw_if_error(const Status& status) {
  if (!status.ok()) throw RankError(status, host(), rank());
}

Status wait(MPI_Request* request, const Deadline& deadline, const std::function<std::string()>& describe) {
  int test_rc = MPI_SUCCESS;
  const Status waited = wait_until(
      deadline,
      [&] {
        int done = 0;
        test_rc = MPI_Test(request, &done, MPI_STATUS_IGNORE);
        return test_rc != MPI_SUCCESS || done != 0;
      },
      describe);
  EPS_RETURN_IF_ERROR(waited);
  return check(test_rc, "MPI_Test", __FILE__, __LINE__);
}

namespace {

int comm_size(MPI_Comm comm) {
  int n = 0;
  MPI_Comm_size(comm, &n);
  return n;
}

std::string describe_collective(std::string_view op, MPI_Comm comm) {
  return fmt::format("{} on a communicator of {} ranks to complete on {} (some peer has not arrived)", op,
                     comm_size(comm), where());
}

}  // namespace

namespace {

// The barrier's messages: epsuite sends no other point-to-point message, and 32767 is the smallest
// MPI_TAG_UB the standard allows.
constexpr int kBarrierTag = 0x7EB5;

void abandon(MPI_Request* request) {
  if (*request == MPI_REQUEST_NULL) return;
  MPI_Cancel(request);
  MPI_Request_free(request);
}

}  // namespace

// A dissemination barrier of zero-byte messages rather than MPI_Ibarrier, so that a rank that waits too
// long knows whom it waits for: in round j it hears from rank - 2^j (mod n), which is named on expiry.
// MPI's non-overtaking rule keeps the rounds of consecutive barriers apart.
Status barrier(MPI_Comm comm, const Deadline& deadline) {
  const int n = comm_size(comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  char token = 0;
  char received = 0;
  for (int distance = 1, round = 0; distance < n; distance *= 2, ++round) {
    const int to = (rank + distance) % n;
    const int from = (rank - distance + n) % n;
    MPI_Request receive = MPI_REQUEST_NULL;
    MPI_Request send = MPI_REQUEST_NULL;
    EPS_MPI_CHECK(MPI_Irecv(&received, 0, MPI_BYTE, from, kBarrierTag, comm, &receive));
    EPS_MPI_CHECK(MPI_Isend(&token, 0, MPI_BYTE, to, kBarrierTag, comm, &send));
    Status heard = wait(&receive, deadline, [&] {
      return fmt::format("rank {} in round {} of a barrier on a communicator of {} ranks, on {}", from, round,
                         n, where());
    });
    if (heard.ok()) {
      heard = wait(&send, deadline, [&] {
        return fmt::format("rank {} to take round {} of a barrier on a communicator of {} ranks, on {}", to,
                           round, n, where());
      });
    }
    if (!heard.ok()) {
      abandon(&receive);
      abandon(&send);
      return heard;
    }
  }
  return Status();
}

Status alltoallv(const void* send, std::span<const int> send_counts, std::span<const int> send_displs,
                 MPI_Datatype send_type, void* recv, std::span<const int> recv_counts,
                 std::span<const int> recv_displs, MPI_Datatype recv_type, MPI_Comm comm,
                 const Deadline& deadline) {
  const std::size_t n = static_cast<std::size_t>(comm_size(comm));
  const std::pair<const char*, std::size_t> sizes[] = {{"send_counts", send_counts.size()},
                                                       {"send_displs", send_displs.size()},
                                                       {"recv_counts", recv_counts.size()},
                                                       {"recv_displs", recv_displs.size()}};
  for (const auto& [field, got] : sizes) {
    if (got != n) return invalid_argument(field, "must have one entry per rank ({}), got {}", n, got);
  }
  long expected = 0;
  for (int c : recv_counts) expected += c;
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Ialltoallv(send, send_counts.data(), send_displs.data(), send_type, recv,
                               recv_counts.data(), recv_displs.data(), recv_type, comm, &request));
  return wait(&request, deadline, [comm, expected] {
    return fmt::format("{} (expecting {} elements in total from all peers)",
                       describe_collective("MPI_Ialltoallv", comm), expected);
  });
}

Result<MPI_Comm> comm_dup(MPI_Comm comm, const Deadline& deadline) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Comm_idup(comm, &dup, &request));
  EPS_RETURN_IF_ERROR(
      wait(&request, deadline, [comm] { return describe_collective("MPI_Comm_idup", comm); }));
  return dup;
}

// MPI offers no non-blocking form of these collectives: a deadline barrier first proves every peer has
// arrived, so the blocking call that follows cannot wait for a missing one.
Result<MPI_Comm> comm_split_node(MPI_Comm comm, const Deadline& deadline) {
  EPS_RETURN_IF_ERROR(barrier(comm, deadline));
  MPI_Comm node = MPI_COMM_NULL;
  EPS_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  return node;
}

Result<SharedWindow> win_allocate_shared(std::size_t bytes, MPI_Comm node, const Deadline& deadline) {
  EPS_RETURN_IF_ERROR(barrier(node, deadline));
  MPI_Info info = MPI_INFO_NULL;
  EPS_MPI_CHECK(MPI_Info_create(&info));
  EPS_MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));
  SharedWindow w;
  const int rc = MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, info, node, &w.base, &w.window);
  MPI_Info_free(&info);
  EPS_MPI_CHECK(rc);
  return w;
}

Status win_free(MPI_Win* window, MPI_Comm node, const Deadline& deadline) {
  EPS_RETURN_IF_ERROR(barrier(node, deadline));
  EPS_MPI_CHECK(MPI_Win_free(window));
  return Status();
}

Result<NodeLayout> node_layout(MPI_Comm comm, const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(MPI_Comm node, comm_split_node(comm, deadline));
  int rank = 0;
  int node_rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_rank(node, &node_rank);
  // The node's lowest world rank names it: broadcast from its node rank 0 by an allgather over the node.
  Result<std::vector<int>> members = allgather_int(rank, node, deadline);
  MPI_Comm_free(&node);
  EPS_RETURN_IF_ERROR(members.status());
  EPS_ASSIGN_OR_RETURN(std::vector<int> leader_of, allgather_int(members->front(), comm, deadline));
  return NodeLayout::from_groups(leader_of);
}

Status allreduce_in_place(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          const Deadline& deadline, std::string_view what) {
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, comm, &request));
  return wait(&request, deadline,
              [comm, what] { return describe_collective(fmt::format("MPI_Iallreduce of {}", what), comm); });
}

Result<std::vector<int>> allgather_int(int local, MPI_Comm comm, const Deadline& deadline,
                                       std::string_view what) {
  std::vector<int> all(static_cast<std::size_t>(comm_size(comm)));
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallgather(&local, 1, MPI_INT, all.data(), 1, MPI_INT, comm, &request));
  EPS_RETURN_IF_ERROR(wait(&request, deadline, [comm, what] {
    return describe_collective(what.empty() ? "MPI_Iallgather" : fmt::format("MPI_Iallgather of {}", what),
                               comm);
  }));
  return all;
}

Result<std::vector<std::string>> allgather_string(const std::string& local, MPI_Comm comm,
                                                  const Deadline& deadline, std::string_view what) {
  EPS_ASSIGN_OR_RETURN(std::vector<int> lengths,
                       allgather_int(static_cast<int>(local.size()), comm, deadline, what));
  std::vector<int> displs(lengths.size(), 0);
  for (std::size_t r = 1; r < lengths.size(); ++r) displs[r] = displs[r - 1] + lengths[r - 1];
  std::string all(static_cast<std::size_t>(displs.back() + lengths.back()), '\0');
  MPI_Request request = MPI_REQUEST_NULL;
  EPS_MPI_CHECK(MPI_Iallgatherv(local.data(), static_cast<int>(local.size()), MPI_CHAR, all.data(),
                                lengths.data(), displs.data(), MPI_CHAR, comm, &request));
  EPS_RETURN_IF_ERROR(wait(&request, deadline, [comm, what] {
    return describe_collective(what.empty() ? "MPI_Iallgatherv" : fmt::format("MPI_Iallgatherv of {}", what),
                               comm);
  }));
  std::vector<std::string> out;
  for (std::size_t r = 0; r < lengths.size(); ++r) out.push_back(all.substr(displs[r], lengths[r]));
  return out;
}

Result<std::vector<std::string>> all_hosts(MPI_Comm comm, const Deadline& deadline) {
  return allgather_string(host(), comm, deadline);
}

int agree_exit_code(const Status& local, const Deadline& deadline) {
  if (!initialized()) {
    if (!local.ok()) std::fprintf(stderr, "epsuite: error: %s\n", local.message().c_str());
    return local.exit_code();
  }
  Result<std::vector<int>> codes =
      allgather_int(local.exit_code(), MPI_COMM_WORLD, deadline, "every rank's exit code");
  if (!codes.ok()) fatal(codes.status());
  const auto first_failed = std::find_if(codes->begin(), codes->end(), [](int c) { return c != 0; });
  if (first_failed != codes->end() && first_failed - codes->begin() == rank()) {
    std::fflush(stdout);
    std::fprintf(stderr, "epsuite: error on %s: %s\n", where().c_str(), local.message().c_str());
    std::fflush(stderr);
  }
  return *std::max_element(codes->begin(), codes->end());
}

int finalize(int exit_code, const Deadline& deadline) {
  if (!initialized()) return exit_code;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return exit_code;
  Result<std::vector<int>> codes =
      allgather_int(exit_code, MPI_COMM_WORLD, deadline, "every rank's exit code before MPI_Finalize");
  if (!codes.ok()) fatal(codes.status());
  const int worst = *std::max_element(codes->begin(), codes->end());
  MPI_Finalize();
  return worst;
}

}  // namespace mpi
}  // namespace eps
