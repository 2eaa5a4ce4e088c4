/* epsuite EP plugin ABI, version 1 (docs/plugins.md): how an expert-parallel library that is not part of the
 * suite plugs into `epsuite check`, `bench`, `run` and `soak` as `--transport plugin:NAME` or
 * `--transport plugin:/path/to/lib.so`.
 *
 * In the manner of NCCL's net plugins: a shared library exports one object, `eps_ep_plugin_v1` (the symbol
 * names the ABI version), a table of function pointers of type eps_ep_plugin_v1_t. A later ABI version gets
 * a header of its own (ep_plugin_v2.h, symbol eps_ep_plugin_v2); a plugin may export several versions.
 * epsuite refuses, with exit 2 and a message naming what is wrong, a library without the symbol, a table
 * whose abi_version is not EPS_PLUGIN_ABI_VERSION_V1, a table with a NULL entry it needs, or declarations
 * outside the ranges below.
 *
 * What a plugin implements is the Transport contract of docs/dispatch.md 5, in C:
 * - properties: what it declares (layouts, combine trees, dtypes, memory kinds, which layouts leave the
 *   receive order open, cached dispatch, size limits), without being initialized. Conformance runs exactly
 *   the declared contracts and nothing else (docs/dispatch.md "Declared contracts").
 * - init / finalize: one context per transport the suite creates (collective over every rank; a suite
 *   process may hold several contexts at once, of different shapes).
 * - dispatch, dispatch_cached, combine, release: the operations, buffers in the layouts of docs/dispatch.md
 *   5.2-5.4 (row-major, shapes below). A dispatch returns a handle that combine and dispatch_cached take;
 *   handles are independent (dispatch A, dispatch B, combine A, combine B is allowed, docs/dispatch.md 5.7)
 *   and live until released.
 *
 * Conventions.
 * - Every function returns an eps_plugin_result_t; on failure, last_error() returns a message for the last
 *   failed call of the calling thread ("dispatch: MPI_Alltoallv failed: ..."), which the suite prints with
 *   the plugin's name and the call. A failed call fails that conformance case or bench point; the suite
 *   goes on with the next one.
 * - The suite checks every input before calling (T_r in [0, T_max], buffer sizes and, unless the plugin
 *   declares checks_routing, expert ids in [-1, E), no expert twice per token, no NaN weight on a valid
 *   slot), so a plugin sees valid input only. With an fp8
 *   transport whose caller asked the dispatch to quantize (docs/dispatch.md 5.8), the suite quantizes and the
 *   plugin receives fp8 codes and scales.
 * - Deadlines (docs/errors.md 10): every wait of the plugin should end after config->timeout_seconds with
 *   EPS_PLUGIN_SYSTEM_ERROR. A call that has not returned 2 s after that deadline (a hang), or that crashes
 *   (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT), ends the whole job with exit 3 and a message naming the
 *   plugin and the call: a hung call cannot be interrupted in-process.
 * - Calls come from one thread per rank at a time; a plugin may start threads of its own.
 * - Every pointer is host memory when config->memory is EPS_PLUGIN_MEMORY_HOST, memory of the configured
 *   device when it is EPS_PLUGIN_MEMORY_DEVICE (a plugin declares the kinds it takes).
 *
 * Notation: R ranks, E experts (a multiple of R), L = E / R local experts (expert e lives on rank e / L at
 * local index e % L), K = top_k, H = hidden, T_r = this call's tokens, T_max = max_tokens_per_rank,
 * C = R * T_max, row_bytes = 2H (bf16 bit patterns) or H (fp8 e4m3fn codes), S = H / 128 fp32 scales per row
 * (fp8 only). bf16 values travel as uint16_t bit patterns. */
#ifndef EPSUITE_EP_PLUGIN_V1_H_
#define EPSUITE_EP_PLUGIN_V1_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EPS_PLUGIN_ABI_VERSION_V1 1
#define EPS_PLUGIN_SYMBOL_V1 "eps_ep_plugin_v1"

