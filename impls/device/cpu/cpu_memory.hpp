// Device memory of the `cpu` and `cpu-isolated` devices (docs/devices.md 12.4, 12.5).
//
// Arena. A device's kDevice memory is one memfd (memfd_create) of `capacity` bytes (the machine's memory),
// sparse until touched, from which allocations are carved first-fit at 256-byte alignment; freed blocks
// coalesce, and whole pages of a freed block of 64 KiB or more go back to the system (FALLOC_FL_PUNCH_HOLE).
// Being a file, any allocation can be exported: an IpcHandle names this process, the memfd's descriptor
// and the offset, and the importing process opens /proc/<pid>/fd/<fd> (same node, same user) and maps it.
//
// Two views. The memfd is mapped once read-write: the private view, through which device operations
// (copies, fills, stream memory operations, kernels) reach the memory. On `cpu` the addresses handed out
// (the public view) are that mapping itself, so host code may use them too. On `cpu-isolated` the public
// addresses are a PROT_NONE reservation of the same size: any host load or store there faults (SIGSEGV),
// and an operation translates each address it is given into the private view (translate(): public + the
// range's offset). Imported memory is mapped the same two ways. Host memory (MemoryKind::kHost, pageable
// memory, registered host memory) is not device memory and is never translated.
//
// Ranges. Device addresses are the arena and every live import, each a [begin, end) public range with its
// private view; is_device and translate look them up (a handful of ranges, under a shared lock).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string_view>
#include <vector>

#include "impls/device/device.hpp"
#include "reference/common/status.hpp"

namespace eps::device::cpu {

class CpuMemory {
 public:
  // `capacity` bytes of device memory (rounded up to pages); `isolated`: public addresses are PROT_NONE.
  // kEnvironment naming the failed call (memfd_create, ftruncate, mmap).
  static Result<std::unique_ptr<CpuMemory>> create(std::size_t capacity, bool isolated);
  ~CpuMemory();
  CpuMemory(const CpuMemory&) = delete;
  CpuMemory& operator=(const CpuMemory&) = delete;

  bool isolated() const { return isolated_; }
  std::size_t capacity() const { return capacity_; }

  // A block of at least `bytes` (> 0); kEnvironment when the arena has no free block that large.
  Result<void*> allocate(std::size_t bytes);
  void release(void* data) noexcept;

  // Whether `p` lies in device memory (the arena or an import; a range's end address counts, as the
  // one-past-the-end pointer of its last allocation).
  bool is_device(const void* p) const;
  // The address an operation on [p, p + bytes) uses: the private view inside device memory, `p` itself
  // outside. kInvalidArgument naming `what` when the range starts in device memory and leaves it.
  Result<void*> translate(const void* p, std::size_t bytes, std::string_view what) const;

  // IPC (docs/devices.md 12.4): `data` must start an arena allocation of at least `bytes`.
  Result<IpcHandle> export_memory(const void* data, std::size_t bytes) const;
  Result<std::unique_ptr<MappedMemory>> import_memory(const IpcHandle& handle);

 private:
  struct Range {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    std::byte* view = nullptr;  // the private address of `begin`
  };
  class Import;

  CpuMemory(int fd, std::size_t capacity, bool isolated, std::byte* public_base, std::byte* private_base);
  const Range* find(std::uintptr_t p) const;  // callers hold ranges_mutex_
  void add_range(const Range& range);
  void remove_range(std::uintptr_t begin) noexcept;

  int fd_;
  std::size_t capacity_;
  bool isolated_;
  std::byte* public_base_;
  std::byte* private_base_;

  mutable std::mutex blocks_mutex_;
  std::map<std::size_t, std::size_t> free_;  // offset -> bytes, coalesced
  std::map<std::size_t, std::size_t> used_;  // offset -> bytes

  mutable std::shared_mutex ranges_mutex_;
  std::vector<Range> ranges_;  // [0] is the arena
};

}  // namespace eps::device::cpu
