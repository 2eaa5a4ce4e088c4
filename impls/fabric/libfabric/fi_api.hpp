// libfabric, loaded at run time instead of linked (impls/runtime/dynamic_library.hpp says why).
//
// FiApi holds the exported libfabric functions epsuite calls; fi_api() loads libfabric.so.1 on first use.
// Everything else the fabric uses (fi_domain, fi_endpoint, fi_cq_read, fi_writemsg, fi_close, ...) is an
// inline function of the headers that calls through the provider's ops tables and needs no symbol. The
// one inline that does need one is fi_allocinfo (fi_dupinfo(NULL)): use FiApi::allocinfo instead. Code
// that calls a libfabric function directly brings the link-time dependency back; `nm -u` on the epsuite
// libraries must list no fi_* symbol.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "reference/common/status.hpp"

namespace eps::fabric::ofi {

inline constexpr const char* kLibfabricSoname = "libfabric.so.1";

struct FiApi {
  decltype(&::fi_getinfo) getinfo;
  decltype(&::fi_freeinfo) freeinfo;
  decltype(&::fi_dupinfo) dupinfo;
  decltype(&::fi_fabric) fabric;
  decltype(&::fi_strerror) strerror;
  decltype(&::fi_version) version;

  // What the header's fi_allocinfo does.
  fi_info* allocinfo() const { return dupinfo(nullptr); }
};

// libfabric.so.1 with every FiApi function resolved, loaded once (thread-safe) and never unloaded; a
// missing library or symbol is kUnavailable "libfabric.so.1 cannot be loaded: <dlerror>", every call.
Result<const FiApi*> fi_api();

// The loading behind fi_api(), from any `soname`: tests use it to check the errors.
Result<FiApi> load_fi_api(const char* soname);

}  // namespace eps::fabric::ofi
