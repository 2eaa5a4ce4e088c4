#include "impls/device/gpu/plugin_device.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "impls/device/gpu/device_plugin.h"
#include "impls/runtime/dynamic_library.hpp"

namespace eps::device {
namespace {

constexpr int kKernelCount = static_cast<int>(KernelId::kCount);

// sizeof the argument struct of every kernel, in KernelId order.
constexpr std::size_t kArgsBytes[] = {
#define EPS_ARGS_BYTES(camel, snake, args) sizeof(args),
    EPS_DEVICE_KERNELS(EPS_ARGS_BYTES)
#undef EPS_ARGS_BYTES
};
static_assert(sizeof(kArgsBytes) / sizeof(kArgsBytes[0]) == kKernelCount);

// The calls versions 2 and 3 share, with the same signatures.
struct CommonApi {
  const char* backend = nullptr;
  int kernel_count = 0;
  int (*device_count)(int* count) = nullptr;
  int (*properties)(int ordinal, eps_device_properties_v2* out) = nullptr;
  int (*open)(int ordinal, void** context) = nullptr;
  int (*close)(void* context) = nullptr;
  int (*allocate)(void* context, size_t bytes, int kind, void** out) = nullptr;
  int (*release)(void* context, void* data, int kind) = nullptr;
  const char* (*last_error)(void) = nullptr;
  int (*export_dma_buf)(void* context, const void* data, size_t bytes, int* fd, uint64_t* offset) = nullptr;
};

template <typename Table>
CommonApi common_of(const Table& t) {
  return CommonApi{t.backend, t.kernel_count, t.device_count, t.properties, t.open,
                   t.close,   t.allocate,     t.release,      t.last_error, t.export_dma_buf};
}

struct LoadedPlugin {
  int version = 0;  // the ABI version found: 3, or 2 (v3 null: the synchronous subset)
  CommonApi api;
  const eps_device_plugin_v2* v2 = nullptr;
  const eps_device_plugin_v3* v3 = nullptr;
  std::string path;    // where it was loaded from
  std::string symbol;  // the entry symbol it exported
};

// "CUDA", "HIP": the runtime's name in messages.
std::string runtime_name(std::string_view backend) {
  std::string name(backend);
  for (char& c : name) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return name;
}

Status unavailable(std::string_view backend, std::string_view reason) {
  return Status(StatusCode::kUnavailable, fmt::format("{}: {}", backend, reason));
}

// Where the plugin is looked for, in order (plugin_device.hpp).
std::vector<std::string> plugin_candidates(const std::string& soname) {
  const char* directory = std::getenv("EPS_DEVICE_PLUGIN_DIR");
  if (directory != nullptr && *directory != '\0') {
    return {(std::filesystem::path(directory) / soname).string()};
  }
  std::vector<std::string> candidates;
  std::error_code error;
  const std::filesystem::path executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) candidates.push_back((executable.parent_path() / soname).string());
  candidates.push_back(soname);
  return candidates;
}

template <typename Table>
bool complete_v2_part(const Table& t) {
  return t.device_count && t.properties && t.open && t.close && t.allocate && t.release && t.last_error;
}

bool complete(const eps_device_plugin_v2& t) {
  return complete_v2_part(t) && t.copy && t.fill && t.synchronize && t.launch;
}

bool complete(const eps_device_plugin_v3& t) {
  return complete_v2_part(t) && t.export_dma_buf && t.queue_create && t.queue_destroy && t.queue_query &&
         t.copy && t.fill && t.launch && t.write_value && t.wait_value && t.event_create && t.event_destroy &&
         t.event_record && t.event_query && t.queue_wait_event && t.event_elapsed_ms && t.ipc_export &&
         t.ipc_import && t.ipc_close && t.host_register && t.host_unregister && t.capture_begin &&
         t.capture_end && t.graph_launch && t.graph_destroy && t.pointer_kind;
}

// A plugin that loaded but does not fit this build stops the search: falling back to another copy would
// hide the stale one.
template <typename Table>
Status check_plugin(std::string_view backend, const LoadedPlugin& plugin, const Table* table, int version) {
  const std::string& path = plugin.path;
  if (table == nullptr)
    return unavailable(backend, fmt::format("{}: {}() returned no plugin", path, plugin.symbol));
  if (table->abi_version != version) {
    return unavailable(
        backend, fmt::format("{} exports {} but its table has plugin ABI version {} (rebuild the plugin)",
                             path, plugin.symbol, table->abi_version));
  }
  if (table->backend == nullptr || backend != table->backend) {
    return unavailable(backend, fmt::format("{} is a plugin of backend '{}'", path,
                                            table->backend != nullptr ? table->backend : "(null)"));
  }
  if (table->kernel_count != kKernelCount) {
    return unavailable(
        backend, fmt::format("{} was built with {} kernels, this epsuite has {} (rebuild the plugin)", path,
                             table->kernel_count, kKernelCount));
  }
  if (!complete(*table)) {
    return unavailable(backend, fmt::format("{} leaves entries of its function table empty", path));
  }
  return Status::ok_status();
}

// The newest version `library` exports (device_plugin.h), checked.
Result<LoadedPlugin> adopt_plugin(std::string_view backend, void* library, const std::string& path) {
  LoadedPlugin plugin;
  plugin.path = path;
  if (void* entry = dlsym(library, EPS_DEVICE_PLUGIN_SYMBOL_V3); entry != nullptr) {
    plugin.version = EPS_DEVICE_PLUGIN_ABI_V3;
    plugin.symbol = EPS_DEVICE_PLUGIN_SYMBOL_V3;
    plugin.v3 = reinterpret_cast<eps_device_plugin_entry_v3>(entry)();
    EPS_RETURN_IF_ERROR(check_plugin(backend, plugin, plugin.v3, EPS_DEVICE_PLUGIN_ABI_V3));
    plugin.api = common_of(*plugin.v3);
    return plugin;
  }
  for (const char* symbol : {EPS_DEVICE_PLUGIN_SYMBOL_V2, EPS_DEVICE_PLUGIN_SYMBOL_V2_LEGACY}) {
    void* entry = dlsym(library, symbol);
    if (entry == nullptr) continue;
    plugin.version = EPS_DEVICE_PLUGIN_ABI_V2;
    plugin.symbol = symbol;
    plugin.v2 = reinterpret_cast<eps_device_plugin_entry_v2>(entry)();
    EPS_RETURN_IF_ERROR(check_plugin(backend, plugin, plugin.v2, EPS_DEVICE_PLUGIN_ABI_V2));
    plugin.api = common_of(*plugin.v2);
    return plugin;
  }
  return unavailable(backend, fmt::format("{} exports none of {}, {}, {} (not an epsuite device plugin)",
                                          path, EPS_DEVICE_PLUGIN_SYMBOL_V3, EPS_DEVICE_PLUGIN_SYMBOL_V2,
                                          EPS_DEVICE_PLUGIN_SYMBOL_V2_LEGACY));
}

Result<LoadedPlugin> load_plugin(std::string_view backend) {
  const std::string soname = fmt::format("libeps_device_{}.so", backend);
  std::vector<std::string> reasons;
  for (const std::string& path : plugin_candidates(soname)) {
    void* library = dlopen_library(path.c_str());
    if (library == nullptr) {
      reasons.push_back(load_error());
      continue;
    }
    return adopt_plugin(backend, library, path);
  }
  return unavailable(backend, fmt::format("{} cannot be loaded: {}", soname, fmt::join(reasons, "; ")));
}

// Each backend's plugin, loaded once; a failure is kept and reported each time.
Result<const LoadedPlugin*> plugin_of(std::string_view backend) {
  static std::mutex mutex;
  static std::map<std::string, Result<LoadedPlugin>, std::less<>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(backend);
  if (it == loaded.end()) it = loaded.emplace(std::string(backend), load_plugin(backend)).first;
  if (!it->second.ok()) return it->second.status();
  return &it->second.value();
}

// Fields of eps_device_properties_v2 are NUL-terminated by the plugin; this bounds them anyway.
std::string text_field(const char* field, std::size_t size) {
  std::size_t length = 0;
  while (length < size && field[length] != '\0') ++length;
  return std::string(field, length);
}

class PluginDevice;

// An event, queue, graph or mapping of a PluginDevice holds its device and the plugin's handle.
class PluginEvent final : public Event {
 public:
  PluginEvent(PluginDevice& device, void* handle) : device_(device), handle_(handle) {}
  ~PluginEvent() override;
  Result<bool> done() override;
  Status wait(const Deadline& deadline) override;
  const PluginDevice& device() const { return device_; }
  void* handle() const { return handle_; }
  bool recorded = false;

