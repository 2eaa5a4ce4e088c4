// The timer of every bench measurement: MPI_Wtime around the measured work only (docs/architecture.md rule
// 7).
#pragma once

#include <mpi.h>

#include "reference/common/status.hpp"

namespace eps::bench {

// This rank's time in µs of `work()`, which returns a Status; a failed Status is returned instead.
template <typename Work>
Result<double> timed_us(Work work) {
  const double start = MPI_Wtime();
  EPS_RETURN_IF_ERROR(work());
  return (MPI_Wtime() - start) * 1e6;
}

}  // namespace eps::bench
