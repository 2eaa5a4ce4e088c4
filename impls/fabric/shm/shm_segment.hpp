// Shared-memory segments between the ranks of one host (the shm fabric's regions and completion rings, the
// ipc fabric's mailboxes): one POSIX shared-memory segment per rank, mapped by every rank.
//
// Names are "/eps-<family>-<tag>-<kind>-<rank>", where the tag (segment_tag) is rank 0's pid and a serial
// agreed over the communicator, so concurrent jobs and fabrics never collide. Space is reserved with
// posix_fallocate, so a full /dev/shm fails at creation instead of with SIGBUS later; fresh segments are
// zero-filled. map_all_segments unlinks each rank's own segment as soon as every rank has mapped it, so
// nothing is left in /dev/shm even if the job crashes later. Every failure fails all ranks alike (an
// allgather of status codes), so that no rank waits for a peer that gave up.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "impls/runtime/deadline.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::shm {

// One mapping of a shared-memory segment, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, std::size_t bytes) : addr_(static_cast<std::byte*>(addr)), bytes_(bytes) {}
  Mapping(Mapping&& other) noexcept { *this = std::move(other); }
  Mapping& operator=(Mapping&& other) noexcept {
    std::swap(addr_, other.addr_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  ~Mapping();
  std::byte* data() const { return addr_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::byte* addr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Every rank's `local` status agreed: `local` itself where it failed, else the first failure of another rank
// ("<family>: <what> failed on rank r (see its message)") with that rank's code, else OK. Collective.
Status agree_on(MPI_Comm comm, std::string_view family, const Status& local, std::string_view what,
                const Deadline& deadline);

// kUnavailable "<family>: ranks span several hosts (a (ranks 0, 1), b (ranks 2, 3)); <family> needs every
// rank on one host" unless every rank of `comm` runs on one host (MPI processor names). Collective.
Status require_one_host(MPI_Comm comm, std::string_view family, const Deadline& deadline);

// The job tag of the segment names: rank 0's pid and fabric serial. Collective.
Result<std::string> segment_tag(MPI_Comm comm, const Deadline& deadline);

// Collective: creates this rank's segment "/eps-<family>-<tag>-<kind>-<rank>" of `bytes` (at least a page),
// maps every rank's, unlinks this rank's. Errors name the failing call, prefixed "<family>: ".
Result<std::vector<Mapping>> map_all_segments(MPI_Comm comm, std::string_view family, const std::string& tag,
                                              const std::string& kind, std::size_t bytes,
                                              const Deadline& deadline);

}  // namespace eps::fabric::shm