 private:
  PluginDevice& device_;
  void* handle_;
};

class PluginGraph final : public Graph {
 public:
  PluginGraph(PluginDevice& device, void* handle, const CopyLedger& copies)
      : Graph(copies), device_(device), handle_(handle) {}
  ~PluginGraph() override;
  const PluginDevice& device() const { return device_; }
  void* handle() const { return handle_; }

 private:
  PluginDevice& device_;
  void* handle_;
};

class PluginMapping final : public MappedMemory {
 public:
  enum class Kind { kImport, kHostRegistration };
  PluginMapping(PluginDevice& device, Kind kind, void* data, std::size_t bytes, void* host)
      : MappedMemory(data, bytes), device_(device), kind_(kind), host_(host) {}
  ~PluginMapping() override;

 private:
  PluginDevice& device_;
  Kind kind_;
  void* host_;  // the registered host address (kHostRegistration)
};

class PluginQueue final : public Queue {
 public:
  PluginQueue(PluginDevice& device, void* handle, int index)
      : device_(device), handle_(handle), index_(index) {}
  ~PluginQueue() override;
  PluginQueue(const PluginQueue&) = delete;
  PluginQueue& operator=(const PluginQueue&) = delete;

  Status copy(void* dst, const void* src, std::size_t bytes) override;
  Status fill(void* dst, std::uint8_t value, std::size_t bytes) override;
  Status launch(KernelId id, const void* args, std::size_t args_bytes) override;
  Status write_value(void* address, std::uint64_t value, ValueWidth width) override;
  Status wait_value(const void* address, std::uint64_t value, WaitCondition condition, ValueWidth width,
                    double timeout_seconds) override;
  Status record(Event& event) override;
  Status wait(Event& event) override;
  Result<bool> idle() override;
  Status synchronize(const Deadline& deadline) override;
  Status begin_capture() override;
  Result<std::unique_ptr<Graph>> end_capture() override;
  Status replay(const Graph& graph) override;

