// The hot paths of the transports' data path on the `cpu` device (impls/transport/data_path/data_path.hpp),
// each next to its yardstick in the same run, so that a case reads as a ratio: compare `bytes` (bytes read
// plus written per second) of a path with its yardstick's at the same shape.
//   BM_CombineHtRank/H       ht-rank tree of 256 tokens with 2 returned rows each (2 ranks), no bias.
//   BM_CombineLlWeighted/H   ll-weighted tree of 128 tokens x 8 valid slots.
//   BM_MemcpyYardstick/B     one memcpy of B bytes (bytes counter: read + written), B = what the combine of
//   the
//                            same H reads: the plain-copy ceiling of a reduction that reads each row once.
//   BM_CombineLlOpenBlasYardstick/H  the ll-weighted sum as OpenBLAS sgemv per token (fp32 rows: y = w^T Y).
//   BM_PackGather/H          a dispatch pack: 256 fp8 rows (H codes + H/128 scales) gathered in a shuffled
//   order
//                            into 16-byte-aligned records (two copy_rows kernels, as the direct protocol
//                            packs).
//   BM_UnpackRun/H           the unpack of those records: one strided copy per run of rows, no index list.
//   BM_RecordCopyYardstick/H memcpy of the same record bytes as one block.
// H is 256 (the smoke preset) and 7168 (DeepSeek-V3).
//   BM_QuantizeThenPack/rows/fold    an fp8 dispatch pack of `rows` bf16 tokens of H = 7168, each packed into
//                                    `fold` records (K-fold gather, shuffled): fp8_quantize into a [rows, H]
//                                    buffer, then the two copy_rows gathers of BM_PackGather.
//   BM_QuantizeIntoRecords/rows/fold the records of the direct protocol's pack (docs/dispatch.md
//                                    5.8): one fp8_quantize gathers each token's bf16 row once and scatters
//                                    codes and scales into its first record, then one copy_rows copies that
//                                    record's codes and scales into the token's other fold - 1 records. Same
//                                    records, bit for bit; compare the times.
#include <cblas.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <benchmark/benchmark.h>

#include "impls/device/cpu/cpu_device.hpp"
#include "reference/data/fill.hpp"

