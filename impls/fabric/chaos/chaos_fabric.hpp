// The chaos fabric (docs/fabrics.md 6.3): a decorator over any Fabric that behaves like the least helpful NIC
// the contract of fabric.hpp allows, driven by a seeded PRNG so that a failure can be replayed.
//
// What it does to the inner fabric's traffic (each knob 0 = off):
// - window W: up to W posted puts are held back and handed to the inner fabric in a seeded random order
//   (so puts overtake each other, docs/fabrics.md 6.1 `unordered`);
// - split B: a put larger than B bytes is cut into chunks of at most B bytes issued in random order,
//   interleaved with other puts; a chunk carrying the put's immediate is issued only after the other
//   chunks' inner local completions, so a remote completion still implies the whole put is placed;
// - delay D: local and remote completions are held for up to D poll calls and released shuffled (the
//   sender-side ones too); a local completion is released only after the inner local completions of all
//   of its chunks (local completion still implies placement);
// - empty P: P per cent of poll calls return nothing although completions are ready (empty CQs);
// - backpressure P: P per cent of try_put calls return false (nothing posted).
// Remote atomics (try_atomic_add) go through the same window, delay and backpressure as puts, so an atomic
// may overtake a put or be overtaken by one and its local completion comes late, but an atomic is never
// split (an 8-byte add in pieces would not be one add) and its local completion still follows the inner
// fabric's, i.e. the add is applied. atomic_support() is the inner fabric's.
// Held puts and completions are released as the caller keeps calling try_put / poll / quiet, so a caller
// that keeps polling always makes progress; quiet and barrier keep their contract (barrier is the inner
// fabric's). ordered() is false. name() is "chaos(<inner name>)".
//
// Replay: every random decision comes from Philox4x32-10 (reference/data) keyed by (seed, rank) and a
// decision counter, so the same seed gives every rank the same sequence of decisions. The decorator
// records its decisions (a rolling hash: the schedule id). describe() says
// "chaos(libfabric:shm) --chaos seed=1,window=8,split=4096,delay=4,empty=10,backpressure=5 schedule 0x...
// after N decisions", which transports put into every error and conformance into every failure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "impls/fabric/fabric.hpp"
#include "reference/common/status.hpp"

namespace eps::fabric {

struct ChaosOptions {
  std::uint64_t seed = 1;
  int window = 8;            // [0, 1024]
  std::size_t split = 4096;  // 0 or [64, kMaxPutBytes]
  int delay = 4;             // [0, 1024]
  int empty = 10;            // [0, 90] per cent
  int backpressure = 5;      // [0, 90] per cent

  // "seed=1,window=8,split=4096,delay=4,empty=10,backpressure=5": the --chaos spelling.
  std::string to_string() const;
  // No perturbation at all (window, split, delay, empty and backpressure 0): the overhead baseline.
  bool zero() const;
};

// Parses a --chaos spec: comma-separated key=value pairs, keys seed (required), window, split, delay,
// empty, backpressure; omitted keys keep the defaults above. kInvalidArgument names the key and its range
// ("--chaos: window must be in [0, 1024], got 5000"; "--chaos: unknown key 'x'; keys: seed, window, ...").
Result<ChaosOptions> parse_chaos(std::string_view spec);

std::unique_ptr<Fabric> make_chaos_fabric(std::unique_ptr<Fabric> inner, const ChaosOptions& options);

}  // namespace eps::fabric
