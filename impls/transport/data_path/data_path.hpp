// The data path of a transport (docs/devices.md "Transports"): every operation on token bytes (payload rows
// and fp8 scales) as kernels of one Device: pack records, the fp8 quantizer (fused into the pack, or into
// scratch before it), unpack received records into the caller's layout, and the reductions of the
// docs/dispatch.md 5.5 combine trees. Backends differ in how bytes move, not in these.
//
// The device is config.device when the host addresses its memory (the `cpu` device) or when the data path is
// GPU-resident (below), else a `cpu` device of the data path's own, on host copies that the frame stages
// (frame.hpp). Kernels are enqueued in order on that device's queue; finish() waits for them. Host code here
// touches index data only: the index arrays the kernels take are host vectors, record headers (routing,
// records.hpp) are written and read by the host, and so are the index outputs of a dispatch (recv_topk_idx /
// weights, src_info, recv_weights). Token bytes are moved only by kernels.
//
// GPU-resident (`device_resident`, docs/devices.md 12.9): with config.memory kDevice on a device the host
// cannot address (a GPU, `cpu-isolated`), the kernels run on config.device over the caller's device buffers
// and the protocol's device regions, and no host code dereferences either. The index data crosses instead,
// through the device's copies (counted by its copy ledger, docs/devices.md 12.7): every index array a kernel
// takes is uploaded to device memory before the launch (freed at finish()), headers are written on the host
// and uploaded, and received headers are gathered on the device and read back. Only index bytes cross.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "impls/device/device.hpp"
#include "impls/transport/data_path/combine_index.hpp"
#include "impls/transport/data_path/records.hpp"
#include "impls/transport/routing/routing.hpp"

namespace eps::transport {

// Where unpacked records go in the caller's rows: consecutive rows from `first` (rows empty), or row rows[i]
// for record i.
struct RowTarget {
  std::int64_t first = 0;
  std::span<const std::int64_t> rows;

  std::int64_t row(std::int64_t i) const {
    return rows.empty() ? first + i : rows[static_cast<std::size_t>(i)];
  }
};

class DataPath {
 public:
  // Throws (value_or_throw) only when a `cpu` device cannot be made, which cannot fail with defaults.
  // `device_resident`: the protocol can run GPU-resident (above); it is only where config asks for it.
  DataPath(const TransportConfig& config, int rank, int num_ranks, bool device_resident = false);

  device::Device& device() const { return *device_; }
  // Whether token data stays in config.device's memory the host cannot address (the header comment).
  bool resident() const { return resident_; }

  // Copies `bytes` between host memory and the data path's device memory: a plain copy unless resident(),
  // else a synchronous device copy (the host side is host memory, the other the device's).
  Status read_device(void* host, const void* device_memory, std::size_t bytes);
  Status write_device(void* device_memory, const void* host, std::size_t bytes);

  // Row i of `rows` rows (row_bytes each) goes from src + src_rows[i] * src_stride (src_rows empty: i) to
  // dst + i * dst_stride, or to dst row dst_rows[i] when given (negative: skipped). Enqueued.
  Status copy_rows(std::byte* dst, std::size_t dst_stride, const std::byte* src, std::size_t src_stride,
                   std::size_t row_bytes, std::int64_t rows, std::span<const std::int64_t> src_rows,
                   std::span<const std::int64_t> dst_rows = {});

  // ---- dispatch, source side
  // Records [first, last) of `plan` as consecutive records at `dst`: headers, and the payloads gathered from
  // in.x / in.x_scales, unless in.quantize is set (then quantize_into_records writes the payloads).
  Status pack_records(const RecordFormat& format, const SendPlan& plan, const DispatchInput& in, int first,
                      int last, std::byte* dst);
  // docs/dispatch.md 5.8, fused: the payloads of every record from in.x (bf16 rows, in.quantize set), records
  // of area a (records.hpp) at areas[a]. The bytes are those pack_records would copy from quantized input.
  Status quantize_into_records(const RecordFormat& format, const QuantizePlan& plan, const DispatchInput& in,
                               const std::array<std::byte*, 2>& areas);
  // docs/dispatch.md 5.8, unfused: `in` with its rows quantized into scratch of this data path (sized for
  // T_max once) as fp8 codes and scales; `in` itself when in.quantize is not set. Waits for the kernel.
  Result<DispatchInput> quantized_input(const DispatchInput& in);

  // ---- dispatch, expert side
  // `n` received records at `records` into the caller's rows at `target`: the payload rows and scales by
  // kernels; from the headers, recv_topk_idx / recv_topk_weights (rank-major, localized), recv_weights
  // (expert-major) or src_info (LL).
  Status unpack_records(const RecordFormat& format, const std::byte* records, std::int64_t n,
                        const RowTarget& target, const DispatchOutput& out);
  // Expert-major padding rows [first, first + n) (docs/dispatch.md 5.3): zero payload, scales and weight.
  Status zero_rows(const DispatchOutput& out, std::int64_t first, std::int64_t n);

  // ---- combine, source side
  // The tree of docs/dispatch.md 5.5 for the `num_tokens` tokens of `plan` into out [T, H] from the returned
  // rows (`rows`, H bf16 values each, found through `index`); biases for the ht trees. Waits for the kernel
  // (the caller's index may die on return).
  Status reduce(CombineTree tree, const SendPlan& plan, const CombineIndex& index, const bf16* rows,
                std::span<const bf16> bias0, std::span<const bf16> bias1, std::span<bf16> out);

  // Waits until every enqueued kernel finished: the host may read what they wrote, reuse what they read
  // (and the uploaded index arrays are freed).
  Status finish();

 private:
  // `host` as a kernel reads it: itself, or (resident()) a device copy alive until finish(); null if empty.
  template <typename T>
  Result<const T*> kernel_index(std::span<const T> host);
  // Headers of records [first, last) of `plan` into the records at `dst` (records.hpp write_headers).
  Status write_record_headers(const RecordFormat& format, const SendPlan& plan, int first, int last,
                              std::byte* dst);
  // The headers of `n` records at `records`, readable by the host, header_bytes apart.
  Result<const std::byte*> headers_on_host(const RecordFormat& format, const std::byte* records,
                                           std::int64_t n);
  // The index data of `n` received records' headers into the caller's rows (unpack_records).
  void read_headers(const RecordFormat& format, const std::byte* records, std::int64_t n,
                    const RowTarget& target, const DispatchOutput& out) const;

  TransportConfig config_;
  int rank_;
  int num_ranks_;
  std::unique_ptr<device::Device> own_device_;
  device::Device* device_ = nullptr;
  bool resident_ = false;
  device::Buffer quantized_codes_, quantized_scales_;  // quantized_input's scratch
  std::vector<device::Buffer> uploads_;                // resident(): kernel_index copies until finish()
  std::vector<std::byte> headers_;  // resident(): headers on their way to / from the device
};

}  // namespace eps::transport
