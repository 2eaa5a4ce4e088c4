# The README worked example of `epsuite ref dispatch` (examples/README_ref_dispatch.md), run as documented from the
# source root but writing into WORK_DIR, and checked against values computed by hand from the docs/dispatch.md 5
# running example (T_max = 4, expert_alignment 2, bf16, H = 128), not taken from the program.
# Usage: cmake -DEPSUITE=<path to epsuite> -DWORK_DIR=<dir> -P ref_dispatch_example.cmake (from the source root).
file(MAKE_DIRECTORY ${WORK_DIR})
set(out ${WORK_DIR}/dispatch.json)
file(REMOVE ${out})
# readme-command: build/epsuite ref dispatch --in examples/dispatch_small.json --out dispatch.json
execute_process(COMMAND ${EPSUITE} ref dispatch --in examples/dispatch_small.json --out ${out}
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite ref dispatch exited ${rc}: ${err}")
endif()
file(READ ${out} doc)

# The scalars of the JSON value at the path, in document order (arrays are flattened).
function(json_values var)
  string(JSON type TYPE "${doc}" ${ARGN})
  if(NOT type STREQUAL "ARRAY")
    string(JSON value GET "${doc}" ${ARGN})
    set(${var} "${value}" PARENT_SCOPE)
    return()
  endif()
  string(JSON n LENGTH "${doc}" ${ARGN})
  set(values "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      json_values(item ${ARGN} ${i})
      list(APPEND values ${item})
    endforeach()
  endif()
  set(${var} "${values}" PARENT_SCOPE)
endfunction()

# The `fields` of every row of the array at the path, row after row; a padding row gives "pad".
function(row_values var fields)
  string(JSON n LENGTH "${doc}" ${ARGN})
  set(values "")
  if(n GREATER 0)
    math(EXPR last "${n} - 1")
    foreach(i RANGE ${last})
      string(JSON padding ERROR_VARIABLE not_padding GET "${doc}" ${ARGN} ${i} padding)
      if(NOT not_padding)
        list(APPEND values pad)
        continue()
      endif()
      foreach(field IN LISTS fields)
        json_values(item ${ARGN} ${i} ${field})
        list(APPEND values ${item})
      endforeach()
    endforeach()
  endif()
  set(${var} "${values}" PARENT_SCOPE)
endfunction()

function(expect what actual)
  if(NOT "${actual}" STREQUAL "${ARGN}")
    message(FATAL_ERROR "${what} = [${actual}], expected [${ARGN}]")
  endif()
endfunction()

function(expect_at)
  cmake_parse_arguments(ARG "" "" "AT;IS" ${ARGN})
  json_values(actual ${ARG_AT})
  expect("${ARG_AT}" "${actual}" ${ARG_IS})
endfunction()

# docs/dispatch.md 5.1. Rank 0: t0 [0, 3] -> {0, 1}, t1 [1, 0] -> {0}, t2 masked -> {}.
# Rank 1: t0 [2, 3] -> {1}, t1 [3, 0] -> {0, 1}. Experts 0, 1 live on rank 0 and 2, 3 on rank 1.
expect_at(AT rank_prefix_matrix IS 2 1 3 3)
expect_at(AT layout 0 num_tokens_per_rank IS 2 1)
expect_at(AT layout 0 num_tokens_per_expert IS 2 1 0 1)
expect_at(AT layout 0 is_token_in_rank IS 1 1 1 0 0 0)
expect_at(AT layout 1 num_tokens_per_rank IS 1 2)
expect_at(AT layout 1 num_tokens_per_expert IS 1 0 1 2)
expect_at(AT layout 1 is_token_in_rank IS 0 1 1 1)

# docs/dispatch.md 5.2: rows (src_rank, src_token, recv_topk_idx [2], recv_topk_weights [2]); counts [3, 1]
# and [1, 3] rounded up to multiples of 2.
set(rank_major_fields src_rank src_token recv_topk_idx recv_topk_weights)
row_values(rows "${rank_major_fields}" ht_rank_major 0 rows)
expect("rank-major rows of rank 0" "${rows}"
       0 0 0 -1 0.5 0.0        # (0, t0): expert 0 here, expert 3 on rank 1
       0 1 1 0 0.75 0.125      # (0, t1): experts 1 and 0 both here
       1 1 -1 0 0.0 0.0625)    # (1, t1): expert 3 on rank 1, expert 0 here
row_values(rows "${rank_major_fields}" ht_rank_major 1 rows)
expect("rank-major rows of rank 1" "${rows}"
       0 0 -1 1 0.0 0.25
       1 0 0 1 0.625 0.375
       1 1 1 -1 0.875 0.0)
expect_at(AT ht_rank_major 0 num_recv_tokens_per_expert IS 4 2)
expect_at(AT ht_rank_major 1 num_recv_tokens_per_expert IS 2 4)

# docs/dispatch.md 5.3 with alignment 2: rows (src_rank, src_token, k, weight) sorted by (l, r, t), each
# segment padded to a multiple of 2. Rank 1 is the diagram [l0: (1,t0)] [pad] [l1: (0,t0) (1,t0) (1,t1)] [pad].
set(expert_major_fields src_rank src_token k weight)
foreach(rank_expert_rows
        "0;0;0 0 0 0.5 0 1 1 0.125 1 1 1 0.0625 pad"
        "0;1;0 1 0 0.75 pad"
        "1;0;1 0 0 0.625 pad"
        "1;1;0 0 1 0.25 1 0 1 0.375 1 1 0 0.875 pad")
  list(GET rank_expert_rows 0 q)
  list(GET rank_expert_rows 1 l)
  list(GET rank_expert_rows 2 expected)
  string(REPLACE " " ";" expected "${expected}")
  row_values(rows "${expert_major_fields}" ht_expert_major ${q} experts ${l} rows)
  expect("expert-major rows of rank ${q}, local expert ${l}" "${rows}" ${expected})
endforeach()
expect_at(AT ht_expert_major 1 experts 0 count IS 1)
expect_at(AT ht_expert_major 1 experts 1 segment_begin IS 2)
expect_at(AT ht_expert_major 1 experts 1 segment_length IS 4)

# docs/dispatch.md 5.4 (C = R·T_max = 8): per local expert the count, layout_range (begin, count) per source
# rank and the src_info of its rows; rank 1 is the table of 5.4.
foreach(rank_expert_ll "0;0;3;0 2 2 1;0 1 1" "0;1;1;0 1 1 0;1" "1;0;1;0 0 0 1;0" "1;1;3;0 1 1 2;0 0 1")
  list(GET rank_expert_ll 0 q)
  list(GET rank_expert_ll 1 l)
  list(GET rank_expert_ll 2 count)
  list(GET rank_expert_ll 3 ranges)
  list(GET rank_expert_ll 4 src_info)
  string(REPLACE " " ";" ranges "${ranges}")
  string(REPLACE " " ";" src_info "${src_info}")
  expect_at(AT ll ${q} experts ${l} packed_recv_count IS ${count})
  expect_at(AT ll ${q} experts ${l} layout_range IS ${ranges})
  row_values(rows src_info ll ${q} experts ${l} rows)
  expect("LL src_info of rank ${q}, local expert ${l}" "${rows}" ${src_info})
endforeach()
expect_at(AT ll 1 capacity IS 8)

# docs/dispatch.md 5.6, 256-byte rows: each rank receives and sends 3 HT rows (one across the boundary) and 4 LL
# selections (one across), in both directions.
foreach(rank 0 1)
  foreach(direction recv send)
    foreach(op ht_dispatch ht_combine)
      expect_at(AT bytes ${rank} ${op} ${direction} algo IS 768)
      expect_at(AT bytes ${rank} ${op} ${direction} physical IS 256)
    endforeach()
    foreach(op ll_dispatch ll_combine)
      expect_at(AT bytes ${rank} ${op} ${direction} algo IS 1024)
      expect_at(AT bytes ${rank} ${op} ${direction} physical IS 256)
    endforeach()
  endforeach()
endforeach()
message(STATUS "ref dispatch README example matches the hand computation")
