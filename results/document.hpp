// Results documents (docs/results.md 9.1), schema results/schema/results-v1.schema.json.
//
// One JSON document per run:
//   schema_version (1), suite_version, git_sha (at configure time; "unknown" outside git), start_time
//   (UTC, RFC 3339 "2025-01-02T03:04:05Z"), argv, platform (harness/platform.hpp), config (the effective
//   parameters), results[] with one object per case:
//   op, transport, mode, dtype, sizes {name: integer}, identity {name: text} (the rest of the case identity,
//   docs/results.md 9.3; absent in files of older builds, read as empty), times_us [per repetition; each the
//   max over ranks],
//   stats {min, p10, p50, p90, p99, max, mean, stdev} (µs; p10 absent in files of older builds, read back
//   from times_us), bytes {algo, physical} of the slowest rank, bandwidth_gbps {algo, physical} = bytes / p50
//   time, slowest_rank, check: null when results were not checked, else {passed, mismatches, first_mismatch
//   (null or text)}, and ceiling (docs/results.md 9.4; absent when not measured and in files of older
//   builds): {us, gbps, ratio, kind} = the p50 of the machine's copy of the same bytes, algo bytes / us,
//   us / the case's p50, and how it was measured ("shm-copy"), and oversubscribed (docs/results.md 9.5; false
//   when absent, in files of older builds): whether the case ran with more threads than CPUs on a node.
// The document's `oversubscribed` (docs/results.md 9.5) is null, or the object of the worst oversubscribed
// node of the run (perf/bench/oversubscription.hpp: host, ranks, proxy_threads, cpus, note); absent (read as
// null) in files of older builds.
//
// Statistics (`summarize`, results/statistics.hpp) give the `stats` of every case.
//
// `ResultsWriter` keeps the document in memory and rewrites the whole file atomically (temp + rename)
// when it starts and after every case, so a run that crashes keeps the cases finished so far. Only one
// process (rank 0) may write a given path.
//
// `read_results_file` accepts a document of this or an older schema version and ignores unknown keys;
// it rejects, with kInvalidArgument (exit 2) naming the file and field, an unreadable or truncated file,
// a JSON value that is not a results document (no schema_version: foreign), and a schema_version newer
// than kResultsSchemaVersion.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "impls/runtime/json_io.hpp"
#include "reference/common/status.hpp"
#include "results/statistics.hpp"

namespace eps {

inline constexpr int kResultsSchemaVersion = 1;

struct CheckOutcome {
  bool passed = true;
  std::int64_t mismatches = 0;
  std::optional<std::string> first_mismatch;
  friend bool operator==(const CheckOutcome&, const CheckOutcome&) = default;
};

// The machine's ceiling of a case (docs/results.md 9.4): `us` is the p50 of the copy of the case's bytes
// between the same ranks (each iteration the maximum over ranks); gbps and ratio follow from the case.
struct Ceiling {
  double us = 0;
  std::string kind;  // "shm-copy"
  friend bool operator==(const Ceiling&, const Ceiling&) = default;
};

struct CaseResult {
  std::string op;                                           // "dispatch", "combine", "roundtrip", ...
  std::string transport;                                    // registry name, e.g. "mpi"
  std::string mode;                                         // e.g. "ht-rank-major", "ll"
  std::string dtype;                                        // "bf16", "fp8"
  std::vector<std::pair<std::string, std::int64_t>> sizes;  // e.g. {"tokens", 128}, {"hidden", 256}
  // The rest of the case identity (docs/results.md 9.3): fabric, signal, chaos, device, workload, seed,
  // preset, ... as text. Two cases are the same case only when op, transport, mode, dtype, sizes and every
  // identity entry match.
  std::map<std::string, std::string> identity;
  // Op-specific fields, written into the case object as they are (e.g. "phases_us" of a layer step): only
  // those the schema declares for `op` (results/op_fields.hpp, docs/results.md 9.6).
  Json extra = Json::object();
  std::vector<double> times_us;  // per repetition, max over ranks
  double algo_bytes = 0;         // docs/dispatch.md 5.6, of the slowest rank
  double physical_bytes = 0;
  int slowest_rank = 0;
  std::optional<CheckOutcome> check;  // nullopt: not checked
  std::optional<Ceiling> ceiling;     // nullopt: not measured
  bool oversubscribed = false;  // ranks (and their threads) outnumbered a node's CPUs (docs/results.md 9.5)
};

// A case as read back, with the statistics stored in the file.
struct CaseRecord {
  CaseResult result;
  SummaryStats stats;
};

struct RunHeader {
  std::string suite_version;
  std::string git_sha;
  std::string start_time;
  std::vector<std::string> argv;
  Json platform = Json::object();
  Json config = Json::object();
  Json oversubscribed = nullptr;  // docs/results.md 9.5: null, or {host, ranks, proxy_threads, cpus, note}
};

// "YYYY-MM-DDTHH:MM:SSZ" in UTC.
std::string utc_timestamp(std::chrono::system_clock::time_point time);
// suite_version and git_sha of this build, start_time now.
RunHeader make_run_header(std::vector<std::string> argv, Json platform, Json config);

// The case object of the document. A case whose `extra` fails check_op_fields (an undeclared key, a field
// every case has, a value of the wrong shape) is a programming error: std::logic_error naming the field.
Result<Json> case_to_json(const CaseResult& result);

class ResultsWriter {
 public:
  ResultsWriter(std::string path, RunHeader header);
  // Writes the document with an empty results[].
  Status start();
  // Appends the case and rewrites the file.
  Status add_case(const CaseResult& result);
  const Json& document() const { return document_; }

 private:
  std::string path_;
  Json document_;
};

struct ResultsDocument {
  int schema_version = 0;
  RunHeader header;
  std::vector<CaseRecord> cases;
};

Result<ResultsDocument> parse_results(const Json& document, const std::string& path);
Result<ResultsDocument> read_results_file(const std::string& path);

}  // namespace eps
