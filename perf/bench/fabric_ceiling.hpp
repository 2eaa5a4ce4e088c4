// The ceiling of a bench row through a fabric (docs/results.md 9.4, kind "fabric"): the same byte matrix as
// the shared-memory ceiling (ceiling.hpp), moved with raw puts of the fabric the transports use (--fabric,
// --chaos, --iface; `auto` is shm inside a node and the inter-node fabric between nodes), all ranks at once.
// It is what the row's bytes cost on that fabric with nothing of a transport around them (no packing, no
// layout, no signal protocol beyond one completion per pair), and the only ceiling a run across nodes has.
//
// An iteration: every block of the rank's copy plan (ceiling.hpp copy_plan) as puts of at most
// limits().max_put_bytes from this rank's source region to the destination's receive region, the last put of
// each block carrying an immediate on an ordered fabric; on an unordered one the rank first waits for its
// puts' local (delivery-complete) completions and then sends each destination a zero-byte put with the
// immediate (a put's bytes are placed once its local completion is seen, fabric.hpp). It ends when every put
// has its local completion and an immediate arrived from every source. The driver's barrier before each
// iteration keeps iterations apart. With -c the source bytes are the bench fabric pattern (seed + iteration),
// the receive region is poisoned before the iteration, and check() counts the bytes that differ.
//
// The fabric is made on the first prepare (collective over MPI_COMM_WORLD, after the row's own measurement)
// and closed by the destructor (collective too).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "impls/fabric/fabric.hpp"
#include "impls/fabric/fabric_selection.hpp"
#include "perf/bench/ceiling.hpp"

namespace eps::bench {

class FabricCeilingMeasurement final : public MachineCeiling {
 public:
  FabricCeilingMeasurement(std::function<Result<ByteMatrix>()> make_matrix, fabric::FabricSelection selection,
                           std::uint64_t seed, double timeout);
  FabricCeilingMeasurement(const FabricCeilingMeasurement&) = delete;
  FabricCeilingMeasurement& operator=(const FabricCeilingMeasurement&) = delete;
  ~FabricCeilingMeasurement() override;

  Status prepare(int iteration, bool checking) override;
  Result<double> run(int iteration) override;
  Result<Mismatches> check(int iteration) override;
  const std::string& kind() const override { return kind_; }

 private:
  Status start();
  Status post_block(const CopyBlock& block, const Deadline& deadline);
  Status post(const fabric::PutOp& op, const Deadline& deadline);
  Status poll();
  Status wait_locals(const Deadline& deadline);
  std::uint64_t seed_of(int iteration) const { return seed_ + static_cast<std::uint64_t>(iteration); }
  void fill_source(int iteration);

  std::function<Result<ByteMatrix>()> make_matrix_;
  fabric::FabricSelection selection_;
  std::uint64_t seed_;
  double timeout_;
  std::string kind_ = kFabricCeiling;
  std::optional<ByteMatrix> matrix_;
  CopyPlan plan_;
  std::unique_ptr<fabric::Fabric> fabric_;
  fabric::Region source_, receive_;
  std::int64_t posted_ = 0;  // puts posted since the fabric was made
  std::int64_t locals_ = 0;  // their local completions seen
  std::int64_t remote_ = 0;  // immediates received
  int filled_for_ = -1;      // the iteration whose pattern the source region holds (-1: none yet)
};

}  // namespace eps::bench
