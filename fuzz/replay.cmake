# Runs a fuzz target once over every file of the folders in INPUTS (ctest NAME_replay, label "fuzz"): the seed
# corpus and the committed crash inputs of fuzz/regressions must all pass. Given files, libFuzzer runs each
# once and exits non-zero on the first crash or failed property.
set(files "")
foreach(dir IN LISTS INPUTS)
  if(IS_DIRECTORY "${dir}")
    file(GLOB_RECURSE found LIST_DIRECTORIES false "${dir}/*")
    list(APPEND files ${found})
  endif()
endforeach()
list(LENGTH files count)
if(count EQUAL 0)
  message(FATAL_ERROR "no inputs in ${INPUTS}")
endif()
execute_process(COMMAND "${FUZZER}" -runs=1 ${files} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}) on one of ${count} inputs")
endif()
message(STATUS "${count} inputs replayed")