 private:
  std::string name() const;
  Status not_capturing(std::string_view call) const;
  void count(const CopyLedger& entry);

  PluginDevice& device_;
  void* handle_;  // null: the context's default queue
  int index_;
  bool capturing_ = false;
  CopyLedger captured_copies_;
};

class PluginDevice final : public Device {
 public:
  PluginDevice(const LoadedPlugin& plugin, void* context, DeviceProperties properties)
      : plugin_(plugin),
        api_(plugin.api),
        v3_(plugin.v3),
        context_(context),
        properties_(std::move(properties)),
        default_queue_(std::make_unique<PluginQueue>(*this, nullptr, 0)) {}
  PluginDevice(const PluginDevice&) = delete;
  PluginDevice& operator=(const PluginDevice&) = delete;
  // Waits for the queue; a failure here cannot be reported (a kernel failure already was, at the last
  // call that waited).
  ~PluginDevice() override {
    default_queue_.reset();
    api_.close(context_);
  }

  const DeviceProperties& properties() const override { return properties_; }
  bool host_accessible() const override { return false; }  // GPU memory: the host stages through copies
  HmemInterface hmem_interface() const override {
    return properties_.backend == "hip" ? HmemInterface::kRocr : HmemInterface::kCuda;
  }

  Result<DmaBuf> export_dma_buf(const void* data, std::size_t bytes) override {
    if (data == nullptr || bytes == 0)
      return invalid_argument("export_dma_buf", "needs a non-null range of at least 1 byte, got {} bytes",
                              bytes);
    DmaBuf out;
    out.bytes = bytes;
    if (api_.export_dma_buf == nullptr ||
        api_.export_dma_buf(context_, data, bytes, &out.fd, &out.offset) != 0) {
      return Status(
          StatusCode::kUnavailable,
          fmt::format(
              "{}:{}: export {} bytes as a dma-buf: {}", properties_.backend, properties_.ordinal, bytes,
              api_.export_dma_buf == nullptr ? "the plugin has no export_dma_buf" : api_.last_error()));
    }
    return out;
  }

