// A deliberately broken transport, registered only by test executables: `stale` wraps the `mpi` baseline
// and, after its first dispatch and its first combine, stops writing the caller's outputs. It still does the
// whole exchange (into scratch buffers of its own), so it is as fast and as collective as a working
// transport; only its results go stale, the way a transport with a buffer-reuse bug would fail. The bench's
// -c checking and the conformance suite must both report it wrong (docs/dispatch.md 5.7).
#pragma once

namespace eps::conformance {

// Adds `stale` to the transport registry (transport::register_test_transport).
void register_stale_transport();

}  // namespace eps::conformance
