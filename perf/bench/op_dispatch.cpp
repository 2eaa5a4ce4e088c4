// `epsuite bench dispatch`: times Transport::dispatch, a fresh one every iteration (counts and payload).
// With -c every iteration dispatches its own payload into poisoned buffers and is checked against
// reference/dispatch (docs/dispatch.md 5.1-5.4). Bytes: the dispatch traffic of docs/dispatch.md 5.6.
#include "perf/bench/transport_ops.hpp"

namespace eps::bench {
namespace {

class DispatchMeasurement final : public Measurement {
 public:
  explicit DispatchMeasurement(TransportWork& work) : work_(work) {}

  Status prepare(int iteration, bool checking) override {
    EPS_RETURN_IF_ERROR(work_.use_payload_of(iteration, checking));
    if (checking) work_.poison_dispatch_outputs();
    work_.start_wire();
    return Status();
  }
  Result<double> run(int) override {
    return timed_us([&] { return work_.dispatch(); });
  }
  Status settle() override { return work_.gather_wire(work_.plan().timeout); }
  Result<Mismatches> check(int) override { return work_.dispatch_mismatches(); }

 private:
  TransportWork& work_;
};

std::unique_ptr<Measurement> make_measurement(TransportWork& work) {
  return std::make_unique<DispatchMeasurement>(work);
}

Result<std::vector<SeriesPlan>> plan(const BenchContext& context, Json& config) {
  return plan_transport_op(context, config, make_measurement, {.dispatch = true, .combine = false});
}

}  // namespace
}  // namespace eps::bench

void eps_register_bench_op_dispatch(eps::bench::BenchOpRegistry& registry) {
  registry.add({"dispatch", "Transport::dispatch, fresh each iteration", eps::bench::transport_op_params,
                eps::bench::plan});
}