  Result<Buffer> allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0)
      return invalid_argument("allocate", "bytes must be > 0 ({} memory)", memory_kind_name(kind));
    void* data = nullptr;
    if (api_.allocate(context_, bytes, kind == MemoryKind::kHost ? 0 : 1, &data) != 0) {
      return failure(fmt::format("allocate {} bytes of {} memory", bytes, memory_kind_name(kind)));
    }
    if (kind == MemoryKind::kDevice) {
      const std::lock_guard<std::mutex> lock(allocations_mutex_);
      allocations_[reinterpret_cast<std::uintptr_t>(data)] = bytes;
    }
    return Buffer(this, data, bytes, kind);
  }

  Queue& queue() override { return *default_queue_; }
  Result<std::unique_ptr<Queue>> create_queue() override {
    EPS_RETURN_IF_ERROR(needs_v3("create_queue"));
    void* handle = nullptr;
    if (v3_->queue_create(context_, &handle) != 0) return failure("create a queue");
    return std::unique_ptr<Queue>(std::make_unique<PluginQueue>(*this, handle, ++queues_made_));
  }
  Result<std::unique_ptr<Event>> create_event() override {
    EPS_RETURN_IF_ERROR(needs_v3("create_event"));
    void* handle = nullptr;
    if (v3_->event_create(context_, &handle) != 0) return failure("create an event");
    return std::unique_ptr<Event>(std::make_unique<PluginEvent>(*this, handle));
  }
  Result<double> elapsed_seconds(Event& start, Event& end) override {
    EPS_RETURN_IF_ERROR(needs_v3("elapsed_seconds"));
    EPS_ASSIGN_OR_RETURN(PluginEvent * from, own_event(start, "elapsed_seconds.start"));
    EPS_ASSIGN_OR_RETURN(PluginEvent * to, own_event(end, "elapsed_seconds.end"));
    for (PluginEvent* event : {from, to}) {
      EPS_ASSIGN_OR_RETURN(const bool done, event->done());
      if (!done || !event->recorded) {
        return invalid_argument(event == from ? "elapsed_seconds.start" : "elapsed_seconds.end",
                                "the event is not recorded and done (wait for it first)");
      }
    }
    float milliseconds = 0;
    if (v3_->event_elapsed_ms(context_, from->handle(), to->handle(), &milliseconds) != 0) {
      return failure("elapsed time between two events");
    }
    return static_cast<double>(milliseconds) * 1e-3;
  }

  Result<IpcHandle> export_memory(const void* data, std::size_t bytes) override {
    EPS_RETURN_IF_ERROR(needs_v3("export_memory"));
    std::size_t size = 0;
    {
      const std::lock_guard<std::mutex> lock(allocations_mutex_);
      const auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(data));
      if (it != allocations_.end()) size = it->second;
    }
    if (size == 0) {
      return invalid_argument("export_memory", "{} is not the start of a device allocation of {}:{}", data,
                              properties_.backend, properties_.ordinal);
    }
    if (bytes == 0 || bytes > size) {
      return invalid_argument("export_memory.bytes", "must be in [1, {}] (the allocation at {}), got {}",
                              size, data, bytes);
    }
    static_assert(EPS_DEVICE_IPC_HANDLE_BYTES <= IpcHandle::kDataBytes);
    IpcHandle handle;
    std::snprintf(handle.backend, sizeof handle.backend, "%s", properties_.backend.c_str());
    handle.bytes = bytes;
    if (v3_->ipc_export(context_, data, handle.data.data()) != 0) {
      return failure(fmt::format("export {} bytes of device memory for another process", bytes),
                     StatusCode::kUnavailable);
    }
    return handle;
  }

  Result<std::unique_ptr<MappedMemory>> import_memory(const IpcHandle& handle) override {
    EPS_RETURN_IF_ERROR(needs_v3("import_memory"));
    const std::string backend(handle.backend, strnlen(handle.backend, sizeof handle.backend));
    if (backend != properties_.backend || handle.bytes == 0) {
      return invalid_argument("import_memory", "the handle was exported by backend '{}', not {}", backend,
                              properties_.backend);
    }
    void* data = nullptr;
    if (v3_->ipc_import(context_, handle.data.data(), &data) != 0) {
      return failure(fmt::format("import {} bytes of another process's device memory", handle.bytes),
                     StatusCode::kUnavailable);
    }
    return std::unique_ptr<MappedMemory>(std::make_unique<PluginMapping>(
        *this, PluginMapping::Kind::kImport, data, static_cast<std::size_t>(handle.bytes), nullptr));
  }

  Result<std::unique_ptr<MappedMemory>> register_host_memory(void* data, std::size_t bytes) override {
    EPS_RETURN_IF_ERROR(needs_v3("register_host_memory"));
    if (data == nullptr || bytes == 0) {
      return invalid_argument("register_host_memory",
                              "needs a non-null range of at least 1 byte, got {} bytes", bytes);
    }
    void* device_address = nullptr;
    if (v3_->host_register(context_, data, bytes, &device_address) != 0) {
      return failure(fmt::format("register {} bytes of host memory", bytes), StatusCode::kUnavailable);
    }
    return std::unique_ptr<MappedMemory>(std::make_unique<PluginMapping>(
        *this, PluginMapping::Kind::kHostRegistration, device_address, bytes, data));
  }

  // For the queues, events, graphs and mappings of this device.
  const LoadedPlugin& plugin() const { return plugin_; }
  const eps_device_plugin_v3* v3() const { return v3_; }
  void* context() const { return context_; }
  // kUnavailable naming `call` where the plugin has ABI version 2 only.
  Status needs_v3(std::string_view call) const {
    if (v3_ != nullptr) return Status();
    return Status(
        StatusCode::kUnavailable,
        fmt::format("{}:{}: {}: {} has device plugin ABI version 2 (symbol {}), which has no queues, "
                    "events, stream memory operations, IPC or graphs (rebuild the plugin for "
                    "version 3)",
                    properties_.backend, properties_.ordinal, call, plugin_.path, plugin_.symbol));
  }
  // "cuda:0: <what>: <the plugin's message>"; call it right after the failed plugin call (same thread).
  Status failure(std::string_view what, StatusCode code = StatusCode::kEnvironment) const {
    return Status(code, fmt::format("{}:{}: {}: {}", properties_.backend, properties_.ordinal, what,
                                    api_.last_error()));
  }
  Result<PluginEvent*> own_event(Event& event, std::string_view field) {
    auto* plugin_event = dynamic_cast<PluginEvent*>(&event);
    if (plugin_event == nullptr || &plugin_event->device() != this) {
      return invalid_argument(field, "the event was not made by {}:{}", properties_.backend,
                              properties_.ordinal);
    }
    return plugin_event;
  }
  // Whether `pointer` is device memory (12.7): the plugin says so (version 3); version 2 knows only this
  // device's own allocations.
  bool is_device(const void* pointer) const {
    if (v3_ != nullptr) {
      int kind = 0;
      return v3_->pointer_kind(context_, pointer, &kind) == 0 && kind == 1;
    }
    const auto at = reinterpret_cast<std::uintptr_t>(pointer);
    const std::lock_guard<std::mutex> lock(allocations_mutex_);
    auto it = allocations_.upper_bound(at);
    if (it == allocations_.begin()) return false;
    --it;
    return at < it->first + it->second;
  }
  void add_copies(const CopyLedger& entry) { record_copies(entry); }

 protected:
  // A failed free is not reportable here; the runtime error it leaves is reported by the next call.
  void release(void* data, MemoryKind kind) noexcept override {
    if (kind == MemoryKind::kDevice) {
      const std::lock_guard<std::mutex> lock(allocations_mutex_);
      allocations_.erase(reinterpret_cast<std::uintptr_t>(data));
    }
    api_.release(context_, data, kind == MemoryKind::kHost ? 0 : 1);
  }

 private:
  const LoadedPlugin& plugin_;
  CommonApi api_;
  const eps_device_plugin_v3* v3_;
  void* context_;
  DeviceProperties properties_;
  mutable std::mutex allocations_mutex_;
  std::map<std::uintptr_t, std::size_t> allocations_;  // kDevice allocations: start -> bytes
  std::unique_ptr<PluginQueue> default_queue_;
  std::atomic<int> queues_made_{0};
};

