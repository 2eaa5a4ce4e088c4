// `epsuite bench combine`: times Transport::combine of the expert outputs along a dispatch made untimed.
// Without -c the dispatch is made once per point; with -c every iteration dispatches its own payload
// (untimed), computes the expert outputs from what arrived, poisons the output, times the combine and checks
// it against reference/dispatch (docs/dispatch.md 5.5). Bytes: the combine traffic of docs/dispatch.md 5.6.
#include "perf/bench/transport_ops.hpp"

namespace eps::bench {
namespace {

class CombineMeasurement final : public Measurement {
 public:
  explicit CombineMeasurement(TransportWork& work) : work_(work) {}

  Status prepare(int iteration, bool checking) override {
    if (checking) {
      EPS_RETURN_IF_ERROR(work_.use_payload_of(iteration, checking));
      EPS_RETURN_IF_ERROR(work_.dispatch());
      work_.compute_expert_outputs();
      work_.poison_combine_output();
    }
    work_.start_wire();  // after the untimed dispatch: only the combine's bytes count
    return Status();
  }
  Result<double> run(int) override {
    return timed_us([&] { return work_.combine(); });
  }
  Status settle() override { return work_.gather_wire(work_.plan().timeout); }
  Result<Mismatches> check(int) override { return work_.combine_mismatches(); }

 private:
  TransportWork& work_;
};

std::unique_ptr<Measurement> make_measurement(TransportWork& work) {
  return std::make_unique<CombineMeasurement>(work);
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  return plan_transport_op(context, config, make_measurement, {.dispatch = false, .combine = true});
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_combine(eps::bench::BenchOpRegistry& registry) {
  registry.add({"combine", "Transport::combine of a dispatch made untimed", eps::bench::transport_op_params,
                eps::bench::plan});
}