namespace eps::device {
namespace {

constexpr int kHtTokens = 256;
constexpr int kHtRecordsPerToken = 2;
constexpr int kLlTokens = 128;
constexpr int kLlSlots = 8;
constexpr int kPackRows = 256;

std::unique_ptr<Device> widest_cpu_device(benchmark::State& state) {
  std::unique_ptr<Device> device = value_or_throw(make_cpu_device());
  state.SetLabel(device->properties().architecture);
  return device;
}

std::vector<bf16> payload_rows(int rows, int hidden) {
  std::vector<bf16> x(static_cast<std::size_t>(rows) * hidden);
  throw_if_error(data::fill_payload(3, 0, 0, rows, hidden, x));
  return x;
}

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["bytes"] =
      benchmark::Counter(bytes_per_iteration, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CombineHtRank(benchmark::State& state) {
  const auto hidden = static_cast<int>(state.range(0));
  std::unique_ptr<Device> device = widest_cpu_device(state);
  const std::vector<bf16> rows = payload_rows(kHtTokens * kHtRecordsPerToken, hidden);
  std::vector<std::int64_t> token_begin(kHtTokens + 1);
  std::vector<std::int64_t> record_rows(static_cast<std::size_t>(kHtTokens) * kHtRecordsPerToken);
  for (int t = 0; t <= kHtTokens; ++t) token_begin[static_cast<std::size_t>(t)] = t * kHtRecordsPerToken;
  for (std::size_t j = 0; j < record_rows.size(); ++j) {
    const auto q = static_cast<std::int64_t>(j % kHtRecordsPerToken);
    record_rows[j] = q * kHtTokens + static_cast<std::int64_t>(j / kHtRecordsPerToken);  // rank q's slot
  }
  std::vector<bf16> out(static_cast<std::size_t>(kHtTokens) * hidden);
  CombineHtArgs args;
  args.out = out.data();
  args.tokens = kHtTokens;
  args.hidden = hidden;
  args.token_begin = token_begin.data();
  args.record_rows = record_rows.data();
  args.rows = rows.data();
  args.row_stride = hidden;
  for (auto _ : state) {
    throw_if_error(device->run(args));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2.0 * (static_cast<double>(rows.size()) + static_cast<double>(out.size())));
}
BENCHMARK(BM_CombineHtRank)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

void BM_CombineLlWeighted(benchmark::State& state) {
  const auto hidden = static_cast<int>(state.range(0));
  std::unique_ptr<Device> device = widest_cpu_device(state);
  const std::vector<bf16> rows = payload_rows(kLlTokens * kLlSlots, hidden);
  std::vector<std::int64_t> slot_rows(static_cast<std::size_t>(kLlTokens) * kLlSlots);
  std::vector<float> weights(slot_rows.size());
  for (std::size_t i = 0; i < slot_rows.size(); ++i) {
    slot_rows[i] = static_cast<std::int64_t>(i);
    weights[i] = 0.125f + 0.0078125f * static_cast<float>(i % kLlSlots);
  }
  std::vector<bf16> out(static_cast<std::size_t>(kLlTokens) * hidden);
  const CombineLlArgs args{out.data(),     kLlTokens,        hidden,      kLlSlots,
                           weights.data(), slot_rows.data(), rows.data(), hidden};
  for (auto _ : state) {
    throw_if_error(device->run(args));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2.0 * (static_cast<double>(rows.size()) + static_cast<double>(out.size())));
}
BENCHMARK(BM_CombineLlWeighted)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

// The bytes the combines above read: ht 256 x 2 rows, ll 128 x 8 rows, of 2H bytes.
void memcpy_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t hidden : {256, 7168}) {
    b->Arg(2 * hidden * kHtTokens * kHtRecordsPerToken);
    b->Arg(2 * hidden * kLlTokens * kLlSlots);
  }
}

void BM_MemcpyYardstick(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  // dst 64 bytes past a page boundary relative to src: equal page offsets of large buffers make some CPUs'
  // copies several times slower (4 KiB aliasing), which would flatter every ratio against this yardstick.
  constexpr std::size_t kSkew = 64;
  std::vector<std::byte> src(bytes, std::byte{1});
  std::vector<std::byte> dst(bytes + kSkew);
  for (auto _ : state) {
    std::memcpy(dst.data() + kSkew, src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, 2.0 * static_cast<double>(bytes));
}
BENCHMARK(BM_MemcpyYardstick)->Apply(memcpy_sizes)->Unit(benchmark::kMicrosecond);

void BM_CombineLlOpenBlasYardstick(benchmark::State& state) {
  const auto hidden = static_cast<int>(state.range(0));
  const std::vector<bf16> narrow = payload_rows(kLlTokens * kLlSlots, hidden);
  std::vector<float> rows(narrow.size());
  std::transform(narrow.begin(), narrow.end(), rows.begin(), [](bf16 v) { return v.to_float(); });
  std::vector<float> weights(static_cast<std::size_t>(kLlTokens) * kLlSlots, 0.125f);
  std::vector<float> out(static_cast<std::size_t>(kLlTokens) * hidden);
  for (auto _ : state) {
    for (int t = 0; t < kLlTokens; ++t) {
      cblas_sgemv(CblasRowMajor, CblasTrans, kLlSlots, hidden, 1.0f,
                  rows.data() + static_cast<std::size_t>(t) * kLlSlots * hidden, hidden,
                  weights.data() + static_cast<std::size_t>(t) * kLlSlots, 1, 0.0f,
                  out.data() + static_cast<std::size_t>(t) * hidden, 1);
    }
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 4.0 * (static_cast<double>(rows.size()) + static_cast<double>(out.size())));
}
BENCHMARK(BM_CombineLlOpenBlasYardstick)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

// fp8 records as DirectTransport lays them out: 16-byte header, H codes, H/128 scales, rounded to 16 bytes.
struct Fp8Records {
  explicit Fp8Records(int hidden)
      : row_bytes(hidden),
        scale_bytes(4 * (hidden / 128)),
        record_bytes((16 + row_bytes + scale_bytes + 15) / 16 * 16),
        codes(static_cast<std::size_t>(kPackRows) * row_bytes, std::byte{0x38}),
        scales(static_cast<std::size_t>(kPackRows) * scale_bytes, std::byte{0x3f}),
        records(static_cast<std::size_t>(kPackRows) * record_bytes),
        order(kPackRows) {
    for (int i = 0; i < kPackRows; ++i) order[static_cast<std::size_t>(i)] = (i * 2654435761u) % kPackRows;
  }
  std::int64_t row_bytes, scale_bytes, record_bytes;
  std::vector<std::byte> codes, scales, records;
  std::vector<std::int64_t> order;
  double payload_bytes() const { return 2.0 * kPackRows * static_cast<double>(row_bytes + scale_bytes); }
};

void BM_PackGather(benchmark::State& state) {
  std::unique_ptr<Device> device = widest_cpu_device(state);
  Fp8Records r(static_cast<int>(state.range(0)));
  const CopyRowsArgs rows{r.records.data() + 16, r.codes.data(), kPackRows, r.row_bytes,
                          r.record_bytes,        r.row_bytes,    nullptr,   r.order.data()};
  const CopyRowsArgs scales{r.records.data() + 16 + r.row_bytes,
                            r.scales.data(),
                            kPackRows,
                            r.scale_bytes,
                            r.record_bytes,
                            r.scale_bytes,
                            nullptr,
                            r.order.data()};
  for (auto _ : state) {
    throw_if_error(device->run(rows));
    throw_if_error(device->run(scales));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(r.records.data());
  }
  set_bytes(state, r.payload_bytes());
}
BENCHMARK(BM_PackGather)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

void BM_UnpackRun(benchmark::State& state) {
  std::unique_ptr<Device> device = widest_cpu_device(state);
  Fp8Records r(static_cast<int>(state.range(0)));
  const CopyRowsArgs rows{r.codes.data(), r.records.data() + 16, kPackRows, r.row_bytes,
                          r.row_bytes,    r.record_bytes,        nullptr,   nullptr};
  const CopyRowsArgs scales{r.scales.data(), r.records.data() + 16 + r.row_bytes,
                            kPackRows,       r.scale_bytes,
                            r.scale_bytes,   r.record_bytes,
                            nullptr,         nullptr};
  for (auto _ : state) {
    throw_if_error(device->run(rows));
    throw_if_error(device->run(scales));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(r.codes.data());
  }
  set_bytes(state, r.payload_bytes());
}
BENCHMARK(BM_UnpackRun)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

void BM_RecordCopyYardstick(benchmark::State& state) {
  Fp8Records r(static_cast<int>(state.range(0)));
  const auto bytes = static_cast<std::size_t>(kPackRows * (r.row_bytes + r.scale_bytes));
  std::vector<std::byte> src(bytes, std::byte{1});
  for (auto _ : state) {
    std::memcpy(r.records.data(), src.data(), bytes);
    benchmark::DoNotOptimize(r.records.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, r.payload_bytes());
}
BENCHMARK(BM_RecordCopyYardstick)->Arg(256)->Arg(7168)->Unit(benchmark::kMicrosecond);

constexpr int kQuantizeHidden = 7168;

// The fp8 records of a K-fold pack: `rows` bf16 tokens, each the source of `fold` records, records in a
// shuffled order (record i packs token order[i]); records laid out as in Fp8Records.
struct QuantizePack {
  QuantizePack(int tokens, int fold)
      : rows(tokens),
        records(static_cast<std::int64_t>(tokens) * fold),
        scale_bytes(4 * (kQuantizeHidden / kFp8GroupSize)),
        record_bytes((16 + kQuantizeHidden + scale_bytes + 15) / 16 * 16),
        x(payload_rows(tokens, kQuantizeHidden)),
        codes(static_cast<std::size_t>(tokens) * kQuantizeHidden),
        scales(static_cast<std::size_t>(tokens) * scale_bytes),
        out(static_cast<std::size_t>(records * record_bytes)),
        order(static_cast<std::size_t>(records)) {
    // An odd multiplier permutes [0, records) (a power of two); mod rows names every token `fold` times.
    for (std::int64_t i = 0; i < records; ++i)
      order[static_cast<std::size_t>(i)] = (static_cast<std::uint32_t>(i) * 2654435761u) % records % rows;
    // The fused pack's plan (QuantizePlan of DirectTransport): each token's first record, and copies from it.
    std::vector<std::int64_t> first(static_cast<std::size_t>(rows), -1);
    for (std::int64_t i = 0; i < records; ++i) {
      std::int64_t& f = first[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
      if (f < 0) {
        f = i;
        quantize_src.push_back(order[static_cast<std::size_t>(i)]);
        quantize_dst.push_back(i);
      } else {
        copy_src.push_back(f);
        copy_dst.push_back(i);
      }
    }
  }
  // fp8_quantize of the bf16 rows `src_rows` (null: 0..n) into codes / scales at the given byte strides.
  Fp8QuantizeArgs quantize(const std::int64_t* src_rows, std::int64_t n, std::byte* to_codes,
                           std::int64_t codes_stride, std::byte* to_scales,
                           std::int64_t scales_stride) const {
    return {x.data(),        kQuantizeHidden,
            src_rows,        reinterpret_cast<std::uint8_t*>(to_codes),
            codes_stride,    to_scales,
            scales_stride,   n,
            kQuantizeHidden, kMode};
  }
  static constexpr Fp8ScaleMode kMode = Fp8ScaleMode::kRoundScale;
  std::int64_t rows, records, scale_bytes, record_bytes;
  std::vector<bf16> x;
  std::vector<std::byte> codes, scales, out;
  std::vector<std::int64_t> order;
  std::vector<std::int64_t> quantize_src, quantize_dst, copy_src, copy_dst;
};

void BM_QuantizeThenPack(benchmark::State& state) {
  std::unique_ptr<Device> device = widest_cpu_device(state);
  QuantizePack p(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  const Fp8QuantizeArgs quantize =
      p.quantize(nullptr, p.rows, p.codes.data(), kQuantizeHidden, p.scales.data(), p.scale_bytes);
  const CopyRowsArgs gather_codes{p.out.data() + 16, p.codes.data(),  p.records, kQuantizeHidden,
                                  p.record_bytes,    kQuantizeHidden, nullptr,   p.order.data()};
  const CopyRowsArgs gather_scales{p.out.data() + 16 + kQuantizeHidden,
                                   p.scales.data(),
                                   p.records,
                                   p.scale_bytes,
                                   p.record_bytes,
                                   p.scale_bytes,
                                   nullptr,
                                   p.order.data()};
  for (auto _ : state) {
    throw_if_error(device->run(quantize));
    throw_if_error(device->run(gather_codes));
    throw_if_error(device->run(gather_scales));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(p.out.data());
  }
}
BENCHMARK(BM_QuantizeThenPack)
    ->ArgNames({"rows", "fold"})
    ->ArgsProduct({{256, 4096}, {1, 4}})
    ->Unit(benchmark::kMicrosecond);

void BM_QuantizeIntoRecords(benchmark::State& state) {
  std::unique_ptr<Device> device = widest_cpu_device(state);
  QuantizePack p(static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
  Fp8QuantizeArgs fused =
      p.quantize(p.quantize_src.data(), static_cast<std::int64_t>(p.quantize_src.size()), p.out.data() + 16,
                 p.record_bytes, p.out.data() + 16 + kQuantizeHidden, p.record_bytes);
  fused.dst_rows = p.quantize_dst.data();
  const CopyRowsArgs duplicates{p.out.data() + 16,
                                p.out.data() + 16,
                                static_cast<std::int64_t>(p.copy_src.size()),
                                kQuantizeHidden + p.scale_bytes,
                                p.record_bytes,
                                p.record_bytes,
                                p.copy_dst.data(),
                                p.copy_src.data()};
  for (auto _ : state) {
    throw_if_error(device->run(fused));
    if (duplicates.rows > 0) throw_if_error(device->run(duplicates));
    throw_if_error(device->synchronize());
    benchmark::DoNotOptimize(p.out.data());
  }
}
BENCHMARK(BM_QuantizeIntoRecords)
    ->ArgNames({"rows", "fold"})
    ->ArgsProduct({{256, 4096}, {1, 4}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace eps::device
