#include "impls/device/gpu/plugin_device.hpp"

#include <cstdlib>
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

struct LoadedPlugin {
  const eps_device_plugin_v1* api = nullptr;
  std::string path;  // where it was loaded from
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

// A plugin that loaded but does not fit this build stops the search: falling back to another copy would
// hide the stale one.
Status check_plugin(std::string_view backend, const std::string& path, const eps_device_plugin_v1* api) {
  if (api == nullptr) {
    return unavailable(backend, fmt::format("{}: {}() returned no plugin", path, EPS_DEVICE_PLUGIN_SYMBOL));
  }
  if (api->abi_version != EPS_DEVICE_PLUGIN_ABI_VERSION) {
    return unavailable(
        backend, fmt::format("{} has plugin ABI version {}, this epsuite needs {} (rebuild the plugin)", path,
                             api->abi_version, EPS_DEVICE_PLUGIN_ABI_VERSION));
  }
  if (api->backend == nullptr || backend != api->backend) {
    return unavailable(backend, fmt::format("{} is a plugin of backend '{}'", path,
                                            api->backend != nullptr ? api->backend : "(null)"));
  }
  if (api->kernel_count != kKernelCount) {
    return unavailable(
        backend, fmt::format("{} was built with {} kernels, this epsuite has {} (rebuild the plugin)", path,
                             api->kernel_count, kKernelCount));
  }
  const bool complete = api->device_count && api->properties && api->open && api->close && api->allocate &&
                        api->release && api->copy && api->fill && api->synchronize && api->launch &&
                        api->last_error;
  if (!complete) {
    return unavailable(backend, fmt::format("{} leaves entries of its function table empty", path));
  }
  return Status::ok_status();
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
    eps_device_plugin_entry_v1 entry = nullptr;
    const Status resolved = resolve(library, path.c_str(), EPS_DEVICE_PLUGIN_SYMBOL, entry);
    if (!resolved.ok()) return unavailable(backend, resolved.message());
    LoadedPlugin plugin{entry(), path};
    EPS_RETURN_IF_ERROR(check_plugin(backend, path, plugin.api));
    return plugin;
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

// Fields of eps_device_properties_v1 are NUL-terminated by the plugin; this bounds them anyway.
std::string text_field(const char* field, std::size_t size) {
  std::size_t length = 0;
  while (length < size && field[length] != '\0') ++length;
  return std::string(field, length);
}

class PluginDevice final : public Device {
 public:
  PluginDevice(const eps_device_plugin_v1* api, void* context, DeviceProperties properties)
      : api_(api), context_(context), properties_(std::move(properties)) {}
  PluginDevice(const PluginDevice&) = delete;
  PluginDevice& operator=(const PluginDevice&) = delete;
  // Waits for the queue; a failure here cannot be reported (a kernel failure already was, at the last
  // call that waited).
  ~PluginDevice() override { api_->close(context_); }

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
    if (api_->export_dma_buf(context_, data, bytes, &out.fd, &out.offset) != 0) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("{}:{}: export {} bytes as a dma-buf: {}", properties_.backend,
                                properties_.ordinal, bytes, api_->last_error()));
    }
    return out;
  }

  Result<Buffer> allocate(std::size_t bytes, MemoryKind kind) override {
    if (bytes == 0)
      return invalid_argument("allocate", "bytes must be > 0 ({} memory)", memory_kind_name(kind));
    void* data = nullptr;
    if (api_->allocate(context_, bytes, kind == MemoryKind::kHost ? 0 : 1, &data) != 0) {
      return failure(fmt::format("allocate {} bytes of {} memory", bytes, memory_kind_name(kind)));
    }
    return Buffer(this, data, bytes, kind);
  }

  Status copy(void* dst, const void* src, std::size_t bytes) override {
    if (api_->copy(context_, dst, src, bytes) != 0) return failure(fmt::format("copy {} bytes", bytes));
    return Status::ok_status();
  }

  Status fill(void* dst, std::uint8_t value, std::size_t bytes) override {
    if (api_->fill(context_, dst, value, bytes) != 0) return failure(fmt::format("fill {} bytes", bytes));
    return Status::ok_status();
  }

  Status synchronize() override {
    if (api_->synchronize(context_) != 0) return failure("synchronize");
    return Status::ok_status();
  }

  Status launch(KernelId id, const void* args, std::size_t args_bytes) override {
    const int kernel = static_cast<int>(id);
    if (kernel < 0 || kernel >= kKernelCount) {
      return out_of_range("launch: kernel id", 0, kKernelCount - 1, kernel);
    }
    if (args_bytes != kArgsBytes[kernel]) {
      return invalid_argument("launch", "kernel {} takes an argument struct of {} bytes, got {}",
                              kernel_name(id), kArgsBytes[kernel], args_bytes);
    }
    if (api_->launch(context_, kernel, args, args_bytes) != 0) {
      return failure(fmt::format("launch {}", kernel_name(id)));
    }
    return Status::ok_status();
  }

 protected:
  // A failed free is not reportable here; the runtime error it leaves is reported by the next call.
  void release(void* data, MemoryKind kind) noexcept override {
    api_->release(context_, data, kind == MemoryKind::kHost ? 0 : 1);
  }

 private:
  // "cuda:0: <what>: <the plugin's message>"; call it right after the failed plugin call (same thread).
  Status failure(std::string_view what) const {
    return Status(StatusCode::kEnvironment, fmt::format("{}:{}: {}: {}", properties_.backend,
                                                        properties_.ordinal, what, api_->last_error()));
  }

  const eps_device_plugin_v1* api_;
  void* context_;
  DeviceProperties properties_;
};

}  // namespace

Result<int> plugin_device_count(std::string_view backend) {
  EPS_ASSIGN_OR_RETURN(const LoadedPlugin* plugin, plugin_of(backend));
  int count = 0;
  if (plugin->api->device_count(&count) != 0) {
    return unavailable(backend,
                       fmt::format("no {} device ({})", runtime_name(backend), plugin->api->last_error()));
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
  const eps_device_plugin_v1* api = plugin_of(backend).value()->api;
  eps_device_properties_v1 raw{};
  if (api->properties(ordinal, &raw) != 0) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("{}:{}: properties: {}", backend, ordinal, api->last_error()));
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
  const eps_device_plugin_v1* api = plugin_of(backend).value()->api;
  void* context = nullptr;
  if (api->open(ordinal, &context) != 0) {
    return Status(StatusCode::kEnvironment,
                  fmt::format("{}:{}: open: {}", backend, ordinal, api->last_error()));
  }
  return std::unique_ptr<Device>(std::make_unique<PluginDevice>(api, context, std::move(properties)));
}

}  // namespace eps::device
