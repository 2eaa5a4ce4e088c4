#include "impls/device/tests/kernel_checks.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "impls/channel/fifo_host.hpp"
#include "impls/device/device_expert.hpp"
#include "reference/data/philox.hpp"
#include "reference/data/values.hpp"
#include "reference/dispatch/combine.hpp"
#include "reference/expert/expert_kernel.hpp"
#include "reference/numerics/quant.hpp"

namespace eps::device::testing {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

// A device buffer of `count` elements pre-filled with 0xA5 bytes, so that unwritten elements show.
template <typename T>
Buffer poisoned(Device& device, std::size_t count) {
  Buffer b =
      value_or_throw(device.allocate(std::max<std::size_t>(1, count * sizeof(T)), MemoryKind::kDevice));
  throw_if_error(device.fill(b.data(), 0xA5, count * sizeof(T)));
  return b;
}

// Deterministic test values: bf16 payloads of docs/numerics.md 2.2 scaled by 2^(i % 7 - 3).
std::vector<bf16> test_rows(std::uint64_t seed, int rows, int cols) {
  std::vector<bf16> x(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      const float v =
          data::payload_value(seed, 0, static_cast<std::uint32_t>(r), static_cast<std::uint32_t>(c))
              .to_float();
      x[static_cast<std::size_t>(r) * cols + c] = bf16::from_float(std::ldexp(v, (r * 3 + c) % 7 - 3));
    }
  }
  return x;
}

template <typename T>
AssertionResult bits_equal(std::string_view what, const T* expected, const T* actual, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(&expected[i], &actual[i], sizeof(T)) != 0) {
      std::uint64_t e = 0;
      std::uint64_t a = 0;
      std::memcpy(&e, &expected[i], sizeof(T));
      std::memcpy(&a, &actual[i], sizeof(T));
      return AssertionFailure() << fmt::format("{}: element {} expected bits {:#x}, got {:#x}", what, i, e,
                                               a);
    }
  }
  return AssertionSuccess();
}

}  // namespace

AssertionResult check_copy_rows(Device& device) {
  constexpr int kRows = 9;
  constexpr int kRowBytes = 1100;  // three chunks, the last one partial
  std::vector<std::byte> src(static_cast<std::size_t>(kRows) * kRowBytes);
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<std::byte>((i * 131 + 7) % 251);
  const std::vector<std::int64_t> src_rows{8, 0, 3, 3, 5};
  const std::vector<std::int64_t> dst_rows{2, -1, 0, 4, 1};
  constexpr int kDstStride = 1200;
  Buffer d_src = upload(device, src);
  Buffer d_src_rows = upload(device, src_rows);
  Buffer d_dst_rows = upload(device, dst_rows);
  Buffer d_dst = poisoned<std::byte>(device, 5 * kDstStride);
  const Status launched =
      device.run(CopyRowsArgs{d_dst.as<std::byte>(), d_src.as<std::byte>(), 5, kRowBytes, kDstStride,
                              kRowBytes, d_dst_rows.as<std::int64_t>(), d_src_rows.as<std::int64_t>()});
  if (!launched.ok()) return AssertionFailure() << launched.message();
  const std::vector<std::byte> got = download<std::byte>(device, d_dst, 5 * kDstStride);
  std::vector<std::byte> want(5 * kDstStride, std::byte{0xA5});
  for (std::size_t i = 0; i < src_rows.size(); ++i) {
    if (dst_rows[i] < 0) continue;
    std::memcpy(want.data() + dst_rows[i] * kDstStride, src.data() + src_rows[i] * kRowBytes, kRowBytes);
  }
  return bits_equal("copy_rows", want.data(), got.data(), want.size());
}

