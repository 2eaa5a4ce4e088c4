/* Libraries the plugin loader must refuse (plugin_library.hpp), one per definition:
 * BAD_VERSION   a table of abi_version 2 under the v1 symbol;
 * OTHER_VERSION only a symbol eps_ep_plugin_v2 (a plugin of another ABI version);
 * NULL_ENTRY    a v1 table whose combine entry is NULL;
 * BAD_TREES     declarations with the ht-rank tree but without the ht-rank-major layout it follows.
 * No function here is ever called past properties(). */
#include <epsuite/ep_plugin_v1.h>

static int properties(eps_plugin_properties_v1* out) {
  out->layouts = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_LL);
#ifdef BAD_TREES
  out->trees = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED) | EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_RANK);
#else
  out->trees = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED);
#endif
  out->dtypes = EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_BF16);
  out->memory = EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_HOST);
  out->open_order = 0;
  out->cached_dispatch = 0;
  out->checks_routing = 0;
  out->max_ranks = out->max_experts = out->max_top_k = out->max_hidden = out->max_tokens_per_rank = 1024;
  return EPS_PLUGIN_SUCCESS;
}

static int refuse(void) { return EPS_PLUGIN_INTERNAL_ERROR; }
static int init(const eps_plugin_config_v1* config, void** context) {
  (void)config;
  (void)context;
  return refuse();
}
static int dispatch(void* context, const eps_plugin_dispatch_v1* args, const eps_plugin_layout_v1* layout,
                    void** handle, int64_t* rows) {
  (void)context, (void)args, (void)layout, (void)handle, (void)rows;
  return refuse();
}
#if !defined(NULL_ENTRY)
static int combine(void* context, void* handle, const eps_plugin_combine_v1* args) {
  (void)context, (void)handle, (void)args;
  return refuse();
}
#endif
static int release(void* context, void* handle) {
  (void)context, (void)handle;
  return refuse();
}
static int finalize(void* context) {
  (void)context;
  return refuse();
}
static const char* last_error(void) { return "this plugin only exists to be refused"; }

#if defined(BAD_VERSION)
#define EPS_BAD_ABI 2
#else
#define EPS_BAD_ABI EPS_PLUGIN_ABI_VERSION_V1
#endif
#if defined(NULL_ENTRY)
#define EPS_BAD_COMBINE 0
#else
#define EPS_BAD_COMBINE combine
#endif

#if defined(OTHER_VERSION)
const eps_ep_plugin_v1_t eps_ep_plugin_v2 = {
#else
const eps_ep_plugin_v1_t eps_ep_plugin_v1 = {
#endif
    EPS_BAD_ABI, PLUGIN_NAME,     "0",     properties, init,       dispatch,
    0,           EPS_BAD_COMBINE, release, finalize,   last_error, 0};
