// _epsuite: the C++ side of the Python bridge (docs/plugins.md 15.5), for EP libraries that are Python first.
//
// It exposes, on NumPy arrays, exactly what the C++ suite uses, so the bytes are the suite's own:
// - Problem: the seeded dispatch/combine problem of impls/problem/transport_problem.hpp for one rank
// (routing,
//   tokens and weights of every rank regenerated from the seeds; a preset's or explicit shapes), its inputs,
//   the reference's expected outputs (docs/dispatch.md 5.1-5.5), the bit-exact checks (fixed or open order,
//   docs/dispatch.md 5.9) and the expert side of combine;
// - presets (docs/presets.md 11) and the platform record with its fingerprint (docs/results.md 9.1);
// - ResultsWriter: the results document of `epsuite bench` (docs/results.md 9.1), statistics included.
//
// Arrays: bf16 values travel as uint16 bit patterns (int16 accepted: a torch bfloat16 tensor viewed as
// int16), fp8 as uint8 codes (int8 accepted), index arrays as int32 (int64 accepted when every value fits),
// weights and scales as float32, is_token_in_rank as bool or uint8. An array of another dtype or shape is a
// ValueError naming it, its expected dtype and shape and what it got; so is every error of the suite
// (eps::Error).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "harness/platform/platform.hpp"
#include "harness/platform/platform_probe.hpp"
#include "impls/problem/transport_problem.hpp"
#include "impls/runtime/json_io.hpp"
#include "perf/bench/presets.hpp"
#include "reference/common/version.hpp"
#include "reference/dispatch/byte_accounting.hpp"
#include "reference/dispatch/expert_major.hpp"
#include "reference/dispatch/layout.hpp"
#include "reference/dispatch/ll_dispatch.hpp"
#include "reference/dispatch/rank_major.hpp"
#include "results/document.hpp"

namespace py = pybind11;

