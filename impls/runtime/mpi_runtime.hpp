// MPI bootstrap of `epsuite` and of the conformance suite (docs/architecture.md rules 3 and 6; docs/errors.md
// 10).
//
// Lifecycle: `mpi::init` once (MPI_Init_thread with MPI_THREAD_MULTIPLE; a library that provides less
// is an environment error, exit 3), then the accessors, then `mpi::finalize(local_exit_code)`, which
// returns the maximum exit code over all ranks so that every rank (and mpirun) exits with the worst
// result (docs/errors.md 10). MPI_COMM_WORLD gets MPI_ERRORS_RETURN so that every MPI return code reaches
// EPS_MPI_CHECK_OR_ABORT, which names the call, file, line, host and rank.
//
// Failing without hanging the others: an error that only some ranks see (a timeout, a peer failure,
// a failed MPI call) goes through `mpi::fatal`, which prints the diagnostic with host and rank and calls
// MPI_Abort with the docs/errors.md 10 exit code; mpirun then ends every rank and exits with that code.
// Errors that every rank sees alike (bad flags) go through `agree_exit_code`, which lets the lowest failing
// rank print once and returns the maximum code on every rank.
//
// Every wait has a deadline (impls/runtime/deadline.hpp): `barrier` and `alltoallv` post the non-blocking
// collective and poll MPI_Test until the deadline; on expiry they return a kEnvironment status naming
// the operation, the communicator size and this rank. A collective that timed out is still pending, so
// the communicator is unusable afterwards: the caller must end the run (`fatal`).
//
// Before `init` (for example while printing --help under mpirun) `launcher_rank()` reads the rank the
// launcher put in the environment (Open MPI, PMIx, PMI, Slurm), 0 when there is none.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"
#include "reference/dispatch/node_layout.hpp"

namespace eps {

// An error that names the host and rank where it happened ("host h, rank r: message").
class RankError : public Error {
 public:
  RankError(Status status, std::string host, int rank);
  const std::string& host() const { return host_; }
  int rank() const { return rank_; }
  // The message without the location prefix.
  const std::string& message() const { return status().message(); }

