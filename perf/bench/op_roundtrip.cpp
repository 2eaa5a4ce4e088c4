// `epsuite bench roundtrip`: dispatch then combine, back to back, timed together. The combine returns expert
// outputs computed once per point from what the point's first dispatch delivered (this op measures the
// transport, not an expert). With -c every iteration sends its own payload into poisoned buffers, so the
// expert outputs are computed from what arrived between the two calls (untimed on this rank; a peer waiting
// in its combine meanwhile still counts it, so -c times are not the ones to compare) and both halves are
// checked (docs/dispatch.md 5.1-5.5). Bytes: dispatch plus combine traffic (docs/dispatch.md 5.6).
#include "perf/bench/transport_ops.hpp"

namespace eps::bench {
namespace {

class RoundtripMeasurement final : public Measurement {
 public:
  explicit RoundtripMeasurement(TransportWork& work) : work_(work) {}

  Status prepare(int iteration, bool checking) override {
    checking_ = checking;
    EPS_RETURN_IF_ERROR(work_.use_payload_of(iteration, checking));
    if (checking) {
      work_.poison_dispatch_outputs();
      work_.poison_combine_output();
    }
    work_.start_wire();
    return Status();
  }
  Result<double> run(int) override {
    if (!checking_) {
      return timed_us([&] {
        EPS_RETURN_IF_ERROR(work_.dispatch());
        return work_.combine();
      });
    }
    EPS_ASSIGN_OR_RETURN(const double dispatch_us, timed_us([&] { return work_.dispatch(); }));
    work_.compute_expert_outputs();
    EPS_ASSIGN_OR_RETURN(const double combine_us, timed_us([&] { return work_.combine(); }));
    return dispatch_us + combine_us;
  }
  Status settle() override { return work_.gather_wire(work_.plan().timeout); }
  Result<Mismatches> check(int) override {
    Mismatches found = work_.dispatch_mismatches();
    EPS_ASSIGN_OR_RETURN(const Mismatches combined, work_.combine_mismatches());
    if (found.count == 0) found.first = combined.first;
    found.count += combined.count;
    return found;
  }

 private:
  TransportWork& work_;
  bool checking_ = false;
};

std::unique_ptr<Measurement> make_measurement(TransportWork& work) {
  return std::make_unique<RoundtripMeasurement>(work);
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  return plan_transport_op(context, config, make_measurement, {.dispatch = true, .combine = true});
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_roundtrip(eps::bench::BenchOpRegistry& registry) {
  registry.add({"roundtrip", "dispatch, expert outputs (untimed), combine", eps::bench::transport_op_params,
                eps::bench::plan});
}
