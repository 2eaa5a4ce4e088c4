#include "impls/fabric/libfabric/hmem.hpp"

#include <sys/uio.h>

#include <utility>

#include <fmt/format.h>

#include "impls/fabric/libfabric/fi_status.hpp"

namespace eps::fabric::ofi {
namespace {

constexpr std::size_t kProbeBytes = 4096;

RegistrationPlan staged(device::HmemInterface iface, std::string reason) {
  return RegistrationPlan{RegistrationKind::kStaged, iface, std::move(reason)};
}

}  // namespace

std::string RegistrationPlan::staging() const {
  switch (kind) {
    case RegistrationKind::kHost:
      return "none";
    case RegistrationKind::kHmem:
      return fmt::format("fi-hmem:{}", device::hmem_interface_name(iface));
    case RegistrationKind::kStaged:
      return fmt::format("host-staging: {}", reason);
  }
  return "unknown";
}

fi_hmem_iface fi_interface(device::HmemInterface iface) {
  switch (iface) {
    case device::HmemInterface::kCuda:
      return FI_HMEM_CUDA;
    case device::HmemInterface::kRocr:
      return FI_HMEM_ROCR;
    case device::HmemInterface::kNone:
    case device::HmemInterface::kSystem:
      return FI_HMEM_SYSTEM;
  }
  return FI_HMEM_SYSTEM;
}

RegistrationPlan plan_for_provider(device::HmemInterface iface, std::string_view provider,
                                   const Status& hmem_query) {
  if (iface == device::HmemInterface::kNone) return RegistrationPlan{};
  if (!hmem_query.ok()) {
    return staged(iface, fmt::format("provider {} offers no FI_HMEM with FI_MR_HMEM ({})", provider,
                                     hmem_query.message()));
  }
  return RegistrationPlan{RegistrationKind::kHmem, iface, ""};
}

RegistrationPlan plan_after_probe(RegistrationPlan plan, std::string_view provider, const Status& probe) {
  if (plan.kind != RegistrationKind::kHmem || probe.ok()) return plan;
  return staged(plan.iface, fmt::format("provider {} cannot register {} memory ({})", provider,
                                        device::hmem_interface_name(plan.iface), probe.message()));
}

Result<SelectedProvider> select_provider_for(ProviderSpec spec, device::HmemInterface iface,
                                             RegistrationPlan* plan) {
  Status hmem_query;
  if (iface != device::HmemInterface::kNone) {
    spec.hmem = true;
    Result<SelectedProvider> with_hmem = select_provider(spec);
    *plan = plan_for_provider(iface, spec.prov_name, with_hmem.status());
    if (with_hmem.ok()) return with_hmem;
    spec.hmem = false;
  } else {
    *plan = RegistrationPlan{};
  }
  return select_provider(spec);
}

Status register_memory(fid_domain* domain, void* base, std::size_t bytes, std::uint64_t access,
                       std::uint64_t requested_key, const RegistrationPlan& plan, int ordinal, fid_mr** mr) {
  const iovec iov{base, bytes};
  fi_mr_attr attr{};
  attr.mr_iov = &iov;
  attr.iov_count = 1;
  attr.access = access;
  attr.requested_key = requested_key;
  attr.iface = FI_HMEM_SYSTEM;
  if (plan.kind == RegistrationKind::kHmem) {
    attr.iface = fi_interface(plan.iface);
    if (plan.iface == device::HmemInterface::kCuda) attr.device.cuda = ordinal;
  }
  EPS_FI_CHECK(fi_mr_regattr(domain, &attr, 0, mr));
  return Status();
}

RegistrationPlan probe_registration(fid_domain* domain, device::Device& device, RegistrationPlan plan,
                                    std::string_view provider) {
  if (plan.kind != RegistrationKind::kHmem) return plan;
  Result<device::Buffer> probe = device.allocate(kProbeBytes, device::MemoryKind::kDevice);
  if (!probe.ok()) return plan_after_probe(std::move(plan), provider, probe.status());
  fid_mr* mr = nullptr;
  const Status registered = register_memory(domain, probe->data(), probe->bytes(), FI_WRITE | FI_REMOTE_WRITE,
                                            0, plan, device.properties().ordinal, &mr);
  if (mr != nullptr) fi_close(&mr->fid);
  return plan_after_probe(std::move(plan), provider, registered);
}

}  // namespace eps::fabric::ofi