AssertionResult check_fp8(Device& device) {
  constexpr int kRows = 6;
  constexpr int kHidden = 384;
  std::vector<bf16> x = test_rows(11, kRows, kHidden);
  x[5] = bf16::from_bits(0x7fc1);                                               // NaN in row 0, group 0
  x[kHidden + 200] = bf16::from_float(std::numeric_limits<float>::infinity());  // inf in row 1, group 1
  for (int c = 0; c < 128; ++c) x[2 * kHidden + c] = bf16::from_float(0.0f);    // an all-zero group
  const std::vector<std::int64_t> order{3, 0, 5, 1, 4, 2};
  for (Fp8ScaleMode mode : {Fp8ScaleMode::kAmax, Fp8ScaleMode::kRoundScale}) {
    std::vector<bf16> gathered;
    for (std::int64_t r : order)
      gathered.insert(gathered.end(), x.begin() + r * kHidden, x.begin() + (r + 1) * kHidden);
    const Fp8Batch want = value_or_throw(quantize_fp8_per_token(gathered, kRows, kHidden, mode));
    // Records of [codes | scales | 16 bytes of slack], as a pack writes them.
    constexpr int kRecord = kHidden + 3 * 4 + 16;
    Buffer d_x = upload(device, x);
    Buffer d_order = upload(device, order);
    Buffer d_records = poisoned<std::byte>(device, kRows * kRecord);
    Fp8QuantizeArgs q{d_x.as<bf16>(),
                      kHidden,
                      d_order.as<std::int64_t>(),
                      d_records.as<std::uint8_t>(),
                      kRecord,
                      d_records.as<std::byte>() + kHidden,
                      kRecord,
                      kRows,
                      kHidden,
                      mode};
    const Status launched = device.run(q);
    if (!launched.ok()) return AssertionFailure() << launched.message();
    const std::vector<std::byte> records = download<std::byte>(device, d_records, kRows * kRecord);
    for (int r = 0; r < kRows; ++r) {
      const auto* codes = reinterpret_cast<const std::uint8_t*>(records.data() + r * kRecord);
      AssertionResult codes_ok =
          bits_equal(fmt::format("fp8 codes of row {}", r), want.codes.data() + r * kHidden, codes, kHidden);
      if (!codes_ok) return codes_ok;
      float scales[3];
      std::memcpy(scales, records.data() + r * kRecord + kHidden, sizeof scales);
      AssertionResult scales_ok =
          bits_equal(fmt::format("fp8 scales of row {}", r), want.scales.data() + r * 3, scales, 3);
      if (!scales_ok) return scales_ok;
    }
    // Scattered: row i into record dst_rows[i] of 7 (a negative entry skips its row), as a pack quantizes
    // each token once into its first record. Records 1 (skipped), 3 and 5 are not written.
    {
      constexpr int kScattered = 7;
      const std::vector<std::int64_t> dst_rows{4, -1, 0, 6, 2, 1};
      Buffer d_dst_rows = upload(device, dst_rows);
      Buffer d_scattered = poisoned<std::byte>(device, kScattered * kRecord);
      Fp8QuantizeArgs scattered = q;
      scattered.codes = d_scattered.as<std::uint8_t>();
      scattered.scales = d_scattered.as<std::byte>() + kHidden;
      scattered.dst_rows = d_dst_rows.as<std::int64_t>();
      const Status ran = device.run(scattered);
      if (!ran.ok()) return AssertionFailure() << ran.message();
      std::vector<std::byte> want_records(kScattered * kRecord, std::byte{0xA5});
      for (int r = 0; r < kRows; ++r) {
        if (dst_rows[static_cast<std::size_t>(r)] < 0) continue;
        std::byte* at = want_records.data() + dst_rows[static_cast<std::size_t>(r)] * kRecord;
        std::memcpy(at, want.codes.data() + r * kHidden, kHidden);
        std::memcpy(at + kHidden, want.scales.data() + r * 3, 3 * 4);
      }
      AssertionResult scattered_ok = bits_equal(
          "fp8 quantize scattered by dst_rows", want_records.data(),
          download<std::byte>(device, d_scattered, want_records.size()).data(), want_records.size());
      if (!scattered_ok) return scattered_ok;
    }
    // Dequantization from the same records.
    const std::vector<float> want_x = value_or_throw(dequantize_fp8_per_token(want));
    Buffer d_out = poisoned<float>(device, kRows * kHidden);
    const Status deq = device.run(Fp8DequantizeArgs{d_records.as<std::uint8_t>(), kRecord,
                                                    d_records.as<std::byte>() + kHidden, kRecord,
                                                    d_out.as<float>(), kHidden, kRows, kHidden});
    if (!deq.ok()) return AssertionFailure() << deq.message();
    const std::vector<float> got_x = download<float>(device, d_out, kRows * kHidden);
    AssertionResult deq_ok = bits_equal("fp8 dequantize", want_x.data(), got_x.data(), want_x.size());
    if (!deq_ok) return deq_ok;
    // The bf16 output: bf16 of the same values.
    std::vector<bf16> want_narrow(want_x.size());
    for (std::size_t i = 0; i < want_x.size(); ++i) want_narrow[i] = bf16::from_float(want_x[i]);
    Buffer d_narrow = poisoned<bf16>(device, kRows * kHidden);
    Fp8DequantizeArgs narrow{d_records.as<std::uint8_t>(),
                             kRecord,
                             d_records.as<std::byte>() + kHidden,
                             kRecord,
                             nullptr,
                             kHidden,
                             kRows,
                             kHidden};
    narrow.out_bf16 = d_narrow.as<bf16>();
    const Status deq_narrow = device.run(narrow);
    if (!deq_narrow.ok()) return AssertionFailure() << deq_narrow.message();
    AssertionResult narrow_ok =
        bits_equal("fp8 dequantize to bf16", want_narrow.data(),
                   download<bf16>(device, d_narrow, want_narrow.size()).data(), want_narrow.size());
    if (!narrow_ok) return narrow_ok;
  }
  return AssertionSuccess();
}

