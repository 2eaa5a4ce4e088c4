// The `plugin:NAME|PATH` transports: the Transport contract (transport.hpp) over an EP plugin loaded at run
// time (plugin_library.hpp, epsuite/ep_plugin_v1.h, docs/plugins.md).
//
// Creating one (collective over config.comm): validate_config against the plugin's declarations, a duplicate
// of the communicator for the bootstrap collectives the suite provides (allgather, barrier, each bounded by
// config.timeout_seconds), the node layout (SPEC 14.2), then the plugin's init. Memory: host memory, and
// device memory the host addresses (the `cpu` device), reach a plugin that takes host memory as host memory;
// other device memory needs a plugin that declares device memory, else the transport is kUnavailable naming
// both. A plugin whose init returns EPS_PLUGIN_UNAVAILABLE makes the transport kUnavailable with its message.
//
// Calls: the suite checks every argument first, with the checks of the built-in backends (an undeclared
// layout or tree, T_r, buffer sizes, a handle of another transport and, unless the plugin declares
// checks_routing, expert ids, duplicate experts and NaN weights: kInvalidArgument naming the field),
// quantizes on its own device when the caller asked the dispatch to (docs/dispatch.md 5.8: the plugin gets
// fp8 codes and scales), then calls the plugin under a PluginCallGuard (call_guard.hpp: deadline and crash
// report, exit 3 naming the plugin and the call). A call that fails returns the plugin's message as "plugin:x
// dispatch: <message>" with the code its result maps to (EPS_PLUGIN_INVALID_ARGUMENT: kInvalidArgument,
// UNAVAILABLE: kUnavailable, SYSTEM_ERROR: kEnvironment, INTERNAL_ERROR: kCheckFailed), plus the bootstrap's
// own error when a bootstrap collective failed during it. A dispatch that reports more rows than the receive
// buffers hold is kCheckFailed.
//
// Handles release their plugin handle when destroyed; the transport's destructor finalizes the plugin's
// context (collective), which frees the handles still alive. describe() names the plugin's file, version and
// ABI; wire_bytes() is the plugin's count (zero when it does not count).
#pragma once

#include <memory>

#include "impls/transport/plugin/plugin_library.hpp"
#include "impls/transport/transport.hpp"

namespace eps::transport {

Result<std::unique_ptr<Transport>> make_plugin_transport(std::shared_ptr<const PluginLibrary> library,
                                                         const TransportConfig& config);

}  // namespace eps::transport
