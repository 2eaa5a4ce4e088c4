// `auto` fails closed (docs/fabrics.md 6.6), shown without an RDMA NIC: the candidates' factory is the test
// hook (FabricConfig::make_other), which reports an RDMA candidate "present but failing" on one rank, or
// absent, while the last candidate is a real shm fabric. Also --require-fabric (check_required_fabric,
// preflight_fabric) on this one-node job.
#include <array>
#include <memory>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "impls/fabric/auto/auto_fabric.hpp"
#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "impls/testing/mpi_gtest.hpp"

namespace eps::fabric {
namespace {

constexpr int kFailingRank = 1;
constexpr std::string_view kOpenError = "verbs:rc: ibv_open_device(mlx5_0) failed: Input/output error";
constexpr std::string_view kAbsent = "verbs:rc: no RDMA device (ibv_get_device_list found 0 devices)";
constexpr std::array<std::string_view, 2> kRdmaThenShm = {"verbs:rc", "shm"};
constexpr std::array<std::string_view, 2> kSocketThenShm = {"libfabric:tcp", "shm"};

// A factory whose candidate `failing` fails on kFailingRank with `code` and is absent elsewhere (a fabric's
// creation is collective, so a rank cannot open it alone), and whose other candidates are real fabrics of
// the same name; counts the candidates tried.
struct InjectedFactory {
  StatusCode code;
  std::string_view failing;
  int* tried;
  Result<std::unique_ptr<Fabric>> operator()(const FabricConfig& config) const {
    ++*tried;
    if (config.name == failing) {
      if (mpi::rank() == kFailingRank) return Status(code, std::string(kOpenError));
      return Status(StatusCode::kUnavailable, std::string(kAbsent));
    }
    return make_plain_fabric(config);
  }
};

FabricConfig config_with(StatusCode code, std::string_view failing, int* tried, bool allow_fallback) {
  FabricConfig config;
  config.timeout_seconds = mpitest::timeout_seconds();
  config.make_other = InjectedFactory{code, failing, tried};
  config.allow_fallback = allow_fallback;
  return config;
}

TEST(AutoFailClosed, PresentButFailingRdmaStopsEveryRank) {
  int tried = 0;
  const Result<InterNodeFabric> opened =
      open_inter_node(config_with(StatusCode::kEnvironment, "verbs:rc", &tried, false), kRdmaThenShm);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kEnvironment);
  EXPECT_EQ(opened.status().exit_code(), 3);
  const std::string& message = opened.status().message();
  EXPECT_NE(message.find(fmt::format("verbs:rc is present but failed to open on rank {}: {}", kFailingRank,
                                     kOpenError)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("--allow-fallback"), std::string::npos) << message;
  EXPECT_EQ(tried, 1);  // shm was never tried
}

TEST(AutoFailClosed, AllowFallbackRefusesItWithItsReasonAndGoesOn) {
  int tried = 0;
  Result<InterNodeFabric> opened =
      open_inter_node(config_with(StatusCode::kEnvironment, "verbs:rc", &tried, true), kRdmaThenShm);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->fabric->name(), "shm");
  ASSERT_EQ(opened->refused.size(), 1u);
  EXPECT_EQ(opened->refused[0].fabric, "verbs:rc");
  EXPECT_EQ(opened->refused[0].reason, fmt::format("rank {}: {}", kFailingRank, kOpenError));
  EXPECT_EQ(tried, 2);
}

TEST(AutoFailClosed, AbsentRdmaIsRefusedWithoutAllowFallback) {
  int tried = 0;
  Result<InterNodeFabric> opened =
      open_inter_node(config_with(StatusCode::kUnavailable, "verbs:rc", &tried, false), kRdmaThenShm);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->fabric->name(), "shm");
  ASSERT_EQ(opened->refused.size(), 1u);
  EXPECT_EQ(opened->refused[0].reason, fmt::format("rank 0: {}", kAbsent));  // every rank: absent
}

