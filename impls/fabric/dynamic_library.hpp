// Run-time loading (dlopen/dlsym) of the fabric libraries, shared by the libfabric loader
// (libfabric/fi_api.hpp) and the libibverbs/libefa loader (verbs/verbs_api.hpp).
//
// epsuite links none of libfabric, libibverbs and libefa: loading a library runs its constructors, and
// Debian's libfabric.so.1 pulls in libpsm_infinipath, whose constructor sleeps ~200 ms, so every process
// paid for it, even `epsuite --version`. Loaded on first use instead, only commands that use a fabric pay.
#pragma once

#include <dlfcn.h>

#include "reference/common/status.hpp"

namespace eps::fabric {

// kUnavailable "<soname> cannot be loaded: <dlerror>"; call it right after the failed dlopen or dlsym.
inline Status cannot_load(const char* soname) {
  const char* reason = dlerror();
  return Status(StatusCode::kUnavailable, fmt::format("{} cannot be loaded: {}", soname,
                                                      reason != nullptr ? reason : "unknown reason"));
}

// The library is never unloaded: its functions and the objects it made are used until exit, and
// unloading would run its destructors under live atexit handlers. RTLD_LOCAL: nothing else in the
// process should bind to its symbols by accident.
inline Result<void*> open_library(const char* soname) {
  void* library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
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

}  // namespace eps::fabric