PluginEvent::~PluginEvent() { device_.v3()->event_destroy(device_.context(), handle_); }

Result<bool> PluginEvent::done() {
  int done = 0;
  if (device_.v3()->event_query(device_.context(), handle_, &done) != 0)
    return device_.failure("event query");
  return done != 0;
}

Status PluginEvent::wait(const Deadline& deadline) {
  return wait_until_done(
      deadline, [this] { return done(); },
      [this] {
        return fmt::format("an event of {}:{} (the work before its record still runs)",
                           device_.properties().backend, device_.properties().ordinal);
      });
}

PluginGraph::~PluginGraph() { device_.v3()->graph_destroy(device_.context(), handle_); }

PluginMapping::~PluginMapping() {
  if (kind_ == Kind::kImport) {
    device_.v3()->ipc_close(device_.context(), data());
  } else {
    device_.v3()->host_unregister(device_.context(), host_);
  }
}

PluginQueue::~PluginQueue() {
  if (handle_ != nullptr) device_.v3()->queue_destroy(device_.context(), handle_);
}

std::string PluginQueue::name() const {
  const DeviceProperties& p = device_.properties();
  return index_ == 0 ? fmt::format("{}:{} default queue", p.backend, p.ordinal)
                     : fmt::format("{}:{} queue {}", p.backend, p.ordinal, index_);
}