TEST(AutoFailClosed, TheSocketFallbackNeverFailsClosed) {
  int tried = 0;
  Result<InterNodeFabric> opened =
      open_inter_node(config_with(StatusCode::kEnvironment, "libfabric:tcp", &tried, false), kSocketThenShm);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(opened->fabric->name(), "shm");
  ASSERT_EQ(opened->refused.size(), 1u);
  EXPECT_EQ(opened->refused[0].fabric, "libfabric:tcp");
}

TEST(AutoFailClosed, AConfigurationErrorOnOneRankStopsEveryRankWithExit2) {
  int tried = 0;
  const Result<InterNodeFabric> opened =
      open_inter_node(config_with(StatusCode::kInvalidArgument, "verbs:rc", &tried, true), kRdmaThenShm);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(tried, 1);
}

TEST(RequireFabric, MetWhenChosenOrNotAsked) {
  FabricSelection selection;
  EXPECT_TRUE(check_required_fabric(selection, {"libfabric:tcp", {}}).ok());
  selection.require_fabric = "verbs:rc";
  EXPECT_TRUE(check_required_fabric(selection, {"verbs:rc", {}}).ok());
}

TEST(RequireFabric, NotMetNamesTheChosenFabricAndWhy) {
  FabricSelection selection;
  selection.require_fabric = "verbs:rc";
  const Status refused =
      check_required_fabric(selection, {"libfabric:tcp", {{"verbs:rc", "rank 2: no RDMA device"}}});
  EXPECT_EQ(refused.exit_code(), 3);
  EXPECT_EQ(refused.message(),
            "--require-fabric verbs:rc: the fabric chosen is libfabric:tcp instead, because auto refused "
            "verbs:rc: rank 2: no RDMA device (docs/fabrics.md 6.6)");
  selection.fabric = "libfabric:tcp";
  EXPECT_NE(check_required_fabric(selection, {"libfabric:tcp", {}})
                .message()
                .find("--fabric libfabric:tcp names it"),
            std::string::npos);
}

TEST(RequireFabric, UnknownOrAutoIsAUsageError) {
  FabricSelection selection;
  selection.require_fabric = "verbs:xyz";
  const Status unknown = validate_fabric_selection(selection);
  EXPECT_EQ(unknown.exit_code(), 2);
  EXPECT_EQ(unknown.message().rfind("--require-fabric: must be a registered fabric other than auto, got "
                                    "'verbs:xyz'",
                                    0),
            0u)
      << unknown.message();
  selection.require_fabric = "auto";
  EXPECT_EQ(validate_fabric_selection(selection).exit_code(), 2);
}

// This job runs on one node: auto is shm, and requiring an inter-node fabric fails with exit 3 saying so.
TEST(Preflight, OneNodeAutoIsShmAndAnInterNodeRequirementFails) {
  FabricSelection selection;
  const Result<FabricPreflight> plain =
      preflight_fabric(selection, MPI_COMM_WORLD, mpitest::timeout_seconds());
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->requested, "auto");
  EXPECT_EQ(plain->choice.chosen, "shm");
  EXPECT_TRUE(plain->choice.refused.empty());
  EXPECT_EQ(describe_preflight(*plain), "auto -> shm");

  selection.require_fabric = "libfabric:tcp";
  const Result<FabricPreflight> required =
      preflight_fabric(selection, MPI_COMM_WORLD, mpitest::timeout_seconds());
  ASSERT_FALSE(required.ok());
  EXPECT_EQ(required.status().exit_code(), 3);
  EXPECT_NE(required.status().message().find("chosen is shm instead, because every rank is on one node"),
            std::string::npos)
      << required.status().message();
  // make_fabric, which the transports call, refuses the same selection alike.
  EXPECT_EQ(make_fabric(selection, MPI_COMM_WORLD, mpitest::timeout_seconds()).status().exit_code(), 3);
}

}  // namespace
}  // namespace eps::fabric
