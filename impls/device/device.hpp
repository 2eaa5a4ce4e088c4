// The Device interface (docs/devices.md): where the data path of an EP layer runs. A device allocates host
// and device memory, runs copies, fills, stream memory operations and the kernels of
// kernels/kernel_args.hpp on ordered queues, times them with events, captures a queue's work as a graph
// and replays it, and exports its memory to other processes. Each backend lives in its own folder and
// registers by name (device_registry.hpp): `cpu` and `cpu-isolated` (always; kernel bodies on host threads,
// cpu/), `cuda` and `hip` (plugins loaded at run time, gpu/).
//
// Queues (docs/devices.md 12.1). A Queue is an ordered stream of operations (a CUDA/HIP stream; on the
// `cpu` devices a worker thread): each operation starts after every operation enqueued before it on the
// same queue has completed, and the enqueue calls may return before it ran. Operations of different queues
// are unordered unless a queue waits for an event recorded on another. Every device has a default queue
// (queue()) and makes more (create_queue()). The synchronous forms below (copy, fill, synchronize) work on
// the default queue and wait for it, as before queues were explicit; launch() enqueues on it.
//
// Stream memory operations (12.2): write_value stores a 32- or 64-bit value once the earlier work of its
// queue is complete, with release semantics (a reader that sees the value sees that work's writes);
// wait_value holds the later work of its queue until the value at an address compares >= (or ==) a value.
// Addresses are device memory, memory imported from another process, or host memory registered with the
// device (register_host_memory). Every wait has a deadline: a wait_value gives up after its timeout on the
// `cpu` devices (the queue then fails, naming the address, the condition and the value last seen); on a
// GPU the wait runs on the GPU and the host's synchronize / Event::wait deadline bounds it.
//
// Events (12.3) mark a point in a queue: done once everything enqueued before record() has completed;
// elapsed_seconds gives the time between two done events of one device.
//
// IPC (12.4): export_memory turns a kDevice allocation into an IpcHandle (plain bytes another process of
// the same node receives, e.g. over MPI); import_memory maps it there (cudaIpcGetMemHandle /
// cudaIpcOpenMemHandle, hipIpc*; `cpu`: the device memory's memfd, reopened through /proc/<pid>/fd).
//
// Graphs (12.6): begin_capture() makes a queue record its operations instead of running them;
// end_capture() returns them as a Graph, and replay() runs the recorded operations in order, as often as
// wanted, with the pointers and values they were captured with (CUDA/HIP graphs; `cpu`: the recorded list).
// Events and synchronization are refused while a queue captures.
//
// Copy ledger (12.7): the device counts every copy between host memory and device memory, whichever API
// made it (synchronous or enqueued copies, replayed graphs); device-to-device and host-to-host copies are
// not counted. copy_ledger() reads the counts, reset_copy_ledger() zeroes them.
//
// Every call returns a Status: a kernel or queue failure surfaces at the next call that waits (synchronize,
// Event::wait, a synchronous copy or fill) and, on the `cpu` devices, at every later call on that queue.
//
// Memory: MemoryKind::kDevice is memory of the device (for `cpu`, shared memory the host may address; for
// `cpu-isolated`, memory the host must not touch outside device operations); MemoryKind::kHost is pinned
// host memory the device copies to and from at full speed (for the `cpu` devices, plain host memory).
// Copies accept any pair of kinds (unified addressing), including pageable host memory.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "impls/device/kernels/kernel_args.hpp"
#include "impls/runtime/deadline.hpp"
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

// Stream memory operations (12.2): the width of the value, and what a wait_value waits for.
enum class ValueWidth : std::uint8_t { k32, k64 };
enum class WaitCondition : std::uint8_t { kGreaterEqual, kEqual };

std::size_t value_bytes(ValueWidth width);              // 4, 8
std::string_view wait_condition_name(WaitCondition c);  // ">=", "=="

// Host<->device copies of a device (12.7), in copies and bytes per direction.
struct CopyLedger {
  std::uint64_t host_to_device_copies = 0;
  std::uint64_t host_to_device_bytes = 0;
  std::uint64_t device_to_host_copies = 0;
  std::uint64_t device_to_host_bytes = 0;