Status PluginQueue::not_capturing(std::string_view call) const {
  if (!capturing_) return Status();
  return invalid_argument(
      call, "{} is capturing a graph{}", name(),
      call == "synchronize" ? " (call end_capture first)" : ": events cannot be captured");
}

void PluginQueue::count(const CopyLedger& entry) {
  if (capturing_) {
    captured_copies_ += entry;
  } else {
    device_.add_copies(entry);
  }
}

Status PluginQueue::copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return Status();
  if (dst == nullptr || src == nullptr) {
    return invalid_argument("copy", "needs non-null addresses for {} bytes (dst {}, src {})", bytes, dst,
                            src);
  }
  const eps_device_plugin_v3* v3 = device_.v3();
  const int rc = v3 != nullptr ? v3->copy(device_.context(), handle_, dst, src, bytes)
                               : device_.plugin().v2->copy(device_.context(), dst, src, bytes);
  if (rc != 0) return device_.failure(fmt::format("copy {} bytes", bytes));
  count(ledger_entry(device_.is_device(dst), device_.is_device(src), bytes));
  return Status::ok_status();
}

Status PluginQueue::fill(void* dst, std::uint8_t value, std::size_t bytes) {
  if (bytes == 0) return Status();
  const eps_device_plugin_v3* v3 = device_.v3();
  const int rc = v3 != nullptr ? v3->fill(device_.context(), handle_, dst, value, bytes)
                               : device_.plugin().v2->fill(device_.context(), dst, value, bytes);
  if (rc != 0) return device_.failure(fmt::format("fill {} bytes", bytes));
  return Status::ok_status();
}

