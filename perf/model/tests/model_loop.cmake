# The validation loop of docs/model.md 16.5 on this machine, run by ctest as
#   cmake -DEPSUITE=... -DMPIEXEC=... -DPYTHON=... -DCHECKER=... -DVALIDATOR=... -DSCHEMA=... -DWORK_DIR=...
#         -P model_loop.cmake
# 1. measures: bench fabric (shm) at 2 ranks; bench dispatch and combine (direct over shm, smoke preset) at 2
#    ranks on tokens 64, 128, 256, 384, 448, 512 (the fit; six sizes allow two size ranges), at 2 ranks on tokens 192 and 320 (unseen sizes, CPU share 1),
#    and at 3, 4 and 8 ranks on tokens 64, 128, 256 (unseen rank counts; oversubscribed on a 2-core machine);
# 2. epsuite model --from the 2-rank fit --validate the rest --max-error 0.3: every validation point with CPU
#    share 1 within ±30 % of its measured p50 (exit 0), the oversubscribed ones reported (steps 1-3 of the 2-rank
#    part are attempted up to 3 times, see below);
# 3. check_model.py: the document is schema-valid and its numbers are the inputs' (measured p50 from the files,
#    errors recomputed, fitted lines and cpu shares re-derived); the figures exist;
# 4. the bound can fail: --max-error 0.0001 exits 1; mixed platforms exit 2 and write nothing.
# When no attempt of the judged part passes and the 1-minute load average exceeded the CPU count when the test
# began (other processes were running), the test is reported skipped with that load instead of failed.
# The README's commands, with the loop's file names and iteration counts (and combine run the same way):
# readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite bench fabric --fabric shm --sizes 64:262144:x4 --json fabric2.json
# readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport direct --fabric shm --device cpu --preset smoke --tokens 64,128,256,384,448,512 --ceiling none --json dispatch2.json
# readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport direct --fabric shm --device cpu --preset smoke --tokens 64,128,256 --ceiling none --json dispatch4.json
# readme-command: build/epsuite model --from fabric2.json dispatch2.json --validate dispatch4.json --preset smoke --tokens 128 --ep 2,3,4,6,8 --ranks-per-node 8 --cpus-per-node 2 --json model.json --plot model-plots
# readme-command: build/epsuite model --from fabric2.json dispatch2.json --preset ll-deepseek-v3 --ep 8:1024:x2 --json model-ll.json
cmake_policy(SET CMP0054 NEW)
# What other processes ask of the CPUs before this test starts (the 1-minute load average against the CPUs).
file(READ /proc/loadavg loadavg)
string(REGEX MATCH "^[0-9.]+" load_at_start "${loadavg}")
cmake_host_system_information(RESULT cpus QUERY NUMBER_OF_LOGICAL_CORES)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
function(run name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 240)
  message("${name}: exit ${rc}\n${out}${err}")
  set(last_rc ${rc} PARENT_SCOPE)
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()
# Runs at 2 ranks are cheap (tens of µs an iteration): many iterations steady their p50 for the gate of
# docs/model.md 16.2. Oversubscribed runs take milliseconds an iteration and are only reported.
function(bench ranks op tokens json)
  if(ranks EQUAL 2)
    set(iterations -n 60 -w 20)
  else()
    set(iterations -n 15 -w 3)
  endif()
  run("bench ${op} ${ranks} ranks" ${MPIEXEC} -np ${ranks} --map-by :OVERSUBSCRIBE ${EPSUITE} bench ${op}
      --transport direct --fabric shm --device cpu --preset smoke --tokens ${tokens} ${iterations} --ceiling none
      --json ${WORK_DIR}/${json})
  if(NOT last_rc EQUAL 0)
    message(FATAL_ERROR "epsuite bench ${op} on ${ranks} ranks exited with '${last_rc}'")
  endif()
endfunction()

run("bench fabric" ${MPIEXEC} -np 2 --map-by :OVERSUBSCRIBE ${EPSUITE} bench fabric --fabric shm
    --sizes 64:262144:x4 -n 10 -w 2 --json ${WORK_DIR}/fabric2.json)
if(NOT last_rc EQUAL 0)
  message(FATAL_ERROR "epsuite bench fabric exited with '${last_rc}'")
endif()
# The oversubscribed runs are measured once: they are reported, not judged.
set(oversubscribed "")
foreach(op IN ITEMS dispatch combine)
  foreach(ranks IN ITEMS 3 4 8)
    bench(${ranks} ${op} 64,128,256 ${op}${ranks}.json)
    list(APPEND oversubscribed ${WORK_DIR}/${op}${ranks}.json)
  endforeach()
endforeach()

