#include "impls/device/device.hpp"

#include <fmt/format.h>

namespace eps::device {

std::string_view memory_kind_name(MemoryKind kind) { return kind == MemoryKind::kHost ? "host" : "device"; }

std::string_view hmem_interface_name(HmemInterface iface) {
  switch (iface) {
    case HmemInterface::kNone:
      return "none";
    case HmemInterface::kSystem:
      return "system";
    case HmemInterface::kCuda:
      return "cuda";
    case HmemInterface::kRocr:
      return "rocr";
  }
  return "unknown";
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = std::exchange(other.device_, nullptr);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    kind_ = other.kind_;
  }
  return *this;
}

void Buffer::reset() {
  if (device_ != nullptr && data_ != nullptr) device_->release(data_, kind_);
  device_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

std::string Device::describe() const {
  const DeviceProperties& p = properties();
  std::string text = fmt::format("{}:{} {} ({}", p.backend, p.ordinal, p.name, p.architecture);
  if (p.memory_bytes > 0) text += fmt::format(", {} GiB", p.memory_bytes >> 30);
  if (!p.pci_bus_id.empty()) text += fmt::format(", PCI {}", p.pci_bus_id);
  return text + ")";
}

std::string_view kernel_name(KernelId id) {
  switch (id) {
#define EPS_KERNEL_NAME(camel, snake, args) \
  case KernelId::k##camel:                  \
    return #snake;
    EPS_DEVICE_KERNELS(EPS_KERNEL_NAME)
#undef EPS_KERNEL_NAME
    case KernelId::kCount:
      break;
  }
  return "unknown";
}

}  // namespace eps::device