/* Results. The suite maps them to its outcomes (docs/errors.md 10.1). */
typedef enum eps_plugin_result_t {
  EPS_PLUGIN_SUCCESS = 0,
  EPS_PLUGIN_INVALID_ARGUMENT = 1, /* a shape or input the plugin does not take: usage error (exit 2) */
  EPS_PLUGIN_UNAVAILABLE = 2,      /* init only: what the plugin needs is absent here (no GPU, no NIC): the
                                      transport's cases are skipped with the message (exit 3 under --strict) */
  EPS_PLUGIN_SYSTEM_ERROR = 3,     /* a failed system or library call, a peer failure, a timeout (exit 3) */
  EPS_PLUGIN_INTERNAL_ERROR = 4    /* anything else: the case fails (exit 1) */
} eps_plugin_result_t;

/* Layouts (docs/dispatch.md 5.2-5.4), combine trees (5.5), dtypes and memory kinds. The declaration masks
 * hold EPS_PLUGIN_BIT(value) for every value declared. */
#define EPS_PLUGIN_BIT(value) (1u << (value))
#define EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR 0   /* "ht-rank-major" */
#define EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR 1 /* "ht-expert-major" */
#define EPS_PLUGIN_LAYOUT_LL 2              /* "ll" */
#define EPS_PLUGIN_TREE_HT_RANK 0           /* "ht-rank" (follows ht-rank-major) */
#define EPS_PLUGIN_TREE_HT_TWO_LEVEL 1      /* "ht-two-level" (follows ht-rank-major) */
#define EPS_PLUGIN_TREE_LL_WEIGHTED 2       /* "ll-weighted" (follows ht-expert-major and ll) */
#define EPS_PLUGIN_DTYPE_BF16 0
#define EPS_PLUGIN_DTYPE_FP8 1 /* e4m3fn codes plus one fp32 scale per 128 values (docs/numerics.md 1.2) */
#define EPS_PLUGIN_MEMORY_HOST 0
#define EPS_PLUGIN_MEMORY_DEVICE 1

/* What the plugin declares (SPEC 14.3 for open_order). Limits are inclusive maxima, each >= 1. */
typedef struct eps_plugin_properties_v1 {
  uint32_t layouts;        /* layouts it produces */
  uint32_t trees;          /* combine trees it implements */
  uint32_t dtypes;         /* payload dtypes */
  uint32_t memory;         /* memory kinds its buffers may be in (at least one) */
  uint32_t open_order;     /* declared layouts whose receive order is left open: rows may come in any order
                              inside a block (docs/dispatch.md 5.9); every other declared layout is fixed */
  int32_t cached_dispatch; /* 1: dispatch_cached is implemented; 0: it may be NULL */
  int32_t checks_routing;  /* 1: dispatch rejects bad routing itself (an expert id outside [-1, E), an expert
                              named twice by one token, a NaN weight on a valid slot) with
                              EPS_PLUGIN_INVALID_ARGUMENT and a message naming the field, as the conformance
                              suite checks; the suite then checks shapes and T_r only, which saves a copy of
                              the  routing to the host per dispatch when it lives in device memory. 0: the
                              suite  checks the routing before every dispatch. */
  int32_t max_ranks;
  int32_t max_experts;
  int32_t max_top_k;
  int32_t max_hidden;
  int32_t max_tokens_per_rank;
} eps_plugin_properties_v1;

/* Collectives the suite provides, over the ranks of the transport (bounded by config->timeout_seconds). A
 * failure returns EPS_PLUGIN_SYSTEM_ERROR with the reason in bootstrap->last_error(bootstrap->context). */
typedef struct eps_plugin_bootstrap_v1 {
  void* context;
  /* Every rank's `bytes` bytes of `send` into `recv` [size * bytes], in rank order (the same `bytes` on
   * every rank). */
  int (*allgather)(void* context, const void* send, void* recv, size_t bytes);
  int (*barrier)(void* context);
  const char* (*last_error)(void* context);
} eps_plugin_bootstrap_v1;

