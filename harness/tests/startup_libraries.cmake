# Which fabric libraries an epsuite command loads, from the dynamic loader's LD_DEBUG=libs trace (it lists
# every library whose constructors run: "calling init: <path>"). The fabric libraries are dlopen'ed, never
# linked (impls/runtime/dynamic_library.hpp), because Debian's libfabric pulls in libpsm_infinipath, whose
# constructor sleeps ~200 ms.
#   MODE=none: `epsuite --version` loads none of them.
#   MODE=once: `epsuite info` (MPI singleton) runs each constructor at most once; Open MPI unloads
#              libpsm_infinipath after MPI_Init unless libfabric was loaded first (fabric_registry.hpp).
# Usage: cmake -DEPSUITE=<path> -DMODE=none|once -P startup_libraries.cmake
if(MODE STREQUAL "none")
  set(args --version)
else()
  set(args info)
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_DEBUG=libs ${EPSUITE} ${args}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE trace)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite ${args} exited ${rc}: ${trace}")
endif()
string(REGEX MATCHALL "calling init: [^\n]*" inits "${trace}")
if(NOT inits)
  message(FATAL_ERROR "LD_DEBUG=libs printed no 'calling init:' lines; cannot check: ${trace}")
endif()
foreach(library IN ITEMS libfabric libibverbs libefa libpsm_infinipath libpsm2 libeps_device_cuda libeps_device_hip
                        libcudart libamdhip64)
  set(count 0)
  foreach(init IN LISTS inits)
    if(init MATCHES "/${library}[.][^/]*$")
      math(EXPR count "${count} + 1")
    endif()
  endforeach()
  if(MODE STREQUAL "none" AND count GREATER 0)
    message(FATAL_ERROR "epsuite ${args} loads ${library}; it must be loaded with dlopen when used, not linked")
  endif()
  if(MODE STREQUAL "once" AND count GREATER 1)
    message(FATAL_ERROR "epsuite ${args} runs the constructors of ${library} ${count} times; load the fabric "
                        "libraries before MPI_Init (fabric::load_fabric_libraries)")
  endif()
endforeach()
