#include "impls/device/device.hpp"

#include <functional>

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

std::size_t value_bytes(ValueWidth width) { return width == ValueWidth::k32 ? 4 : 8; }

std::string_view wait_condition_name(WaitCondition c) { return c == WaitCondition::kEqual ? "==" : ">="; }

CopyLedger& CopyLedger::operator+=(const CopyLedger& other) {
  host_to_device_copies += other.host_to_device_copies;
  host_to_device_bytes += other.host_to_device_bytes;
  device_to_host_copies += other.device_to_host_copies;
  device_to_host_bytes += other.device_to_host_bytes;
  return *this;
}

CopyLedger ledger_entry(bool dst_is_device, bool src_is_device, std::size_t bytes) {
  CopyLedger entry;
  if (dst_is_device && !src_is_device) {
    entry.host_to_device_copies = 1;
    entry.host_to_device_bytes = bytes;
  } else if (!dst_is_device && src_is_device) {
    entry.device_to_host_copies = 1;
    entry.device_to_host_bytes = bytes;
  }
  return entry;
}

CopyLedger Device::copy_ledger() const {
  return CopyLedger{ledger_[0].load(std::memory_order_relaxed), ledger_[1].load(std::memory_order_relaxed),
                    ledger_[2].load(std::memory_order_relaxed), ledger_[3].load(std::memory_order_relaxed)};
}

void Device::reset_copy_ledger() {
  for (auto& field : ledger_) field.store(0, std::memory_order_relaxed);
}

void Device::record_copies(const CopyLedger& entry) {
  const std::uint64_t fields[] = {entry.host_to_device_copies, entry.host_to_device_bytes,
                                  entry.device_to_host_copies, entry.device_to_host_bytes};
  for (int i = 0; i < 4; ++i) {
    if (fields[i] != 0) ledger_[i].fetch_add(fields[i], std::memory_order_relaxed);
  }
}

Status Device::copy(void* dst, const void* src, std::size_t bytes) {
  EPS_RETURN_IF_ERROR(queue().copy(dst, src, bytes));
  return queue().synchronize(Deadline(timeout_seconds_));
}

Status Device::fill(void* dst, std::uint8_t value, std::size_t bytes) {
  EPS_RETURN_IF_ERROR(queue().fill(dst, value, bytes));
  return queue().synchronize(Deadline(timeout_seconds_));
}

Status Device::synchronize() { return queue().synchronize(Deadline(timeout_seconds_)); }

namespace {

// The checks write_value and wait_value share, in the name of `call`.
Status check_value_operation(std::string_view call, const void* address, std::uint64_t value,
                             ValueWidth width) {
  const std::size_t size = value_bytes(width);
  if (address == nullptr || reinterpret_cast<std::uintptr_t>(address) % size != 0) {
    return invalid_argument(fmt::format("{}.address", call),
                            "must be a non-null address aligned to {} bytes, got {}", size, address);
  }
  if (width == ValueWidth::k32 && value > 0xFFFF'FFFFull) {
    return invalid_argument(fmt::format("{}.value", call), "a 32-bit operation takes values < 2^32, got {}",
                            value);
  }
  return Status();
}

}  // namespace

Status check_write_value(const void* address, std::uint64_t value, ValueWidth width) {
  return check_value_operation("write_value", address, value, width);
}

Status check_wait_value(const void* address, std::uint64_t value, ValueWidth width, double timeout_seconds) {
  EPS_RETURN_IF_ERROR(check_value_operation("wait_value", address, value, width));
  if (!(timeout_seconds > 0) || timeout_seconds > 1e9) {
    return invalid_argument("wait_value.timeout_seconds", "must be in (0, 1e9], got {}", timeout_seconds);
  }
  return Status();
}

Status wait_until_done(const Deadline& deadline, const std::function<Result<bool>()>& done,
                       const std::function<std::string()>& describe) {
  Status failure;
  EPS_RETURN_IF_ERROR(wait_until(
      deadline,
      [&] {
        const Result<bool> is_done = done();
        if (!is_done.ok()) failure = is_done.status();
        return !is_done.ok() || *is_done;
      },
      describe));
  return failure;
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
