// The GPU runtime names gpu_plugin.cu uses, mapped onto the CUDA runtime (nvcc, __CUDACC__) or the HIP
// runtime (hipcc, __HIPCC__), so that one source builds both plugins (device_plugin.h). Only what the plugin
// calls is mapped; every mapped call returns a gpuError_t.
//
// gpuMemcpyAsync copies between any two kinds of memory (cudaMemcpyDefault / hipMemcpyDefault: unified
// addressing decides the direction). gpuMallocHost allocates pinned host memory that the device reaches
// through unified addressing. kGpuBackend is the plugin's backend name ("cuda", "hip"); gpu_call_name()
// turns a mapped name into the vendor's, so that an error message names the call that failed ("cudaMalloc",
// "hipHostMalloc").
#pragma once

// The vendor header comes before any standard header: HIP declares device overloads of memcpy that <cstring>
// must see to put them into std (std::memcpy is called from the EPS_HD bodies).
#if defined(__HIPCC__)
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#include <cuda.h>  // driver types only: the driver is reached through cudaGetDriverEntryPointByVersion
#include <cuda_runtime.h>
#endif

#include <dlfcn.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__HIPCC__)

inline constexpr const char kGpuBackend[] = "hip";

using gpuError_t = hipError_t;
using gpuStream_t = hipStream_t;
using gpuEvent_t = hipEvent_t;
using gpuGraph_t = hipGraph_t;
using gpuGraphExec_t = hipGraphExec_t;
using gpuIpcMemHandle_t = hipIpcMemHandle_t;
using gpuPointerAttributes = hipPointerAttribute_t;
using gpuDeviceProp_t = hipDeviceProp_t;
using gpuFuncAttributes = hipFuncAttributes;
inline constexpr gpuError_t gpuSuccess = hipSuccess;
inline constexpr gpuError_t gpuErrorNotReady = hipErrorNotReady;

#define gpuDeviceGetPCIBusId hipDeviceGetPCIBusId
#define gpuFree hipFree
#define gpuFreeHost hipHostFree
#define gpuFuncGetAttributes hipFuncGetAttributes
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuGetDeviceProperties hipGetDeviceProperties
#define gpuGetErrorName hipGetErrorName
#define gpuGetErrorString hipGetErrorString
#define gpuGetLastError hipGetLastError
#define gpuMalloc hipMalloc
#define gpuSetDevice hipSetDevice
#define gpuStreamCreate hipStreamCreate
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuStreamQuery hipStreamQuery
#define gpuStreamWaitEvent hipStreamWaitEvent
#define gpuEventCreate hipEventCreate
#define gpuEventDestroy hipEventDestroy
#define gpuEventRecord hipEventRecord
#define gpuEventQuery hipEventQuery
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuIpcGetMemHandle hipIpcGetMemHandle
#define gpuIpcCloseMemHandle hipIpcCloseMemHandle
#define gpuHostUnregister hipHostUnregister
#define gpuHostGetDevicePointer hipHostGetDevicePointer
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuPointerGetAttributes hipPointerGetAttributes

inline gpuError_t gpuMallocHost(void** data, std::size_t bytes) {
  return hipHostMalloc(data, bytes, hipHostMallocDefault);
}
inline gpuError_t gpuIpcOpenMemHandle(void** data, gpuIpcMemHandle_t handle) {
  return hipIpcOpenMemHandle(data, handle, hipIpcMemLazyEnablePeerAccess);
}
inline gpuError_t gpuHostRegister(void* data, std::size_t bytes) {
  return hipHostRegister(data, bytes, hipHostRegisterPortable | hipHostRegisterMapped);
}
inline gpuError_t gpuStreamBeginCapture(gpuStream_t stream) {
  return hipStreamBeginCapture(stream, hipStreamCaptureModeRelaxed);
}
inline gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph) {
  return hipGraphInstantiate(exec, graph, nullptr, nullptr, 0);
}
// Device memory (of any device, mapped from another process included), as the copy ledger counts it.
inline bool gpu_is_device_memory(const gpuPointerAttributes& attributes) {
  return attributes.memoryType == hipMemoryTypeDevice;
}

