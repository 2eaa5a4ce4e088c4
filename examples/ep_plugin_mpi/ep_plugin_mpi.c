/* An EP plugin for epsuite, written as an EP library vendor would write one: expert-parallel dispatch and
 * combine as MPI all-to-all exchanges, in plain C, behind the C ABI of <epsuite/ep_plugin_v1.h>, built out of
 * the suite's tree against its installed package (CMakeLists.txt here; docs/plugins.md).
 *
 *   epsuite check --transport plugin:example-mpi      (found by name where the package installed it)
 *
 * It declares every layout (ht-rank-major, ht-expert-major, ll), every combine tree, bf16 and fp8, cached
 * dispatch, host memory, and fixed receive order. A dispatch sends one record per (token, destination rank)
 * for rank-major, one per valid (token, slot) for the other layouts: a small header (the token, its routing
 * or its local expert and weight), the payload row and its fp8 scales, all in one MPI_Ialltoallv after an
 * MPI_Ialltoall of the record counts. The receiver places the records in the layout's order; it keeps where
 * each record went, which is what combine and a cached dispatch need. Combine sends every received row's
 * expert output back the same way and reduces at the source in the order its tree prescribes
 * (docs/dispatch.md 5.5): fp32 sums, one rounding per operation (built with -ffp-contract=off), one bf16
 * rounding at the end.
 *
 * Every wait polls MPI_Test until config->timeout_seconds and then fails with EPS_PLUGIN_SYSTEM_ERROR, so a
 * lost peer is reported instead of hanging. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <epsuite/ep_plugin_v1.h>

static _Thread_local char g_error[512];

static int fail(int code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(g_error, sizeof(g_error), format, args);
  va_end(args);
  return code;
}

#define TRY(call)                                      \
  do {                                                 \
    const int result_ = (call);                        \
    if (result_ != EPS_PLUGIN_SUCCESS) return result_; \
  } while (0)

#define MPI_TRY(call)                                                      \
  do {                                                                     \
    const int rc_ = (call);                                                \
    if (rc_ != MPI_SUCCESS) {                                              \
      char text_[MPI_MAX_ERROR_STRING];                                    \
      int length_ = 0;                                                     \
      MPI_Error_string(rc_, text_, &length_);                              \
      return fail(EPS_PLUGIN_SYSTEM_ERROR, "%s failed: %s", #call, text_); \
    }                                                                      \
  } while (0)

struct handle;

typedef struct context {
  MPI_Comm comm;
  eps_plugin_bootstrap_v1 bootstrap;
  struct handle* handles; /* alive, linked through handle.next: finalize frees them */
  int rank, size, experts, local, top_k, hidden, t_max, fp8, alignment, ranks_per_node;
  double timeout;
  size_t row_bytes;   /* payload bytes of a row: 2H (bf16) or H (fp8) */
  size_t scale_bytes; /* 4 * H / 128 (fp8) or 0 */
  int64_t wire_sent, wire_received;
} context;

typedef struct handle {
  struct handle *next, *previous;
  int layout, num_tokens;
  int32_t* topk_idx; /* [T, K]: this rank's routing, for combine and cached dispatch */
  float* topk_weights;
  int *send_counts, *recv_counts; /* records per peer */
  int64_t* recv_row;              /* the output row of every received record, in receive order */
  int64_t rows;
} handle;

static void* zalloc(size_t bytes) { return calloc(bytes > 0 ? bytes : 1, 1); }

static int release(void* ctx, void* h);

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);                 /* round to nearest even */
}

