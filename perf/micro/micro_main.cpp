// epsuite-micro entry point; the benchmarks register themselves from the micro_*.cpp files.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
