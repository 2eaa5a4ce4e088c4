#include "impls/fabric/verbs/verbs_api.hpp"

#include <cstring>

#include "impls/runtime/dynamic_library.hpp"

namespace eps::fabric::verbs {

int VerbsApi::query_port(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) const {
  // The body of ___ibv_query_port (infiniband/verbs.h) with the exported call taken from this table.
  verbs_context* extended = verbs_get_ctx_op(context, query_port);
  if (extended != nullptr) return extended->query_port(context, port, attr, sizeof(*attr));
  std::memset(attr, 0, sizeof(*attr));
  return query_port_compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

Result<VerbsApi> load_verbs_api(const char* soname) {
  EPS_ASSIGN_OR_RETURN(void* library, open_library(soname));
  VerbsApi api{};
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_get_device_list", api.get_device_list));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_free_device_list", api.free_device_list));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_get_device_name", api.get_device_name));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_open_device", api.open_device));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_close_device", api.close_device));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_query_device", api.query_device));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_query_port", api.query_port_compat));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_query_gid", api.query_gid));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_alloc_pd", api.alloc_pd));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_dealloc_pd", api.dealloc_pd));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_reg_mr", api.reg_mr));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_dereg_mr", api.dereg_mr));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_create_cq", api.create_cq));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_destroy_cq", api.destroy_cq));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_create_qp", api.create_qp));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_destroy_qp", api.destroy_qp));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_modify_qp", api.modify_qp));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_qp_to_qp_ex", api.qp_to_qp_ex));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_create_ah", api.create_ah));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_destroy_ah", api.destroy_ah));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_port_state_str", api.port_state_str));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "ibv_wc_status_str", api.wc_status_str));
  // Optional: an older libibverbs still serves host memory; device memory then stages (verbs_dmabuf.hpp).
  if (!resolve(library, soname, "ibv_reg_dmabuf_mr", api.reg_dmabuf_mr).ok()) api.reg_dmabuf_mr = nullptr;
  return api;
}

Result<const VerbsApi*> verbs_api() {
  // A function-local static is initialized once, thread-safely; a failure is kept and reported each time.
  static const Result<VerbsApi> loaded = load_verbs_api(kVerbsSoname);
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}

#if defined(EPS_HAVE_EFADV) && EPS_HAVE_EFADV
Result<EfaApi> load_efa_api(const char* soname) {
  EPS_ASSIGN_OR_RETURN(void* library, open_library(soname));
  EfaApi api{};
  EPS_RETURN_IF_ERROR(resolve(library, soname, "efadv_query_device", api.query_device));
  EPS_RETURN_IF_ERROR(resolve(library, soname, "efadv_create_qp_ex", api.create_qp_ex));
  return api;
}

Result<const EfaApi*> efa_api() {
  static const Result<EfaApi> loaded = load_efa_api(kEfaSoname);
  if (!loaded.ok()) return loaded.status();
  return &loaded.value();
}
#endif

}  // namespace eps::fabric::verbs