static float from_bf16(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int align_up(int n, int alignment) { return (n + alignment - 1) / alignment * alignment; }

/* Polls `request` until it completes or the deadline passes. */
static int wait_for(const context* c, MPI_Request* request, const char* what) {
  const double start = MPI_Wtime();
  for (long polls = 0;; ++polls) {
    int done = 0;
    MPI_TRY(MPI_Test(request, &done, MPI_STATUS_IGNORE));
    if (done) return EPS_PLUGIN_SUCCESS;
    if (MPI_Wtime() - start > c->timeout) {
      return fail(EPS_PLUGIN_SYSTEM_ERROR, "rank %d: timed out after %.3f s waiting for %s", c->rank,
                  c->timeout, what);
    }
    if (polls > 4096) { /* oversubscribed ranks: give the peers the core, then sleep between polls */
      const struct timespec pause = {0, 50000};
      nanosleep(&pause, NULL);
    } else if (polls > 64) {
      sched_yield();
    }
  }
}

/* One exchange of `bytes_to[q]` bytes with every peer q (bytes_from from the counts), deadline-bounded. */
static int exchange(context* c, const void* send, const int* bytes_to, void* recv, const int* bytes_from,
                    const char* what) {
  int* send_displs = zalloc(sizeof(int) * (size_t)c->size);
  int* recv_displs = zalloc(sizeof(int) * (size_t)c->size);
  for (int q = 1; q < c->size; ++q) {
    send_displs[q] = send_displs[q - 1] + bytes_to[q - 1];
    recv_displs[q] = recv_displs[q - 1] + bytes_from[q - 1];
  }
  for (int q = 0; q < c->size; ++q) {
    if (q == c->rank) continue;
    c->wire_sent += bytes_to[q];
    c->wire_received += bytes_from[q];
  }
  MPI_Request request;
  int result = EPS_PLUGIN_SUCCESS;
  const int rc = MPI_Ialltoallv(send, bytes_to, send_displs, MPI_BYTE, recv, bytes_from, recv_displs,
                                MPI_BYTE, c->comm, &request);
  if (rc != MPI_SUCCESS) result = fail(EPS_PLUGIN_SYSTEM_ERROR, "MPI_Ialltoallv of %s failed (%d)", what, rc);
  if (result == EPS_PLUGIN_SUCCESS) result = wait_for(c, &request, what);
  free(send_displs);
  free(recv_displs);
  return result;
}

/* ---- records --------------------------------------------------------------------------------------------
 */

/* Rank-major: token, topk_idx[K], topk_weights[K]; the slot layouts: token, local expert, weight. */
static size_t header_bytes(const context* c, int layout) {
  return layout == EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR ? 4 + 8 * (size_t)c->top_k : 12;
}
static size_t record_bytes(const context* c, int layout) {
  return header_bytes(c, layout) + c->row_bytes + c->scale_bytes;
}

/* Calls visit(q, t, k) for every record of this rank's tokens in send order (t ascending; for rank-major
 * each destination rank of t once, k = -1; else each valid slot, k ascending). */
typedef void (*record_visitor)(void* state, int q, int t, int k);
static void for_each_record(const context* c, int layout, int tokens, const int32_t* idx,
                            record_visitor visit, void* state) {
  for (int t = 0; t < tokens; ++t) {
    int last = -1;
    for (int q = 0; layout == EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR && q < c->size; ++q) {
      for (int k = 0; k < c->top_k; ++k) {
        const int e = idx[t * c->top_k + k];
        if (e >= 0 && e / c->local == q && q != last) {
          visit(state, q, t, -1);
          last = q;
        }
      }
    }
    for (int k = 0; layout != EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR && k < c->top_k; ++k) {
      const int e = idx[t * c->top_k + k];
      if (e >= 0) visit(state, e / c->local, t, k);
    }
  }
}

static void count_record(void* state, int q, int t, int k) {
  (void)t, (void)k;
  ((int*)state)[q]++;
}

typedef struct packer {
  const context* c;
  const handle* h;
  const eps_plugin_dispatch_v1* args;
  char* buffer;
  size_t* cursor; /* per peer: the next byte */
} packer;

static void pack_record(void* state, int q, int t, int k) {
  packer* p = state;
  const context* c = p->c;
  char* at = p->buffer + p->cursor[q];
  const int32_t token = t;
  memcpy(at, &token, 4);
  at += 4;
  if (k < 0) {
    memcpy(at, p->h->topk_idx + (size_t)t * c->top_k, 4 * (size_t)c->top_k);
    memcpy(at + 4 * c->top_k, p->h->topk_weights + (size_t)t * c->top_k, 4 * (size_t)c->top_k);
    at += 8 * (size_t)c->top_k;
  } else {
    const int32_t local = p->h->topk_idx[t * c->top_k + k] % c->local;
    memcpy(at, &local, 4);
    memcpy(at + 4, p->h->topk_weights + (size_t)t * c->top_k + k, 4);
    at += 8;
  }
  memcpy(at, (const char*)p->args->x + (size_t)t * c->row_bytes, c->row_bytes);
  if (c->scale_bytes > 0)
    memcpy(at + c->row_bytes, (const char*)p->args->x_scales + (size_t)t * c->scale_bytes, c->scale_bytes);
  p->cursor[q] += record_bytes(c, p->h->layout);
}

/* ---- placing received records (docs/dispatch.md 5.2-5.4) --------------------------------------------------
 */

static void put_row(const context* c, const eps_plugin_dispatch_v1* a, int64_t row, const char* payload) {
  memcpy((char*)a->recv_x + row * (int64_t)c->row_bytes, payload, c->row_bytes);
  if (c->scale_bytes > 0)
    memcpy((char*)a->recv_x_scales + row * (int64_t)c->scale_bytes, payload + c->row_bytes, c->scale_bytes);
}

static void zero_row(const context* c, const eps_plugin_dispatch_v1* a, int64_t row) {
  memset((char*)a->recv_x + row * (int64_t)c->row_bytes, 0, c->row_bytes);
  if (c->scale_bytes > 0) memset((char*)a->recv_x_scales + row * (int64_t)c->scale_bytes, 0, c->scale_bytes);
  a->recv_weights[row] = 0.0f;
}

static void place_rank_major(const context* c, const eps_plugin_dispatch_v1* a, handle* h,
                             const char* records, int64_t n) {
  const size_t bytes = record_bytes(c, h->layout);
  for (int l = 0; l < c->local; ++l) a->num_recv_tokens_per_expert[l] = 0;
  for (int64_t i = 0; i < n; ++i) { /* sources ascending, tokens ascending: the order of 5.2 */
    const char* r = records + i * (int64_t)bytes;
    for (int k = 0; k < c->top_k; ++k) {
      int32_t e;
      float w;
      memcpy(&e, r + 4 + 4 * k, 4);
      memcpy(&w, r + 4 + 4 * c->top_k + 4 * k, 4);
      const int here = e >= 0 && e / c->local == c->rank;
      a->recv_topk_idx[i * c->top_k + k] = here ? e % c->local : -1;
      a->recv_topk_weights[i * c->top_k + k] = here ? w : 0.0f;
      if (here) a->num_recv_tokens_per_expert[e % c->local]++;
    }
    put_row(c, a, i, r + header_bytes(c, h->layout));
    h->recv_row[i] = i;
  }
  for (int l = 0; l < c->local; ++l)
    a->num_recv_tokens_per_expert[l] = align_up(a->num_recv_tokens_per_expert[l], c->alignment);
  h->rows = n;
}

static int32_t local_of(const char* record) {
  int32_t l;
  memcpy(&l, record + 4, 4);
  return l;
}

static void place_expert_major(const context* c, const eps_plugin_dispatch_v1* a, handle* h,
                               const char* records, int64_t n) {
  const size_t bytes = record_bytes(c, h->layout);
  int64_t* begin = zalloc(sizeof(int64_t) * (size_t)(c->local + 1));
  int64_t* filled = zalloc(sizeof(int64_t) * (size_t)c->local);
  int* count = zalloc(sizeof(int) * (size_t)c->local);
  for (int64_t i = 0; i < n; ++i) count[local_of(records + i * (int64_t)bytes)]++;
  for (int l = 0; l < c->local; ++l) {
    a->num_recv_tokens_per_expert[l] = align_up(count[l], c->alignment);
    begin[l + 1] = begin[l] + a->num_recv_tokens_per_expert[l];
  }
  for (int64_t i = 0; i < n; ++i) { /* (r, t) ascending within each expert: the order of 5.3 */
    const char* r = records + i * (int64_t)bytes;
    const int l = local_of(r);
    const int64_t row = begin[l] + filled[l]++;
    memcpy(&a->recv_weights[row], r + 8, 4);
    put_row(c, a, row, r + header_bytes(c, h->layout));
    h->recv_row[i] = row;
  }
  for (int l = 0; l < c->local; ++l) {
    for (int64_t row = begin[l] + count[l]; row < begin[l + 1]; ++row) zero_row(c, a, row); /* padding */
  }
  h->rows = begin[c->local];
  free(begin);
  free(filled);
  free(count);
}

static void place_ll(const context* c, const eps_plugin_dispatch_v1* a, handle* h, const char* records) {
  const size_t bytes = record_bytes(c, h->layout);
  const int64_t capacity = (int64_t)c->size * c->t_max;
  int* count = zalloc(sizeof(int) * (size_t)c->local * (size_t)c->size); /* [L, R] */
  int64_t i = 0;
  for (int r = 0; r < c->size; ++r) {
    for (int j = 0; j < h->recv_counts[r]; ++j, ++i)
      count[local_of(records + i * (int64_t)bytes) * c->size + r]++;
  }
  h->rows = 0;
  for (int l = 0; l < c->local; ++l) { /* blocks in ascending source rank: ordered */
    int begin = 0;
    for (int r = 0; r < c->size; ++r) {
      a->layout_range[(l * c->size + r) * 2] = begin;
      a->layout_range[(l * c->size + r) * 2 + 1] = count[l * c->size + r];
      begin += count[l * c->size + r];
      count[l * c->size + r] = 0; /* now the rows placed so far */
    }
    a->packed_recv_count[l] = begin;
    h->rows += begin;
  }
  i = 0;
  for (int r = 0; r < c->size; ++r) {
    for (int j = 0; j < h->recv_counts[r]; ++j, ++i) {
      const char* record = records + i * (int64_t)bytes;
      const int l = local_of(record);
      const int64_t row = l * capacity + a->layout_range[(l * c->size + r) * 2] + count[l * c->size + r]++;
      memcpy(&a->src_info[row], record, 4);
      put_row(c, a, row, record + header_bytes(c, h->layout));
      h->recv_row[i] = row;
    }
  }
  free(count);
}

/* Packs, exchanges and places the records of `h` (counts known). */
static int move_records(context* c, handle* h, const eps_plugin_dispatch_v1* a) {
  const size_t bytes = record_bytes(c, h->layout);
  int *bytes_to = zalloc(sizeof(int) * (size_t)c->size), *bytes_from = zalloc(sizeof(int) * (size_t)c->size);
  size_t* cursor = zalloc(sizeof(size_t) * (size_t)c->size);
  int64_t sent = 0, received = 0;
  for (int q = 0; q < c->size; ++q) {
    cursor[q] = (size_t)sent * bytes;
    bytes_to[q] = h->send_counts[q] * (int)bytes;
    bytes_from[q] = h->recv_counts[q] * (int)bytes;
    sent += h->send_counts[q];
    received += h->recv_counts[q];
  }
  char* send = zalloc((size_t)sent * bytes);
  char* recv = zalloc((size_t)received * bytes);
  packer p = {c, h, a, send, cursor};
  for_each_record(c, h->layout, h->num_tokens, h->topk_idx, pack_record, &p);
  int result = exchange(c, send, bytes_to, recv, bytes_from, "the dispatch records");
  if (result == EPS_PLUGIN_SUCCESS) {
    free(h->recv_row);
    h->recv_row = zalloc(sizeof(int64_t) * (size_t)received);
    if (h->layout == EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR) place_rank_major(c, a, h, recv, received);
    if (h->layout == EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) place_expert_major(c, a, h, recv, received);
    if (h->layout == EPS_PLUGIN_LAYOUT_LL) place_ll(c, a, h, recv);
  }
  free(send);
  free(recv);
  free(cursor);
  free(bytes_to);
  free(bytes_from);
  return result;
}

/* docs/dispatch.md 5.1 of this rank's tokens; the rank prefix matrix needs every rank's counts. */
static int write_layout(context* c, const handle* h, const eps_plugin_layout_v1* out) {
  memset(out->num_tokens_per_rank, 0, sizeof(int32_t) * (size_t)c->size);
  memset(out->num_tokens_per_expert, 0, sizeof(int32_t) * (size_t)c->experts);
  if (h->num_tokens > 0) memset(out->is_token_in_rank, 0, (size_t)h->num_tokens * (size_t)c->size);
  for (int t = 0; t < h->num_tokens; ++t) {
    for (int k = 0; k < c->top_k; ++k) {
      const int e = h->topk_idx[t * c->top_k + k];
      if (e < 0) continue;
      out->num_tokens_per_expert[e]++;
      uint8_t* in_rank = &out->is_token_in_rank[t * c->size + e / c->local];
      if (!*in_rank) out->num_tokens_per_rank[e / c->local]++;
      *in_rank = 1;
    }
  }
  MPI_Request request;
  MPI_TRY(MPI_Iallgather(out->num_tokens_per_rank, c->size, MPI_INT32_T, out->rank_prefix_matrix, c->size,
                         MPI_INT32_T, c->comm, &request));
  TRY(wait_for(c, &request, "the tokens per rank of every rank"));
  for (int i = 1; i < c->size; ++i) {
    for (int j = 0; j < c->size; ++j)
      out->rank_prefix_matrix[i * c->size + j] += out->rank_prefix_matrix[(i - 1) * c->size + j];
  }
  return EPS_PLUGIN_SUCCESS;
}

/* ---- the ABI --------------------------------------------------------------------------------------------
 */

static int properties(eps_plugin_properties_v1* out) {
  memset(out, 0, sizeof(*out));
  out->layouts = EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_RANK_MAJOR) |
                 EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_HT_EXPERT_MAJOR) | EPS_PLUGIN_BIT(EPS_PLUGIN_LAYOUT_LL);
  out->trees = EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_RANK) | EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_HT_TWO_LEVEL) |
               EPS_PLUGIN_BIT(EPS_PLUGIN_TREE_LL_WEIGHTED);
  out->dtypes = EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_BF16) | EPS_PLUGIN_BIT(EPS_PLUGIN_DTYPE_FP8);
  out->memory = EPS_PLUGIN_BIT(EPS_PLUGIN_MEMORY_HOST);
  out->open_order = 0; /* every layout in the fixed order of docs/dispatch.md 5.2-5.4 */
  out->cached_dispatch = 1;
  out->checks_routing = 0; /* the suite checks the routing for us */
  out->max_ranks = 1024;
  out->max_experts = 1 << 16;
  out->max_top_k = 64;
  out->max_hidden = 1 << 14; /* keeps every MPI byte count below 2^31 */
  out->max_tokens_per_rank = 1 << 14;
  return EPS_PLUGIN_SUCCESS;
}