 private:
  std::string host_;
  int rank_;
};

namespace mpi {

// MPI_Init_thread(MPI_THREAD_MULTIPLE) once; a second call is a no-op. kEnvironment if the library
// cannot provide MPI_THREAD_MULTIPLE.
Status init(int* argc, char*** argv);
bool initialized();
// Calls MPI_Finalize when init succeeded, after agreeing on max(exit_code) over ranks within `deadline`
// (a timeout there is fatal). Returns that maximum (exit_code unchanged when MPI was never initialized).
int finalize(int exit_code, const Deadline& deadline = Deadline());

int rank();                     // 0 before init
int size();                     // 1 before init
bool is_root();                 // rank() == 0
const std::string& host();      // MPI_Get_processor_name (gethostname before init)
std::string where();            // "host h, rank r"
int launcher_rank();            // see above
std::string library_version();  // MPI_Get_library_version, first line

// The status of an MPI return code: OK for MPI_SUCCESS, else kEnvironment
// "MPI_Send failed at file.cpp:12 on host h, rank r: <MPI_Error_string>".
Status check(int rc, const char* call, const char* file, int line);
// Prints "epsuite: error on host h, rank r: message" to stderr and ends the whole job with
// MPI_Abort(status exit code); exits the process when MPI is not initialized. A kOk status aborts with 1.
[[noreturn]] void fatal(const Status& status);
// Throws RankError (this host and rank) when `status` failed.
void throw_if_error(const Status& status);

// In-place MPI_Iallreduce of `count` elements of `data` with `op` (MPI_SUM, MPI_MAX, ...) under the deadline.
Status allreduce_in_place(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                          const Deadline& deadline, std::string_view what);

// Polls `request` with MPI_Test until it completes or the deadline expires.
Status wait(MPI_Request* request, const Deadline& deadline, const std::function<std::string()>& describe);
// A barrier whose timeout names the rank it waited for (a dissemination barrier of zero-byte messages on a
// reserved tag, MPI_Test polling).
Status barrier(MPI_Comm comm, const Deadline& deadline);
// MPI_Ialltoallv + MPI_Test polling. Counts and displacements are in elements of the datatypes and must
// have one entry per rank of `comm` (kInvalidArgument otherwise).
Status alltoallv(const void* send, std::span<const int> send_counts, std::span<const int> send_displs,
                 MPI_Datatype send_type, void* recv, std::span<const int> recv_counts,
                 std::span<const int> recv_displs, MPI_Datatype recv_type, MPI_Comm comm,
                 const Deadline& deadline);
// A duplicate of `comm` (MPI_Comm_idup with the deadline); the caller frees it.
Result<MPI_Comm> comm_dup(MPI_Comm comm, const Deadline& deadline);
// The ranks of `comm` that share memory with this one (MPI_COMM_TYPE_SHARED: one node), after a deadline
// barrier; the caller frees it.
Result<MPI_Comm> comm_split_node(MPI_Comm comm, const Deadline& deadline);
// MPI_Win_allocate_shared of `bytes` on this rank over `node` (a comm_split_node communicator), after a
// deadline barrier; `base` is this rank's segment. win_free frees it after a deadline barrier.
struct SharedWindow {
  MPI_Win window = MPI_WIN_NULL;
  std::byte* base = nullptr;
};
Result<SharedWindow> win_allocate_shared(std::size_t bytes, MPI_Comm node, const Deadline& deadline);
Status win_free(MPI_Win* window, MPI_Comm node, const Deadline& deadline);
// Which ranks share a node (docs/fabrics.md 6.4: from the MPI shared-memory split, never from host names), as
// the reference's NodeLayout (nodes numbered by their lowest rank, any sizes; SPEC 14.2).
using NodeLayout = ::eps::NodeLayout;
Result<NodeLayout> node_layout(MPI_Comm comm, const Deadline& deadline);
// Every rank's value of `local`, in rank order (MPI_Iallgather with a deadline). `what` names the values in
// the timeout diagnostic ("MPI_Iallgather of <what> on a communicator of ...").
Result<std::vector<int>> allgather_int(int local, MPI_Comm comm, const Deadline& deadline,
                                       std::string_view what = {});
// Every rank's `local` text, in rank order (lengths, then MPI_Iallgatherv, both with the deadline).
Result<std::vector<std::string>> allgather_string(const std::string& local, MPI_Comm comm,
                                                  const Deadline& deadline, std::string_view what = {});
// Every rank's host name, in rank order.
Result<std::vector<std::string>> all_hosts(MPI_Comm comm, const Deadline& deadline);

// Collective over MPI_COMM_WORLD: returns max(exit code) over ranks. The lowest rank whose status failed
// prints "epsuite: error on host h, rank r: message" to stderr (once per job, not once per rank). A
// timeout of this exchange itself is fatal.
int agree_exit_code(const Status& local, const Deadline& deadline);

// Rank-0 printing: fmt formatting to stdout, flushed, on rank 0 only (launcher rank 0 before init).
template <typename... Args>
void root_print(fmt::format_string<Args...> format, Args&&... args) {
  if ((initialized() ? rank() : launcher_rank()) != 0) return;
  fmt::print(stdout, format, std::forward<Args>(args)...);
  std::fflush(stdout);
}

}  // namespace mpi
}  // namespace eps

// Ends the job (mpi::fatal, exit 3) when an MPI call fails; names the call, file, line, host and rank.
#define EPS_MPI_CHECK_OR_ABORT(call)                                                \
  do {                                                                              \
    const int eps_mpi_rc_ = (call);                                                 \
    if (eps_mpi_rc_ != MPI_SUCCESS)                                                 \
      ::eps::mpi::fatal(::eps::mpi::check(eps_mpi_rc_, #call, __FILE__, __LINE__)); \
  } while (0)

// Returns the failed Status (kEnvironment, same message) from the enclosing function instead.
#define EPS_MPI_CHECK(call)                                                                           \
  do {                                                                                                \
    const int eps_mpi_rc_ = (call);                                                                   \
    if (eps_mpi_rc_ != MPI_SUCCESS) return ::eps::mpi::check(eps_mpi_rc_, #call, __FILE__, __LINE__); \
  } while (0)
