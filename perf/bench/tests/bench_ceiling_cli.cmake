# Every `epsuite bench` row carries the machine's ceiling (docs/results.md 9.4), run by ctest as
#   cmake -DEPSUITE=... -DMPIEXEC=... -DPYTHON=... -DCHECKER=... -DVALIDATOR=... -DSCHEMA=... -DWORK_DIR=... -DOP=...
#         -P bench_ceiling_cli.cmake
# OP dispatch: mpi and direct over shm; OP combine, roundtrip: mpi; OP layer: mpi; OP dispatch-fabric: direct over
# -DFABRIC (chaos(shm) for shm) with --ceiling fabric; OP layer-fabric: mpi with --ceiling fabric over -DFABRIC (the
# fabric ceiling, kind "fabric", which runs across nodes use). Two ranks on one node, two
# token counts, -c (the ceiling's copies are checked byte for byte too). The results document must be
# schema-valid and check_ceiling.py must find a ceiling in every case and every table row.
cmake_policy(SET CMP0054 NEW)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(json ${WORK_DIR}/out.json)
set(kind shm-copy)
if(OP STREQUAL "dispatch")
  set(transports mpi,direct --fabric shm)
  set(series 2)
elseif(OP STREQUAL "dispatch-fabric")
  # The fabric ceiling on one node (--ceiling fabric): the row's bytes as raw puts of the unordered chaos(shm)
  # fabric (immediates after the local completions) and of libfabric:tcp when built.
  set(OP dispatch)
  set(transports direct --fabric ${FABRIC} --ceiling fabric)
  if(FABRIC STREQUAL "shm")
    list(APPEND transports --chaos seed=5)
  endif()
  set(series 1)
  set(kind fabric)
elseif(OP STREQUAL "layer-fabric")
  set(OP layer)
  set(transports mpi --fabric ${FABRIC} --ceiling fabric)
  set(series 1)
  set(kind fabric)
elseif(OP MATCHES "^(combine|roundtrip|layer)$")
  set(transports mpi)
  set(series 1)
else()
  message(FATAL_ERROR "unknown OP ${OP}")
endif()
execute_process(COMMAND ${MPIEXEC} -np 2 --map-by :OVERSUBSCRIBE ${EPSUITE} bench ${OP} --transport ${transports}
                        --tokens 64,128 -n 3 -w 1 -c --json ${json}
                RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr TIMEOUT 240)
message("stdout:\n${stdout}\nstderr:\n${stderr}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite bench ${OP} exited with '${rc}'")
endif()
file(WRITE ${WORK_DIR}/table.txt "${stdout}")
execute_process(COMMAND ${PYTHON} ${VALIDATOR} ${SCHEMA} ${json} RESULT_VARIABLE valid_rc)
if(NOT valid_rc EQUAL 0)
  message(FATAL_ERROR "the results document is not schema-valid")
endif()
execute_process(COMMAND ${PYTHON} ${CHECKER} ${OP} ${json} ${WORK_DIR}/table.txt ${series} ${kind}
                RESULT_VARIABLE check_rc)
if(NOT check_rc EQUAL 0)
  message(FATAL_ERROR "a row or case without its ceiling")
endif()
