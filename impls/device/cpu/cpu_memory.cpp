#include "impls/device/cpu/cpu_memory.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

#include <fmt/format.h>

namespace eps::device::cpu {
namespace {

constexpr std::size_t kAlignment = 256;
// Freed blocks of at least this many bytes give their whole pages back to the system.
constexpr std::size_t kPunchBytes = 64 * 1024;
constexpr std::uint64_t kHandleMagic = 0x4550'5343'5055'3031ull;  // "EPSCPU01"

std::string errno_text(int error) { return std::error_code(error, std::generic_category()).message(); }

Status failed_call(StatusCode code, std::string_view call, int error) {
  return Status(code, fmt::format("cpu device: {} failed: {}", call, errno_text(error)));
}

std::size_t page_bytes() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }
std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

// What a cpu IpcHandle carries in its data bytes.
struct HandleData {
  std::uint64_t magic = kHandleMagic;
  std::int64_t pid = 0;
  std::int64_t fd = -1;
  std::uint64_t offset = 0;  // of the exported range in the memfd
};
static_assert(sizeof(HandleData) <= IpcHandle::kDataBytes);

// A PROT_NONE reservation of `bytes` (the public view of isolated memory), or MAP_FAILED.
void* reserve(std::size_t bytes) {
  return mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
}

}  // namespace

// An imported range: its two views, unmapped (and its range forgotten) on destruction.
class CpuMemory::Import final : public MappedMemory {
 public:
  Import(CpuMemory& owner, void* data, std::size_t bytes, std::byte* private_map, std::byte* public_map,
         std::size_t map_bytes)
      : MappedMemory(data, bytes),
        owner_(owner),
        private_map_(private_map),
        public_map_(public_map),
        map_bytes_(map_bytes) {}
  ~Import() override {
    owner_.remove_range(reinterpret_cast<std::uintptr_t>(data()));
    munmap(private_map_, map_bytes_);
    if (public_map_ != private_map_) munmap(public_map_, map_bytes_);
  }

 private:
  CpuMemory& owner_;
  std::byte* private_map_;
  std::byte* public_map_;
  std::size_t map_bytes_;
};

CpuMemory::CpuMemory(int fd, std::size_t capacity, bool isolated, std::byte* public_base,
                     std::byte* private_base)
    : fd_(fd),
      capacity_(capacity),
      isolated_(isolated),
      public_base_(public_base),
      private_base_(private_base) {
  free_.emplace(0, capacity);
  const auto begin = reinterpret_cast<std::uintptr_t>(public_base);
  ranges_.push_back(Range{begin, begin + capacity, private_base});
}

Result<std::unique_ptr<CpuMemory>> CpuMemory::create(std::size_t capacity, bool isolated) {
  capacity = round_up(std::max<std::size_t>(capacity, page_bytes()), page_bytes());
  const int fd = memfd_create(isolated ? "eps-cpu-isolated-device" : "eps-cpu-device", MFD_CLOEXEC);
  if (fd < 0) return failed_call(StatusCode::kEnvironment, "memfd_create", errno);
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    const int error = errno;
    close(fd);
    return failed_call(StatusCode::kEnvironment, fmt::format("ftruncate of the memfd to {} bytes", capacity),
                       error);
  }
  void* view = mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
  if (view == MAP_FAILED) {
    const int error = errno;
    close(fd);
    return failed_call(StatusCode::kEnvironment, fmt::format("mmap of {} bytes of device memory", capacity),
                       error);
  }
  void* public_view = view;
  if (isolated) {
    public_view = reserve(capacity);
    if (public_view == MAP_FAILED) {
      const int error = errno;
      munmap(view, capacity);
      close(fd);
      return failed_call(StatusCode::kEnvironment,
                         fmt::format("mmap of a {}-byte PROT_NONE reservation", capacity), error);
    }
  }
  return std::unique_ptr<CpuMemory>(new CpuMemory(
      fd, capacity, isolated, static_cast<std::byte*>(public_view), static_cast<std::byte*>(view)));
}

CpuMemory::~CpuMemory() {
  munmap(private_base_, capacity_);
  if (public_base_ != private_base_) munmap(public_base_, capacity_);
  close(fd_);
}

Result<void*> CpuMemory::allocate(std::size_t bytes) {
  const std::size_t size = round_up(bytes, kAlignment);
  const std::lock_guard<std::mutex> lock(blocks_mutex_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::size_t offset = it->first;
    const std::size_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + size, rest);
    used_.emplace(offset, size);
    return static_cast<void*>(public_base_ + offset);
  }
  return Status(
      StatusCode::kEnvironment,
      fmt::format("{} device: allocating {} bytes of device memory failed: no free block that large "
                  "in its {} bytes",
                  isolated_ ? "cpu-isolated" : "cpu", bytes, capacity_));
}