/* The shapes of one transport, fixed for the life of its context (docs/dispatch.md 5). */
typedef struct eps_plugin_config_v1 {
  int32_t rank; /* this rank in [0, size) */
  int32_t size; /* R */
  int32_t node; /* this rank's node (SPEC 14.2: the ranks that share memory), nodes ordered by lowest rank */
  int32_t num_nodes;           /* nodes of the job */
  int32_t local_rank;          /* this rank's index among the ranks of its node */
  int32_t local_size;          /* ranks on this rank's node */
  int32_t num_experts;         /* E */
  int32_t top_k;               /* K */
  int32_t hidden;              /* H (a multiple of 128 for fp8) */
  int32_t max_tokens_per_rank; /* T_max */
  int32_t dtype;               /* EPS_PLUGIN_DTYPE_* */
  int32_t expert_alignment;    /* >= 1, docs/dispatch.md 5.2 / 5.3 */
  int32_t ranks_per_node;      /* the node size ht-two-level reduces over: groups of consecutive ranks */
  int32_t memory;              /* EPS_PLUGIN_MEMORY_* of every buffer of every call */
  int32_t device_ordinal;      /* the GPU of this rank for EPS_PLUGIN_MEMORY_DEVICE, else -1 */
  const char* device;          /* the suite's device ("cpu: ...", "cuda:0: NVIDIA H100 ...") */
  double timeout_seconds;      /* the deadline of every wait (docs/errors.md 10) */
  const void* mpi_comm;        /* an MPI_Comm* of the suite's MPI over these ranks, for a plugin that uses
                                  MPI itself (the suite initialized MPI with MPI_THREAD_MULTIPLE); a plugin
                                  should duplicate it, never free it */
  eps_plugin_bootstrap_v1 bootstrap;
} eps_plugin_config_v1;

/* The arguments of dispatch and dispatch_cached. Outputs of the other layouts are NULL. The receive arrays
 * hold recv_capacity rows: ht-rank-major R * T_max, ht-expert-major R * T_max * min(K, L) + L * (alignment -
 * 1), ll L * C. Rows a call does not write must stay untouched (the suite fills them with NaN and checks).
 * - ht-rank-major (5.2): rows (r, t) for every source token with an expert here, ordered (r, t) when the
 * order is fixed; recv_x [cap, row_bytes], recv_x_scales [cap, S], recv_topk_idx [cap, K] (the local expert
 * index of slots whose expert lives here, else -1), recv_topk_weights [cap, K] (the weight there, else
 * +0.0f), num_recv_tokens_per_expert [L] (valid local slots, rounded up to the alignment).
 * - ht-expert-major (5.3): rows (l, r, t) sorted when fixed; each local expert's segment padded with zero
 *   rows (zero bytes, zero scales, weight +0.0f) to a multiple of the alignment; recv_x, recv_x_scales,
 *   recv_weights [cap] (the slot's weight), num_recv_tokens_per_expert [L] (each segment's padded length).
 * - ll (5.4): recv_x is packed_recv_x [L, C, row_bytes], recv_x_scales [L, C, S], packed_recv_count [L],
 *   src_info [L, C] (source token of each row), layout_range [L, R, 2] (begin, count of source rank r's block
 *   in expert l's rows). */
typedef struct eps_plugin_dispatch_v1 {
  int32_t layout;            /* EPS_PLUGIN_LAYOUT_*, one the plugin declared */
  int32_t num_tokens;        /* T_r */
  const void* x;             /* [T_r, row_bytes] */
  const float* x_scales;     /* [T_r, S] for fp8, NULL for bf16 */
  const int32_t* topk_idx;   /* [T_r, K], -1 = no expert (NULL in dispatch_cached: the handle's routing) */
  const float* topk_weights; /* [T_r, K] (NULL in dispatch_cached) */
  int64_t recv_capacity;     /* rows of the receive arrays */
  void* recv_x;
  float* recv_x_scales; /* NULL for bf16 */
  int32_t* recv_topk_idx;
  float* recv_topk_weights;
  float* recv_weights;
  int32_t* num_recv_tokens_per_expert;
  int32_t* packed_recv_count;
  int32_t* src_info;
  int32_t* layout_range;
} eps_plugin_dispatch_v1;

/* docs/dispatch.md 5.1, which a fresh dispatch writes for this rank's tokens (host memory always). */
typedef struct eps_plugin_layout_v1 {
  int32_t* num_tokens_per_rank;   /* [R]: tokens that go to each rank (once per rank) */
  int32_t* num_tokens_per_expert; /* [E]: valid slots per expert */
  uint8_t* is_token_in_rank;      /* [T_r, R]: 1 where the token goes to that rank */
  int32_t* rank_prefix_matrix;    /* [R, R]: [i][j] = tokens rank j receives from ranks 0..i (every rank's) */
} eps_plugin_layout_v1;