namespace {

constexpr int kCombineRanks = 6;
constexpr int kCombineHidden = 130;  // three channel blocks, the last one partial

// Routing of rank 0's tokens over 12 experts on 6 ranks (2 per rank), K = 4, with masked slots and a token
// without any slot; the other ranks have no tokens.
dispatch::DispatchPlan combine_plan() {
  dispatch::DispatchConfig config{kCombineRanks, 12, 4, kCombineHidden, 8};
  std::vector<dispatch::RankRouting> routing(kCombineRanks);
  routing[0].num_tokens = 5;
  routing[0].topk_idx = {0, 5, 11, 2, -1, 7, 6, -1, -1, -1, -1, -1, 9, 10, 1, 3, 4, -1, 8, 0};
  routing[0].topk_weights = {0.5f, 0.25f, 1.5f, -0.75f, 9.0f,   0.125f, 3.0f, 9.0f, 9.0f,  9.0f,
                             9.0f, 9.0f,  1.0f, -2.0f,  0.375f, 0.625f, 0.3f, 9.0f, -0.1f, 0.7f};
  return value_or_throw(dispatch::DispatchPlan::make(config, routing));
}

bf16 partial_value(int q, int t, int k, int c) {
  return bf16::from_float(
      data::payload_from_bits(data::stream_bits(5, {data::DataStream::kPayload, 1, 0},
                                                static_cast<std::uint32_t>((q + 1) * 64 + t * 8 + k + 1),
                                                static_cast<std::uint32_t>(c))) *
      3.0f);
}

AssertionResult check_combine_ll(Device& device, const dispatch::DispatchPlan& plan) {
  const int tokens = plan.num_tokens(0);
  const int k_max = plan.top_k();
  std::vector<bf16> rows;
  std::vector<std::int64_t> slot_rows(static_cast<std::size_t>(tokens) * k_max, -1);
  for (int t = 0; t < tokens; ++t) {
    for (int k = 0; k < k_max; ++k) {
      if (plan.topk_idx(0, t)[k] < 0) continue;
      slot_rows[static_cast<std::size_t>(t) * k_max + k] =
          static_cast<std::int64_t>(rows.size() / kCombineHidden);
      for (int c = 0; c < kCombineHidden; ++c) rows.push_back(partial_value(-1, t, k, c));
    }
  }
  const auto want =
      value_or_throw(dispatch::expected_ll_combine(plan, 0, [](int, int t, int k, std::span<bf16> row) {
        for (int c = 0; c < kCombineHidden; ++c) row[c] = partial_value(-1, t, k, c);
      }));
  std::vector<float> weights;
  for (int t = 0; t < tokens; ++t)
    weights.insert(weights.end(), plan.topk_weights(0, t).begin(), plan.topk_weights(0, t).end());
  Buffer d_rows = upload(device, rows);
  Buffer d_slots = upload(device, slot_rows);
  Buffer d_weights = upload(device, weights);
  Buffer d_out = poisoned<bf16>(device, want.size());
  const Status s =
      device.run(CombineLlArgs{d_out.as<bf16>(), tokens, kCombineHidden, k_max, d_weights.as<float>(),
                               d_slots.as<std::int64_t>(), d_rows.as<bf16>(), kCombineHidden});
  if (!s.ok()) return AssertionFailure() << s.message();
  const std::vector<bf16> got = download<bf16>(device, d_out, want.size());
  return bits_equal("combine_ll", want.data(), got.data(), want.size());
}

// `groups` empty = ht-rank; else ht-two-level over NodeLayout::from_groups(groups).
AssertionResult check_combine_ht(Device& device, const dispatch::DispatchPlan& plan,
                                 const std::vector<int>& groups, bool bias) {
  const NodeLayout nodes = NodeLayout::from_groups(groups);
  const int tokens = plan.num_tokens(0);
  std::vector<bf16> rows;
  std::vector<std::int64_t> token_begin{0};
  std::vector<std::int64_t> record_rows;
  std::vector<std::int32_t> record_nodes;
  for (int t = 0; t < tokens; ++t) {
    for (int q : plan.dst_ranks(0, t)) {
      record_rows.push_back(static_cast<std::int64_t>(rows.size() / kCombineHidden));
      if (!groups.empty()) record_nodes.push_back(nodes.node_of[static_cast<std::size_t>(q)]);
      for (int c = 0; c < kCombineHidden; ++c) rows.push_back(partial_value(q, t, 0, c));
    }
    token_begin.push_back(static_cast<std::int64_t>(record_rows.size()));
  }
  const auto partial = [](int q, int, int t, std::span<bf16> row) {
    for (int c = 0; c < kCombineHidden; ++c) row[c] = partial_value(q, t, 0, c);
  };
  const auto bias_row = [](int which) {
    return [which](int, int t, std::span<bf16> row) {
      for (int c = 0; c < kCombineHidden; ++c) row[c] = partial_value(40 + which, t, 1, c);
    };
  };
  dispatch::CombineBias biases;
  std::vector<bf16> bias0, bias1;
  if (bias) {
    biases = {bias_row(0), bias_row(1)};
    for (int t = 0; t < tokens; ++t) {
      for (int c = 0; c < kCombineHidden; ++c) {
        bias0.push_back(partial_value(40, t, 1, c));
        bias1.push_back(partial_value(41, t, 1, c));
      }
    }
  }
  const auto want = value_or_throw(
      groups.empty() ? dispatch::expected_ht_rank_combine(plan, 0, partial, biases)
                     : dispatch::expected_ht_two_level_combine(plan, 0, nodes, partial, biases));
  Buffer d_rows = upload(device, rows);
  Buffer d_begin = upload(device, token_begin);
  Buffer d_record_rows = upload(device, record_rows);
  Buffer d_record_nodes = upload(device, record_nodes);
  Buffer d_bias0 = upload(device, bias0);
  Buffer d_bias1 = upload(device, bias1);
  Buffer d_out = poisoned<bf16>(device, want.size());
  CombineHtArgs args{d_out.as<bf16>(),
                     tokens,
                     kCombineHidden,
                     d_begin.as<std::int64_t>(),
                     d_record_rows.as<std::int64_t>(),
                     groups.empty() ? nullptr : d_record_nodes.as<std::int32_t>(),
                     d_rows.as<bf16>(),
                     kCombineHidden,
                     bias ? d_bias0.as<bf16>() : nullptr,
                     bias ? d_bias1.as<bf16>() : nullptr};
  const Status s = device.run(args);
  if (!s.ok()) return AssertionFailure() << s.message();
  const std::vector<bf16> got = download<bf16>(device, d_out, want.size());
  return bits_equal(fmt::format("combine_ht (nodes [{}], bias {})", fmt::join(groups, " "), bias),
                    want.data(), got.data(), want.size());
}

}  // namespace