Status PluginQueue::launch(KernelId id, const void* args, std::size_t args_bytes) {
  const int kernel = static_cast<int>(id);
  if (kernel < 0 || kernel >= kKernelCount) {
    return out_of_range("launch: kernel id", 0, kKernelCount - 1, kernel);
  }
  if (args_bytes != kArgsBytes[kernel]) {
    return invalid_argument("launch", "kernel {} takes an argument struct of {} bytes, got {}",
                            kernel_name(id), kArgsBytes[kernel], args_bytes);
  }
  const eps_device_plugin_v3* v3 = device_.v3();
  const int rc = v3 != nullptr ? v3->launch(device_.context(), handle_, kernel, args, args_bytes)
                               : device_.plugin().v2->launch(device_.context(), kernel, args, args_bytes);
  if (rc != 0) return device_.failure(fmt::format("launch {}", kernel_name(id)));
  return Status::ok_status();
}

Status PluginQueue::write_value(void* address, std::uint64_t value, ValueWidth width) {
  EPS_RETURN_IF_ERROR(device_.needs_v3("write_value"));
  EPS_RETURN_IF_ERROR(check_write_value(address, value, width));
  if (device_.v3()->write_value(device_.context(), handle_, address, value,
                                static_cast<int>(value_bytes(width))) != 0) {
    return device_.failure(fmt::format("write_value of {} at {}", value, address));
  }
  return Status::ok_status();
}

Status PluginQueue::wait_value(const void* address, std::uint64_t value, WaitCondition condition,
                               ValueWidth width, double timeout_seconds) {
  EPS_RETURN_IF_ERROR(device_.needs_v3("wait_value"));
  EPS_RETURN_IF_ERROR(check_wait_value(address, value, width, timeout_seconds));
  if (device_.v3()->wait_value(device_.context(), handle_, address, value,
                               static_cast<int>(value_bytes(width)),
                               condition == WaitCondition::kEqual ? 1 : 0, timeout_seconds) != 0) {
    return device_.failure(
        fmt::format("wait_value {} {} at {}", wait_condition_name(condition), value, address));
  }
  return Status::ok_status();
}

Status PluginQueue::record(Event& event) {
  EPS_RETURN_IF_ERROR(device_.needs_v3("record"));
  EPS_RETURN_IF_ERROR(not_capturing("record"));
  EPS_ASSIGN_OR_RETURN(PluginEvent * plugin_event, device_.own_event(event, "record"));
  if (device_.v3()->event_record(device_.context(), plugin_event->handle(), handle_) != 0) {
    return device_.failure("record an event");
  }
  plugin_event->recorded = true;
  return Status::ok_status();
}

Status PluginQueue::wait(Event& event) {
  EPS_RETURN_IF_ERROR(device_.needs_v3("wait"));
  EPS_RETURN_IF_ERROR(not_capturing("wait"));
  EPS_ASSIGN_OR_RETURN(PluginEvent * plugin_event, device_.own_event(event, "wait"));
  if (device_.v3()->queue_wait_event(device_.context(), handle_, plugin_event->handle()) != 0) {
    return device_.failure("wait for an event");
  }
  return Status::ok_status();
}

Result<bool> PluginQueue::idle() {
  const eps_device_plugin_v3* v3 = device_.v3();
  if (v3 == nullptr) {  // version 2: synchronize is all there is
    if (device_.plugin().v2->synchronize(device_.context()) != 0) return device_.failure("synchronize");
    return true;
  }
  int idle = 0;
  if (v3->queue_query(device_.context(), handle_, &idle) != 0)
    return device_.failure(fmt::format("query {}", name()));
  return idle != 0;
}

Status PluginQueue::synchronize(const Deadline& deadline) {
  EPS_RETURN_IF_ERROR(not_capturing("synchronize"));
  return wait_until_done(
      deadline, [this] { return idle(); },
      [this] { return fmt::format("{} (a kernel, copy or wait_value still runs)", name()); });
}