static int init(const eps_plugin_config_v1* config, void** out) {
  if (config->memory != EPS_PLUGIN_MEMORY_HOST) return fail(EPS_PLUGIN_INVALID_ARGUMENT, "memory: host only");
  /* Every rank must run with the same shapes: compare them through the suite's bootstrap allgather. */
  const int32_t mine[3] = {config->num_experts, config->hidden, config->max_tokens_per_rank};
  int32_t* all = zalloc(sizeof(mine) * (size_t)config->size);
  const eps_plugin_bootstrap_v1* b = &config->bootstrap;
  if (b->allgather(b->context, mine, all, sizeof(mine)) != EPS_PLUGIN_SUCCESS) {
    free(all);
    return fail(EPS_PLUGIN_SYSTEM_ERROR, "bootstrap allgather: %s", b->last_error(b->context));
  }
  for (int r = 0; r < config->size; ++r) {
    if (memcmp(all + 3 * r, mine, sizeof(mine)) != 0) {
      free(all);
      return fail(EPS_PLUGIN_INVALID_ARGUMENT, "rank %d has other shapes than rank %d", r, config->rank);
    }
  }
  free(all);
  context* c = zalloc(sizeof(context));
  MPI_TRY(MPI_Comm_dup(*(const MPI_Comm*)config->mpi_comm, &c->comm));
  c->rank = config->rank;
  c->size = config->size;
  c->experts = config->num_experts;
  c->local = config->num_experts / config->size;
  c->top_k = config->top_k;
  c->hidden = config->hidden;
  c->t_max = config->max_tokens_per_rank;
  c->fp8 = config->dtype == EPS_PLUGIN_DTYPE_FP8;
  c->alignment = config->expert_alignment;
  c->ranks_per_node = config->ranks_per_node;
  c->timeout = config->timeout_seconds;
  c->bootstrap = config->bootstrap;
  c->row_bytes = c->fp8 ? (size_t)c->hidden : 2 * (size_t)c->hidden;
  c->scale_bytes = c->fp8 ? 4 * (size_t)(c->hidden / 128) : 0;
  *out = c;
  return EPS_PLUGIN_SUCCESS;
}

