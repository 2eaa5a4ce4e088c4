# `epsuite --version` must not load the fabric libraries: they are dlopen'ed when a fabric is first used
# (impls/fabric/dynamic_library.hpp), because Debian's libfabric pulls in libpsm_infinipath, whose
# constructor sleeps ~200 ms at every process start. The dynamic loader's LD_DEBUG=libs trace lists every
# library whose constructors run ("calling init: <path>"). Usage: cmake -DEPSUITE=<path> -P this file.
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_DEBUG=libs ${EPSUITE} --version
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE trace)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite --version exited ${rc}: ${trace}")
endif()
string(REGEX MATCHALL "calling init: [^\n]*" inits "${trace}")
if(NOT inits)
  message(FATAL_ERROR "LD_DEBUG=libs printed no 'calling init:' lines; cannot check: ${trace}")
endif()
foreach(library IN ITEMS libfabric libibverbs libefa libpsm)
  foreach(init IN LISTS inits)
    if(init MATCHES "/${library}[^/]*$")
      message(FATAL_ERROR "epsuite --version loads ${library} (${init}); it must be loaded with dlopen when used, not linked")
    endif()
  endforeach()
endforeach()
