#include "perf/bench/fabric_ceiling.hpp"

#include <algorithm>
#include <array>
#include <cstdio>

#include <fmt/format.h>

#include "impls/fabric/fabric_registry.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/fabric_engine.hpp"

namespace eps::bench {

FabricCeilingMeasurement::FabricCeilingMeasurement(std::function<Result<ByteMatrix>()> make_matrix,
                                                   fabric::FabricSelection selection, std::uint64_t seed,
                                                   double timeout)
    : make_matrix_(std::move(make_matrix)),
      selection_(std::move(selection)),
      seed_(seed),
      timeout_(timeout) {}

// Closing the fabric is collective (every rank destroys its measurement); a failure to drain is reported, not
// thrown, since the row's numbers are already taken.
FabricCeilingMeasurement::~FabricCeilingMeasurement() {
  if (!fabric_) return;
  const Status quiet = fabric_->quiet(Deadline(timeout_));
  if (!quiet.ok()) std::fprintf(stderr, "epsuite: bench fabric ceiling: %s\n", quiet.message().c_str());
}

Status FabricCeilingMeasurement::start() {
  EPS_ASSIGN_OR_RETURN(ByteMatrix matrix, make_matrix_());
  if (matrix.ranks() != mpi::size()) {
    return invalid_argument("ceiling", "byte matrix of {} ranks on a run of {}", matrix.ranks(), mpi::size());
  }
  matrix_ = std::move(matrix);
  plan_ = copy_plan(*matrix_, mpi::rank());
  EPS_ASSIGN_OR_RETURN(fabric_, fabric::make_fabric(selection_, MPI_COMM_WORLD, timeout_));
  // Regions are never empty (a rank that sends or receives nothing still takes part in the collective).
  EPS_ASSIGN_OR_RETURN(source_, fabric_->allocate(std::max<std::size_t>(plan_.send_bytes, 64)));
  EPS_ASSIGN_OR_RETURN(receive_, fabric_->allocate(std::max<std::size_t>(plan_.recv_bytes, 64)));
  return Status();
}

void FabricCeilingMeasurement::fill_source(int iteration) {
  if (filled_for_ == iteration) return;
  bench_fabric::fill_pattern(seed_of(iteration), mpi::rank(), 0,
                             source_.local.subspan(0, static_cast<std::size_t>(plan_.send_bytes)));
  filled_for_ = iteration;
}

Status FabricCeilingMeasurement::prepare(int iteration, bool checking) {
  if (!matrix_) {
    EPS_RETURN_IF_ERROR(start());
    fill_source(0);
  }
  if (!checking) return Status();
  fill_source(iteration);
  poison_received(*matrix_, plan_, mpi::rank(), seed_of(iteration), receive_.local);
  return Status();
}

// Drives progress and counts what completed (local completions of puts, immediates from sources).
Status FabricCeilingMeasurement::poll() {
  std::array<fabric::Completion, 64> completions;
  for (;;) {
    EPS_ASSIGN_OR_RETURN(const std::size_t n, fabric_->poll(completions));
    for (std::size_t i = 0; i < n; ++i) {
      if (completions[i].kind == fabric::CompletionKind::kLocal) {
        ++locals_;
      } else {
        ++remote_;
      }
    }
    if (n < completions.size()) return Status();
  }
}

Status FabricCeilingMeasurement::post(const fabric::PutOp& op, const Deadline& deadline) {
  for (;;) {
    EPS_ASSIGN_OR_RETURN(const bool posted, fabric_->try_put(op));
    if (posted) {
      ++posted_;
      return Status();
    }
    EPS_RETURN_IF_ERROR(poll());
    if (deadline.expired()) {
      return Status(StatusCode::kEnvironment,
                    fmt::format("timed out after {} s: the fabric ceiling's put to rank {} stayed refused "
                                "(backpressure, {} of {} puts completed) on {}",
                                deadline.budget_seconds(), op.peer, locals_, posted_, fabric_->describe()));
    }
  }
}

// One block as puts of at most the fabric's largest put; on an ordered fabric the last one carries the
// immediate that tells the destination this source is done.
Status FabricCeilingMeasurement::post_block(const CopyBlock& block, const Deadline& deadline) {
  const auto largest = static_cast<std::int64_t>(fabric_->limits().max_put_bytes);
  const bool signal_in_data = fabric_->ordered();
  for (std::int64_t done = 0; done < block.bytes;) {
    const std::int64_t bytes = std::min(largest, block.bytes - done);
    const bool last = done + bytes == block.bytes;
    fabric::PutOp op{block.peer,
                     source_.id,
                     static_cast<std::size_t>(block.src_offset + done),
                     receive_.id,
                     static_cast<std::size_t>(block.dst_offset + done),
                     static_cast<std::size_t>(bytes),
                     {},
                     0};
    if (last && signal_in_data) op.imm = static_cast<std::uint32_t>(mpi::rank());
    EPS_RETURN_IF_ERROR(post(op, deadline));
    done += bytes;
  }
  return Status();
}

Status FabricCeilingMeasurement::wait_locals(const Deadline& deadline) {
  return bench_fabric::spin_until(
      deadline,
      [&] {
        const Status polled = poll();
        return !polled.ok() || locals_ == posted_;
      },
      [&] {
        return fmt::format("the fabric ceiling's local completions: {} of {} puts on {}", locals_, posted_,
                           fabric_->describe());
      });
}

Result<double> FabricCeilingMeasurement::run(int) {
  const Deadline deadline(timeout_);
  const std::int64_t expected_remote = remote_ + static_cast<std::int64_t>(plan_.sources.size());
  const double start = MPI_Wtime();
  for (const CopyBlock& block : plan_.blocks) EPS_RETURN_IF_ERROR(post_block(block, deadline));
  if (!fabric_->ordered()) {
    // Unordered: the immediate may only follow bytes that are placed, i.e. after the local completions.
    EPS_RETURN_IF_ERROR(wait_locals(deadline));
    for (const CopyBlock& block : plan_.blocks) {
      EPS_RETURN_IF_ERROR(
          post({block.peer, source_.id, 0, receive_.id, 0, 0, static_cast<std::uint32_t>(mpi::rank()), 0},
               deadline));
    }
  }
  EPS_RETURN_IF_ERROR(bench_fabric::spin_until(
      deadline,
      [&] {
        const Status polled = poll();
        return !polled.ok() || (locals_ == posted_ && remote_ >= expected_remote);
      },
      [&] {
        return fmt::format(
            "the fabric ceiling on rank {}: {} of {} local completions, {} of {} sources done on {}",
            mpi::rank(), locals_, posted_,
            static_cast<std::int64_t>(plan_.sources.size()) - (expected_remote - remote_),
            plan_.sources.size(), fabric_->describe());
      }));
  return (MPI_Wtime() - start) * 1e6;
}

// Every source's immediate arrived before run() returned, after its bytes were placed: they are here.
Result<Mismatches> FabricCeilingMeasurement::check(int iteration) {
  return check_received(*matrix_, plan_, mpi::rank(), seed_of(iteration), receive_.local, "fabric ceiling");
}

}  // namespace eps::bench
