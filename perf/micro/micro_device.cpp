// The `cpu` device's kernels (docs/devices.md), one thread each: the expert kernel at the shape of
// micro_expert.cpp (compare its `flops` with BM_ExpertOpenBlasYardstick of the same run), and pack +
// quantize of 4096 rows of H = 7168 bf16 (DeepSeek-V3's hidden size) gathered in a shuffled order into
// 16-byte-aligned send records, as a dispatch packs them. `bytes` counts bf16 read plus codes and scales
// written.
#include <cstdint>
#include <vector>

#include <benchmark/benchmark.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "impls/device/device_expert.hpp"
#include "reference/data/fill.hpp"
#include "reference/expert/expert_kernel.hpp"

namespace eps::device {
namespace {

constexpr ExpertShape kShape{512, 384};
constexpr int kExpertRows = 256;

std::unique_ptr<Device> cpu_device(benchmark::State& state) {
  CpuDeviceOptions options;
  options.isa = static_cast<CpuIsa>(state.range(0));
  std::unique_ptr<Device> device = value_or_throw(make_cpu_device(options));
  state.SetLabel(device->properties().architecture);
  return device;
}

void isa_args(benchmark::internal::Benchmark* b) {
  for (CpuIsa isa : available_cpu_isas()) b->Arg(static_cast<int>(isa));
}

void run_device_expert(benchmark::State& state, ExpertShape shape, int rows) {
  std::unique_ptr<Device> device = cpu_device(state);
  const ExpertWeights weights = value_or_throw(generate_expert_weights(1, 0, ExpertRole::kRouted, 0, shape));
  std::vector<bf16> x(static_cast<std::size_t>(rows) * shape.hidden);
  throw_if_error(data::fill_payload(1, 0, 0, rows, shape.hidden, x));
  std::vector<bf16> y(x.size());
  DeviceExpert expert = value_or_throw(DeviceExpert::create(*device, weights));
  for (auto _ : state) {
    throw_if_error(expert.forward(x.data(), rows, y.data()));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * rows * 3.0 * shape.ffn * shape.hidden;
  state.counters["flops"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DeviceExpert(benchmark::State& state) { run_device_expert(state, kShape, kExpertRows); }
BENCHMARK(BM_DeviceExpert)->Apply(isa_args)->Unit(benchmark::kMillisecond);

// The smoke preset's routed expert (H 256, F 128) on the ~85 rows one local expert receives per layer at 2
// ranks and 256 tokens per rank (256 x 4 slots x 2 ranks / 24 experts): the yardstick of `bench layer`'s
// expert_gflops_per_rank.
void BM_DeviceExpertSmokeShape(benchmark::State& state) { run_device_expert(state, {256, 128}, 85); }
BENCHMARK(BM_DeviceExpertSmokeShape)->Apply(isa_args)->Unit(benchmark::kMicrosecond);

constexpr int kPackRows = 4096;
constexpr int kPackHidden = 7168;
constexpr int kPackGroups = kPackHidden / kFp8GroupSize;
constexpr std::int64_t kRecordBytes = (16 + kPackHidden + 4 * kPackGroups + 15) / 16 * 16;

void BM_DevicePackQuantize(benchmark::State& state) {
  std::unique_ptr<Device> device = cpu_device(state);
  std::vector<bf16> x(static_cast<std::size_t>(kPackRows) * kPackHidden);
  throw_if_error(data::fill_payload(2, 0, 0, kPackRows, kPackHidden, x));
  std::vector<std::int64_t> order(kPackRows);
  for (int i = 0; i < kPackRows; ++i) order[static_cast<std::size_t>(i)] = (i * 2654435761u) % kPackRows;
  Buffer records = value_or_throw(device->allocate(kPackRows * kRecordBytes, MemoryKind::kDevice));
  const Fp8QuantizeArgs args{x.data(),     kPackHidden,
                             order.data(), records.as<std::uint8_t>() + 16,
                             kRecordBytes, records.as<std::byte>() + 16 + kPackHidden,
                             kRecordBytes, kPackRows,
                             kPackHidden,  Fp8ScaleMode::kAmax};
  for (auto _ : state) {
    throw_if_error(device->run(args));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(records.data());
  }
  const double bytes = static_cast<double>(kPackRows) * (2.0 * kPackHidden + kPackHidden + 4.0 * kPackGroups);
  state.counters["bytes"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DevicePackQuantize)->Apply(isa_args)->Unit(benchmark::kMillisecond);

// The bf16 pack alone (copy_rows into the same records): the memory-bandwidth yardstick of the quantizer.
void BM_DevicePackRows(benchmark::State& state) {
  std::unique_ptr<Device> device = cpu_device(state);
  std::vector<bf16> x(static_cast<std::size_t>(kPackRows) * kPackHidden);
  throw_if_error(data::fill_payload(2, 0, 0, kPackRows, kPackHidden, x));
  std::vector<std::int64_t> order(kPackRows);
  for (int i = 0; i < kPackRows; ++i) order[static_cast<std::size_t>(i)] = (i * 2654435761u) % kPackRows;
  constexpr std::int64_t kRowBytes = 2 * kPackHidden;
  Buffer records = value_or_throw(device->allocate(kPackRows * (kRowBytes + 16), MemoryKind::kDevice));
  const CopyRowsArgs args{records.as<std::byte>() + 16,
                          reinterpret_cast<const std::byte*>(x.data()),
                          kPackRows,
                          kRowBytes,
                          kRowBytes + 16,
                          kRowBytes,
                          nullptr,
                          order.data()};
  for (auto _ : state) {
    throw_if_error(device->run(args));
    benchmark::DoNotOptimize(records.data());
  }
  state.counters["bytes"] =
      benchmark::Counter(2.0 * kPackRows * kRowBytes, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DevicePackRows)->Apply(isa_args)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace eps::device
