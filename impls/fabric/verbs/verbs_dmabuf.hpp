// Device memory registered with an RDMA NIC through dma-buf (docs/devices.md "Memory kinds"): when the verbs
// fabric's regions live in a GPU's memory, the Device exports each region as a dma-buf (Device::
// export_dma_buf: CUDA cuMemGetHandleForAddressRange, ROCr hsa_amd_portable_export_dmabuf) and the fabric
// registers it with ibv_reg_dmabuf_mr (rdma-core 34+). Where that cannot be, regions stay host memory and
// the plan says why, so that callers stage through them (results `staging`, "host-staging: <reason>").
//
// plan_verbs_memory is a pure function of the device's interface, what the device reports
// (DeviceProperties::dma_buf) and whether this libibverbs has ibv_reg_dmabuf_mr, so that the choice and its
// text are tested without a GPU or an RDMA NIC. Memory of kind kNone and kSystem is host memory and is
// registered with ibv_reg_mr as always.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <string>

#include "impls/device/device.hpp"
#include "impls/fabric/verbs/verbs_api.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::verbs {

enum class VerbsRegistration {
  kHost,    // host memory, ibv_reg_mr
  kDmaBuf,  // the device's memory, exported as a dma-buf and registered with ibv_reg_dmabuf_mr
  kStaged,  // the device's memory cannot be registered: regions are host memory, the caller stages
};

struct VerbsMemoryPlan {
  VerbsRegistration kind = VerbsRegistration::kHost;
  std::string reason;  // kStaged: why

  // The results' `staging` text: "none", "dma-buf" or "host-staging: <reason>".
  std::string staging() const;
};

// `device` names the device in the reason ("cuda:0"); `device_exports` is DeviceProperties::dma_buf;
// `library_registers` whether VerbsApi::reg_dmabuf_mr was found.
VerbsMemoryPlan plan_verbs_memory(device::HmemInterface iface, const std::string& device, bool device_exports,
                                  bool library_registers);

// The plan for `memory_device` (null: host memory) with this libibverbs.
VerbsMemoryPlan plan_verbs_memory(const device::Device* memory_device, const VerbsApi& api);

// Registers [data, data + bytes) of the device's memory under a kDmaBuf plan: exports it (the descriptor is
// closed once registered, as the kernel keeps its own reference), then ibv_reg_dmabuf_mr with the region's
// virtual address as its iova, so that remote writes name it as they name host regions. kInvalidArgument
// when the API has no ibv_reg_dmabuf_mr; the export's or the registration's error otherwise.
Result<ibv_mr*> register_dma_buf(const VerbsApi& api, ibv_pd* pd, device::Device& device, void* data,
                                 std::size_t bytes, int access);

}  // namespace eps::fabric::verbs