AssertionResult check_combine(Device& device) {
  const dispatch::DispatchPlan plan = combine_plan();
  AssertionResult ll = check_combine_ll(device, plan);
  if (!ll) return ll;
  // ht-rank; nodes of 1, 2 and 3 ranks; nodes of unequal size and of non-consecutive ranks (5.5.1).
  const std::vector<std::vector<int>> layouts{
      {}, {0, 1, 2, 3, 4, 5}, {0, 0, 1, 1, 2, 2}, {0, 0, 0, 1, 1, 1}, {0, 1, 1, 1, 1, 2}, {0, 1, 0, 2, 1, 0}};
  for (const std::vector<int>& groups : layouts) {
    for (bool bias : {false, true}) {
      AssertionResult ht = check_combine_ht(device, plan, groups, bias);
      if (!ht) return ht;
    }
  }
  return AssertionSuccess();
}

AssertionResult check_expert(Device& device) {
  for (ExpertShape shape : {ExpertShape{128, 256}, ExpertShape{70, 37}}) {
    const ExpertWeights weights =
        value_or_throw(generate_expert_weights(3, 1, ExpertRole::kRouted, 2, shape));
    const Expert reference = value_or_throw(Expert::create(weights, ExpertKernelKind::kVectorized));
    DeviceExpert expert = value_or_throw(DeviceExpert::create(device, weights));
    for (int rows : {1, 5, 13}) {
      const std::vector<bf16> x = test_rows(17, rows, shape.hidden);
      std::vector<bf16> want_y(x.size());
      std::vector<bf16> want_h(static_cast<std::size_t>(rows) * shape.ffn);
      throw_if_error(reference.forward(x, ExpertOutputs{want_y, {}, {}, {}, want_h}));
      Buffer d_x = upload(device, x);
      Buffer d_y = poisoned<bf16>(device, x.size());
      Buffer d_h = poisoned<bf16>(device, want_h.size());
      const Status s = expert.forward(d_x.as<bf16>(), rows, d_y.as<bf16>(), d_h.as<bf16>());
      if (!s.ok()) return AssertionFailure() << s.message();
      const std::string where = fmt::format("expert H={} F={} rows={}", shape.hidden, shape.ffn, rows);
      AssertionResult h_ok = bits_equal(where + " h", want_h.data(),
                                        download<bf16>(device, d_h, want_h.size()).data(), want_h.size());
      if (!h_ok) return h_ok;
      AssertionResult y_ok =
          bits_equal(where + " y", want_y.data(), download<bf16>(device, d_y, x.size()).data(), x.size());
      if (!y_ok) return y_ok;
    }
  }
  return AssertionSuccess();
}

