// Run-time loading (dlopen/dlsym) of optional shared libraries: the fabric libraries (the libfabric loader
// impls/fabric/libfabric/fi_api.hpp, the libibverbs/libefa loader impls/fabric/verbs/verbs_api.hpp) and
// the GPU device plugins (impls/device/gpu/plugin_device.hpp).
//
// epsuite links none of libfabric, libibverbs, libefa and the GPU runtimes: loading a library runs its
// constructors, and Debian's libfabric.so.1 pulls in libpsm_infinipath, whose constructor sleeps ~200 ms,
// so every process paid for it, even `epsuite --version`. Loaded on first use instead, only commands that
// use a fabric or a GPU pay, and one binary runs on machines with and without them.
#pragma once

#include <dlfcn.h>

#include <string>

#include "reference/common/status.hpp"

namespace eps {

// The loader's message for the last failed dlopen or dlsym of this thread ("libx.so: cannot open shared
// object file: No such file or directory"); call it right after the failure.
inline std::string load_error() {
  const char* reason = dlerror();
  return reason != nullptr ? reason : "unknown reason";
}

// dlopen with the policy of open_library (below), for a caller that tries several places and words the
// error itself: nullptr on failure, load_error() then says why.
inline void* dlopen_library(const char* path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }

// kUnavailable "<soname> cannot be loaded: <dlerror>"; call it right after the failed dlopen or dlsym.
inline Status cannot_load(const char* soname) {
  return Status(StatusCode::kUnavailable, fmt::format("{} cannot be loaded: {}", soname, load_error()));
}

// The library is never unloaded: its functions and the objects it made are used until exit, and
// unloading would run its destructors under live atexit handlers. RTLD_LOCAL: nothing else in the
// process should bind to its symbols by accident. `soname` may also be a path.
inline Result<void*> open_library(const char* soname) {
  void* library = dlopen_library(soname);
  if (library == nullptr) return cannot_load(soname);
  return library;
}

// Points `function` at the exported (default-version) symbol `name`, as the static linker would have.
template <typename Function>
Status resolve(void* library, const char* soname, const char* name, Function& function) {
  dlerror();  // clears an earlier error, so that cannot_load reports this lookup's
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr ? Status() : cannot_load(soname);
}

}  // namespace eps
