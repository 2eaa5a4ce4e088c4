# A bad `epsuite ref route` input must exit 2 (docs/errors.md 10: usage or configuration error), name the field in
# its message and write nothing. Usage: cmake -DEPSUITE=<epsuite> -DWORK_DIR=<dir> -P ref_route_bad_input.cmake
set(in ${WORK_DIR}/route_bad_k_min.json)
set(out ${WORK_DIR}/route_bad_k_min.out.json)
file(REMOVE ${out})
file(WRITE ${in} [=[{"router": {"type": "ec", "k": 20, "schedule": "linear_reverse", "k_min": 33, "k_max": 32},
 "seq_len": 1, "mask_ratio": [0.5], "logits": [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33]]}]=])
execute_process(COMMAND ${EPSUITE} ref route --in ${in} --out ${out} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2, got ${rc}: ${err}")
endif()
if(NOT err MATCHES "router\\.k_min: must be <= router\\.k_max, got 33 > 32")
  message(FATAL_ERROR "unexpected message: ${err}")
endif()
if(EXISTS ${out})
  message(FATAL_ERROR "${out} was written although the input is bad")
endif()
message(STATUS "bad input exits 2 with: ${err}")