// Stream memory operations (device_plugin_v3.h write_value, wait_value): "" on success, else the failed
// call and its error.
inline std::string gpu_error_text(const char* call, gpuError_t error) {
  return std::string(call) + ": " + hipGetErrorString(error);
}
inline std::string gpu_stream_write_value(gpuStream_t stream, void* address, std::uint64_t value, int width) {
  const gpuError_t error = width == 4
                               ? hipStreamWriteValue32(stream, address, static_cast<std::uint32_t>(value), 0)
                               : hipStreamWriteValue64(stream, address, value, 0);
  return error == hipSuccess
             ? ""
             : gpu_error_text(width == 4 ? "hipStreamWriteValue32" : "hipStreamWriteValue64", error);
}
inline std::string gpu_stream_wait_value(gpuStream_t stream, const void* address, std::uint64_t value,
                                         int width, bool equal) {
  const unsigned flags = equal ? hipStreamWaitValueEq : hipStreamWaitValueGte;
  void* word = const_cast<void*>(address);
  const gpuError_t error =
      width == 4 ? hipStreamWaitValue32(stream, word, static_cast<std::uint32_t>(value), flags, 0xFFFFFFFFu)
                 : hipStreamWaitValue64(stream, word, value, flags, ~std::uint64_t{0});
  return error == hipSuccess
             ? ""
             : gpu_error_text(width == 4 ? "hipStreamWaitValue32" : "hipStreamWaitValue64", error);
}
inline gpuError_t gpuMemcpyAsync(void* dst, const void* src, std::size_t bytes, gpuStream_t stream) {
  return hipMemcpyAsync(dst, src, bytes, hipMemcpyDefault, stream);
}
inline gpuError_t gpuMemsetAsync(void* dst, int value, std::size_t bytes, gpuStream_t stream) {
  return hipMemsetAsync(dst, value, bytes, stream);
}

// The architecture a code object is built for: gcnArchName without its feature flags
// ("gfx90a:sramecc+:xnack-" -> "gfx90a").
inline void gpu_architecture(const gpuDeviceProp_t& prop, char* out, std::size_t size) {
  const std::size_t length = std::strcspn(prop.gcnArchName, ":");
  std::snprintf(out, size, "%.*s", static_cast<int>(length), prop.gcnArchName);
}

// 1 when device memory can be exported as a dma-buf, else 0. The HIP runtime of ROCm 5.2 has no device
// attribute for it (nor an export call), and asking the kernel driver is not cheap, so the HIP plugin reports
// 0 ("not known to be supported") rather than guess.
inline int gpu_dma_buf_supported(int ordinal) {
  (void)ordinal;
  return 0;
}

// Exports [data, data + bytes) of device memory as a dma-buf (device_plugin.h export_dma_buf): "" on success,
// else why not. ROCr's hsa_amd_portable_export_dmabuf (ROCm 5.6+) is looked up in the process at run time,
// where the HIP runtime has loaded ROCr: the ROCm 5.2 headers this builds against do not declare it.
inline std::string gpu_export_dma_buf(const void* data, std::size_t bytes, int* fd, std::uint64_t* offset) {
  using Export = int (*)(const void*, std::size_t, int*, std::uint64_t*);
  const auto export_dmabuf = reinterpret_cast<Export>(dlsym(RTLD_DEFAULT, "hsa_amd_portable_export_dmabuf"));
  if (export_dmabuf == nullptr) {
    return "this ROCr has no hsa_amd_portable_export_dmabuf (ROCm 5.6 or newer exports dma-bufs)";
  }
  const int status = export_dmabuf(data, bytes, fd, offset);
  if (status != 0) return "hsa_amd_portable_export_dmabuf failed with hsa_status_t " + std::to_string(status);
  return "";
}

#elif defined(__CUDACC__)

inline constexpr const char kGpuBackend[] = "cuda";

using gpuError_t = cudaError_t;
using gpuStream_t = cudaStream_t;
using gpuEvent_t = cudaEvent_t;
using gpuGraph_t = cudaGraph_t;
using gpuGraphExec_t = cudaGraphExec_t;
using gpuIpcMemHandle_t = cudaIpcMemHandle_t;
using gpuPointerAttributes = cudaPointerAttributes;
using gpuDeviceProp_t = cudaDeviceProp;
using gpuFuncAttributes = cudaFuncAttributes;
inline constexpr gpuError_t gpuSuccess = cudaSuccess;
inline constexpr gpuError_t gpuErrorNotReady = cudaErrorNotReady;

