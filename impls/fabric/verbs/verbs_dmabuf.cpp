#include "impls/fabric/verbs/verbs_dmabuf.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <fmt/format.h>

#include "impls/fabric/verbs/verbs_check.hpp"

namespace eps::fabric::verbs {

std::string VerbsMemoryPlan::staging() const {
  switch (kind) {
    case VerbsRegistration::kHost:
      return "none";
    case VerbsRegistration::kDmaBuf:
      return "dma-buf";
    case VerbsRegistration::kStaged:
      return fmt::format("host-staging: {}", reason);
  }
  return "unknown";
}

VerbsMemoryPlan plan_verbs_memory(device::HmemInterface iface, const std::string& device, bool device_exports,
                                  bool library_registers) {
  if (iface == device::HmemInterface::kNone || iface == device::HmemInterface::kSystem) return {};
  if (!library_registers) {
    return {VerbsRegistration::kStaged, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core 34 or newer has it)"};
  }
  if (!device_exports) {
    return {VerbsRegistration::kStaged, fmt::format("{} does not export its memory as dma-buf", device)};
  }
  return {VerbsRegistration::kDmaBuf, ""};
}

VerbsMemoryPlan plan_verbs_memory(const device::Device* memory_device, const VerbsApi& api) {
  if (memory_device == nullptr) return {};
  const device::DeviceProperties& p = memory_device->properties();
  return plan_verbs_memory(memory_device->hmem_interface(), fmt::format("{}:{}", p.backend, p.ordinal),
                           p.dma_buf, api.reg_dmabuf_mr != nullptr);
}

Result<ibv_mr*> register_dma_buf(const VerbsApi& api, ibv_pd* pd, device::Device& device, void* data,
                                 std::size_t bytes, int access) {
  if (api.reg_dmabuf_mr == nullptr) {
    return invalid_argument("ibv_reg_dmabuf_mr",
                            "this libibverbs has none; plan_verbs_memory stages instead");
  }
  EPS_ASSIGN_OR_RETURN(device::DmaBuf exported, device.export_dma_buf(data, bytes));
  errno = 0;
  ibv_mr* mr = api.reg_dmabuf_mr(pd, exported.offset, bytes, reinterpret_cast<std::uintptr_t>(data),
                                 exported.fd, access);
  const int saved = errno;
  close(exported.fd);
  if (mr == nullptr) {
    return verbs_error("ibv_reg_dmabuf_mr(pd, offset, bytes, iova, fd, access)", verbs_errno(0, saved),
                       __FILE__, __LINE__);
  }
  return mr;
}

}  // namespace eps::fabric::verbs
