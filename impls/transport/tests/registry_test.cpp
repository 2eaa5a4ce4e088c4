// The transport registry and the shape rules shared by every backend (impls/transport/transport.hpp).
#include <gtest/gtest.h>

#include "impls/transport/mpi/mpi_transport.hpp"
#include "impls/transport/registry.hpp"

namespace eps::transport {
namespace {

TEST(TransportRegistry, ListsTheMpiBaseline) {
  const std::vector<std::string> names = transport_registry().names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "mpi");
  ASSERT_NE(transport_registry().find("mpi"), nullptr);
  EXPECT_EQ(transport_registry().find("nccl-ep"), nullptr);
}

TEST(TransportRegistry, RejectsADuplicateName) {
  TransportRegistry registry;
  const auto make = [](const TransportConfig& config, const fabric::FabricSelection&) {
    return make_mpi_transport(config);
  };
  registry.add({.name = "x", .summary = "first", .factory = make, .capabilities = mpi_capabilities});
  EXPECT_THROW(
      registry.add({.name = "x", .summary = "second", .factory = make, .capabilities = mpi_capabilities}),
      std::logic_error);
}

TEST(SelectTransports, AllListAndUnknownNames) {
  Result<std::vector<std::string>> all = select_transports("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(*all, transport_registry().names());
  Result<std::vector<std::string>> one = select_transports("mpi");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(*one, std::vector<std::string>{"mpi"});

  Result<std::vector<std::string>> unknown = select_transports("mpi,bogus");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().message().rfind("--transport: unknown transport 'bogus'; registered: mpi", 0),
            0u)
      << unknown.status().message();
  EXPECT_FALSE(select_transports("mpi,mpi").ok());
  EXPECT_FALSE(select_transports("").ok());
}

TEST(RecvCapacity, HandComputedRows) {
  TransportConfig c;
  c.num_experts = 16;  // R = 4 -> L = 4
  c.top_k = 6;
  c.max_tokens_per_rank = 10;
  c.expert_alignment = 4;
  // rank-major: R * T_max = 4 * 10.
  EXPECT_EQ(recv_capacity_rows(Layout::kHtRankMajor, c, 4), 40);
  // expert-major: R * T_max * min(K, L) + L * (align - 1) = 4 * 10 * 4 + 4 * 3 = 172.
  EXPECT_EQ(recv_capacity_rows(Layout::kHtExpertMajor, c, 4), 172);
  // LL: L * R * T_max = 4 * 4 * 10.
  EXPECT_EQ(recv_capacity_rows(Layout::kLl, c, 4), 160);
}

TEST(ValidateConfig, NamesTheFieldAndRange) {
  const Capabilities caps = mpi_capabilities();
  TransportConfig c;
  c.num_experts = 16;
  c.top_k = 4;
  c.hidden = 256;
  c.max_tokens_per_rank = 64;
  EXPECT_TRUE(validate_config(c, 4, caps).ok());

  TransportConfig bad = c;
  bad.num_experts = 18;
  EXPECT_EQ(validate_config(bad, 4, caps).message(),
            "num_experts: must be a multiple of the rank count 4, got 18");
  bad = c;
  bad.dtype = PayloadType::kFp8;
  bad.hidden = 200;
  EXPECT_EQ(validate_config(bad, 4, caps).message(),
            "hidden: must be a multiple of 128 for fp8 (docs/numerics.md 1.2), got 200");
  bad = c;
  bad.top_k = 17;
  EXPECT_EQ(validate_config(bad, 4, caps).message(), "top_k: must be in [1, 16], got 17");
  bad = c;
  bad.nodes = NodeLayout::from_groups(std::vector<int>{0, 0, 1});
  EXPECT_EQ(validate_config(bad, 4, caps).message(),
            "nodes: must place the 4 ranks of the run, got a layout of 3");
}

TEST(MpiCapabilities, DeclaresEveryContractOfIssue4) {
  const Capabilities caps = mpi_capabilities();
  for (Layout l : {Layout::kHtRankMajor, Layout::kHtExpertMajor, Layout::kLl}) EXPECT_TRUE(caps.supports(l));
  for (CombineTree t : {CombineTree::kHtRank, CombineTree::kHtTwoLevel, CombineTree::kLlWeighted}) {
    EXPECT_TRUE(caps.supports(t));
  }
  EXPECT_TRUE(caps.supports(PayloadType::kBf16));
  EXPECT_TRUE(caps.supports(PayloadType::kFp8));
  EXPECT_TRUE(caps.ll_ordered);
  EXPECT_TRUE(caps.cached_dispatch);
}

}  // namespace
}  // namespace eps::transport