static int dispatch(void* ctx, const eps_plugin_dispatch_v1* a, const eps_plugin_layout_v1* layout,
                    void** out, int64_t* num_recv_rows) {
  context* c = ctx;
  const size_t slots = (size_t)a->num_tokens * (size_t)c->top_k;
  handle* h = zalloc(sizeof(handle));
  h->layout = a->layout;
  h->num_tokens = a->num_tokens;
  h->topk_idx = zalloc(4 * slots);
  h->topk_weights = zalloc(4 * slots);
  h->send_counts = zalloc(sizeof(int) * (size_t)c->size);
  h->recv_counts = zalloc(sizeof(int) * (size_t)c->size);
  if (slots > 0) {
    memcpy(h->topk_idx, a->topk_idx, 4 * slots);
    memcpy(h->topk_weights, a->topk_weights, 4 * slots);
  }
  h->next = c->handles;
  if (h->next != NULL) h->next->previous = h;
  c->handles = h;
  for_each_record(c, h->layout, h->num_tokens, h->topk_idx, count_record, h->send_counts);
  MPI_Request request;
  int result = write_layout(c, h, layout);
  if (result == EPS_PLUGIN_SUCCESS && MPI_Ialltoall(h->send_counts, 1, MPI_INT, h->recv_counts, 1, MPI_INT,
                                                    c->comm, &request) != MPI_SUCCESS) {
    result = fail(EPS_PLUGIN_SYSTEM_ERROR, "MPI_Ialltoall of the record counts failed");
  } else if (result == EPS_PLUGIN_SUCCESS) {
    result = wait_for(c, &request, "the record counts");
    c->wire_sent += 4 * (int64_t)(c->size - 1);
    c->wire_received += 4 * (int64_t)(c->size - 1);
  }
  if (result == EPS_PLUGIN_SUCCESS) result = move_records(c, h, a);
  if (result != EPS_PLUGIN_SUCCESS) {
    release(ctx, h);
    return result;
  }
  *num_recv_rows = h->rows;
  *out = h;
  return EPS_PLUGIN_SUCCESS;
}

