#include "perf/bench/eplb_window.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "impls/layer/distributed_layer.hpp"
#include "impls/runtime/mpi_runtime.hpp"
#include "perf/bench/layer_setup.hpp"

namespace eps::bench {
namespace {

// References kept for reuse by later series; beyond this the oldest steps are dropped (and recomputed).
constexpr double kReferenceBudgetBytes = 1024.0 * 1024 * 1024;

}  // namespace

Status StepReferences::ensure(std::int64_t first, int count,
                              const std::function<layer::LayerSpec(std::int64_t)>& spec_at, double timeout) {
  std::vector<std::int64_t> missing;
  for (std::int64_t step = first; step < first + count; ++step) {
    if (outputs_.count(step) == 0) missing.push_back(step);
  }
  if (missing.empty()) return Status();
  const layer::LayerSpec spec = spec_at(first);
  const std::size_t values =
      static_cast<std::size_t>(spec.num_tokens()) * static_cast<std::size_t>(spec.hidden);
  const auto keep = static_cast<std::size_t>(std::max(
      kReferenceBudgetBytes / (static_cast<double>(values) * sizeof(bf16)), static_cast<double>(count)));
  // Drop the lowest steps outside this range while the range's would not fit.
  for (auto it = outputs_.begin(); it != outputs_.end() && outputs_.size() + missing.size() > keep;) {
    it = it->first >= first && it->first < first + count ? std::next(it) : outputs_.erase(it);
  }
  Status mine;
  for (std::size_t i = 0; i < missing.size() && mine.ok(); ++i) {
    if (static_cast<int>(i % static_cast<std::size_t>(mpi::size())) != mpi::rank()) continue;
    Result<std::vector<bf16>> out = layer::reference_stack_output(spec_at(missing[i]));
    if (!out.ok()) {
      mine = out.status();
    } else if (out->size() != values) {
      mine =
          Status(StatusCode::kEnvironment, fmt::format("the reference of step {} has {} values, expected {}",
                                                       missing[i], out->size(), values));
    } else {
      outputs_[missing[i]] = std::move(out).value();
    }
  }
  const Deadline deadline(timeout);
  int failed = mine.ok() ? 0 : 1;
  EPS_RETURN_IF_ERROR(
      mpi::allreduce_in_place(&failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, deadline, "the EPLB references"));
  if (!mine.ok()) return mine;
  if (failed)
    return Status(StatusCode::kEnvironment, "a reference stack failed on another rank (it says why)");
  for (std::size_t i = 0; i < missing.size(); ++i) {
    const int owner = static_cast<int>(i % static_cast<std::size_t>(mpi::size()));
    std::vector<bf16>& out = outputs_[missing[i]];
    out.resize(values);
    MPI_Request request = MPI_REQUEST_NULL;
    EPS_MPI_CHECK(
        MPI_Ibcast(out.data(), static_cast<int>(values), MPI_UINT16_T, owner, MPI_COMM_WORLD, &request));
    EPS_RETURN_IF_ERROR(mpi::wait(&request, deadline, [&] {
      return fmt::format("the reference of step {} from rank {} (rank {})", missing[i], owner, mpi::rank());
    }));
  }
  return Status();
}

Status WindowMeasurement::prepare(int iteration, bool checking) {
  if (!checking || iteration != 0) return Status();
  return references_.ensure(
      runtime_.next_step(), steps_, [this](std::int64_t step) { return runtime_.spec_at(step); }, timeout_);
}

Result<double> WindowMeasurement::run(int) {
  EPS_ASSIGN_OR_RETURN(const layer::EplbStepRecord record, runtime_.step());
  StepSummary s{record.step, record.stack_us, record.boundary_us, 0};
  for (const layer::StepRecord& l : record.layers) s.wire_received += l.wire.received;
  steps_done_.push_back(s);
  return record.stack_us;
}

Result<Mismatches> WindowMeasurement::check(int) {
  const std::int64_t step = steps_done_.back().step;
  EPS_ASSIGN_OR_RETURN(const std::vector<bf16> got, runtime_.output());
  const layer::OutputMismatches m =
      layer::compare_with_reference(runtime_.spec_at(step), mpi::rank(), got, references_.at(step));
  return Mismatches{m.count, m.count > 0 ? fmt::format("step {}: {}", step, m.first) : std::string()};
}

Status WindowMeasurement::settle() {
  const Deadline deadline(timeout_);
  // Boundary times, then the stalls of the switches at the window's boundaries (the same list on every rank).
  const std::int64_t first = steps_done_.front().step;
  const std::int64_t last = steps_done_.back().step;
  std::vector<double> times;
  for (const StepSummary& s : steps_done_) times.push_back(s.boundary_us);
  for (const layer::RebalanceRecord& r : runtime_.rebalances()) {
    if (r.switch_step - 1 < first || r.switch_step - 1 > last) continue;
    switches_.push_back({r, 0.0});
    times.push_back(r.switch_us);
  }
  EPS_RETURN_IF_ERROR(mpi::allreduce_in_place(times.data(), static_cast<int>(times.size()), MPI_DOUBLE,
                                              MPI_MAX, MPI_COMM_WORLD, deadline, "EPLB boundary times"));
  for (std::size_t i = 0; i < steps_done_.size(); ++i) steps_done_[i].boundary_us = times[i];
  for (std::size_t i = 0; i < switches_.size(); ++i) switches_[i].stall_us = times[steps_done_.size() + i];
  std::int64_t wire = 0;
  for (const StepSummary& s : steps_done_) wire += s.wire_received;
  EPS_ASSIGN_OR_RETURN(wire_received_, gather_int64(wire, deadline, "wire bytes"));
  return Status();
}

}  // namespace eps::bench
