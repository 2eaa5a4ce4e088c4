# The README worked example of `epsuite ref eplb`, run exactly as documented, checked against the docs/eplb.md 8.2
# golden phy2log rows. Usage: cmake -DEPSUITE=<path to epsuite> -P ref_eplb_example.cmake (from the
# source root, where examples/ lives).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
# readme-command: build/epsuite ref eplb --in examples/eplb_deepseek.json --out eplb.json
execute_process(COMMAND ${EPSUITE} ref eplb --in ${SOURCE_DIR}/examples/eplb_deepseek.json --out ${WORK_DIR}/eplb.json
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite ref eplb exited ${rc}: ${err}")
endif()
file(READ ${WORK_DIR}/eplb.json doc)
set(expected_0 5 6 5 7 8 4 3 4 10 9 10 2 0 1 11 1)
set(expected_1 7 10 6 8 6 11 8 9 2 4 5 1 5 0 3 1)
foreach(layer 0 1)
  string(JSON slots LENGTH "${doc}" phy2log ${layer})
  if(NOT slots EQUAL 16)
    message(FATAL_ERROR "phy2log[${layer}] has ${slots} slots, expected 16")
  endif()
  set(row "")
  foreach(p RANGE 15)
    string(JSON v GET "${doc}" phy2log ${layer} ${p})
    list(APPEND row ${v})
  endforeach()
  if(NOT row STREQUAL expected_${layer})
    message(FATAL_ERROR "phy2log[${layer}] = ${row}, expected ${expected_${layer}}")
  endif()
endforeach()
message(STATUS "phy2log matches the docs/eplb.md 8.2 golden vector")
