# Accelerator toolchains (docs/architecture.md "Platform facts"): the GPU device plugins
# (impls/device/gpu/, libeps_device_cuda.so and libeps_device_hip.so) compile in CI even though they cannot
# run there. EPSUITE_WITH_{CUDA,HIP}=AUTO turns each on when its toolchain is found and can compile a kernel;
# ON makes a missing or broken toolchain a configure error; OFF skips it. epsuite itself never links a GPU
# runtime: it loads the plugins at run time.
#
# Results: EPS_HAVE_CUDA (CUDA language enabled, CUDA::cudart_static available, sm_90, EPS_CUDA_FLAGS) and
# EPS_HAVE_HIP (EPS_HIPCC, EPS_HIP_FLAGS, hip::host available). Both flag sets turn FMA contraction off:
# the plugins compile the kernel bodies and the references' EPS_HD functions (docs/numerics.md 1.4,
# docs/devices.md "No implicit FMA").
include(CheckLanguage)

# Reports a toolchain that is not usable: a configure error under ON, a STATUS line under AUTO.
function(eps_accelerator_unavailable option reason)
  if(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${reason}")
  endif()
  message(STATUS "epsuite: ${option}=AUTO turned off: ${reason}")
endfunction()

# ---- CUDA: CMake's CUDA language with nvcc, one architecture (sm_90) to keep the build fast.
set(EPS_HAVE_CUDA OFF)
if(NOT EPSUITE_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    eps_accelerator_unavailable(EPSUITE_WITH_CUDA "no working CUDA compiler (nvcc) was found")
  else()
    set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures")
    set(EPS_CUDA_FLAGS --fmad=false -Xcompiler=-Wall,-Wextra,-Wno-unused-parameter)
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 support (CUDA 12) and would stop with "requires the language
    # dialect CUDA20" (CUDA_STANDARD defaults to CXX_STANDARD); teach it the flag.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION -std=c++20)
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION -std=c++20)
      list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit QUIET)
    # The plugin links the static runtime, so that it needs only the driver where it runs.
    if(TARGET CUDA::cudart_static)
      set(EPS_HAVE_CUDA ON)
    else()
      eps_accelerator_unavailable(EPSUITE_WITH_CUDA
        "nvcc was found but not the static CUDA runtime (CUDA::cudart_static)")
    endif()
  endif()
endif()
message(STATUS "epsuite: CUDA device plugin ${EPS_HAVE_CUDA}")

# ---- HIP: hipcc invoked directly. CMake's HIP language cannot be used with Debian's ROCm packaging:
# CMake 3.25 looks for <rocm>/lib/cmake/hip-lang, Debian installs it under lib/<multiarch>/cmake.
set(EPS_HIP_ARCHITECTURES gfx90a CACHE STRING "AMD GPU architectures of the HIP device plugin")
set(EPS_HAVE_HIP OFF)
if(NOT EPSUITE_WITH_HIP STREQUAL "OFF")
  find_program(EPS_HIPCC hipcc)
  find_package(hip CONFIG QUIET)
  set(EPS_HIP_FLAGS -std=c++20 -O2 -fPIC -fno-gpu-rdc -ffp-contract=off
                    -fhip-fp32-correctly-rounded-divide-sqrt -Wall -Wextra -Wno-unused-parameter)
  foreach(arch IN LISTS EPS_HIP_ARCHITECTURES)
    list(APPEND EPS_HIP_FLAGS --offload-arch=${arch})
  endforeach()
  if(NOT EPS_HIPCC)
    eps_accelerator_unavailable(EPSUITE_WITH_HIP "hipcc was not found")
  elseif(NOT TARGET hip::host)
    eps_accelerator_unavailable(EPSUITE_WITH_HIP "hipcc was found but not the HIP runtime package (hip-config.cmake)")
  else()
    # Compile one kernel with the real flags once per (hipcc, flags); the result is cached.
    set(probe_key "${EPS_HIPCC};${EPS_HIP_FLAGS}")
    if(NOT EPS_HIP_PROBE_KEY STREQUAL probe_key)
      set(probe_dir ${CMAKE_BINARY_DIR}/CMakeFiles/eps_hip_probe)
      file(WRITE ${probe_dir}/probe.hip
           "#include <hip/hip_runtime.h>\n__global__ void eps_probe(float* x) { x[threadIdx.x] *= 2.0f; }\n"
           "void eps_probe_launch(float* x) { hipLaunchKernelGGL(eps_probe, dim3(1), dim3(64), 0, 0, x); }\n")
      execute_process(COMMAND ${EPS_HIPCC} ${EPS_HIP_FLAGS} -c probe.hip -o probe.o
                      WORKING_DIRECTORY ${probe_dir} RESULT_VARIABLE probe_rc OUTPUT_VARIABLE probe_log
                      ERROR_VARIABLE probe_log)
      if(probe_rc EQUAL 0)
        set(EPS_HIP_PROBE_OK ON CACHE INTERNAL "")
      else()
        set(EPS_HIP_PROBE_OK OFF CACHE INTERNAL "")
        set(EPS_HIP_PROBE_LOG "${probe_log}" CACHE INTERNAL "")
      endif()
      set(EPS_HIP_PROBE_KEY "${probe_key}" CACHE INTERNAL "")
    endif()
    if(EPS_HIP_PROBE_OK)
      set(EPS_HAVE_HIP ON)
    else()
      string(SUBSTRING "${EPS_HIP_PROBE_LOG}" 0 600 probe_excerpt)
      eps_accelerator_unavailable(EPSUITE_WITH_HIP
        "${EPS_HIPCC} cannot compile a kernel for ${EPS_HIP_ARCHITECTURES}:\n${probe_excerpt}")
    endif()
  endif()
endif()
message(STATUS "epsuite: HIP device plugin ${EPS_HAVE_HIP} (${EPS_HIP_ARCHITECTURES})")
