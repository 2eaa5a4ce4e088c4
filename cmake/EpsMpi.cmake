# MPI for the harness and the conformance suite (docs/architecture.md, rule 10; docs/errors.md 10).
#
# eps_add_mpi_test(NAME NP n [n2 ...] SOURCES a.cpp ... DEPS lib ... [TIMEOUT s] [LABELS l ...])
#   Builds one executable NAME from SOURCES linked with DEPS (DEPS must provide main(), normally
#   eps_conformance_main) and registers one ctest entry per rank count: `NAME_np<n>` runs
#   `mpirun -np n --map-by :OVERSUBSCRIBE NAME` with labels `mpi`, `np<n>` and LABELS, and the
#   environment of docs/architecture.md: loopback-only Open MPI (btl self,vader; oob over lo) and the
#   run-as-root permission. TIMEOUT (default 300 s) is the ctest limit of each entry.
find_package(MPI REQUIRED COMPONENTS C)
# The C API only: without these, Open MPI's mpi.h pulls its deprecated C++ bindings into every C++ file
# that includes it, and executables fail to link without libmpi_cxx.
set_property(TARGET MPI::MPI_C APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

# The README's exports (ci/check-docs): every MPI test runs with them.
# readme-command: export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# readme-command: export OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo FI_TCP_IFACE=lo
# readme-command: export OMPI_MCA_btl=self,vader OMPI_MCA_oob_tcp_if_include=lo
set(EPS_MPI_TEST_ENVIRONMENT
    OMPI_ALLOW_RUN_AS_ROOT=1
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_btl=self,vader
    OMPI_MCA_oob_tcp_if_include=lo
    OMPI_MCA_btl_tcp_if_include=lo
    OMPI_MCA_rmaps_base_oversubscribe=1
    FI_TCP_IFACE=lo
    CACHE INTERNAL "Environment of every MPI test: loopback only (never a routed address)")

# eps_add_mpi_run(NAME TARGET exe NP n [n2 ...] ARGS a ... [TIMEOUT s] [LABELS l ...])
#   One more ctest entry `NAME_np<n>` per rank count for an executable made by eps_add_mpi_test, run with
#   ARGS (e.g. one transport variant of a conformance suite), same environment and labels scheme.
function(eps_add_mpi_run name)
  cmake_parse_arguments(ARG "" "TARGET;TIMEOUT" "NP;ARGS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  foreach(np IN LISTS ARG_NP)
    add_test(NAME ${name}_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --map-by :OVERSUBSCRIBE
                     $<TARGET_FILE:${ARG_TARGET}> ${ARG_ARGS})
    set_tests_properties(${name}_np${np} PROPERTIES
      TIMEOUT ${ARG_TIMEOUT}
      LABELS "mpi;np${np};${ARG_LABELS}"
      ENVIRONMENT "${EPS_MPI_TEST_ENVIRONMENT}"
      # ctest -j must not run more ranks at once than the oversubscribed machine can progress.
      PROCESSORS ${np})
  endforeach()
endfunction()

function(eps_add_mpi_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "NP;SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_NP)
    message(FATAL_ERROR "eps_add_mpi_test(${name}): NP is required")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} MPI::MPI_C GTest::gtest)
  target_compile_options(${name} PRIVATE ${EPS_WARNING_FLAGS})
  eps_add_mpi_run(${name} TARGET ${name} NP ${ARG_NP} TIMEOUT ${ARG_TIMEOUT} LABELS ${ARG_LABELS})
endfunction()
