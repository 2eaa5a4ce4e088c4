// The performance model of `epsuite model` (docs/model.md 16): what was measured, fitted, and carried to EP
// sizes that were not.
//
// Inputs are results documents (docs/results.md 9.1). From them:
//   links       one LinkModel per fabric of `bench fabric` cases: put-latency (one message, x = bytes),
//               put-bw (a window of puts, x = window bytes) and the node's memcpy (`copy`, x = window bytes),
//               each a gated fit (link_fit.hpp); scope "intra-node" for shm and ipc and the copy, else
//               "inter-node" (docs/model.md 16.2).
//   ops         one OpModel per series of `bench dispatch` / `bench combine` cases: the series is everything
//               of a case's identity except the ranks, the tokens and what only shapes the routing (preset,
//               workload, seed, hidden, experts, top_k, max_tokens); its cost line is fitted on the cases of
//               the series at the fit rank count (--fit-ranks, default the smallest present), x = the busiest
//               rank's bytes (traffic.hpp) of the routing regenerated from the case, y = p50 / the run's CPU
//               share (below) (docs/model.md 16.3).
//   validation  every case of a series at another rank count: predicted vs measured p50, and the error
//               predicted / measured - 1 (docs/model.md 16.5); the fitted cases are listed too (role "fit").
// Predictions (docs/model.md 16.4) run the preset's routing at each EP size: time = CPU share x cost(x) +
// the inter-node term (the inter-node link's put-bw line at the busiest rank's inter-node bytes) when the
// EP size spans nodes.
//
// CPU share (docs/model.md 16.3): ranks that outnumber a node's CPUs are time-sliced; the share of a run is
// max(1, ranks x (1 + helper threads) / CPUs) of its worst node, read from the document's `oversubscribed`
// census (docs/results.md 9.5; a case not marked oversubscribed has share 1). Fitting divides it out,
// predicting multiplies the target's back in (--cpus-per-node; 0 = every rank has its CPU, share 1).
//
// Mixed platforms: inputs whose node platform (platform_key: CPU model, memory, topology, libraries,
// GPUs, devices and NICs of the ranks; not the rank count, hosts or tags) differs are refused with
// kInvalidArgument unless `allow_mixed`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "perf/model/link_fit.hpp"
#include "perf/model/traffic.hpp"
#include "reference/common/status.hpp"
#include "results/document.hpp"

namespace eps::model {

// `validate_only`: the file's cases are never fitted, only predicted and compared (--validate).
struct ModelSource {
  std::string path;
  ResultsDocument document;
  bool validate_only = false;
};

// A 16-hex-digit hash of the node platform of a results document (see above).
std::string platform_key(const Json& platform);

struct LinkModel {
  std::string fabric;   // "shm", "libfabric:tcp", ...; "copy" for memcpy between ranks of a node
  std::string scope;    // "intra-node" or "inter-node"
  std::string measure;  // "put-latency", "put-bw" or "copy"
  int ranks = 0;
  std::string source;
  GatedFit fit;
};

struct OpModel {
  std::string series;  // op/transport/mode/dtype and the identity kept, as text
  CaseRecord example;  // the first fitted case (op, transport, mode, dtype, identity)
  int fit_ranks = 0;
  std::vector<std::string> sources;
  GatedFit cost;  // µs (at CPU share 1) against the busiest rank's bytes
};

// One measured case of a fitted series: role "fit" (a point of the cost line; `error` is its residual) or
// "validation" (a rank count the line did not see).
struct Validation {
  std::string series;
  std::string role;
  std::string source;
  std::string preset;
  int ranks = 0;
  std::int64_t tokens = 0;
  double cpu_share = 1;
  bool oversubscribed = false;
  double busiest_rank_bytes = 0;
  double measured_p50_us = 0;
  double predicted_us = 0;
  double error = 0;  // predicted / measured - 1
};

struct PredictOptions {
  std::string preset;
  std::vector<std::int64_t> ep_sizes;
  int ranks_per_node = 8;
  int cpus_per_node = 0;    // 0: every rank has a CPU (share 1)
  std::int64_t tokens = 0;  // 0: the preset's tokens per rank
  std::string workload = "uniform";
  std::uint64_t seed = 1;
  std::string fabric;  // inter-node link; "" = the only inter-node link fitted
};

struct Prediction {
  std::string series;
  std::string op;
  int ep = 0;
  int ranks_per_node = 0;
  int nodes = 0;
  std::int64_t tokens = 0;
  std::optional<std::string> skipped;  // the reason, when this size cannot be predicted
  double time_us = 0;
  double cpu_share = 1;
  double inter_us = 0;
  OpTraffic traffic;
  double gbps = 0;  // busiest rank's bytes / time
};

struct ModelOptions {
  int fit_ranks = 0;  // 0: the smallest rank count of each series
  bool allow_mixed = false;
};

struct Model {
  std::vector<LinkModel> links;
  std::vector<OpModel> ops;
  std::vector<Validation> validation;
};

// Refuses mixed platforms, fits links and ops, validates. kInvalidArgument for mixed platforms or inputs
// with nothing to fit (no fabric case and no dispatch/combine case), naming the files.
Result<Model> fit_model(const std::vector<ModelSource>& sources, const ModelOptions& options);

// One prediction per fitted op series and EP size (sizes that cannot run are `skipped` with the reason);
// kInvalidArgument for an unknown preset or an inter-node --fabric that was not fitted.
Result<std::vector<Prediction>> predict(const Model& model, const PredictOptions& options);

// The `model` object of a kind-model document (results/schema/results-v1.schema.json $defs/model).
Json model_to_json(const std::vector<ModelSource>& sources, const Model& model,
                   const std::vector<Prediction>& predictions);

}  // namespace eps::model