#define gpuDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define gpuFree cudaFree
#define gpuFreeHost cudaFreeHost
#define gpuFuncGetAttributes cudaFuncGetAttributes
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuGetDeviceProperties cudaGetDeviceProperties
#define gpuGetErrorName cudaGetErrorName
#define gpuGetErrorString cudaGetErrorString
#define gpuGetLastError cudaGetLastError
#define gpuMalloc cudaMalloc
#define gpuSetDevice cudaSetDevice
#define gpuStreamCreate cudaStreamCreate
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuStreamQuery cudaStreamQuery
#define gpuStreamWaitEvent cudaStreamWaitEvent
#define gpuEventCreate cudaEventCreate
#define gpuEventDestroy cudaEventDestroy
#define gpuEventRecord cudaEventRecord
#define gpuEventQuery cudaEventQuery
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuIpcGetMemHandle cudaIpcGetMemHandle
#define gpuIpcCloseMemHandle cudaIpcCloseMemHandle
#define gpuHostUnregister cudaHostUnregister
#define gpuHostGetDevicePointer cudaHostGetDevicePointer
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuPointerGetAttributes cudaPointerGetAttributes

inline gpuError_t gpuMallocHost(void** data, std::size_t bytes) { return cudaMallocHost(data, bytes); }
inline gpuError_t gpuIpcOpenMemHandle(void** data, gpuIpcMemHandle_t handle) {
  return cudaIpcOpenMemHandle(data, handle, cudaIpcMemLazyEnablePeerAccess);
}
inline gpuError_t gpuHostRegister(void* data, std::size_t bytes) {
  return cudaHostRegister(data, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
}
inline gpuError_t gpuStreamBeginCapture(gpuStream_t stream) {
  return cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed);
}
inline gpuError_t gpuGraphInstantiate(gpuGraphExec_t* exec, gpuGraph_t graph) {
  return cudaGraphInstantiate(exec, graph, 0);
}
// Device memory (of any device, mapped from another process included; managed memory counts as device
// memory), as the copy ledger counts it.
inline bool gpu_is_device_memory(const gpuPointerAttributes& attributes) {
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// A driver function fetched through the runtime (the plugin does not link libcuda), once; null when the
// driver lacks it.
template <typename Function>
Function gpu_driver_function(const char* name, int version) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &function, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

inline std::string gpu_driver_failure(const char* call, CUresult result) {
  return std::string(call) + " failed with CUresult " + std::to_string(static_cast<int>(result));
}

// Stream memory operations (device_plugin_v3.h write_value, wait_value) through the driver's
// cuStreamWriteValue32/64 and cuStreamWaitValue32/64: "" on success, else the failed call and its error.
inline std::string gpu_stream_write_value(gpuStream_t stream, void* address, std::uint64_t value, int width) {
  using Write32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using Write64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  static const Write32 write32 = gpu_driver_function<Write32>("cuStreamWriteValue32", 12000);
  static const Write64 write64 = gpu_driver_function<Write64>("cuStreamWriteValue64", 12000);
  const char* call = width == 4 ? "cuStreamWriteValue32" : "cuStreamWriteValue64";
  if ((width == 4 ? write32 == nullptr : write64 == nullptr)) {
    return std::string("the CUDA driver has no ") + call + " (driver 525 or newer has it)";
  }
  const auto word = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address));
  const CUresult result =
      width == 4 ? write32(stream, word, static_cast<cuuint32_t>(value), CU_STREAM_WRITE_VALUE_DEFAULT)
                 : write64(stream, word, value, CU_STREAM_WRITE_VALUE_DEFAULT);
  return result == CUDA_SUCCESS ? "" : gpu_driver_failure(call, result);
}
inline std::string gpu_stream_wait_value(gpuStream_t stream, const void* address, std::uint64_t value,
                                         int width, bool equal) {
  using Wait32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
  using Wait64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  static const Wait32 wait32 = gpu_driver_function<Wait32>("cuStreamWaitValue32", 12000);
  static const Wait64 wait64 = gpu_driver_function<Wait64>("cuStreamWaitValue64", 12000);
  const char* call = width == 4 ? "cuStreamWaitValue32" : "cuStreamWaitValue64";
  if ((width == 4 ? wait32 == nullptr : wait64 == nullptr)) {
    return std::string("the CUDA driver has no ") + call + " (driver 525 or newer has it)";
  }
  const unsigned flags = equal ? CU_STREAM_WAIT_VALUE_EQ : CU_STREAM_WAIT_VALUE_GEQ;
  const auto word = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(address));
  const CUresult result = width == 4 ? wait32(stream, word, static_cast<cuuint32_t>(value), flags)
                                     : wait64(stream, word, value, flags);
  return result == CUDA_SUCCESS ? "" : gpu_driver_failure(call, result);
}
inline gpuError_t gpuMemcpyAsync(void* dst, const void* src, std::size_t bytes, gpuStream_t stream) {
  return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
}
inline gpuError_t gpuMemsetAsync(void* dst, int value, std::size_t bytes, gpuStream_t stream) {
  return cudaMemsetAsync(dst, value, bytes, stream);
}

