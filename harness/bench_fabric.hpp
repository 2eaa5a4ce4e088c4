// `epsuite bench fabric --fabric NAME [--chaos SPEC]`: the ceiling of a fabric (the perftest / fi_rma_bw
// analogue) next to the physical limit of the host, so that a transport's GB/s can be read against both.
//
// Pairing: rank r puts to rank put_peer(r) = (r + R/2) % R (pairs across the halves when R is even; a ring
// when R is odd; R = 1 puts to itself), so every rank receives from exactly one rank, put_source(r). The
// latency ping-pong pairs r with ping_partner(r) = r + R/2 for r < R/2 (and back); with odd R the last
// rank pings itself.
//
// Per message size s of --sizes (bytes, 1 .. fabric::kMaxPutBytes; also at most the fabric's
// limits().max_put_bytes, else exit 2), with -w warm-up and -n timed iterations (identical on every rank):
//   bandwidth  fabric barrier, then each rank posts --window puts of s bytes back to back (retrying on
//              backpressure while polling), the last one with an immediate, and waits for every local
//              completion of its puts and for the immediate from put_source(r). Time per iteration = max
//              over ranks; GB/s = window * s (bytes moved by one rank) / p50.
//   latency    fabric barrier, then one put of s bytes with an immediate each way (initiator: post, wait
//              for the reply's immediate; responder: wait, post); time per iteration = max over ranks of
//              the round trip, reported halved (one-way latency, p50 / p99).
//   copy       the physical limit of shared memory: MPI barrier, then each rank memcpy's the same window
//              of bytes into the MPI_Win_allocate_shared segment of its peer (put_peer over the ranks of
//              its node, MPI_COMM_TYPE_SHARED) and sets a release flag there; it waits for its own flag.
//              Same timing; `copy GB/s` and the ratio put GB/s / copy GB/s share the row.
// Put i of a window goes from source slot i % slots to destination slot i % slots, slots =
// window_slots(s, window) (at most kRegionCapBytes per region), so large sizes reuse memory the way
// perftest does. Source bytes are pattern_byte(seed, writer, region offset); -c poisons the destination
// (the complement of the expected bytes), runs one more iteration of each measurement and counts the
// destination bytes that differ from the writer's pattern (#wrong, summed over ranks; exit 1 when any).
//
// Output: rank 0 prints a `#` block (fabric describe(), pairing, method, timer, the effective flags) and
// one row per size (fabric_table_header / fabric_table_row). --json writes SPEC 9.1 cases: per size three
// cases with op "fabric", transport = the fabric's name ("shm", "chaos(libfabric:tcp)"), mode "put-bw",
// "put-latency" or "copy", dtype "bytes", sizes {bytes, window, ranks}, per-iteration times (latency:
// halved), bytes {algo: moved by one rank, physical: the same unless the rank writes to itself} and check.
//
// Bad input exits 2 with one message naming the flag before anything runs or is written: an unknown
// --fabric, a malformed --chaos, --sizes out of range, a flag of the transport ops (--preset, --signal, ...)
// given on the command line. A fabric that cannot run here (no provider, ranks on several hosts for shm)
// exits 3 with the fabric's message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "harness/params.hpp"
#include "harness/platform.hpp"

namespace eps {

// The parameters only `bench fabric` reads (sizes, window); listed by bench_param_specs().
std::vector<ParamSpec> bench_fabric_param_specs();

// Every bench parameter the fabric op reads; the other bench flags are refused when given on the
// command line (environment twins are ignored, since they may be set for the whole suite).
const std::vector<std::string>& bench_fabric_param_names();

// Measures the fabric of `params` (bench_command_specs(), resolved); prints on rank 0 and writes --json.
// MPI must be initialized; it stays initialized. Returns the exit code agreed over ranks (0 ok, 1 -c found
// wrong bytes, 2 bad input, 3 fabric not available); failures while measuring end the job (SPEC 10).
int run_bench_fabric(const Params& params, const Platform& platform, const std::vector<std::string>& argv);

namespace bench_fabric {

// The largest region (per rank, source and destination each) a size may use: slots shrink above it.
inline constexpr std::size_t kRegionCapBytes = std::size_t{64} << 20;

int put_peer(int rank, int ranks);      // (rank + ranks / 2) % ranks
int put_source(int rank, int ranks);    // the rank r with put_peer(r) == rank
int ping_partner(int rank, int ranks);  // rank + R/2, rank - R/2, or rank itself (odd R, last rank)
// Destination slots of a window of puts of `bytes`: min(window, max(1, kRegionCapBytes / bytes)).
std::size_t window_slots(std::size_t bytes, int window);

// The byte that `writer` puts at `offset` of a region: Philox4x32-10 keyed by `seed`, counter
// {offset / 16 (low, high words), writer, 0xfab0}, byte offset % 16 of the block (little endian).
std::uint8_t pattern_byte(std::uint64_t seed, int writer, std::size_t offset);
// out[i] = pattern_byte(seed, writer, offset + i).
void fill_pattern(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out);
// out[i] = ~pattern_byte(seed, writer, offset + i): every byte differs from the expected one.
void fill_poison(std::uint64_t seed, int writer, std::size_t offset, std::span<std::byte> out);

struct WrongBytes {
  std::int64_t count = 0;
  std::optional<std::size_t> first_offset;  // offset (relative to `offset`) of the first wrong byte
  std::uint8_t expected = 0;
  std::uint8_t got = 0;
};
// Compares `data` with fill_pattern(seed, writer, offset, ...).
WrongBytes count_wrong(std::uint64_t seed, int writer, std::size_t offset, std::span<const std::byte> data);

// One table row. Columns (fixed widths, right-aligned, locked by harness/tests/bench_fabric_test.cpp):
//   size (B) | bytes (B, window * size) | put p50 (us) | put GB/s | lat p50 (us) | lat p99 (us) |
//   copy p50 (us) | copy GB/s | put/copy | slowest rank (of put-bw) | #wrong (N/A without -c)
struct FabricRow {
  std::int64_t size = 0;
  std::int64_t bytes = 0;
  double put_p50_us = 0;
  double put_gbps = 0;
  double lat_p50_us = 0;
  double lat_p99_us = 0;
  double copy_p50_us = 0;
  double copy_gbps = 0;
  int slowest_rank = 0;
  std::optional<std::int64_t> wrong;
};
// `config_lines` ('#' prepended where missing) + "#" + the two column-title lines.
std::string fabric_table_header(const std::string& config_lines);
std::string fabric_table_row(const FabricRow& row);

}  // namespace bench_fabric
}  // namespace eps