/* The arguments of combine (docs/dispatch.md 5.5), after a dispatch of the handle's layout:
 * - ht-rank / ht-two-level: x [rows, H] holds one pre-weighted partial per received row (rows = the
 * dispatch's num_recv_rows, in the order the dispatch wrote them); out row t = bf16(fp32(bias0) + fp32(bias1)
 * + the partials of t's destination ranks ascending) (ht-two-level: each node's sum rounded to bf16 first);
 * - ll-weighted: x holds the expert output of every received row (ht-expert-major [rows, H]; ll [L, C, H]);
 *   out row t = bf16(sum over valid k ascending of fp32(w_k) * fp32(y_k)), exact 0 without a valid slot.
 * Every sum in fp32, one rounding per operation (no FMA), one bf16 rounding at the end. */
typedef struct eps_plugin_combine_v1 {
  int32_t tree;            /* EPS_PLUGIN_TREE_*, one that follows the handle's layout */
  int32_t num_tokens;      /* T_r of the handle's dispatch */
  const uint16_t* x;       /* see above */
  int64_t x_rows;          /* rows of x */
  const uint16_t* bias0;   /* [T_r, H] or NULL (ht trees only) */
  const uint16_t* bias1;   /* [T_r, H] or NULL */
  uint16_t* out;           /* [T_r, H] */
  float* combined_weights; /* [T_r, K] or NULL: the weights of valid slots, +0.0f for masked ones */
} eps_plugin_combine_v1;

typedef struct eps_ep_plugin_v1_t {
  int32_t abi_version; /* EPS_PLUGIN_ABI_VERSION_V1 */
  const char* name;    /* 1-64 characters of [A-Za-z0-9._-]: the suite names the transport "plugin:<name>" */
  const char* version; /* the plugin's own version, printed in headers */
  /* Declarations, callable before init (and several times). */
  int (*properties)(eps_plugin_properties_v1* out);
  /* Collective: makes a context for these shapes. */
  int (*init)(const eps_plugin_config_v1* config, void** context);
  /* Collective: a fresh dispatch; *handle for combine and dispatch_cached; *num_recv_rows = rows written
   * (ht layouts) or the sum of packed_recv_count (ll). */
  int (*dispatch)(void* context, const eps_plugin_dispatch_v1* args, const eps_plugin_layout_v1* layout,
                  void** handle, int64_t* num_recv_rows);
  /* Collective: new payloads (x, x_scales) along the routing of `handle` without exchanging counts again;
   * outputs bit-equal to those of a fresh dispatch (docs/dispatch.md 5.2). NULL when not declared. */
  int (*dispatch_cached)(void* context, void* handle, const eps_plugin_dispatch_v1* args);
  /* Collective. */
  int (*combine)(void* context, void* handle, const eps_plugin_combine_v1* args);
  /* Local: frees a handle. */
  int (*release)(void* context, void* handle);
  /* Collective: frees the context. */
  int (*finalize)(void* context);
  /* The message of the calling thread's last failed call. */
  const char* (*last_error)(void);
  /* Optional (NULL: not counted): the bytes this context put on the wire to other ranks and took off the
   * wire from them since init, payloads, headers, signals and count exchanges included (docs/dispatch.md 5.6
   * `physical`); bytes a rank moves to itself are not counted. Local. */
  int (*wire_bytes)(void* context, int64_t* sent, int64_t* received);
} eps_ep_plugin_v1_t;

/* The exported object. In C:    const eps_ep_plugin_v1_t eps_ep_plugin_v1 = {EPS_PLUGIN_ABI_VERSION_V1, ...};
 * In C++ the declaration below gives it C linkage (and external linkage despite const); it is exported even
 * when the plugin is built with -fvisibility=hidden (as epsuite_add_plugin does). */
#if defined(__GNUC__)
#define EPS_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define EPS_PLUGIN_EXPORT
#endif
EPS_PLUGIN_EXPORT extern const eps_ep_plugin_v1_t eps_ep_plugin_v1;

#ifdef __cplusplus
}
#endif

#endif /* EPSUITE_EP_PLUGIN_V1_H_ */
