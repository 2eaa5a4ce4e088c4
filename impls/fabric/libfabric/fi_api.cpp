#include "impls/fabric/libfabric/fi_api.hpp"

#include "impls/runtime/dynamic_library.hpp"

namespace eps::fabric::ofi {

Result<FiApi> load_fi_api(const char* soname) {
  EPS_ASSIGN_OR_RETURN(void* library, open_library(soname));
  FiApi api{};
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_getinfo", api.getinfo));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_freeinfo", api.freeinfo));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_dupinfo", api.dupinfo));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_fabric", api.fabric));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_strerror", api.strerror));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "fi_version", api.version));
  return api;
}

Result<const FiApi*> fi_api() {
  // A function-local static is initialized once, thread-safely; a failure is kept and reported each time.
  static const Result<FiApi> loaded = load_fi_api(kLibfabricSoname);
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}

}  // namespace eps::fabric::ofi
