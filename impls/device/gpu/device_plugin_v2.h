/* Version 2 of the ABI between epsuite and its GPU device plugins (device_plugin.h): the synchronous
 * subset, one in-order stream per context. Plugins built before version 3 exported this table under the
 * symbol "eps_device_plugin_v1" (the struct was named after version 1 while carrying ABI 2); the loader
 * still accepts that name, and a version-2 plugin gets the synchronous subset of the Device interface (its
 * queues, events, stream memory operations, IPC and graphs are `unavailable`, saying so).
 *
 * Conventions: every function returns 0 on success; on failure a non-zero value and a message is left for
 * last_error() of the calling thread ("cudaMalloc of 1073741824 bytes: out of memory"). `kind` is 0 for
 * pinned host memory and 1 for device memory (MemoryKind). `kernel` is a KernelId and `args` points to
 * that kernel's argument struct (impls/device/kernels/kernel_args.hpp) of `args_bytes` bytes; the plugin
 * checks the size. A context is one device with one in-order stream; copy, fill and synchronize wait for
 * the stream. */
#ifndef EPS_DEVICE_PLUGIN_V2_H_
#define EPS_DEVICE_PLUGIN_V2_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EPS_DEVICE_PLUGIN_ABI_V2 2 /* 2: export_dma_buf */
#define EPS_DEVICE_PLUGIN_SYMBOL_V2 "eps_device_plugin_v2"
/* What version-2 plugins exported before the headers were split. */
#define EPS_DEVICE_PLUGIN_SYMBOL_V2_LEGACY "eps_device_plugin_v1"

typedef struct eps_device_properties_v2 {
  char name[256];
  char architecture[64]; /* "sm_90", "gfx90a" */
  char pci_bus_id[64];   /* "0000:1b:00.0" */
  uint64_t memory_bytes;
  int dma_buf_supported; /* the driver can export device memory as a dma-buf (verbs registration) */
} eps_device_properties_v2;

typedef struct eps_device_plugin_v2 {
  int abi_version;     /* EPS_DEVICE_PLUGIN_ABI_V2 */
  const char* backend; /* "cuda", "hip" */
  int kernel_count;    /* KernelId::kCount the plugin was built with */
  int (*device_count)(int* count);
  int (*properties)(int ordinal, eps_device_properties_v2* out);
  int (*open)(int ordinal, void** context);
  int (*close)(void* context);
  int (*allocate)(void* context, size_t bytes, int kind, void** out);
  int (*release)(void* context, void* data, int kind);
  int (*copy)(void* context, void* dst, const void* src, size_t bytes);
  int (*fill)(void* context, void* dst, int value, size_t bytes);
  int (*synchronize)(void* context);
  int (*launch)(void* context, int kernel, const void* args, size_t args_bytes);
  const char* (*last_error)(void);
  /* Exports [data, data + bytes) of device memory as a dma-buf: *fd (owned by the caller) and *offset, where
   * the range starts in it. Fails where the driver has no export (the message says so). */
  int (*export_dma_buf)(void* context, const void* data, size_t bytes, int* fd, uint64_t* offset);
} eps_device_plugin_v2;

/* The exported symbol: `const eps_device_plugin_v2* eps_device_plugin_v2(void);` (or, from plugins built
 * before the rename, the same function named eps_device_plugin_v1). */
typedef const eps_device_plugin_v2* (*eps_device_plugin_entry_v2)(void);

#ifdef __cplusplus
}
#endif

#endif /* EPS_DEVICE_PLUGIN_V2_H_ */
