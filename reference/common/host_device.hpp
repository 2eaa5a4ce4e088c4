// EPS_HD marks functions compiled for the host and for CUDA/HIP devices from one body, so that the CPU
// tests cover the logic the device kernels run (docs/architecture.md "Device").
#pragma once

#if defined(__CUDACC__) || defined(__HIPCC__)
#define EPS_HD __host__ __device__
#else
#define EPS_HD
#endif
