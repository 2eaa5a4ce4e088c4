// libibverbs and libefa, loaded at run time instead of linked (impls/runtime/dynamic_library.hpp says why).
//
// VerbsApi holds the exported libibverbs functions epsuite calls; verbs_api() loads libibverbs.so.1 on
// first use. The data path (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_wr_*) consists of inline
// header functions calling through the provider's ops tables and needs no symbol. Two names are macros
// over inline wrappers that do reference exported symbols, and must not be called as such:
// ibv_query_port (use VerbsApi::query_port) and ibv_reg_mr (use VerbsApi::reg_mr). Code that calls a
// libibverbs or efadv function directly brings the link-time dependency back; `nm -u` on the epsuite
// libraries must list no ibv_* or efadv_* symbol.
//
// EfaApi (efadv, libefa.so.1) is the optional part that only verbs:efa loads, declared where this build
// has efadv (EPS_HAVE_EFADV, a definition of the verbs targets).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "reference/common/status.hpp"

#if defined(EPS_HAVE_EFADV) && EPS_HAVE_EFADV
#include <infiniband/efadv.h>
#endif

namespace eps::fabric::verbs {

inline constexpr const char* kVerbsSoname = "libibverbs.so.1";

struct VerbsApi {
  decltype(&::ibv_get_device_list) get_device_list;
  decltype(&::ibv_free_device_list) free_device_list;
  decltype(&::ibv_get_device_name) get_device_name;
  decltype(&::ibv_open_device) open_device;
  decltype(&::ibv_close_device) close_device;
  decltype(&::ibv_query_device) query_device;
  // The exported ibv_query_port fills only the original part of ibv_port_attr (_compat_ibv_port_attr);
  // call query_port(), which prefers the provider's full query as the header's macro does.
  decltype(&::ibv_query_port) query_port_compat;
  decltype(&::ibv_query_gid) query_gid;
  decltype(&::ibv_alloc_pd) alloc_pd;
  decltype(&::ibv_dealloc_pd) dealloc_pd;
  // The header's ibv_reg_mr macro switches to ibv_reg_mr_iova2 only for IBV_ACCESS_OPTIONAL_RANGE access
  // flags, which epsuite never passes: the exported ibv_reg_mr is what it calls.
  decltype(&::ibv_reg_mr) reg_mr;
  decltype(&::ibv_dereg_mr) dereg_mr;
  // Optional (rdma-core 34+): null where this libibverbs has no dma-buf registration (verbs_dmabuf.hpp).
  decltype(&::ibv_reg_dmabuf_mr) reg_dmabuf_mr = nullptr;
  decltype(&::ibv_create_cq) create_cq;
  decltype(&::ibv_destroy_cq) destroy_cq;
  decltype(&::ibv_create_qp) create_qp;
  decltype(&::ibv_destroy_qp) destroy_qp;
  decltype(&::ibv_modify_qp) modify_qp;
  decltype(&::ibv_qp_to_qp_ex) qp_to_qp_ex;
  decltype(&::ibv_create_ah) create_ah;
  decltype(&::ibv_destroy_ah) destroy_ah;
  decltype(&::ibv_port_state_str) port_state_str;
  decltype(&::ibv_wc_status_str) wc_status_str;

  // What the header's ibv_query_port does: 0 or an errno value.
  int query_port(ibv_context* context, std::uint8_t port, ibv_port_attr* attr) const;
};

// libibverbs.so.1 with every VerbsApi function resolved, loaded once (thread-safe) and never unloaded; a
// missing library or symbol is kUnavailable "libibverbs.so.1 cannot be loaded: <dlerror>", every call.
Result<const VerbsApi*> verbs_api();

// The loading behind verbs_api(), from any `soname`: tests use it to check the errors.
Result<VerbsApi> load_verbs_api(const char* soname);

#if defined(EPS_HAVE_EFADV) && EPS_HAVE_EFADV
inline constexpr const char* kEfaSoname = "libefa.so.1";

struct EfaApi {
  decltype(&::efadv_query_device) query_device;
  decltype(&::efadv_create_qp_ex) create_qp_ex;
};

// libefa.so.1, as verbs_api() loads libibverbs; kUnavailable "libefa.so.1 cannot be loaded: <dlerror>".
Result<const EfaApi*> efa_api();
Result<EfaApi> load_efa_api(const char* soname);
#endif

}  // namespace eps::fabric::verbs