namespace eps::python {
namespace {

using dispatch::PayloadType;
using transport::CombineTree;
using transport::Layout;

[[noreturn]] void raise(const Status& status) { throw py::value_error(status.message()); }

template <typename T>
T value_or_raise(Result<T> result) {
  if (!result.ok()) raise(result.status());
  return std::move(result).value();
}

Layout layout_of(const std::string& name) {
  for (Layout l : {Layout::kHtRankMajor, Layout::kHtExpertMajor, Layout::kLl}) {
    if (transport::layout_name(l) == name) return l;
  }
  throw py::value_error(fmt::format("layout: must be ht-rank-major, ht-expert-major or ll, got '{}'", name));
}

CombineTree tree_of(const std::string& name) {
  for (CombineTree t : {CombineTree::kHtRank, CombineTree::kHtTwoLevel, CombineTree::kLlWeighted}) {
    if (combine_tree_name(t) == name) return t;
  }
  throw py::value_error(fmt::format("tree: must be ht-rank, ht-two-level or ll-weighted, got '{}'", name));
}

// ---- arrays
// --------------------------------------------------------------------------------------------------

template <typename T>
py::array_t<T> to_numpy(std::vector<T> values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  const py::capsule free_when_done(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(shape, owned->data(), free_when_done);
}

py::array_t<std::uint16_t> bf16_numpy(const std::vector<bf16>& values, std::vector<py::ssize_t> shape) {
  std::vector<std::uint16_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(bf16));
  return to_numpy(std::move(bits), std::move(shape));
}

// Payload rows (bf16 bits or fp8 codes) of `rows` rows as [shape..., H].
py::array payload_numpy(const std::vector<std::byte>& bytes, PayloadType dtype,
                        std::vector<py::ssize_t> shape) {
  if (dtype == PayloadType::kFp8) {
    std::vector<std::uint8_t> codes(bytes.size());
    std::memcpy(codes.data(), bytes.data(), bytes.size());
    return to_numpy(std::move(codes), std::move(shape));
  }
  std::vector<std::uint16_t> bits(bytes.size() / 2);
  std::memcpy(bits.data(), bytes.data(), bytes.size());
  return to_numpy(std::move(bits), std::move(shape));
}

std::string shape_text(const std::vector<py::ssize_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// What an input array must be: one of `dtypes` (the first is the canonical one), exactly `shape`.
struct Want {
  std::string name;
  std::vector<std::string> dtypes;  // numpy names: "uint16", "int32", ...
  std::vector<py::ssize_t> shape;
  std::string meaning;  // "bf16 bit patterns", ...
};

std::string dtype_name(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// The array `a` checked against `want` (ValueError naming it otherwise), C-contiguous.
py::array checked(const py::handle& object, const Want& want) {
  if (object.is_none()) {
    throw py::value_error(fmt::format("{}: missing; expected {} {}{}", want.name, want.dtypes.front(),
                                      shape_text(want.shape),
                                      want.meaning.empty() ? "" : " (" + want.meaning + ")"));
  }
  if (!py::isinstance<py::array>(object)) {
    throw py::value_error(fmt::format("{}: expected a NumPy array (or a DLPack tensor) {} {}, got {}",
                                      want.name, want.dtypes.front(), shape_text(want.shape),
                                      py::str(py::type::of(object)).cast<std::string>()));
  }
  py::array a = py::reinterpret_borrow<py::array>(object);
  std::vector<py::ssize_t> got(a.shape(), a.shape() + a.ndim());
  const std::string dtype = dtype_name(a);
  const bool dtype_ok = std::find(want.dtypes.begin(), want.dtypes.end(), dtype) != want.dtypes.end();
  if (!dtype_ok || got != want.shape) {
    throw py::value_error(fmt::format(
        "{}: expected {} {}{}, got {} {}", want.name, fmt::join(want.dtypes, " or "), shape_text(want.shape),
        want.meaning.empty() ? "" : " (" + want.meaning + ")", dtype, shape_text(got)));
  }
  return py::array::ensure(a, py::array::c_style);
}

// Copies `a` (checked) into `out`, converting the accepted integer widths and checking their range.
template <typename T>
void copy_into(const py::array& a, const std::string& name, std::span<T> out) {
  if constexpr (std::is_same_v<T, std::byte>) {  // payload rows: their bytes as they are
    const auto bytes = static_cast<std::size_t>(a.nbytes());
    if (bytes > out.size()) {
      throw py::value_error(fmt::format("{}: {} bytes exceed the buffer of {}", name, bytes, out.size()));
    }
    std::memcpy(out.data(), a.data(), bytes);
    return;
  }
  const auto n = static_cast<std::size_t>(a.size());
  if (n > out.size()) {
    throw py::value_error(fmt::format("{}: {} elements exceed the buffer of {}", name, n, out.size()));
  }
  if (a.itemsize() == static_cast<py::ssize_t>(sizeof(T))) {
    std::memcpy(out.data(), a.data(), n * sizeof(T));
    return;
  }
  if constexpr (std::is_same_v<T, int>) {
    const auto* wide = static_cast<const std::int64_t*>(a.data());
    for (std::size_t i = 0; i < n; ++i) {
      if (wide[i] < INT32_MIN || wide[i] > INT32_MAX) {
        throw py::value_error(fmt::format("{}: entry {} ({}) does not fit int32", name, i, wide[i]));
      }
      out[i] = static_cast<int>(wide[i]);
    }
    return;
  }
  throw py::value_error(fmt::format("{}: unexpected element size {}", name, a.itemsize()));
}

const std::vector<std::string> kInts = {"int32", "int64"};
const std::vector<std::string> kFloats = {"float32"};
const std::vector<std::string> kBf16 = {"uint16", "int16"};
const std::vector<std::string> kFp8 = {"uint8", "int8"};

// ---- the problem
// ---------------------------------------------------------------------------------------------

problem::ProblemShape shape_from(const py::dict& d) {
  problem::ProblemShape s;
  int ranks_per_node = 0;  // 0 = not given: one rank per node
  const std::map<std::string, int*> ints = {{"ranks", &s.ranks},
                                            {"experts", &s.experts},
                                            {"top_k", &s.top_k},
                                            {"hidden", &s.hidden},
                                            {"max_tokens", &s.max_tokens},
                                            {"alignment", &s.alignment},
                                            {"ranks_per_node", &ranks_per_node},
                                            {"tokens_per_rank", &s.tokens_per_rank}};
  for (const auto& [key, value] : d) {
    const auto name = py::str(key).cast<std::string>();
    if (const auto it = ints.find(name); it != ints.end()) {
      *it->second = value.cast<int>();
    } else if (name == "dtype") {
      const auto dtype = value.cast<std::string>();
      if (dtype != "bf16" && dtype != "fp8")
        throw py::value_error("shape.dtype: must be bf16 or fp8, got " + dtype);
      s.dtype = dtype == "fp8" ? PayloadType::kFp8 : PayloadType::kBf16;
    } else if (name == "quantize") {
      const auto mode = value.is_none() ? std::string("off") : value.cast<std::string>();
      if (mode == "amax") s.quantize = Fp8ScaleMode::kAmax;
      if (mode == "round-scale") s.quantize = Fp8ScaleMode::kRoundScale;
      if (mode != "off" && !s.quantize)
        throw py::value_error("shape.quantize: must be off, amax or round-scale");
    } else {
      throw py::value_error(
          fmt::format("shape: unknown field '{}' (ranks, experts, top_k, hidden, max_tokens, "
                      "alignment, ranks_per_node, tokens_per_rank, dtype, quantize)",
                      name));
    }
  }
  // Uniform nodes of ranks_per_node consecutive ranks (docs/dispatch.md 5.5.1).
  if (ranks_per_node != 0) s.nodes = value_or_raise(NodeLayout::uniform(s.ranks, ranks_per_node));
  return s;
}

py::dict shape_dict(const problem::ProblemShape& s) {
  py::dict d;
  d["ranks"] = s.ranks;
  d["experts"] = s.experts;
  d["top_k"] = s.top_k;
  d["hidden"] = s.hidden;
  d["max_tokens"] = s.max_tokens;
  d["alignment"] = s.alignment;
  d["ranks_per_node"] = s.nodes.node_of.empty() ? 1 : s.nodes.ranks_per_node();
  d["tokens_per_rank"] = s.tokens_per_rank;
  d["dtype"] = std::string(transport::dtype_name(s.dtype));
  d["quantize"] = s.quantize
                      ? py::cast(std::string(*s.quantize == Fp8ScaleMode::kAmax ? "amax" : "round-scale"))
                      : py::none();
  return d;
}

py::dict report_dict(const dispatch::MismatchReport& report) {
  py::dict d;
  d["passed"] = report.ok();
  d["mismatches"] = report.mismatches();
  d["first"] = report.ok() ? py::none() : py::cast(report.to_string());
  return d;
}

class PyProblem {
 public:
  PyProblem(const py::dict& shape, const std::string& workload, int rank, std::uint64_t routing_seed,
            int step, std::uint64_t payload_seed)
      : problem_(value_or_raise(
            problem::Problem::make(shape_from(shape), workload, rank, routing_seed, step, payload_seed))),
        rank_(rank) {
    if (rank < 0 || rank >= problem_.shape().ranks) {
      throw py::value_error(
          fmt::format("rank: must be in [0, {}], got {}", problem_.shape().ranks - 1, rank));
    }
  }

  const problem::ProblemShape& shape() const { return problem_.shape(); }
  int rank() const { return rank_; }
  int tokens() const { return problem_.plan().num_tokens(rank_); }
  int num_tokens(int rank) const { return problem_.plan().num_tokens(rank); }
  int local() const { return shape().experts / shape().ranks; }
  py::ssize_t ll_capacity() const { return static_cast<py::ssize_t>(shape().ranks) * shape().max_tokens; }
  int scales() const { return dispatch::payload_num_scales(shape().dtype, shape().hidden); }

  py::array x() const {
    const transport::DispatchInput in = problem_.input();
    std::vector<std::byte> bytes(in.x.begin(), in.x.end());
    const PayloadType rows = shape().quantize ? PayloadType::kBf16 : shape().dtype;
    return payload_numpy(bytes, rows, {tokens(), shape().hidden});
  }
  py::array_t<float> x_scales() const {
    const transport::DispatchInput in = problem_.input();
    return to_numpy(std::vector<float>(in.x_scales.begin(), in.x_scales.end()),
                    {tokens(), shape().quantize ? 0 : scales()});
  }
  py::array_t<int> topk_idx() const {
    const transport::DispatchInput in = problem_.input();
    return to_numpy(std::vector<int>(in.topk_idx.begin(), in.topk_idx.end()), {tokens(), shape().top_k});
  }
  py::array_t<float> topk_weights() const {
    const transport::DispatchInput in = problem_.input();
    return to_numpy(std::vector<float>(in.topk_weights.begin(), in.topk_weights.end()),
                    {tokens(), shape().top_k});
  }
  py::array_t<std::uint16_t> bias(int which) const {
    const std::span<const bf16> b = which == 0 ? problem_.bias0() : problem_.bias1();
    return bf16_numpy(std::vector<bf16>(b.begin(), b.end()), {tokens(), shape().hidden});
  }

  py::dict expected_layout() const {
    const dispatch::DispatchLayout l = value_or_raise(dispatch::expected_layout(problem_.plan(), rank_));
    const py::ssize_t ranks = shape().ranks;
    py::dict d;
    d["num_tokens_per_rank"] = to_numpy(l.num_tokens_per_rank, {ranks});
    d["num_tokens_per_expert"] = to_numpy(l.num_tokens_per_expert, {shape().experts});
    d["is_token_in_rank"] = to_numpy(l.is_token_in_rank, {tokens(), ranks});
    d["rank_prefix_matrix"] = to_numpy(l.rank_prefix_matrix, {ranks, ranks});
    return d;
  }

  // The shapes every dispatch output of `layout` must have (HT: `rows` rows).
  std::map<std::string, Want> dispatch_wants(Layout layout, py::ssize_t rows) const {
    const py::ssize_t h = shape().hidden, k = shape().top_k, l = local(), c = ll_capacity(), s = scales();
    const bool fp8 = shape().dtype == PayloadType::kFp8;
    const std::string rows_meaning = fp8 ? "fp8 e4m3fn codes" : "bf16 bit patterns";
    std::map<std::string, Want> w;
    const std::vector<py::ssize_t> lead =
        layout == Layout::kLl ? std::vector<py::ssize_t>{l, c} : std::vector{rows};
    auto with = [](std::vector<py::ssize_t> v, py::ssize_t last) {
      v.push_back(last);
      return v;
    };
    w["recv_x"] = {"recv_x", fp8 ? kFp8 : kBf16, with(lead, h), rows_meaning};
    if (fp8)
      w["recv_x_scales"] = {"recv_x_scales", kFloats, with(lead, s), "fp32 scales, one per 128 values"};
    if (layout == Layout::kHtRankMajor) {
      w["recv_topk_idx"] = {"recv_topk_idx", kInts, {rows, k}, "local expert index or -1"};
      w["recv_topk_weights"] = {"recv_topk_weights", kFloats, {rows, k}, ""};
    }
    if (layout == Layout::kHtExpertMajor) w["recv_weights"] = {"recv_weights", kFloats, {rows}, ""};
    if (layout != Layout::kLl) {
      w["num_recv_tokens_per_expert"] = {"num_recv_tokens_per_expert", kInts, {l}, ""};
    } else {
      w["packed_recv_count"] = {"packed_recv_count", kInts, {l}, ""};
      w["src_info"] = {"src_info", kInts, {l, c}, "source token of each row"};
      w["layout_range"] = {"layout_range", kInts, {l, shape().ranks, 2}, "begin, count"};
    }
    return w;
  }

  py::dict expected_dispatch(const std::string& layout_name) const {
    const Layout layout = layout_of(layout_name);
    const dispatch::DispatchPlan& plan = problem_.plan();
    py::dict d;
    const py::ssize_t h = shape().hidden;
    if (layout == Layout::kHtRankMajor) {
      const auto e = value_or_raise(dispatch::expected_rank_major(plan, rank_, problem_.source()));
      const auto rows = static_cast<py::ssize_t>(e.index.num_rows());
      d["recv_x"] = payload_numpy(e.recv_x, shape().dtype, {rows, h});
      if (scales() > 0) d["recv_x_scales"] = to_numpy(e.recv_x_scales, {rows, scales()});
      d["recv_topk_idx"] = to_numpy(e.index.recv_topk_idx, {rows, shape().top_k});
      d["recv_topk_weights"] = to_numpy(e.index.recv_topk_weights, {rows, shape().top_k});
      d["num_recv_tokens_per_expert"] = to_numpy(e.index.num_recv_tokens_per_expert, {local()});
    } else if (layout == Layout::kHtExpertMajor) {
      const auto e = value_or_raise(dispatch::expected_expert_major(plan, rank_, problem_.source()));
      const auto rows = static_cast<py::ssize_t>(e.index.rows.size());
      std::vector<float> weights;
      for (const auto& row : e.index.rows) weights.push_back(row.weight);
      std::vector<int> segments;
      for (std::size_t l = 0; l + 1 < e.index.segment_begin.size(); ++l)
        segments.push_back(e.index.segment_begin[l + 1] - e.index.segment_begin[l]);
      d["recv_x"] = payload_numpy(e.recv_x, shape().dtype, {rows, h});
      if (scales() > 0) d["recv_x_scales"] = to_numpy(e.recv_x_scales, {rows, scales()});
      d["recv_weights"] = to_numpy(weights, {rows});
      d["num_recv_tokens_per_expert"] = to_numpy(segments, {local()});
    } else {
      const auto e = value_or_raise(dispatch::expected_ll(plan, rank_, problem_.source()));
      d["recv_x"] = payload_numpy(e.packed_recv_x, shape().dtype, {local(), ll_capacity(), h});
      if (scales() > 0)
        d["recv_x_scales"] = to_numpy(e.packed_recv_x_scales, {local(), ll_capacity(), scales()});
      d["packed_recv_count"] = to_numpy(e.index.packed_recv_count, {local()});
      d["src_info"] = to_numpy(e.index.src_info, {local(), ll_capacity()});
      std::vector<int> ranges;
      for (const dispatch::LlRange& r : e.index.layout_range) {
        ranges.push_back(r.begin);
        ranges.push_back(r.count);
      }
      d["layout_range"] = to_numpy(ranges, {local(), shape().ranks, 2});
    }
    return d;
  }

  // The rows an HT dispatch of `layout` delivers to this rank (the reference's count), 0 for ll.
  std::int64_t expected_rows(Layout layout) const {
    if (layout == Layout::kHtRankMajor) {
      return static_cast<std::int64_t>(
          value_or_raise(dispatch::rank_major_index(problem_.plan(), rank_)).num_rows());
    }
    if (layout == Layout::kHtExpertMajor) {
      return static_cast<std::int64_t>(
          value_or_raise(dispatch::expert_major_index(problem_.plan(), rank_)).rows.size());
    }
    return 0;
  }

  // The adapter's dispatch outputs, checked against the shapes of this rank's expected outputs and copied
  // into buffers of the suite (NaN-filled at capacity, as the C++ suite's). `rows`: the rows received.
  problem::DispatchBuffers buffers_of(Layout layout, const py::dict& out, std::int64_t& rows) const {
    problem::DispatchBuffers b(layout, shape());
    rows = expected_rows(layout);
    for (const auto& [name, want] : dispatch_wants(layout, rows)) {
      const py::array a =
          checked(out.contains(name.c_str()) ? py::handle(out[name.c_str()]) : py::none(), want);
      if (name == "recv_x") copy_into<std::byte>(a, name, b.recv_x);
      if (name == "recv_x_scales") copy_into<float>(a, name, b.recv_x_scales);
      if (name == "recv_topk_idx") copy_into<int>(a, name, b.recv_topk_idx);
      if (name == "recv_topk_weights") copy_into<float>(a, name, b.recv_topk_weights);
      if (name == "recv_weights") copy_into<float>(a, name, b.recv_weights);
      if (name == "num_recv_tokens_per_expert") copy_into<int>(a, name, b.num_recv_tokens_per_expert);
      if (name == "packed_recv_count") copy_into<int>(a, name, b.packed_recv_count);
      if (name == "src_info") copy_into<int>(a, name, b.src_info);
      if (name == "layout_range") {
        copy_into<int>(
            a, name,
            std::span<int>(reinterpret_cast<int*>(b.layout_range.data()), 2 * b.layout_range.size()));
      }
    }
    if (layout == Layout::kLl) {
      for (int count : b.packed_recv_count) rows += std::max(count, 0);
    }
    return b;
  }

  py::dict check_layout(const py::dict& out) const {
    const py::ssize_t ranks = shape().ranks;
    dispatch::DispatchLayout l;
    l.rank = rank_;
    l.num_tokens_per_rank.resize(static_cast<std::size_t>(ranks));
    l.num_tokens_per_expert.resize(static_cast<std::size_t>(shape().experts));
    l.is_token_in_rank.resize(static_cast<std::size_t>(tokens()) * static_cast<std::size_t>(ranks));
    l.rank_prefix_matrix.resize(static_cast<std::size_t>(ranks * ranks));
    auto get = [&](const char* name) {
      return out.contains(name) ? py::handle(out[name]) : py::handle(py::none());
    };
    copy_into<int>(checked(get("num_tokens_per_rank"), {"num_tokens_per_rank", kInts, {ranks}, ""}),
                   "num_tokens_per_rank", std::span(l.num_tokens_per_rank));
    copy_into<int>(
        checked(get("num_tokens_per_expert"), {"num_tokens_per_expert", kInts, {shape().experts}, ""}),
        "num_tokens_per_expert", std::span(l.num_tokens_per_expert));
    copy_into<std::uint8_t>(
        checked(get("is_token_in_rank"), {"is_token_in_rank", {"bool", "uint8"}, {tokens(), ranks}, ""}),
        "is_token_in_rank", std::span(l.is_token_in_rank));
    copy_into<int>(checked(get("rank_prefix_matrix"), {"rank_prefix_matrix", kInts, {ranks, ranks}, ""}),
                   "rank_prefix_matrix", std::span(l.rank_prefix_matrix));
    return report_dict(problem::check_layout(problem_, rank_, l));
  }

  py::tuple check_dispatch(const std::string& layout_name, const py::dict& out, bool fixed_order) const {
    std::int64_t rows = 0;
    const problem::DispatchBuffers b = buffers_of(layout_of(layout_name), out, rows);
    return py::make_tuple(report_dict(problem::check_dispatch(problem_, rank_, b, rows, fixed_order)), rows);
  }

  py::array_t<std::uint16_t> expert_outputs(const std::string& layout_name, const py::dict& out) const {
    const Layout layout = layout_of(layout_name);
    std::int64_t rows = 0;
    const problem::DispatchBuffers b = buffers_of(layout, out, rows);
    const std::vector<bf16> y = problem::expert_outputs(shape(), rank_, b, rows);
    if (layout == Layout::kLl) return bf16_numpy(y, {local(), ll_capacity(), shape().hidden});
    return bf16_numpy(y, {static_cast<py::ssize_t>(rows), shape().hidden});
  }

  py::dict check_combine(const std::string& tree_name, bool with_bias, const py::handle& out,
                         const py::handle& combined_weights) const {
    const py::ssize_t t = tokens();
    std::vector<bf16> x(static_cast<std::size_t>(t * shape().hidden));
    copy_into<std::uint16_t>(checked(out, {"out", kBf16, {t, shape().hidden}, "bf16 bit patterns"}), "out",
                             std::span(reinterpret_cast<std::uint16_t*>(x.data()), x.size()));
    std::vector<float> weights;
    if (!combined_weights.is_none()) {
      weights.resize(static_cast<std::size_t>(t * shape().top_k));
      copy_into<float>(checked(combined_weights, {"combined_weights", kFloats, {t, shape().top_k}, ""}),
                       "combined_weights", std::span(weights));
    }
    const dispatch::MismatchReport report =
        value_or_raise(problem::check_combine(problem_, rank_, tree_of(tree_name), with_bias, x, weights));
    return report_dict(report);
  }

  // The reference's combine [T_r, H] (bf16 bits) of what the suite's expert side returns for every row.
  py::array_t<std::uint16_t> expected_combine(const std::string& tree_name, bool with_bias) const {
    return bf16_numpy(
        value_or_raise(problem::expected_combine(problem_, rank_, tree_of(tree_name), with_bias)),
        {tokens(), shape().hidden});
  }

  // docs/dispatch.md 5.6 `algo` bytes this rank receives in a dispatch of `layout`, and in its combine.
  py::tuple algo_bytes(const std::string& layout_name) const {
    const dispatch::ByteAccount account = dispatch::account_bytes(problem_.plan());
    const bool per_selection = layout_of(layout_name) != Layout::kHtRankMajor;
    const auto r = static_cast<std::size_t>(rank_);
    return py::make_tuple((per_selection ? account.ll_dispatch : account.ht_dispatch)[r].recv.algo,
                          (per_selection ? account.ll_combine : account.ht_combine)[r].recv.algo);
  }

 private:
  problem::Problem problem_;
  int rank_;
};

py::dict default_shape(int ranks, const std::string& workload, const std::string& dtype) {
  if (dtype != "bf16" && dtype != "fp8") throw py::value_error("dtype: must be bf16 or fp8, got " + dtype);
  return shape_dict(
      problem::default_shape(ranks, workload, dtype == "fp8" ? PayloadType::kFp8 : PayloadType::kBf16));
}

py::dict preset(const std::string& name, int ranks, int ranks_per_node) {
  const ResolvedPreset r = value_or_raise(resolve_preset(name, ranks, ranks_per_node, TokenSweep{}));
  py::dict d;
  d["name"] = std::string(r.preset->name);
  d["mode"] = std::string(r.preset->mode);
  d["tokens"] = r.tokens.values;
  d["max_tokens"] = r.max_tokens;
  d["hidden"] = r.preset->hidden;
  d["top_k"] = r.preset->topk;
  d["experts"] = r.preset->experts;
  d["dispatch_dtype"] = std::string(r.preset->dispatch_dtype);
  d["ranks_per_node"] = r.ranks_per_node;
  return d;
}

std::string platform_json(const std::vector<std::map<std::string, std::string>>& ranks,
                          const std::string& provider, const std::map<std::string, std::string>& libraries,
                          const std::map<std::string, std::string>& tags) {
  Platform p;
  for (const auto& r : ranks) p.ranks.push_back({r.at("host"), r.at("device"), r.at("nic")});
  p.provider = provider;
  p.libraries = libraries;
  p.node = probe_node();
  p.tags = tags;
  return platform_to_json(p).dump();
}

class PyResultsWriter {
 public:
  PyResultsWriter(const std::string& path, std::vector<std::string> argv, const std::string& platform,
                  const std::string& config)
      : writer_(path,
                make_run_header(std::move(argv), parse(platform, "platform"), parse(config, "config"))) {
    const Status started = writer_.start();
    if (!started.ok()) raise(started);
  }

  // One case as JSON text: op, transport, mode, dtype, sizes, identity, times_us, algo_bytes, physical_bytes,
  // slowest_rank, check (null or {passed, mismatches, first_mismatch}).
  void add_case(const std::string& text) {
    const Json j = parse(text, "case");
    CaseResult c;
    try {
      c.op = j.at("op").get<std::string>();
      c.transport = j.at("transport").get<std::string>();
      c.mode = j.at("mode").get<std::string>();
      c.dtype = j.at("dtype").get<std::string>();
      for (const auto& [name, value] : j.at("sizes").items())
        c.sizes.emplace_back(name, value.get<std::int64_t>());
      c.identity = j.at("identity").get<std::map<std::string, std::string>>();
      c.times_us = j.at("times_us").get<std::vector<double>>();
      c.algo_bytes = j.at("algo_bytes").get<double>();
      c.physical_bytes = j.at("physical_bytes").get<double>();
      c.slowest_rank = j.at("slowest_rank").get<int>();
      if (!j.at("check").is_null()) {
        const Json& check = j.at("check");
        c.check =
            CheckOutcome{check.at("passed").get<bool>(), check.at("mismatches").get<std::int64_t>(),
                         check.at("first_mismatch").is_null()
                             ? std::nullopt
                             : std::optional<std::string>(check.at("first_mismatch").get<std::string>())};
      }
    } catch (const Json::exception& e) {
      throw py::value_error(fmt::format("case: {}", e.what()));
    }
    const Status added = writer_.add_case(c);
    if (!added.ok()) raise(added);
  }

 private:
  static Json parse(const std::string& text, const char* what) {
    try {
      return Json::parse(text);
    } catch (const Json::exception& e) {
      throw py::value_error(fmt::format("{}: not JSON: {}", what, e.what()));
    }
  }

  ResultsWriter writer_;
};

}  // namespace
}  // namespace eps::python

PYBIND11_MODULE(_epsuite, m) {
  using namespace eps::python;
  m.doc() = "epsuite's seeded problems, references, checkers and results writer (docs/plugins.md 15.5)";
  m.attr("suite_version") = std::string(eps::kSuiteVersion);
  m.attr("git_sha") = std::string(eps::kGitSha);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const eps::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<PyProblem>(m, "Problem")
      .def(py::init<const py::dict&, const std::string&, int, std::uint64_t, int, std::uint64_t>(),
           py::arg("shape"), py::arg("workload"), py::arg("rank"), py::arg("routing_seed"),
           py::arg("step") = 0, py::arg("payload_seed"))
      .def_property_readonly("shape", [](const PyProblem& p) { return shape_dict(p.shape()); })
      .def_property_readonly("rank", &PyProblem::rank)
      .def_property_readonly("tokens", &PyProblem::tokens)
      .def("num_tokens", &PyProblem::num_tokens, py::arg("rank"))
      .def_property_readonly("x", &PyProblem::x)
      .def_property_readonly("x_scales", &PyProblem::x_scales)
      .def_property_readonly("topk_idx", &PyProblem::topk_idx)
      .def_property_readonly("topk_weights", &PyProblem::topk_weights)
      .def_property_readonly("bias0", [](const PyProblem& p) { return p.bias(0); })
      .def_property_readonly("bias1", [](const PyProblem& p) { return p.bias(1); })
      .def("expected_layout", &PyProblem::expected_layout)
      .def("expected_dispatch", &PyProblem::expected_dispatch, py::arg("layout"))
      .def("check_layout", &PyProblem::check_layout, py::arg("outputs"))
      .def("check_dispatch", &PyProblem::check_dispatch, py::arg("layout"), py::arg("outputs"),
           py::arg("fixed_order") = true)
      .def("expert_outputs", &PyProblem::expert_outputs, py::arg("layout"), py::arg("outputs"))
      .def("expected_combine", &PyProblem::expected_combine, py::arg("tree"), py::arg("with_bias"))
      .def("check_combine", &PyProblem::check_combine, py::arg("tree"), py::arg("with_bias"), py::arg("out"),
           py::arg("combined_weights") = py::none())
      .def("algo_bytes", &PyProblem::algo_bytes, py::arg("layout"));

  m.def("default_shape", &default_shape, py::arg("ranks"), py::arg("workload") = "uniform",
        py::arg("dtype") = "bf16");
  m.def("preset", &preset, py::arg("name"), py::arg("ranks"), py::arg("ranks_per_node") = 1);
  m.def("preset_names", [] { return eps::preset_names(); });
  m.def("cpu_model", [] { return eps::probe_cpu_model(); });
  m.def("platform_json", &platform_json, py::arg("ranks"), py::arg("provider"), py::arg("libraries"),
        py::arg("tags"));
  py::class_<PyResultsWriter>(m, "ResultsWriter")
      .def(py::init<const std::string&, std::vector<std::string>, const std::string&, const std::string&>(),
           py::arg("path"), py::arg("argv"), py::arg("platform"), py::arg("config"))
      .def("add_case", &PyResultsWriter::add_case, py::arg("case"));
}