  std::uint64_t copies() const { return host_to_device_copies + device_to_host_copies; }
  std::uint64_t bytes() const { return host_to_device_bytes + device_to_host_bytes; }
  CopyLedger& operator+=(const CopyLedger& other);
  bool operator==(const CopyLedger&) const = default;
};

// The ledger entry of one copy of `bytes` from src to dst, each host or device memory: empty unless the copy
// crosses between host and device.
CopyLedger ledger_entry(bool dst_is_device, bool src_is_device, std::size_t bytes);

// Exported device memory (12.4): plain bytes, sent to another process of the node and imported there.
struct IpcHandle {
  static constexpr std::size_t kDataBytes = 96;
  char backend[16] = {};                     // the exporting backend: "cpu", "cuda", "hip"
  std::uint64_t bytes = 0;                   // of the exported range
  std::array<std::byte, kDataBytes> data{};  // the backend's own description
};

// Memory made addressable to a device that it did not allocate: imported from another process
// (import_memory) or registered host memory (register_host_memory). data() is the address the device's
// operations (and, where host_accessible(), the host) use; the mapping is undone on destruction, which
// must come before the device's.
class MappedMemory {
 public:
  virtual ~MappedMemory() = default;
  MappedMemory(const MappedMemory&) = delete;
  MappedMemory& operator=(const MappedMemory&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 protected:
  MappedMemory(void* data, std::size_t bytes) : data_(data), bytes_(bytes) {}

 private:
  void* data_;
  std::size_t bytes_;
};

// A point in a queue (12.3), made by Device::create_event and placed by Queue::record.
class Event {
 public:
  virtual ~Event() = default;
  // Whether the work enqueued before the event's latest record() has completed (true before any record()).
  // Errors: the failure of the queue it was recorded on.
  virtual Result<bool> done() = 0;
  // Blocks until done(); kEnvironment at the deadline, naming what the queue still runs.
  virtual Status wait(const Deadline& deadline) = 0;
};

// A queue's captured work (12.6), replayed by Queue::replay on a queue of the same device.
class Graph {
 public:
  virtual ~Graph() = default;
  // The host<->device copies one replay makes (counted into the device's ledger at each replay).
  const CopyLedger& copies() const { return copies_; }

 protected:
  explicit Graph(const CopyLedger& copies) : copies_(copies) {}

 private:
  CopyLedger copies_;
};

// An ordered queue of a device (12.1; the header comment). Enqueue calls check their arguments at once
// (kInvalidArgument naming the field) and may return before the operation ran. A queue is used by one host
// thread at a time; it must be destroyed before its device.
class Queue {
 public:
  virtual ~Queue() = default;
  virtual Status copy(void* dst, const void* src, std::size_t bytes) = 0;
  virtual Status fill(void* dst, std::uint8_t value, std::size_t bytes) = 0;
  // Kernel `id` with `args` (the struct KernelOf names, `args_bytes` its size). Prefer run().
  virtual Status launch(KernelId id, const void* args, std::size_t args_bytes) = 0;
  template <typename Args>
  Status run(const Args& args) {
    return launch(KernelOf<Args>::id, &args, sizeof(Args));
  }
  // Stores `value` (< 2^32 for k32) at `address` (aligned to its width) after the earlier work (12.2).
  virtual Status write_value(void* address, std::uint64_t value, ValueWidth width) = 0;
  // Holds later work until the value at `address` compares `condition` `value` (12.2). `timeout_seconds`
  // (> 0) counts from when the wait starts; past it the `cpu` queues fail naming the address and value.
  virtual Status wait_value(const void* address, std::uint64_t value, WaitCondition condition,
                            ValueWidth width, double timeout_seconds) = 0;
  // Places `event` (of this queue's device) after the work enqueued so far.
  virtual Status record(Event& event) = 0;
  // Holds later work of this queue until `event` (of this device, recorded on any of its queues) is done.
  virtual Status wait(Event& event) = 0;
  // Whether every enqueued operation has completed (cudaStreamQuery), without waiting; the queue's failure.
  virtual Result<bool> idle() = 0;
  // Returns once every enqueued operation has completed, or the queue's failure; kEnvironment at the
  // deadline naming what is still pending.
  virtual Status synchronize(const Deadline& deadline) = 0;
  // Graph capture (12.6). begin_capture on a capturing queue, end_capture on one that is not, and
  // record, wait or synchronize while capturing are kInvalidArgument.
  virtual Status begin_capture() = 0;
  virtual Result<std::unique_ptr<Graph>> end_capture() = 0;
  virtual Status replay(const Graph& graph) = 0;
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

