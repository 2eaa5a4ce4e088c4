/* Version 3 of the ABI between epsuite and its GPU device plugins (device_plugin.h): version 2's calls
 * (device_plugin_v2.h) plus the device execution model of docs/devices.md 12.1-12.7 (SPEC 14.6): queues,
 * events, stream memory operations, IPC, host registration, graph capture and the memory kind of a
 * pointer (the copy ledger). Exported as `const eps_device_plugin_v3* eps_device_plugin_v3(void);`.
 *
 * Conventions are version 2's: 0 on success, else non-zero and a message for last_error() of the calling
 * thread; `kind` 0 pinned host and 1 device memory; kernels by KernelId with their argument struct.
 *
 * Queues. A queue is an in-order stream (CUDA/HIP stream). Wherever a call takes `queue`, NULL names the
 * context's default queue (the one stream of version 2). copy, fill, launch, write_value, wait_value and
 * event_record enqueue and return; nothing in version 3 blocks on the device: the host waits by polling
 * queue_query / event_query under its own deadline.
 * - write_value stores `value` (4 or 8 bytes, `width_bytes`) at `address` after the earlier work of the
 *   queue, with a memory barrier before it (cuStreamWriteValue32/64, hipStreamWriteValue32/64).
 * - wait_value holds the later work of the queue until the 4- or 8-byte value at `address` is >= `value`
 *   (`condition` 0) or == `value` (1) (cuStreamWaitValue32/64 with GEQ / EQ, hipStreamWaitValue32/64 with
 *   Gte / Eq). `timeout_seconds` is honoured by plugins that can give up (a host plugin); on a GPU the wait
 *   runs on the GPU and the host's deadline on queue_query bounds it.
 * - `address` is device memory, imported memory, or host memory registered with host_register (use the
 *   address host_register returned).
 * Events: event_create makes a timing event; event_record places it on a queue; event_query says whether
 * it is done (`*done` 1; an event never recorded is done); queue_wait_event holds a queue until an event is
 * done; event_elapsed_ms gives the milliseconds between two done events.
 * IPC: ipc_export writes EPS_DEVICE_IPC_HANDLE_BYTES bytes describing the allocation starting at `data`
 * (cudaIpcGetMemHandle, hipIpcGetMemHandle); ipc_import maps a handle another process exported
 * (cudaIpcOpenMemHandle / hipIpcOpenMemHandle with lazy peer access) and ipc_close unmaps it.
 * host_register / host_unregister: cudaHostRegister / hipHostRegister (portable, mapped) of host memory the
 * plugin did not allocate; *device_address is what device operations use for it.
 * Graphs: capture_begin makes a queue record instead of run (the relaxed capture mode, so that other threads
 * keep working); capture_end instantiates what was recorded into *graph (an executable graph);
 * graph_launch runs it on a queue; graph_destroy frees it.
 * pointer_kind: 1 when `pointer` is device memory (of any device, imported included), 0 for host memory
 * (pinned, registered or pageable); what the copy ledger counts host<->device copies with. */
#ifndef EPS_DEVICE_PLUGIN_V3_H_
#define EPS_DEVICE_PLUGIN_V3_H_

#include <stddef.h>
#include <stdint.h>

#include "impls/device/gpu/device_plugin_v2.h" /* eps_device_properties_v2 */

#ifdef __cplusplus
extern "C" {
#endif

#define EPS_DEVICE_PLUGIN_ABI_V3 3
#define EPS_DEVICE_PLUGIN_SYMBOL_V3 "eps_device_plugin_v3"
#define EPS_DEVICE_IPC_HANDLE_BYTES 64 /* CU_IPC_HANDLE_SIZE, HIP_IPC_HANDLE_SIZE */

typedef struct eps_device_plugin_v3 {
  int abi_version;     /* EPS_DEVICE_PLUGIN_ABI_V3 */
  const char* backend; /* "cuda", "hip" */
  int kernel_count;    /* KernelId::kCount the plugin was built with */
  int (*device_count)(int* count);
  int (*properties)(int ordinal, eps_device_properties_v2* out);
  int (*open)(int ordinal, void** context);
  int (*close)(void* context); /* waits for the default queue */
  int (*allocate)(void* context, size_t bytes, int kind, void** out);
  int (*release)(void* context, void* data, int kind);
  const char* (*last_error)(void);
  int (*export_dma_buf)(void* context, const void* data, size_t bytes, int* fd, uint64_t* offset);
  /* Queues. */
  int (*queue_create)(void* context, void** queue);
  int (*queue_destroy)(void* context, void* queue); /* waits for the queue */
  int (*queue_query)(void* context, void* queue, int* idle);
  int (*copy)(void* context, void* queue, void* dst, const void* src, size_t bytes);
  int (*fill)(void* context, void* queue, void* dst, int value, size_t bytes);
  int (*launch)(void* context, void* queue, int kernel, const void* args, size_t args_bytes);
  int (*write_value)(void* context, void* queue, void* address, uint64_t value, int width_bytes);
  int (*wait_value)(void* context, void* queue, const void* address, uint64_t value, int width_bytes,
                    int condition, double timeout_seconds);
  /* Events. */
  int (*event_create)(void* context, void** event);
  int (*event_destroy)(void* context, void* event);
  int (*event_record)(void* context, void* event, void* queue);
  int (*event_query)(void* context, void* event, int* done);
  int (*queue_wait_event)(void* context, void* queue, void* event);
  int (*event_elapsed_ms)(void* context, void* start, void* end, float* milliseconds);
  /* IPC and host registration. */
  int (*ipc_export)(void* context, const void* data, void* handle);
  int (*ipc_import)(void* context, const void* handle, void** data);
  int (*ipc_close)(void* context, void* data);
  int (*host_register)(void* context, void* data, size_t bytes, void** device_address);
  int (*host_unregister)(void* context, void* data);
  /* Graphs. */
  int (*capture_begin)(void* context, void* queue);
  int (*capture_end)(void* context, void* queue, void** graph);
  int (*graph_launch)(void* context, void* graph, void* queue);
  int (*graph_destroy)(void* context, void* graph);
  /* The copy ledger. */
  int (*pointer_kind)(void* context, const void* pointer, int* kind);
} eps_device_plugin_v3;

typedef const eps_device_plugin_v3* (*eps_device_plugin_entry_v3)(void);

#ifdef __cplusplus
}
#endif

#endif /* EPS_DEVICE_PLUGIN_V3_H_ */
