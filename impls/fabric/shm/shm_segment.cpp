#include "impls/fabric/shm/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <map>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "impls/runtime/mpi_runtime.hpp"

namespace eps::fabric::shm {
namespace {

std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

template <typename... Args>
Status environment(std::string_view family, fmt::format_string<Args...> format, Args&&... args) {
  return Status(StatusCode::kEnvironment,
                fmt::format("{}: {}", family, fmt::format(format, std::forward<Args>(args)...)));
}

// mmap needs a non-zero length: empty segments still get one page.
std::size_t mapped_bytes(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return std::max(page, (bytes + page - 1) / page * page);
}

Result<Mapping> map_fd(std::string_view family, int fd, const std::string& name, std::size_t bytes) {
  void* addr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int error = errno;
  close(fd);
  if (addr == MAP_FAILED)
    return environment(family, "mmap of {} ({} bytes) failed: {}", name, bytes, errno_text(error));
  return Mapping(addr, bytes);
}

Result<Mapping> create_segment(std::string_view family, const std::string& name, std::size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Left by a crashed job whose rank 0 had the same pid: it is nobody's any more.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return environment(family, "shm_open({}) failed: {}", name, errno_text(errno));
  const std::size_t length = mapped_bytes(bytes);
  // Reserve the pages now: a full /dev/shm must fail here, not with SIGBUS on a later put.
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(length)); error != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return environment(family, "cannot reserve {} bytes for {} in /dev/shm: {}", length, name,
                       errno_text(error));
  }
  Result<Mapping> mapping = map_fd(family, fd, name, length);
  if (!mapping.ok()) shm_unlink(name.c_str());
  return mapping;
}

Result<Mapping> open_segment(std::string_view family, const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    return environment(family, "shm_open({}) of a peer's segment failed: {}", name, errno_text(errno));
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    const int error = errno;
    close(fd);
    return environment(family, "fstat of {} failed: {}", name, errno_text(error));
  }
  return map_fd(family, fd, name, static_cast<std::size_t>(info.st_size));
}

// "a (ranks 0, 1), b (ranks 2, 3)".
std::string host_summary(const std::vector<std::string>& hosts) {
  std::map<std::string, std::vector<int>> ranks;
  for (std::size_t r = 0; r < hosts.size(); ++r) ranks[hosts[r]].push_back(static_cast<int>(r));
  std::vector<std::string> parts;
  for (const auto& [host, list] : ranks)
    parts.push_back(fmt::format("{} (ranks {})", host, fmt::join(list, ", ")));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

Mapping::~Mapping() {
  if (addr_ != nullptr) munmap(addr_, bytes_);
}

Status agree_on(MPI_Comm comm, std::string_view family, const Status& local, std::string_view what,
                const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(std::vector<int> codes,
                       mpi::allgather_int(static_cast<int>(local.code()), comm, deadline));
  if (!local.ok()) return local;
  for (std::size_t r = 0; r < codes.size(); ++r) {
    if (codes[r] != 0) {
      return Status(static_cast<StatusCode>(codes[r]),
                    fmt::format("{}: {} failed on rank {} (see its message)", family, what, r));
    }
  }
  return Status();
}

Status require_one_host(MPI_Comm comm, std::string_view family, const Deadline& deadline) {
  EPS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, mpi::all_hosts(comm, deadline));
  for (const std::string& host : hosts) {
    if (host != hosts.front()) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("{}: ranks span several hosts ({}); {} needs every rank on one host", family,
                                host_summary(hosts), family));
    }
  }
  return Status();
}

Result<std::string> segment_tag(MPI_Comm comm, const Deadline& deadline) {
  static std::atomic<int> serial{0};
  EPS_ASSIGN_OR_RETURN(std::vector<int> pids, mpi::allgather_int(static_cast<int>(getpid()), comm, deadline));
  EPS_ASSIGN_OR_RETURN(std::vector<int> serials, mpi::allgather_int(serial++, comm, deadline));
  return fmt::format("{}-{}", pids.front(), serials.front());
}

Result<std::vector<Mapping>> map_all_segments(MPI_Comm comm, std::string_view family, const std::string& tag,
                                              const std::string& kind, std::size_t bytes,
                                              const Deadline& deadline) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const auto name_of = [&](int r) { return fmt::format("/eps-{}-{}-{}-{}", family, tag, kind, r); };
  std::vector<Mapping> mappings(static_cast<std::size_t>(size));
  const std::string mine = name_of(rank);
  Result<Mapping> created = create_segment(family, mine, bytes);
  EPS_RETURN_IF_ERROR(
      agree_on(comm, family, created.status(), fmt::format("creating segment {}", kind), deadline));
  mappings[static_cast<std::size_t>(rank)] = std::move(created).value();
  Status opened;
  for (int r = 0; r < size && opened.ok(); ++r) {
    if (r == rank) continue;
    Result<Mapping> peer = open_segment(family, name_of(r));
    if (peer.ok()) mappings[static_cast<std::size_t>(r)] = std::move(peer).value();
    opened = peer.status();
  }
  const Status all_mapped =
      agree_on(comm, family, opened, fmt::format("mapping the peers' segments {}", kind), deadline);
  shm_unlink(mine.c_str());  // every rank got past its own mapping attempt: the name is no longer needed
  EPS_RETURN_IF_ERROR(all_mapped);
  return mappings;
}

}  // namespace eps::fabric::shm
