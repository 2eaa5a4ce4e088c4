// The put path of the `direct` transport (protocol/put_path.hpp): the calling thread posts every put to the
// Fabric itself, polls its completions and counts them per parity, so that sender-barrier's signal waits
// for its data puts' local completions and an operation starts only once the puts of two operations ago no
// longer read the send region.
#pragma once

#include <memory>

#include "impls/transport/protocol/put_path.hpp"

namespace eps::transport {

std::unique_ptr<PutPath> make_fabric_put_path(const PutContext& context);

}  // namespace eps::transport
