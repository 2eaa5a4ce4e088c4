// Loading an EP plugin (epsuite/ep_plugin_v1.h, docs/plugins.md) for `--transport plugin:NAME|PATH`.
//
// Where it is looked for: a PATH (the text holds a '/') is that file only. A NAME (1-64 characters of
// [A-Za-z0-9._-]) is the library libepsuite-plugin-NAME.so, looked for in each directory of the environment
// variable EPSUITE_PLUGIN_PATH (colon-separated, in order), then by that file name through the dynamic
// loader's search path (LD_LIBRARY_PATH, the executable's RUNPATH, the ld.so cache). A library is loaded once
// per process (dlopen RTLD_NOW | RTLD_LOCAL) and never unloaded; the same text gives the same library.
//
// Refusals, each kInvalidArgument (exit 2) naming the library and what is wrong:
// - it cannot be loaded (the loader's message; for a NAME, every place looked in);
// - it has no symbol eps_ep_plugin_v1 (with the eps_ep_plugin_v<N> symbols it does export, if any);
// - its table's abi_version is not EPS_PLUGIN_ABI_VERSION_V1;
// - its name is not 1-64 characters of [A-Za-z0-9._-], differs from the NAME it was looked up by, or is the
//   name of a plugin already loaded from another file;
// - an entry it must provide is NULL (name, version, properties, init, dispatch, combine, release, finalize,
//   last_error; dispatch_cached when it declares cached dispatch), naming the entry;
// - properties() fails (its message) or declares something outside the ABI (plugin_capabilities).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <epsuite/ep_plugin_v1.h>

#include "impls/transport/transport.hpp"
#include "reference/common/status.hpp"

namespace eps::transport {

struct PluginLibrary {
  const eps_ep_plugin_v1_t* api = nullptr;
  std::string path;     // the file it was loaded from
  std::string name;     // its own name: the transport is "plugin:<name>"
  std::string version;  // its own version
  Capabilities capabilities;
  bool host_memory = false;    // declares EPS_PLUGIN_MEMORY_HOST
  bool device_memory = false;  // declares EPS_PLUGIN_MEMORY_DEVICE
  bool checks_routing = false;
};

// The file name a plugin NAME is looked for under: "libepsuite-plugin-NAME.so".
std::string plugin_file_name(std::string_view name);

Result<std::shared_ptr<const PluginLibrary>> load_plugin(std::string_view spec);

// The Capabilities of `declared` (kInvalidArgument "properties.<field>: ..." for a mask with bits outside the
// ABI, no layout, tree, dtype or memory kind, a tree without the layout it follows, an open order for an
// undeclared layout, a limit below 1, cached_dispatch or checks_routing not 0 or 1). A plugin that takes host
// memory also takes device memory the host addresses (the `cpu` device).
Result<Capabilities> plugin_capabilities(const eps_plugin_properties_v1& declared);

}  // namespace eps::transport