// "sm_<major><minor>", the name of the SASS the plugin carries ("sm_90").
inline void gpu_architecture(const gpuDeviceProp_t& prop, char* out, std::size_t size) {
  std::snprintf(out, size, "sm_%d%d", prop.major, prop.minor);
}

// 1 when device memory can be exported as a dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), else 0. The
// runtime API has no name for this attribute, so the driver's cuDeviceGetAttribute is fetched through the
// runtime (the plugin does not link libcuda). A driver that cannot answer counts as "not supported": the
// flag only tells a fabric whether to try dma-buf registration.
inline int gpu_dma_buf_supported(int ordinal) {
  using DeviceGet = CUresult (*)(CUdevice*, int);
  using DeviceGetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  const auto device_get = gpu_driver_function<DeviceGet>("cuDeviceGet", 2000);
  const auto device_get_attribute = gpu_driver_function<DeviceGetAttribute>("cuDeviceGetAttribute", 2000);
  if (device_get == nullptr || device_get_attribute == nullptr) return 0;
  CUdevice device = 0;
  int value = 0;
  if (device_get(&device, ordinal) != CUDA_SUCCESS) return 0;
  if (device_get_attribute(&value, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, device) != CUDA_SUCCESS) return 0;
  return value != 0 ? 1 : 0;
}

// Exports [data, data + bytes) of device memory as a dma-buf (device_plugin.h export_dma_buf): "" on success,
// else why not. cuMemGetHandleForAddressRange (CUDA 11.7+) takes a host-page-aligned range, so the export
// covers the pages around the range and `offset` is where it starts in them. The driver call is fetched
// through the runtime, as in gpu_dma_buf_supported.
inline std::string gpu_export_dma_buf(const void* data, std::size_t bytes, int* fd, std::uint64_t* offset) {
  using GetHandle = CUresult (*)(void*, CUdeviceptr, std::size_t, CUmemRangeHandleType, unsigned long long);
  const auto get_handle = gpu_driver_function<GetHandle>("cuMemGetHandleForAddressRange", 11070);
  if (get_handle == nullptr) {
    return "the CUDA driver has no cuMemGetHandleForAddressRange (driver 515 or newer exports dma-bufs)";
  }
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t base = first / page * page;
  const std::uintptr_t end = (first + bytes + page - 1) / page * page;
  const CUresult result =
      get_handle(fd, static_cast<CUdeviceptr>(base), end - base, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
  if (result != CUDA_SUCCESS) {
    return "cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) failed with CUresult " +
           std::to_string(static_cast<int>(result));
  }
  *offset = first - base;
  return "";
}

#else
#error "gpu_runtime.hpp is compiled by nvcc (CUDA) or hipcc (HIP) only"
#endif

// The vendor's name of a mapped call: "gpuMalloc" -> "cudaMalloc" / "hipMalloc", "gpuMallocHost" ->
// "cudaMallocHost" / "hipHostMalloc". Other names are returned as they are.
inline std::string gpu_call_name(std::string_view name) {
#if defined(__HIPCC__)
  if (name == "gpuMallocHost") return "hipHostMalloc";
  if (name == "gpuFreeHost") return "hipHostFree";
#endif
  if (name.size() > 3 && name.substr(0, 3) == "gpu" && name[3] >= 'A' && name[3] <= 'Z') {
    return std::string(kGpuBackend) + std::string(name.substr(3));
  }
  return std::string(name);
}
