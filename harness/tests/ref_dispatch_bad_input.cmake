# A bad `epsuite ref dispatch` input must exit 2 (docs/errors.md 10: usage or configuration error), name the field
# and its allowed range in its message and write nothing. The expert id 4 is outside [-1, E) for E = 4, which
# DispatchPlan::make rejects (docs/dispatch.md 5). Usage: cmake -DEPSUITE=<epsuite> -DWORK_DIR=<dir>
# -P ref_dispatch_bad_input.cmake
file(MAKE_DIRECTORY ${WORK_DIR})
set(in ${WORK_DIR}/dispatch_bad_expert.json)
set(out ${WORK_DIR}/dispatch_bad_expert.out.json)
file(REMOVE ${out})
file(WRITE ${in} [=[{"num_ranks": 2, "num_experts": 4, "top_k": 2,
 "ranks": [{"topk_idx": [[0, 3], [1, 0], [-1, -1]], "topk_weights": [[0.5, 0.25], [0.75, 0.125], [0, 0]]},
           {"topk_idx": [[2, 3], [3, 4]], "topk_weights": [[0.625, 0.375], [0.875, 0.0625]]}]}]=])
execute_process(COMMAND ${EPSUITE} ref dispatch --in ${in} --out ${out} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "expected exit code 2, got ${rc}: ${err}")
endif()
if(NOT err MATCHES "ranks\\[1\\]\\.topk_idx\\[1\\]\\[1\\]: must be in \\[-1, 3\\], got 4")
  message(FATAL_ERROR "unexpected message: ${err}")
endif()
if(EXISTS ${out})
  message(FATAL_ERROR "${out} was written although the input is bad")
endif()
message(STATUS "bad input exits 2 with: ${err}")