Status PluginQueue::begin_capture() {
  EPS_RETURN_IF_ERROR(device_.needs_v3("begin_capture"));
  if (capturing_) return invalid_argument("begin_capture", "{} is capturing a graph already", name());
  if (device_.v3()->capture_begin(device_.context(), handle_) != 0)
    return device_.failure("begin a graph capture");
  capturing_ = true;
  captured_copies_ = CopyLedger{};
  return Status::ok_status();
}

Result<std::unique_ptr<Graph>> PluginQueue::end_capture() {
  EPS_RETURN_IF_ERROR(device_.needs_v3("end_capture"));
  if (!capturing_)
    return invalid_argument("end_capture", "{} is not capturing (call begin_capture first)", name());
  capturing_ = false;
  void* graph = nullptr;
  if (device_.v3()->capture_end(device_.context(), handle_, &graph) != 0)
    return device_.failure("end a graph capture");
  return std::unique_ptr<Graph>(std::make_unique<PluginGraph>(device_, graph, captured_copies_));
}

Status PluginQueue::replay(const Graph& graph) {
  EPS_RETURN_IF_ERROR(device_.needs_v3("replay"));
  const auto* plugin_graph = dynamic_cast<const PluginGraph*>(&graph);
  if (plugin_graph == nullptr || &plugin_graph->device() != &device_) {
    return invalid_argument("replay", "the graph was not captured on {}", name());
  }
  if (device_.v3()->graph_launch(device_.context(), plugin_graph->handle(), handle_) != 0) {
    return device_.failure("replay a graph");
  }
  count(graph.copies());
  return Status::ok_status();
}

}  // namespace

Result<int> plugin_device_count(std::string_view backend) {
  EPS_ASSIGN_OR_RETURN(const LoadedPlugin* plugin, plugin_of(backend));
  int count = 0;
  if (plugin->api.device_count(&count) != 0) {
    return unavailable(backend,
                       fmt::format("no {} device ({})", runtime_name(backend), plugin->api.last_error()));
  }
  if (count <= 0) {
    return unavailable(backend, fmt::format("no {} device (the {} runtime counts {})", runtime_name(backend),
                                            runtime_name(backend), count));
  }
  return count;
}

Result<DeviceProperties> plugin_device_properties(std::string_view backend, int ordinal) {
  EPS_ASSIGN_OR_RETURN(int count, plugin_device_count(backend));
  if (ordinal < 0 || ordinal >= count) {
    return out_of_range(fmt::format("{} device ordinal", backend), 0, count - 1, ordinal);
  }
  const CommonApi& api = plugin_of(backend).value()->api;
  eps_device_properties_v2 raw{};
  if (api.properties(ordinal, &raw) != 0) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("{}:{}: properties: {}", backend, ordinal, api.last_error()));
  }
  DeviceProperties properties;
  properties.backend = std::string(backend);
  properties.ordinal = ordinal;
  properties.name = text_field(raw.name, sizeof(raw.name));
  properties.architecture = text_field(raw.architecture, sizeof(raw.architecture));
  properties.memory_bytes = static_cast<std::size_t>(raw.memory_bytes);
  properties.pci_bus_id = text_field(raw.pci_bus_id, sizeof(raw.pci_bus_id));
  properties.dma_buf = raw.dma_buf_supported != 0;
  return properties;
}

Result<std::unique_ptr<Device>> open_plugin_device(std::string_view backend, int ordinal) {
  EPS_ASSIGN_OR_RETURN(DeviceProperties properties, plugin_device_properties(backend, ordinal));
  const LoadedPlugin& plugin = *plugin_of(backend).value();
  void* context = nullptr;
  if (plugin.api.open(ordinal, &context) != 0) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("{}:{}: open: {}", backend, ordinal, plugin.api.last_error()));
  }
  return std::unique_ptr<Device>(std::make_unique<PluginDevice>(plugin, context, std::move(properties)));
}

}  // namespace eps::device