  // The default queue, and more queues (kUnavailable with the reason where the backend has none).
  virtual Queue& queue() = 0;
  virtual Result<std::unique_ptr<Queue>> create_queue() = 0;
  virtual Result<std::unique_ptr<Event>> create_event() = 0;
  // Seconds from `start` to `end`, both events of this device, recorded and done (kInvalidArgument else).
  virtual Result<double> elapsed_seconds(Event& start, Event& end) = 0;

  // IPC (12.4). export_memory: `data` must be the start of a kDevice allocation of this device and
  // `bytes` at most its size (kInvalidArgument naming the address otherwise). import_memory: a handle
  // another process exported, of this backend (kInvalidArgument otherwise); kUnavailable naming the call
  // and its error when the mapping is refused.
  virtual Result<IpcHandle> export_memory(const void* data, std::size_t bytes) = 0;
  virtual Result<std::unique_ptr<MappedMemory>> import_memory(const IpcHandle& handle) = 0;
  // Makes host memory this device did not allocate (a shared-memory segment) a target of its operations
  // (cudaHostRegister / hipHostRegister; the `cpu` devices address host memory as it is).
  virtual Result<std::unique_ptr<MappedMemory>> register_host_memory(void* data, std::size_t bytes) = 0;

  // The copy ledger (12.7).
  CopyLedger copy_ledger() const;
  void reset_copy_ledger();

  // The synchronous forms on the default queue: copy and fill complete before they return (and data a
  // kernel wrote is visible to the host after a copy or synchronize()); launch enqueues. Their waits end
  // after timeout_seconds() (kDefaultTimeoutSeconds unless set).
  Status copy(void* dst, const void* src, std::size_t bytes);
  Status fill(void* dst, std::uint8_t value, std::size_t bytes);
  Status synchronize();
  Status launch(KernelId id, const void* args, std::size_t args_bytes) {
    return queue().launch(id, args, args_bytes);
  }
  // Enqueues the kernel of an argument struct on the default queue: device.run(CopyRowsArgs{...}).
  template <typename Args>
  Status run(const Args& args) {
    return launch(KernelOf<Args>::id, &args, sizeof(Args));
  }
  double timeout_seconds() const { return timeout_seconds_; }
  void set_timeout_seconds(double seconds) { timeout_seconds_ = seconds; }

 protected:
  friend class Buffer;
  virtual void release(void* data, MemoryKind kind) noexcept = 0;
  // Backends add every host<->device copy they enqueue (ledger_entry) or replay.
  void record_copies(const CopyLedger& entry);

 private:
  std::atomic<std::uint64_t> ledger_[4] = {};  // the fields of CopyLedger, in order
  double timeout_seconds_ = kDefaultTimeoutSeconds;
};

// The argument checks every backend applies to the stream memory operations (12.2): kInvalidArgument for a
// null or misaligned address, a 32-bit value >= 2^32 or a timeout that is not > 0.
Status check_write_value(const void* address, std::uint64_t value, ValueWidth width);
Status check_wait_value(const void* address, std::uint64_t value, ValueWidth width, double timeout_seconds);

// Polls `done` (an event's, a queue's idle) until it says true or fails; kEnvironment at the deadline with
// `describe` (wait_until's message).
Status wait_until_done(const Deadline& deadline, const std::function<Result<bool>()>& done,
                       const std::function<std::string()>& describe);

// A name of every kernel, in KernelId order (for the fatbinary checks and messages).
std::string_view kernel_name(KernelId id);

}  // namespace eps::device