static int dispatch_cached(void* ctx, void* h, const eps_plugin_dispatch_v1* a) {
  return move_records(ctx, h, a); /* the handle's routing and counts, new payloads */
}

/* ---- combine (docs/dispatch.md 5.5) -----------------------------------------------------------------------
 */

typedef struct reducer {
  const context* c;
  const handle* h;
  const eps_plugin_combine_v1* a;
  const uint16_t* returned; /* the rows every expert-side rank sent back, peers ascending */
  int64_t* next;            /* per peer: its next row in `returned` */
  float *acc, *node_acc;    /* [H] */
} reducer;

static const uint16_t* next_row(reducer* r, int q) { return r->returned + (r->next[q]++) * r->c->hidden; }

static void add(float* acc, const uint16_t* row, int hidden) {
  for (int i = 0; i < hidden; ++i) acc[i] = acc[i] + from_bf16(row[i]);
}

static int goes_to(const reducer* r, int t, int q) {
  for (int k = 0; k < r->c->top_k; ++k) {
    const int e = r->h->topk_idx[t * r->c->top_k + k];
    if (e >= 0 && e / r->c->local == q) return 1;
  }
  return 0;
}

/* ht-two-level: a node's fp32 sum, rounded to bf16 once, joins the token's fp32 sum. */
static void close_node(reducer* r) {
  for (int i = 0; i < r->c->hidden; ++i) r->acc[i] = r->acc[i] + from_bf16(to_bf16(r->node_acc[i]));
}