# The judged part: the 2-rank fit and the 2-rank unseen sizes, then the model, the schema and check_model.py.
# On a shared 2-core machine other processes can take a CPU from a 2-rank run for a whole point (a p50 of
# 300 µs where 35 µs is usual), which no model of this run can know: such an attempt is measured again, at
# most 3 attempts in all, and the test fails when none passes.
set(fit ${WORK_DIR}/fabric2.json ${WORK_DIR}/dispatch2.json ${WORK_DIR}/combine2.json)
set(validate ${WORK_DIR}/dispatch2_unseen.json ${WORK_DIR}/combine2_unseen.json ${oversubscribed})
set(model_json ${WORK_DIR}/model.json)
set(verdict "")
foreach(attempt RANGE 1 3)
  foreach(op IN ITEMS dispatch combine)
    bench(2 ${op} 64,128,256,384,448,512 ${op}2.json)
    bench(2 ${op} 192,320 ${op}2_unseen.json)
  endforeach()
  file(REMOVE_RECURSE ${WORK_DIR}/plots ${model_json})
  run("model (attempt ${attempt})" ${EPSUITE} model --from ${fit} --validate ${validate} --preset smoke --tokens 128
      --ep 2,3,4,6,8 --ranks-per-node 8 --cpus-per-node 2 --json ${model_json} --plot ${WORK_DIR}/plots
      --max-error 0.3)
  set(model_rc ${last_rc})
  execute_process(COMMAND ${PYTHON} ${VALIDATOR} ${SCHEMA} ${model_json} RESULT_VARIABLE valid_rc)
  execute_process(COMMAND ${PYTHON} ${CHECKER} ${model_json} ${WORK_DIR}/plots RESULT_VARIABLE check_rc)
  if(NOT valid_rc EQUAL 0)
    set(verdict "the model document is not schema-valid")
  elseif(NOT check_rc EQUAL 0)
    set(verdict "check_model.py: the model document does not follow from its inputs (or a fit was withheld)")
  elseif(NOT model_rc EQUAL 0)
    set(verdict "epsuite model --max-error 0.3 exited with '${model_rc}': a validation point with CPU share 1 is "
                "beyond ±30 % of its measured p50 (table above)")
  else()
    set(verdict "")
    message("attempt ${attempt} passed")
    break()
  endif()
  message("attempt ${attempt} failed: ${verdict}")
endforeach()
if(NOT verdict STREQUAL "")
  # A machine that other processes kept busier than its CPUs when the test began cannot time 2 ranks on 2
  # CPUs: the test is reported skipped with the load (SKIP_REGULAR_EXPRESSION), not passed. On an idle
  # machine the same failure fails the test.
  if(load_at_start GREATER cpus)
    string(CONCAT busy "model loop skipped: machine busy (load ${load_at_start} on ${cpus} CPUs when the test "
                  "began); last verdict: ${verdict}")
  else()
    message(FATAL_ERROR "${verdict}")
  endif()
endif()

# ll-deepseek-v3 at EP 8..1024 (docs/model.md 16.4): 512 and 1024 are skipped (256 experts), sizes across
# nodes are skipped without an inter-node link; the run must succeed, write its document and say so.
string(TIMESTAMP ll_start "%s")
run("model ll-deepseek-v3" ${EPSUITE} model --from ${fit} --preset ll-deepseek-v3 --ep 8:1024:x2
    --json ${WORK_DIR}/model-ll.json)
string(TIMESTAMP ll_end "%s")
math(EXPR ll_seconds "${ll_end} - ${ll_start}")
message("model ll-deepseek-v3 EP 8..1024: ${ll_seconds} s")
if(NOT last_rc EQUAL 0 OR NOT EXISTS ${WORK_DIR}/model-ll.json)
  message(FATAL_ERROR "model ll-deepseek-v3: expected exit 0 and a document, got '${last_rc}'")
endif()
# Without a fitted series (fits withheld on a busy machine) there is nothing to predict or skip.
if(NOT DEFINED busy AND NOT last_out MATCHES "cannot be split evenly over 1024")
  message(FATAL_ERROR "model ll-deepseek-v3: EP 1024 should be skipped with its reason (256 experts)")
endif()

# The bound is a real gate: a bound no prediction meets fails.
run("model tight bound" ${EPSUITE} model --from ${fit} --validate ${validate} --preset smoke --ep 2
    --max-error 0.0001)
if(NOT last_rc EQUAL 1)
  message(FATAL_ERROR "--max-error 0.0001 should fail (exit 1), got '${last_rc}'")
endif()

# Mixed platforms: a copy of the fit whose CPU model differs is refused with exit 2, and nothing is written.
file(READ ${WORK_DIR}/dispatch2.json text)
string(REPLACE "\"cpu_model\": \"" "\"cpu_model\": \"other " text "${text}")
file(WRITE ${WORK_DIR}/other.json "${text}")
run("model mixed" ${EPSUITE} model --from ${fit} ${WORK_DIR}/other.json --preset smoke --ep 2
    --json ${WORK_DIR}/mixed.json)
if(NOT last_rc EQUAL 2 OR EXISTS ${WORK_DIR}/mixed.json OR NOT last_err MATCHES "allow-mixed")
  message(FATAL_ERROR "mixed platforms: expected exit 2 naming --allow-mixed and no file, got '${last_rc}'")
endif()
run("model mixed allowed" ${EPSUITE} model --from ${fit} ${WORK_DIR}/other.json --preset smoke --ep 2
    --allow-mixed)
if(NOT last_rc EQUAL 0)
  message(FATAL_ERROR "--allow-mixed should fit mixed platforms, got '${last_rc}'")
endif()
if(DEFINED busy)
  message("${busy}")
endif()