void CpuMemory::release(void* data) noexcept {
  const auto offset = static_cast<std::size_t>(static_cast<std::byte*>(data) - public_base_);
  const std::lock_guard<std::mutex> lock(blocks_mutex_);
  const auto used = used_.find(offset);
  if (used == used_.end()) return;
  std::size_t begin = offset;
  std::size_t size = used->second;
  used_.erase(used);
  if (size >= kPunchBytes) {
    const std::size_t first = round_up(begin, page_bytes());
    const std::size_t last = (begin + size) / page_bytes() * page_bytes();
    if (last > first) {
      (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
                      static_cast<off_t>(last - first));
    }
  }
  auto next = free_.lower_bound(begin);
  if (next != free_.end() && next->first == begin + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(begin, size);
}

// A range holding p, else one ending at p (the one-past-the-end pointer of its last allocation): ranges
// may be adjacent, and an address that starts one must not be taken for the end of the other.
const CpuMemory::Range* CpuMemory::find(std::uintptr_t p) const {
  for (const Range& range : ranges_) {
    if (p >= range.begin && p < range.end) return &range;
  }
  for (const Range& range : ranges_) {
    if (p == range.end) return &range;
  }
  return nullptr;
}

bool CpuMemory::is_device(const void* p) const {
  const std::shared_lock<std::shared_mutex> lock(ranges_mutex_);
  return find(reinterpret_cast<std::uintptr_t>(p)) != nullptr;
}

Result<void*> CpuMemory::translate(const void* p, std::size_t bytes, std::string_view what) const {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  const std::shared_lock<std::shared_mutex> lock(ranges_mutex_);
  const Range* range = find(address);
  if (range == nullptr) return const_cast<void*>(p);
  if (bytes > range->end - address) {
    return invalid_argument(what,
                            "{} bytes at {} run past the end of device memory (its range ends at {:#x})",
                            bytes, p, range->end);
  }
  return static_cast<void*>(range->view + (address - range->begin));
}

void CpuMemory::add_range(const Range& range) {
  const std::unique_lock<std::shared_mutex> lock(ranges_mutex_);
  ranges_.push_back(range);
}

void CpuMemory::remove_range(std::uintptr_t begin) noexcept {
  const std::unique_lock<std::shared_mutex> lock(ranges_mutex_);
  for (auto it = ranges_.begin() + 1; it != ranges_.end(); ++it) {
    if (it->begin == begin) {
      ranges_.erase(it);
      return;
    }
  }
}

Result<IpcHandle> CpuMemory::export_memory(const void* data, std::size_t bytes) const {
  const auto* at = static_cast<const std::byte*>(data);
  const bool in_arena = at >= public_base_ && at < public_base_ + capacity_;
  std::size_t offset = in_arena ? static_cast<std::size_t>(at - public_base_) : 0;
  std::size_t size = 0;
  {
    const std::lock_guard<std::mutex> lock(blocks_mutex_);
    const auto used = used_.find(offset);
    if (in_arena && used != used_.end()) size = used->second;
  }
  if (size == 0) {
    return invalid_argument("export_memory", "{} is not the start of a device allocation of this device",
                            data);
  }
  if (bytes == 0 || bytes > size) {
    return invalid_argument("export_memory.bytes", "must be in [1, {}] (the allocation at {}), got {}", size,
                            data, bytes);
  }
  IpcHandle handle;
  std::snprintf(handle.backend, sizeof handle.backend, "%s", "cpu");
  handle.bytes = bytes;
  const HandleData description{kHandleMagic, static_cast<std::int64_t>(getpid()), fd_, offset};
  std::memcpy(handle.data.data(), &description, sizeof description);
  return handle;
}

Result<std::unique_ptr<MappedMemory>> CpuMemory::import_memory(const IpcHandle& handle) {
  HandleData description;
  std::memcpy(&description, handle.data.data(), sizeof description);
  if (std::string_view(handle.backend, strnlen(handle.backend, sizeof handle.backend)) != "cpu" ||
      description.magic != kHandleMagic || handle.bytes == 0) {
    return invalid_argument("import_memory", "the handle was not exported by a cpu device (backend '{}')",
                            std::string_view(handle.backend, strnlen(handle.backend, sizeof handle.backend)));
  }
  const std::string path = fmt::format("/proc/{}/fd/{}", description.pid, description.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return failed_call(StatusCode::kUnavailable, fmt::format("import_memory: open({})", path), errno);
  const std::size_t first = description.offset / page_bytes() * page_bytes();
  const std::size_t map_bytes = round_up(description.offset + handle.bytes, page_bytes()) - first;
  void* view = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(first));
  const int map_error = errno;
  close(fd);
  if (view == MAP_FAILED) {
    return failed_call(StatusCode::kUnavailable,
                       fmt::format("import_memory: mmap of {} bytes of {}", map_bytes, path), map_error);
  }
  void* public_view = view;
  if (isolated_) {
    public_view = reserve(map_bytes);
    if (public_view == MAP_FAILED) {
      const int error = errno;
      munmap(view, map_bytes);
      return failed_call(StatusCode::kUnavailable, "import_memory: mmap of a PROT_NONE reservation", error);
    }
  }
  const std::size_t skip = description.offset - first;
  std::byte* data = static_cast<std::byte*>(public_view) + skip;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  add_range(Range{begin, begin + handle.bytes, static_cast<std::byte*>(view) + skip});
  return std::unique_ptr<MappedMemory>(
      std::make_unique<Import>(*this, data, handle.bytes, static_cast<std::byte*>(view),
                               static_cast<std::byte*>(public_view), map_bytes));
}

}  // namespace eps::device::cpu