static void reduce_token_ht(reducer* r, int t) {
  const context* c = r->c;
  const int hidden = c->hidden;
  for (int i = 0; i < hidden; ++i) { /* fp32(bias0) + fp32(bias1), an absent bias reading as +0 */
    const float b0 = r->a->bias0 != NULL ? from_bf16(r->a->bias0[(size_t)t * hidden + i]) : 0.0f;
    r->acc[i] = b0 + (r->a->bias1 != NULL ? from_bf16(r->a->bias1[(size_t)t * hidden + i]) : 0.0f);
  }
  const int two_level = r->a->tree == EPS_PLUGIN_TREE_HT_TWO_LEVEL;
  int open_node = -1;
  for (int q = 0; q < c->size; ++q) { /* destination ranks ascending */
    if (!goes_to(r, t, q)) continue;
    if (!two_level) {
      add(r->acc, next_row(r, q), hidden);
      continue;
    }
    const int node = q / c->ranks_per_node; /* nodes: groups of consecutive ranks */
    if (node != open_node) {
      if (open_node >= 0) close_node(r);
      for (int i = 0; i < hidden; ++i) r->node_acc[i] = 0.0f;
      open_node = node;
    }
    add(r->node_acc, next_row(r, q), hidden);
  }
  if (open_node >= 0) close_node(r);
}