AssertionResult check_fills(Device& device) {
  constexpr int kRows = 7;
  constexpr int kHidden = 300;
  Buffer d_x = poisoned<bf16>(device, kRows * kHidden);
  const Status s = device.run(FillPayloadArgs{d_x.as<bf16>(), kRows, kHidden, 99, 3, 40});
  if (!s.ok()) return AssertionFailure() << s.message();
  std::vector<bf16> want;
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kHidden; ++c) want.push_back(data::payload_value(99, 3, 40 + r, c));
  AssertionResult payload =
      bits_equal("fill_payload", want.data(), download<bf16>(device, d_x, want.size()).data(), want.size());
  if (!payload) return payload;
  const data::StreamAddress address{data::DataStream::kPayload, 2, 9};
  Buffer d_bits = poisoned<std::uint32_t>(device, 5 * 33);
  const Status b = device.run(StreamBitsArgs{d_bits.as<std::uint32_t>(), 1234, address, 5, 33});
  if (!b.ok()) return AssertionFailure() << b.message();
  std::vector<std::uint32_t> want_bits;
  for (std::uint32_t r = 0; r < 5; ++r)
    for (std::uint32_t c = 0; c < 33; ++c) want_bits.push_back(data::stream_bits(1234, address, r, c));
  return bits_equal("stream_bits", want_bits.data(),
                    download<std::uint32_t>(device, d_bits, want_bits.size()).data(), want_bits.size());
}

AssertionResult check_sum_rows(Device& device) {
  constexpr int kRows = 5;
  constexpr int kHidden = 70;
  for (int count : {1, 2, 3}) {
    std::vector<bf16> terms(static_cast<std::size_t>(count) * kRows * kHidden);
    for (std::size_t i = 0; i < terms.size(); ++i)
      terms[i] = data::payload_value(5, 1, static_cast<std::uint32_t>(i / kHidden), i % kHidden);
    // Row 0: every term -0, so the sum keeps its sign only when it starts from term 0 (not from +0).
    for (int j = 0; j < count; ++j)
      for (int c = 0; c < kHidden; ++c)
        terms[(static_cast<std::size_t>(j) * kRows) * kHidden + c] = bf16::from_bits(0x8000);
    std::vector<bf16> want(kRows * kHidden);
    for (std::size_t i = 0; i < want.size(); ++i) {
      float acc = terms[i].to_float();
      for (int j = 1; j < count; ++j)
        acc = acc + terms[static_cast<std::size_t>(j) * want.size() + i].to_float();
      want[i] = bf16::from_float(acc);
    }
    Buffer d_terms = upload(device, terms);
    Buffer d_out = poisoned<bf16>(device, want.size());
    const Status s = device.run(SumRowsArgs{d_out.as<bf16>(), d_terms.as<bf16>(), kRows, kHidden, count});
    if (!s.ok()) return AssertionFailure() << s.message();
    AssertionResult same = bits_equal(fmt::format("sum_rows of {} terms", count), want.data(),
                                      download<bf16>(device, d_out, want.size()).data(), want.size());
    if (!same) return same;
  }
  return AssertionSuccess();
}

