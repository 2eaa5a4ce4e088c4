/* The ABI between epsuite and its GPU device plugins (docs/devices.md 12.8), in the manner of NCCL's net
 * plugins: one C struct of function pointers per version, each in a header of its own, returned by one
 * exported symbol per version.
 *
 * A plugin is a shared library, libeps_device_<backend>.so ("cuda", "hip"), built from the one source
 * gpu_plugin.cu against its vendor runtime. epsuite never links a GPU runtime: it dlopens the plugin when a
 * device is asked for, so one binary runs on machines with or without a GPU (a plugin that cannot load, or
 * finds no GPU, makes that backend unavailable with the loader's or the runtime's message).
 *
 * Versions (the loader, plugin_device.cpp, looks for the newest symbol first):
 * - 3 (device_plugin_v3.h, "eps_device_plugin_v3"): queues, events, stream memory operations, IPC, host
 *   registration, graphs, pointer kinds. What the plugins of this build export.
 * - 2 (device_plugin_v2.h, "eps_device_plugin_v2", or "eps_device_plugin_v1" from plugins built before the
 *   headers were split): the synchronous subset; the rest of the Device interface is `unavailable` there,
 *   naming the plugin's version. */
#ifndef EPS_DEVICE_PLUGIN_H_
#define EPS_DEVICE_PLUGIN_H_

#include "impls/device/gpu/device_plugin_v2.h"
#include "impls/device/gpu/device_plugin_v3.h"

#define EPS_DEVICE_PLUGIN_ABI_VERSION \
  EPS_DEVICE_PLUGIN_ABI_V3 /* the newest, what this build's plugins carry */

#endif /* EPS_DEVICE_PLUGIN_H_ */
