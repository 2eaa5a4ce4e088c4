// Device memory registered with the NIC through libfabric FI_HMEM (docs/devices.md "Memory kinds",
// docs/fabrics.md 6.1): when a fabric's regions live in a Device's kDevice memory (FabricConfig::
// memory_device), the provider is asked for FI_HMEM with mr_mode FI_MR_HMEM and every region is registered
// with fi_mr_regattr carrying the device's interface (FI_HMEM_SYSTEM, FI_HMEM_CUDA, FI_HMEM_ROCR) and, for
// CUDA, its ordinal. Where that cannot be, the fabric's regions stay host memory and the plan says why:
// the caller stages through them (results `staging`, "host-staging: <reason>").
//
// The plan is decided in two steps, each a pure function of what the provider answered, so that the
// choice and its text are tested without a GPU:
// 1. plan_for_provider: the device's interface and whether fi_getinfo found the provider with FI_HMEM.
// 2. plan_after_probe: whether fi_mr_regattr accepted a probe allocation of the device with that interface
//    (a provider may offer FI_HMEM yet lack the interface, e.g. libfabric built without CUDA).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "impls/device/device.hpp"
#include "impls/fabric/libfabric/provider.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric::ofi {

enum class RegistrationKind {
  kHost,    // regions are host memory the fabric maps itself (no memory_device, or a kNone device)
  kHmem,    // regions are the device's memory, registered through FI_HMEM with `iface`
  kStaged,  // the device's memory cannot be registered: regions are host memory, the caller stages
};

struct RegistrationPlan {
  RegistrationKind kind = RegistrationKind::kHost;
  device::HmemInterface iface = device::HmemInterface::kNone;
  std::string reason;  // kStaged: why the device memory is not registered

  // The results' `staging` text: "none", "fi-hmem:<iface>" or "host-staging: <reason>".
  std::string staging() const;
};

// The FI_HMEM interface of a device interface (kNone maps to FI_HMEM_SYSTEM, registered without FI_HMEM).
fi_hmem_iface fi_interface(device::HmemInterface iface);

// Step 1. `provider` names the provider ("shm"); `hmem_query` is the outcome of selecting it with FI_HMEM
// (ProviderSpec::hmem): ok, or the reason it is not there.
RegistrationPlan plan_for_provider(device::HmemInterface iface, std::string_view provider,
                                   const Status& hmem_query);
// Step 2. `probe` is the outcome of registering a probe allocation with the planned interface.
RegistrationPlan plan_after_probe(RegistrationPlan plan, std::string_view provider, const Status& probe);

// Selects the provider of `spec` for memory of interface `iface`: with FI_HMEM first when the plan wants
// it, else (or when the provider has no FI_HMEM) as select_provider does. `plan` receives step 1.
Result<SelectedProvider> select_provider_for(ProviderSpec spec, device::HmemInterface iface,
                                             RegistrationPlan* plan);

// fi_mr_regattr of [base, base + bytes) with `access` and `requested_key`: with the plan's FI_HMEM interface
// (and `ordinal` as the CUDA device) for kHmem, as plain host memory otherwise.
Status register_memory(fid_domain* domain, void* base, std::size_t bytes, std::uint64_t access,
                       std::uint64_t requested_key, const RegistrationPlan& plan, int ordinal, fid_mr** mr);

// Step 2 run for real: allocates `probe_bytes` of the device's kDevice memory, registers it with the
// plan's interface and closes the registration; returns plan_after_probe of the outcome. A plan that is not
// kHmem is returned as it is.
RegistrationPlan probe_registration(fid_domain* domain, device::Device& device, RegistrationPlan plan,
                                    std::string_view provider);

}  // namespace eps::fabric::ofi