static void reduce_token_ll(reducer* r, int t) {
  const context* c = r->c;
  for (int i = 0; i < c->hidden; ++i) r->acc[i] = 0.0f;
  for (int k = 0; k < c->top_k; ++k) {
    const int e = r->h->topk_idx[t * c->top_k + k];
    if (e < 0) continue;
    const float w = r->h->topk_weights[t * c->top_k + k];
    const uint16_t* y = next_row(r, e / c->local);
    for (int i = 0; i < c->hidden; ++i) {
      const float product = w * from_bf16(y[i]);
      r->acc[i] = r->acc[i] + product;
    }
  }
}

static int combine(void* ctx, void* hv, const eps_plugin_combine_v1* a) {
  context* c = ctx;
  const handle* h = hv;
  const size_t row = 2 * (size_t)c->hidden;
  int *bytes_to = zalloc(sizeof(int) * (size_t)c->size), *bytes_from = zalloc(sizeof(int) * (size_t)c->size);
  int64_t received = 0, returned = 0;
  for (int q = 0; q < c->size; ++q) {
    bytes_to[q] = h->recv_counts[q] * (int)row; /* every received record's row goes back to its source */
    bytes_from[q] = h->send_counts[q] * (int)row;
    received += h->recv_counts[q];
    returned += h->send_counts[q];
  }
  uint16_t* back = zalloc((size_t)received * row);
  uint16_t* rows = zalloc((size_t)returned * row);
  for (int64_t i = 0; i < received; ++i) memcpy(back + i * c->hidden, a->x + h->recv_row[i] * c->hidden, row);
  int result = exchange(c, back, bytes_to, rows, bytes_from, "the combine rows");
  if (result == EPS_PLUGIN_SUCCESS) {
    reducer r = {c,
                 h,
                 a,
                 rows,
                 zalloc(sizeof(int64_t) * (size_t)c->size),
                 zalloc(4 * (size_t)c->hidden),
                 zalloc(4 * (size_t)c->hidden)};
    for (int q = 1; q < c->size; ++q) r.next[q] = r.next[q - 1] + h->send_counts[q - 1];
    for (int t = 0; t < h->num_tokens; ++t) {
      if (a->tree == EPS_PLUGIN_TREE_LL_WEIGHTED) {
        reduce_token_ll(&r, t);
      } else {
        reduce_token_ht(&r, t);
      }
      for (int i = 0; i < c->hidden; ++i) a->out[(size_t)t * c->hidden + i] = to_bf16(r.acc[i]);
      for (int k = 0; a->combined_weights != NULL && k < c->top_k; ++k) {
        const size_t slot = (size_t)t * c->top_k + k;
        a->combined_weights[slot] = h->topk_idx[slot] >= 0 ? h->topk_weights[slot] : 0.0f;
      }
    }
    free(r.next);
    free(r.acc);
    free(r.node_acc);
  }
  free(back);
  free(rows);
  free(bytes_to);
  free(bytes_from);
  return result;
}

static int release(void* ctx, void* hv) {
  context* c = ctx;
  handle* h = hv;
  if (h->previous != NULL) {
    h->previous->next = h->next;
  } else {
    c->handles = h->next;
  }
  if (h->next != NULL) h->next->previous = h->previous;
  free(h->topk_idx);
  free(h->topk_weights);
  free(h->send_counts);
  free(h->recv_counts);
  free(h->recv_row);
  free(h);
  return EPS_PLUGIN_SUCCESS;
}

static int finalize(void* ctx) {
  context* c = ctx;
  while (c->handles != NULL) release(c, c->handles);
  /* No rank frees its communicator while a peer may still be inside an exchange on it. */
  const int synced = c->bootstrap.barrier(c->bootstrap.context);
  if (synced != EPS_PLUGIN_SUCCESS) {
    fail(synced, "bootstrap barrier: %s", c->bootstrap.last_error(c->bootstrap.context));
  }
  MPI_Comm_free(&c->comm);
  free(c);
  return synced;
}

static const char* last_error(void) { return g_error; }

static int wire_bytes(void* ctx, int64_t* sent, int64_t* received) {
  const context* c = ctx;
  *sent = c->wire_sent;
  *received = c->wire_received;
  return EPS_PLUGIN_SUCCESS;
}

const eps_ep_plugin_v1_t eps_ep_plugin_v1 = {
    EPS_PLUGIN_ABI_VERSION_V1, "example-mpi", "1.0",   properties, init,       dispatch,
    dispatch_cached,           combine,       release, finalize,   last_error, wire_bytes};
