// The Device interface (docs/devices.md): where the data path of an EP layer runs. A device allocates host
// and device memory, copies, fills, synchronizes and runs the kernels of kernels/kernel_args.hpp. Each
// backend lives in its own folder and registers by name (device_registry.hpp): `cpu` (always; runs the
// kernel bodies on host threads), `cuda` and `hip` (plugins loaded at run time, gpu/).
//
// Ordering: one in-order queue per device. launch() enqueues a kernel and may return before it ran; copy()
// and fill() are ordered after everything enqueued before them and complete before they return, so data
// a kernel wrote is visible to the host after a copy or synchronize(). Every call returns a Status: a
// kernel failure on a GPU surfaces at the next call that waits (copy, fill, synchronize).
//
// Memory: MemoryKind::kDevice is memory of the device (for `cpu`, host memory); MemoryKind::kHost is pinned
// host memory the device copies to and from at full speed (for `cpu`, plain host memory). copy() accepts
// any pair of kinds (unified addressing), including pageable host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "impls/device/kernels/kernel_args.hpp"
#include "reference/common/status.hpp"

namespace eps::device {

enum class MemoryKind : std::uint8_t { kHost, kDevice };

std::string_view memory_kind_name(MemoryKind kind);  // "host", "device"

// How a NIC addresses a device's kDevice memory (docs/devices.md "Memory kinds"): the libfabric FI_HMEM
// interface it is registered with. kNone: plain host memory, registered as such (the `cpu` device); kSystem:
// host memory registered through FI_HMEM with FI_HMEM_SYSTEM (a `cpu` device declared so, what the tests of
// that path use); kCuda / kRocr: GPU memory (FI_HMEM_CUDA / FI_HMEM_ROCR).
enum class HmemInterface : std::uint8_t { kNone, kSystem, kCuda, kRocr };

std::string_view hmem_interface_name(HmemInterface iface);  // "none", "system", "cuda", "rocr"

// A dma-buf exported for a range of device memory (verbs ibv_reg_dmabuf_mr): the range starts `offset`
// bytes into the dma-buf `fd`. The receiver owns the descriptor and closes it once registered.
struct DmaBuf {
  int fd = -1;
  std::uint64_t offset = 0;
  std::size_t bytes = 0;  // of the exported range, from `offset`
};

class Device;

// An allocation of a Device, freed when the Buffer is destroyed. The device must outlive its buffers.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device* device, void* data, std::size_t bytes, MemoryKind kind)
      : device_(device), data_(data), bytes_(bytes), kind_(kind) {}
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  void reset();

 private:
  Device* device_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryKind kind_ = MemoryKind::kDevice;
};

// What `epsuite info` and results show of a device.
struct DeviceProperties {
  std::string backend;  // "cpu", "cuda", "hip"
  int ordinal = 0;
  std::string name;          // "NVIDIA H100 80GB HBM3", or the CPU model
  std::string architecture;  // "sm_90", "gfx90a", "x86-64 avx512"
  std::size_t memory_bytes = 0;
  std::string pci_bus_id;  // "0000:1b:00.0"; empty for `cpu`
  bool dma_buf = false;    // the driver exports device memory as dma-buf (verbs registration of GPU memory)
};

class Device {
 public:
  virtual ~Device() = default;
  virtual const DeviceProperties& properties() const = 0;
  // True when the host can read and write this device's kDevice memory directly (the `cpu` device), so
  // host code and host-side data structures may be used on it without copies.
  virtual bool host_accessible() const = 0;
  // The FI_HMEM interface a fabric registers this device's kDevice memory with (HmemInterface above).
  virtual HmemInterface hmem_interface() const = 0;
  // Exports [data, data + bytes) of this device's kDevice memory as a dma-buf for NIC registration (CUDA:
  // cuMemGetHandleForAddressRange, ROCr: hsa_amd_portable_export_dmabuf). kInvalidArgument for 0 bytes or a
  // null pointer; kUnavailable where the device or its driver cannot export (the `cpu` device never can: its
  // memory is host memory, registered directly), with the reason.
  virtual Result<DmaBuf> export_dma_buf(const void* data, std::size_t bytes) = 0;
  // One line for headers: "cuda:0 NVIDIA H100 (sm_90, 80 GiB, PCI 0000:1b:00.0)".
  std::string describe() const;

  // kInvalidArgument for 0 bytes; kEnvironment when the memory is exhausted (naming bytes and kind).
  virtual Result<Buffer> allocate(std::size_t bytes, MemoryKind kind) = 0;
  virtual Status copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status fill(void* dst, std::uint8_t value, std::size_t bytes) = 0;
  virtual Status synchronize() = 0;
  // Enqueues kernel `id` with `args` (the struct KernelOf names, `args_bytes` its size). Prefer run().
  virtual Status launch(KernelId id, const void* args, std::size_t args_bytes) = 0;

  // Enqueues the kernel of an argument struct: device.run(CopyRowsArgs{...}).
  template <typename Args>
  Status run(const Args& args) {
    return launch(KernelOf<Args>::id, &args, sizeof(Args));
  }

 protected:
  friend class Buffer;
  virtual void release(void* data, MemoryKind kind) noexcept = 0;
};

// A name of every kernel, in KernelId order (for the fatbinary checks and messages).
std::string_view kernel_name(KernelId id);

}  // namespace eps::device
