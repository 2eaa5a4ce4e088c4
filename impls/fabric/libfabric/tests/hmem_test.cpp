// Which registration the libfabric fabric chooses for device memory, and the `staging` text it reports
// (hmem.hpp, docs/devices.md "Memory kinds"). The expected texts are written out here, from the contract.
#include "impls/fabric/libfabric/hmem.hpp"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

namespace eps::fabric::ofi {
namespace {

using device::HmemInterface;

const Status kNoProvider(
    StatusCode::kUnavailable,
    "libfabric:tcp: provider tcp;ofi_rxm not available here (fi_getinfo: No data available)");

TEST(HmemPlan, HostMemoryNeedsNoHmem) {
  const RegistrationPlan plan = plan_for_provider(HmemInterface::kNone, "shm", kNoProvider);
  EXPECT_EQ(plan.kind, RegistrationKind::kHost);
  EXPECT_EQ(plan.staging(), "none");
}

TEST(HmemPlan, ProviderWithHmemRegistersTheInterface) {
  const struct {
    HmemInterface iface;
    const char* staging;
  } cases[] = {{HmemInterface::kSystem, "fi-hmem:system"},
               {HmemInterface::kCuda, "fi-hmem:cuda"},
               {HmemInterface::kRocr, "fi-hmem:rocr"}};
  for (const auto& c : cases) {
    const RegistrationPlan plan = plan_for_provider(c.iface, "shm", Status());
    EXPECT_EQ(plan.kind, RegistrationKind::kHmem) << c.staging;
    EXPECT_EQ(plan.iface, c.iface);
    EXPECT_EQ(plan.staging(), c.staging);
  }
}

TEST(HmemPlan, ProviderWithoutHmemStagesAndSaysWhy) {
  const RegistrationPlan plan = plan_for_provider(HmemInterface::kCuda, "tcp;ofi_rxm", kNoProvider);
  EXPECT_EQ(plan.kind, RegistrationKind::kStaged);
  EXPECT_EQ(plan.staging(),
            "host-staging: provider tcp;ofi_rxm offers no FI_HMEM with FI_MR_HMEM (libfabric:tcp: provider "
            "tcp;ofi_rxm not available here (fi_getinfo: No data available))");
}

TEST(HmemPlan, ProbeFailureStagesAndNamesTheInterface) {
  const RegistrationPlan hmem = plan_for_provider(HmemInterface::kRocr, "shm", Status());
  const Status refused(StatusCode::kEnvironment,
                       "fi_mr_regattr(domain, &attr, 0, mr) failed: Function not implemented (-38)");
  const RegistrationPlan plan = plan_after_probe(hmem, "shm", refused);
  EXPECT_EQ(plan.kind, RegistrationKind::kStaged);
  EXPECT_EQ(
      plan.staging(),
      "host-staging: provider shm cannot register rocr memory (fi_mr_regattr(domain, &attr, 0, mr) failed: "
      "Function not implemented (-38))");
  EXPECT_EQ(plan_after_probe(hmem, "shm", Status()).staging(), "fi-hmem:rocr");
  // A plan that did not register device memory stays what it was, whatever the probe says.
  EXPECT_EQ(plan_after_probe(RegistrationPlan{}, "shm", refused).staging(), "none");
}

TEST(HmemPlan, InterfacesMapToLibfabricIfaces) {
  EXPECT_EQ(fi_interface(HmemInterface::kSystem), FI_HMEM_SYSTEM);
  EXPECT_EQ(fi_interface(HmemInterface::kCuda), FI_HMEM_CUDA);
  EXPECT_EQ(fi_interface(HmemInterface::kRocr), FI_HMEM_ROCR);
}

// libfabric's shm provider offers FI_HMEM (system memory always; CUDA/ROCr where libfabric was built with
// them), so system memory selects it with FI_HMEM and FI_MR_HMEM.
TEST(HmemSelect, ShmOffersHmemForSystemMemory) {
  RegistrationPlan plan;
  Result<SelectedProvider> selected =
      select_provider_for(ProviderSpec{"shm", "shm", "", false}, HmemInterface::kSystem, &plan);
  ASSERT_TRUE(selected.ok()) << selected.status().message();
  EXPECT_EQ(plan.staging(), "fi-hmem:system");
  EXPECT_NE(selected->info->caps & FI_HMEM, 0u);
  EXPECT_NE(selected->info->domain_attr->mr_mode & FI_MR_HMEM, 0u);
  EXPECT_NE(selected->info->tx_attr->op_flags & FI_DELIVERY_COMPLETE, 0u);
}

TEST(HmemSelect, HostMemoryAsksForNoHmem) {
  RegistrationPlan plan;
  plan.kind = RegistrationKind::kStaged;  // overwritten
  Result<SelectedProvider> selected =
      select_provider_for(ProviderSpec{"shm", "shm", "", false}, HmemInterface::kNone, &plan);
  ASSERT_TRUE(selected.ok()) << selected.status().message();
  EXPECT_EQ(plan.staging(), "none");
  EXPECT_EQ(selected->info->domain_attr->mr_mode & FI_MR_HMEM, 0u);
}

// A provider that is not here at all: the plan stages, and the selection's own error is returned.
TEST(HmemSelect, MissingProviderStagesAndFails) {
  RegistrationPlan plan;
  Result<SelectedProvider> selected =
      select_provider_for(ProviderSpec{"efa", "efa", "", false}, HmemInterface::kCuda, &plan);
  if (selected.ok()) GTEST_SKIP() << "an efa provider is available here";
  EXPECT_EQ(plan.kind, RegistrationKind::kStaged);
  EXPECT_EQ(selected.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(plan.reason.find("provider efa offers no FI_HMEM with FI_MR_HMEM"), std::string::npos)
      << plan.reason;
}

}  // namespace
}  // namespace eps::fabric::ofi
