// The verbs fabric under MPI (docs/fabrics.md 6.1, 10). Without an RDMA device (development and CI machines)
// creation must fail on every rank with kEnvironment naming the reason, so that callers skip the fabric; with
// a device, a put with an immediate to the next rank and one to itself must arrive intact, with one local
// completion per put and one remote completion per immediate.
#include <infiniband/verbs.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/fabric/verbs/verbs_api.hpp"
#include "impls/fabric/verbs/verbs_fabric.hpp"
#include "impls/testing/mpi_gtest.hpp"

namespace eps::fabric::verbs {
namespace {

// Independent of the fabric: what libibverbs itself reports on this rank (none without the library).
int rdma_device_count() {
  const Result<const VerbsApi*> ibv = verbs_api();
  if (!ibv.ok()) return 0;
  int count = 0;
  ibv_device** list = (*ibv)->get_device_list(&count);
  if (list == nullptr) return 0;
  (*ibv)->free_device_list(list);
  return count;
}

TEST(VerbsFabric, RegistersBothVariants) {
  const std::vector<std::string> names = fabric_registry().names();
  EXPECT_NE(std::find(names.begin(), names.end(), "verbs:rc"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "verbs:efa"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "verbs"), names.end());  // the family alone is no fabric
}

TEST(VerbsFabric, WithoutDeviceCreationIsUnavailable) {
  // With a device this check does not apply and PutsWithImmediatesArriveOnRc covers the fabric instead.
  if (rdma_device_count() > 0) GTEST_SKIP() << "this machine has an RDMA device";
  const Result<std::unique_ptr<Fabric>> rc =
      make_fabric("verbs:rc", MPI_COMM_WORLD, mpitest::timeout_seconds());
  ASSERT_FALSE(rc.ok());
  EXPECT_EQ(rc.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(rc.status().message().rfind("verbs:rc: no RDMA device (ibv_get_device_list found 0 devices)", 0),
            0u)
      << rc.status().message();

  const Result<std::unique_ptr<Fabric>> efa =
      make_fabric("verbs:efa", MPI_COMM_WORLD, mpitest::timeout_seconds());
  ASSERT_FALSE(efa.ok());
  EXPECT_EQ(efa.status().code(), StatusCode::kUnavailable);
  const std::string expected = build_info().efadv
                                   ? "verbs:efa: no RDMA device (ibv_get_device_list found 0 devices)"
                                   : "verbs:efa: built without efadv";
  EXPECT_EQ(efa.status().message().rfind(expected, 0), 0u) << efa.status().message();
}

constexpr std::size_t kBytes = 256;
constexpr std::size_t kFromPeerOffset = 1024;
constexpr std::size_t kFromSelfOffset = 2048;

std::byte pattern(int rank, std::size_t i) {
  return static_cast<std::byte>((rank * 31 + static_cast<int>(i) * 7) & 0xff);
}

TEST(VerbsFabric, PutsWithImmediatesArriveOnRc) {
  Result<std::unique_ptr<Fabric>> made = make_fabric("verbs:rc", MPI_COMM_WORLD, mpitest::timeout_seconds());
  if (!made.ok() && made.status().code() == StatusCode::kUnavailable) {
    EPS_SKIP_UNAVAILABLE(/*selected=*/false, made.status().message());
  }
  EPS_ASSERT_OK(made.status());
  Fabric& fabric = **made;
  EXPECT_TRUE(fabric.ordered());
  const int rank = fabric.rank();
  const int size = fabric.size();
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  Result<Region> region = fabric.allocate(4096);
  EPS_ASSERT_OK(region.status());
  for (std::size_t i = 0; i < kBytes; ++i) region->local[i] = pattern(rank, i);
  EPS_ASSERT_OK(fabric.barrier(mpitest::test_deadline()));

  const std::uint32_t to_next = 0x00010000u | static_cast<std::uint32_t>(rank);
  const std::uint32_t to_self = 0x00020000u | static_cast<std::uint32_t>(rank);
  const PutOp ops[] = {{next, region->id, 0, region->id, kFromPeerOffset, kBytes, to_next, 1},
                       {rank, region->id, 0, region->id, kFromSelfOffset, kBytes, to_self, 2}};
  for (const PutOp& op : ops) {
    bool posted = false;
    EPS_ASSERT_OK(wait_until(
        mpitest::test_deadline(),
        [&] {
          Result<bool> r = fabric.try_put(op);
          posted = r.ok() && *r;
          return !r.ok() || posted;
        },
        [] { return std::string("posting a verbs put"); }));
    ASSERT_TRUE(posted);
  }

  std::vector<std::uint64_t> contexts;
  std::vector<std::uint32_t> imms;
  std::vector<Completion> out(8);
  Status failure;
  EPS_ASSERT_OK(wait_until(
      mpitest::test_deadline(),
      [&] {
        Result<std::size_t> n = fabric.poll(out);
        if (!n.ok()) failure = n.status();
        for (std::size_t i = 0; n.ok() && i < *n; ++i) {
          if (out[i].kind == CompletionKind::kLocal) contexts.push_back(out[i].context);
          if (out[i].kind == CompletionKind::kRemote) imms.push_back(out[i].imm);
        }
        return !failure.ok() || (contexts.size() >= 2 && imms.size() >= 2);
      },
      [&] {
        return fmt::format("{} local and {} remote completions of 2 each", contexts.size(), imms.size());
      }));
  EPS_ASSERT_OK(failure);
  std::sort(contexts.begin(), contexts.end());
  std::sort(imms.begin(), imms.end());
  EXPECT_EQ(contexts, (std::vector<std::uint64_t>{1, 2}));
  const std::uint32_t from_prev = 0x00010000u | static_cast<std::uint32_t>(prev);
  std::vector<std::uint32_t> expected_imms = {from_prev, to_self};
  std::sort(expected_imms.begin(), expected_imms.end());
  EXPECT_EQ(imms, expected_imms);
  for (std::size_t i = 0; i < kBytes; ++i) {
    ASSERT_EQ(region->local[kFromPeerOffset + i], pattern(prev, i)) << "byte " << i << " from rank " << prev;
    ASSERT_EQ(region->local[kFromSelfOffset + i], pattern(rank, i)) << "byte " << i << " from itself";
  }
  EPS_ASSERT_OK(fabric.quiet(mpitest::test_deadline()));
  EPS_ASSERT_OK(fabric.barrier(mpitest::test_deadline()));
}

}  // namespace
}  // namespace eps::fabric::verbs
