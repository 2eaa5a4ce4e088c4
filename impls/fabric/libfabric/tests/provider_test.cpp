#include "impls/fabric/libfabric/provider.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <rdma/fi_errno.h>

#include <cstring>

namespace eps::fabric::ofi {
namespace {

// libfabric is installed wherever this test is built (the libfabric fabric is declared only then).
const FiApi& fi() {
  const Result<const FiApi*> loaded = fi_api();
  if (!loaded.ok()) throw Error(loaded.status());
  return **loaded;
}

TEST(ProviderSpec, VariantsMapToProviders) {
  EXPECT_EQ(libfabric_variants(), (std::vector<std::string>{"shm", "tcp", "efa", "verbs"}));
  const struct {
    const char* variant;
    const char* prov;
    const char* node;
    bool loopback;
  } cases[] = {{"shm", "shm", "", false},
               {"tcp", "tcp;ofi_rxm", "", true},
               {"efa", "efa", "", false},
               {"verbs", "verbs;ofi_rxm", "", false}};
  for (const auto& c : cases) {
    Result<ProviderSpec> spec = provider_spec(c.variant);
    ASSERT_TRUE(spec.ok()) << c.variant;
    EXPECT_EQ(spec->variant, c.variant);
    EXPECT_EQ(spec->prov_name, c.prov);
    EXPECT_EQ(spec->node, c.node);
    EXPECT_EQ(spec->binds_interface, c.loopback);
  }
}

TEST(ProviderSpec, UnknownVariantNamesTheChoices) {
  Result<ProviderSpec> spec = provider_spec("udp");
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(), "libfabric variant: must be one of shm, tcp, efa, verbs, got 'udp'");
}

TEST(Hints, ExpressTheFabricContract) {
  const ProviderSpec spec{"tcp", "tcp;ofi_rxm", "127.0.0.1", true};
  InfoPtr hints = make_hints(fi(), spec, HintOptions{});
  ASSERT_NE(hints, nullptr);
  EXPECT_EQ(hints->ep_attr->type, FI_EP_RDM);
  EXPECT_EQ(hints->caps, FI_RMA | FI_WRITE | FI_REMOTE_WRITE);
  EXPECT_EQ(hints->mode, FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA);
  // 0x4 | 0x10 | 0x20 | 0x40 | 0x200 (fabric.h): everything the fabric handles, FI_MR_RAW not among them.
  EXPECT_EQ(hints->domain_attr->mr_mode, 0x274);
  EXPECT_EQ(hints->domain_attr->threading, FI_THREAD_DOMAIN);
  EXPECT_STREQ(hints->fabric_attr->prov_name, "tcp;ofi_rxm");
  EXPECT_EQ(hints->tx_attr->op_flags, FI_DELIVERY_COMPLETE);
  EXPECT_EQ(hints->tx_attr->msg_order, waw_order_bits());
  EXPECT_EQ(hints->rx_attr->msg_order, waw_order_bits());
  EXPECT_NE(waw_order_bits() & FI_ORDER_WAW, 0u);
}

TEST(Hints, OptionsToggleOrderingCompletionAndMessages) {
  const ProviderSpec spec{"shm", "shm", "", false};
  InfoPtr hints = make_hints(fi(), spec, HintOptions{false, false, true});
  ASSERT_NE(hints, nullptr);
  EXPECT_EQ(hints->tx_attr->msg_order, 0u);
  EXPECT_EQ(hints->rx_attr->msg_order, 0u);
  EXPECT_EQ(hints->tx_attr->op_flags, 0u);
  EXPECT_EQ(hints->caps, FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_MSG | FI_RECV);
}

TEST(Hints, AtomicOptionAddsFiAtomic) {
  const ProviderSpec spec{"tcp", "tcp;ofi_rxm", "", true};
  InfoPtr hints = make_hints(fi(), spec, HintOptions{true, true, false, true});
  ASSERT_NE(hints, nullptr);
  EXPECT_EQ(hints->caps, FI_RMA | FI_WRITE | FI_REMOTE_WRITE | FI_ATOMIC);
  EXPECT_EQ(make_hints(fi(), spec, HintOptions{})->caps & FI_ATOMIC, 0u);
}

TEST(Atomics, ShmProviderUpTo117IsRefusedWithItsReasonOthersAreNot) {
  EXPECT_EQ(broken_atomics(FI_VERSION(1, 17), "shm"),
            "provider shm of libfabric 1.17 corrupts the operands of delivery-complete atomics with many in "
            "flight (an unchecked inject-buffer pool); not used");
  EXPECT_NE(broken_atomics(FI_VERSION(1, 9), "shm"), "");
  EXPECT_EQ(broken_atomics(FI_VERSION(1, 18), "shm"), "");
  EXPECT_EQ(broken_atomics(FI_VERSION(1, 17), "tcp;ofi_rxm"), "");
  EXPECT_EQ(broken_atomics(FI_VERSION(1, 17), "efa"), "");
}

InfoPtr ordered_info(std::uint64_t tx_order, std::uint64_t rx_order, std::size_t waw_size) {
  InfoPtr info(fi().allocinfo());
  info->tx_attr->msg_order = tx_order;
  info->rx_attr->msg_order = rx_order;
  info->ep_attr->max_order_waw_size = waw_size;
  return info;
}

TEST(Ordering, NeedsWawOnBothSidesForWholePuts) {
  const std::uint64_t waw = waw_order_bits();
  constexpr std::size_t kPut = 1 << 20;
  EXPECT_TRUE(waw_ordered(*ordered_info(waw | FI_ORDER_SAS, waw, kPut), kPut));
  EXPECT_TRUE(waw_ordered(*ordered_info(waw, waw, SIZE_MAX), kPut));
  EXPECT_FALSE(waw_ordered(*ordered_info(FI_ORDER_SAS, waw, kPut), kPut));  // shm's default tx order
  EXPECT_FALSE(waw_ordered(*ordered_info(waw, 0, kPut), kPut));
  EXPECT_FALSE(waw_ordered(*ordered_info(waw, waw, kPut - 1), kPut));  // ordering only for smaller writes
  EXPECT_FALSE(waw_ordered(*ordered_info(waw, waw, 0), kPut));
}

// The endpoint check of a bound interface (docs/fabrics.md 6.4): the address must be exactly the interface's.
TEST(BoundAddress, AcceptsOnlyTheInterfaceAddress) {
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_TRUE(address_is(&in, sizeof(in), FI_SOCKADDR_IN, "127.0.0.1"));
  in.sin_addr.s_addr = htonl(0x7f010203);  // 127.1.2.3: loopback, but not the interface's address
  EXPECT_FALSE(address_is(&in, sizeof(in), FI_SOCKADDR_IN, "127.0.0.1"));
  EXPECT_TRUE(address_is(&in, sizeof(in), FI_SOCKADDR_IN, "127.1.2.3"));
  in.sin_addr.s_addr = htonl(INADDR_ANY);  // the wildcard is no interface's address
  EXPECT_FALSE(address_is(&in, sizeof(in), FI_SOCKADDR_IN, "127.0.0.1"));
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_FALSE(address_is(&in, sizeof(in) - 1, FI_SOCKADDR_IN, "127.0.0.1"));  // truncated
  EXPECT_FALSE(address_is(&in, sizeof(in), FI_ADDR_STR, "127.0.0.1"));         // not a socket address format
  EXPECT_FALSE(address_is(&in, sizeof(in), FI_SOCKADDR_IN, "not-an-address"));
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_addr = in6addr_loopback;
  EXPECT_FALSE(address_is(&in6, sizeof(in6), FI_SOCKADDR_IN6, "127.0.0.1"));  // interfaces bind IPv4
}

TEST(BoundAddress, InterfaceAddressOrANamedError) {
  Result<std::string> lo = interface_ipv4("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().message();
  EXPECT_EQ(*lo, "127.0.0.1");
  Result<std::string> missing = interface_ipv4("no-such-if0");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(missing.status().message().starts_with("--iface: no IPv4 address on interface 'no-such-if0'"))
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("lo"), std::string::npos)
      << "the interfaces that exist are listed";
}

TEST(Describe, NamesProviderOrderingAndLimits) {
  InfoPtr info(fi().allocinfo());
  info->fabric_attr->prov_name = strdup("shm");
  info->fabric_attr->name = strdup("shm");
  info->fabric_attr->prov_version = FI_VERSION(117, 0);
  info->domain_attr->name = strdup("dom0");
  info->domain_attr->mr_mode = FI_MR_VIRT_ADDR;
  info->domain_attr->cq_data_size = 8;
  info->tx_attr->op_flags = FI_DELIVERY_COMPLETE;
  info->tx_attr->size = 1024;
  const std::uint32_t v = fi().version();
  EXPECT_EQ(
      describe_provider(fi(), *info, true, 4096),
      fmt::format(
          "libfabric {}.{} provider shm 117.0 (fabric shm, domain dom0, ordered WAW, delivery-complete, "
          "mr_mode 0x10, cq_data 8 B, max put 4096 B, tx 1024)",
          FI_MAJOR(v), FI_MINOR(v)));
}

// These two ask the real library; each skips where the provider situation differs from the check.
TEST(Select, MissingProviderIsUnavailableWithFiStrerror) {
  const ProviderSpec spec{"efa", "efa", "", false};
  Result<SelectedProvider> selected = select_provider(spec);
  if (selected.ok()) GTEST_SKIP() << "an efa provider is available here";
  EXPECT_EQ(selected.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(selected.status().message(),
            fmt::format("libfabric:efa: provider efa not available here (fi_getinfo: {})",
                        fi().strerror(FI_ENODATA)));
}

TEST(Select, ShmGivesDeliveryCompleteAnd32BitImmediates) {
  Result<SelectedProvider> selected = select_provider(ProviderSpec{"shm", "shm", "", false});
  if (!selected.ok()) GTEST_SKIP() << selected.status().message();
  const fi_info& info = *selected->info;
  EXPECT_STREQ(info.fabric_attr->prov_name, "shm");
  EXPECT_EQ(info.ep_attr->type, FI_EP_RDM);
  EXPECT_NE(info.tx_attr->op_flags & FI_DELIVERY_COMPLETE, 0u);
  EXPECT_GE(info.domain_attr->cq_data_size, 4u);
  EXPECT_EQ(info.domain_attr->mr_mode & FI_MR_RAW, 0u);
  EXPECT_EQ(info.caps & (FI_RMA | FI_WRITE | FI_REMOTE_WRITE), FI_RMA | FI_WRITE | FI_REMOTE_WRITE);
}

// tcp;ofi_rxm (libfabric 1.17) offers FI_ATOMIC only without write-after-write ordering: the selection keeps
// the ordering and records why there are no atomics. Skips where the provider behaves otherwise.
TEST(Select, TcpKeepsOrderingAndSaysAtomicsNeedItGone) {
  const Result<std::string> lo = interface_ipv4("lo");
  if (!lo.ok()) GTEST_SKIP() << lo.status().message();
  Result<SelectedProvider> selected = select_provider(ProviderSpec{"tcp", "tcp;ofi_rxm", *lo, true});
  if (!selected.ok()) GTEST_SKIP() << selected.status().message();
  if (selected->atomics || !selected->asked_ordered) GTEST_SKIP() << "this tcp;ofi_rxm orders atomics too";
  EXPECT_TRUE(selected->atomics_only_unordered);
}

}  // namespace
}  // namespace eps::fabric::ofi