AssertionResult check_fifo_push(Device& device) {
  constexpr std::int64_t kCommands = 20000;
  std::unique_ptr<channel::CommandFifo> fifo = value_or_throw(channel::CommandFifo::create(64, &device));
  std::vector<channel::Command> commands;
  for (std::int64_t i = 0; i < kCommands; ++i) {
    commands.push_back(
        channel::pack_command({channel::CommandType::kWrite, 0, static_cast<std::uint32_t>(i % 7),
                               static_cast<std::uint32_t>(i % 5), 64, static_cast<std::uint64_t>(i), 0}));
  }
  Buffer d_commands = upload(device, commands);
  Buffer d_gave_up = upload(device, std::vector<std::uint64_t>{0});
  std::vector<int> seen(kCommands, 0);
  std::int64_t popped = 0;
  std::thread proxy([&] {
    channel::FifoConsumer consumer(fifo->view());
    const Deadline deadline(60);
    while (popped < kCommands && !deadline.expired()) {
      channel::Command c;
      if (!consumer.try_pop(c)) {
        consumer.publish_tail();
        std::this_thread::yield();
        continue;
      }
      if (c.local_offset() < kCommands) ++seen[c.local_offset()];
      ++popped;
    }
    consumer.publish_tail();
  });
  const Status pushed = device.run(FifoPushArgs{fifo->view(), d_commands.as<channel::Command>(), kCommands,
                                                std::uint64_t{1} << 32, d_gave_up.as<std::uint64_t>()});
  const Status synced = pushed.ok() ? device.synchronize() : pushed;
  if (!synced.ok()) fifo->close();
  proxy.join();
  if (!synced.ok()) return AssertionFailure() << synced.message();
  const std::uint64_t gave_up = download<std::uint64_t>(device, d_gave_up, 1)[0];
  if (gave_up != 0) return AssertionFailure() << gave_up << " producers gave up; " << fifo->describe();
  if (popped != kCommands) return AssertionFailure() << "popped " << popped << " of " << kCommands;
  for (std::int64_t i = 0; i < kCommands; ++i) {
    if (seen[i] != 1) return AssertionFailure() << "command " << i << " arrived " << seen[i] << " times";
  }
  return AssertionSuccess();
}

AssertionResult check_atomic_add(Device& device) {
  constexpr int kAdds = 100;
  Buffer word = upload(device, std::vector<std::uint64_t>{0});
  std::unique_ptr<Queue> other = value_or_throw(device.create_queue());
  std::uint64_t expected = 0;
  for (int i = 0; i < kAdds; ++i) {
    // Full 64-bit values (their sum wraps), distinct per add: a fixed odd multiplier over the index.
    const std::uint64_t a = (static_cast<std::uint64_t>(i) + 1) * 0x9E37'79B9'7F4A'7C15ull;
    const std::uint64_t b = a ^ 0xFFFF'0000'FFFF'0000ull;
    expected += a + b;
    throw_if_error(device.run(AtomicAddArgs{word.as<std::uint64_t>(), a}));
    throw_if_error(other->run(AtomicAddArgs{word.as<std::uint64_t>(), b}));
  }
  throw_if_error(device.run(AtomicAddArgs{nullptr, 1}));
  throw_if_error(other->synchronize(Deadline(60)));
  const std::uint64_t sum = download<std::uint64_t>(device, word, 1)[0];
  if (sum != expected)
    return AssertionFailure() << fmt::format("atomic_add sum {:#x}, expected {:#x}", sum, expected);
  return AssertionSuccess();
}

}  // namespace eps::device::testing
