"""The validation loop of `epsuite model` on this machine (docs/model.md 16.5; ctest model_validation_loop):

1. measures: bench fabric (shm) at 2 ranks; bench dispatch and combine (direct over shm, smoke preset) at 2 ranks
   on tokens 64, 128, 256, 384, 448, 512 (the fit; six sizes allow two size ranges), at 2 ranks on tokens 192 and
   320 (unseen sizes, CPU share 1), and at 3, 4 and 8 ranks on tokens 64, 128, 256 (unseen rank counts;
   oversubscribed on a 2-core machine);
2. epsuite model --from the 2-rank fit --validate the rest --max-error 0.3: every validation point with CPU share 1
   within ±30 % of its measured p50 (exit 0), the oversubscribed ones reported (the 2-rank part is attempted up to
   3 times, see JUDGED_ATTEMPTS);
3. the document is schema-valid and its numbers are the inputs' (check_model: measured p50 from the files, errors
   recomputed, fitted lines and cpu shares re-derived); the figures exist;
4. ll-deepseek-v3 at EP 8..1024 writes its document and skips EP 1024 with its reason;
5. the bound can fail: --max-error 0.0001 exits 1; mixed platforms exit 2 and write nothing; --allow-mixed fits them.

When no attempt of the judged part passes and the 1-minute load average exceeded the CPU count when the test began
(other processes were running), the test is skipped with that load (ctest: --skip-exit-code 77) instead of failed,
after the checks of 4 and 5.

The README's commands, with the loop's file names and iteration counts (and combine run the same way):
readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite bench fabric --fabric shm --sizes 64:262144:x4 --json fabric2.json
readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport direct --fabric shm --device cpu --preset smoke --tokens 64,128,256,384,448,512 --ceiling none --json dispatch2.json
readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport direct --fabric shm --device cpu --preset smoke --tokens 64,128,256 --ceiling none --json dispatch4.json
readme-command: build/epsuite model --from fabric2.json dispatch2.json --validate dispatch4.json --preset smoke --tokens 128 --ep 2,3,4,6,8 --ranks-per-node 8 --cpus-per-node 2 --json model.json --plot model-plots
readme-command: build/epsuite model --from fabric2.json dispatch2.json --preset ll-deepseek-v3 --ep 8:1024:x2 --json model-ll.json
"""

import os
import shutil

import pytest

from support import expect_usage_error, load_json

# On a shared 2-core machine other processes can take a CPU from a 2-rank run for a whole point (a p50 of 300 µs
# where 35 µs is usual), which no model of this run can know: such an attempt is measured again, at most this many
# attempts in all, and the test fails when none passes.
JUDGED_ATTEMPTS = 3
MAX_ERROR = 0.3
OPS = ("dispatch", "combine")


def bench(mpirun, epsuite, ranks, op, tokens, json_path):
    """`epsuite bench OP` (direct over shm, smoke preset) on `ranks` ranks, which must pass. Runs at 2 ranks are
    cheap (tens of µs an iteration): many iterations steady their p50 for the gate of docs/model.md 16.2.
    Oversubscribed runs take milliseconds an iteration and are only reported."""
    iterations = ["-n", "60", "-w", "20"] if ranks == 2 else ["-n", "15", "-w", "3"]
    result = mpirun(ranks, epsuite, "bench", op, "--transport", "direct", "--fabric", "shm", "--device", "cpu",
                    "--preset", "smoke", "--tokens", tokens, *iterations, "--ceiling", "none", "--json", json_path)
    assert result.returncode == 0, f"epsuite bench {op} on {ranks} ranks exited {result.returncode}"


def test_model_validation_loop(mpirun, epsuite, run, results_schema, tmp_path):
    # What other processes ask of the CPUs before this test starts (the 1-minute load average against the CPUs).
    with open("/proc/loadavg", encoding="utf-8") as f:
        load_at_start = float(f.read().split()[0])
    cpus = os.cpu_count()

    fabric = tmp_path / "fabric2.json"
    result = mpirun(2, epsuite, "bench", "fabric", "--fabric", "shm", "--sizes", "64:262144:x4", "-n", "10", "-w",
                    "2", "--json", fabric)
    assert result.returncode == 0, f"epsuite bench fabric exited {result.returncode}"
    # The oversubscribed runs are measured once: they are reported, not judged.
    oversubscribed = []
    for op in OPS:
        for ranks in (3, 4, 8):
            oversubscribed.append(tmp_path / f"{op}{ranks}.json")
            bench(mpirun, epsuite, ranks, op, "64,128,256", oversubscribed[-1])

    # The judged part: the 2-rank fit and the 2-rank unseen sizes, then the model, the schema and check_model.
    fit = [fabric, tmp_path / "dispatch2.json", tmp_path / "combine2.json"]
    validate = [tmp_path / "dispatch2_unseen.json", tmp_path / "combine2_unseen.json", *oversubscribed]
    model_json, plots = tmp_path / "model.json", tmp_path / "plots"
    verdict = None
    for attempt in range(1, JUDGED_ATTEMPTS + 1):
        for op in OPS:
            bench(mpirun, epsuite, 2, op, "64,128,256,384,448,512", tmp_path / f"{op}2.json")
            bench(mpirun, epsuite, 2, op, "192,320", tmp_path / f"{op}2_unseen.json")
        model_json.unlink(missing_ok=True)
        shutil.rmtree(plots, ignore_errors=True)
        result = run([epsuite, "model", "--from", *fit, "--validate", *validate, "--preset", "smoke", "--tokens",
                      "128", "--ep", "2,3,4,6,8", "--ranks-per-node", "8", "--cpus-per-node", "2", "--json",
                      model_json, "--plot", plots, "--max-error", MAX_ERROR], timeout=240)
        verdict = judge(result.returncode, results_schema, model_json, plots)
        if verdict is None:
            print(f"attempt {attempt} passed")
            break
        print(f"attempt {attempt} failed: {verdict}")
    busy = None
    if verdict is not None:
        # A machine that other processes kept busier than its CPUs when the test began cannot time 2 ranks on 2
        # CPUs: the test is skipped with the load (after the checks below), not passed. On an idle machine the
        # same failure fails the test.
        assert load_at_start > cpus, verdict
        busy = (f"model loop skipped: machine busy (load {load_at_start} on {cpus} CPUs when the test began); "
                f"last verdict: {verdict}")

    # ll-deepseek-v3 at EP 8..1024 (docs/model.md 16.4): 512 and 1024 are skipped (256 experts), sizes across
    # nodes are skipped without an inter-node link; the run must succeed, write its document and say so.
    model_ll = tmp_path / "model-ll.json"
    result = run([epsuite, "model", "--from", *fit, "--preset", "ll-deepseek-v3", "--ep", "8:1024:x2", "--json",
                  model_ll], timeout=240)
    print(f"model ll-deepseek-v3 EP 8..1024: {result.seconds:.1f} s")
    assert result.returncode == 0 and model_ll.exists(), \
        f"model ll-deepseek-v3: expected exit 0 and a document, got {result.returncode}"
    # Without a fitted series (fits withheld on a busy machine) there is nothing to predict or skip.
    assert busy or "cannot be split evenly over 1024" in result.stdout, \
        "model ll-deepseek-v3: EP 1024 should be skipped with its reason (256 experts)"

    # The bound is a real gate: a bound no prediction meets fails.
    result = run([epsuite, "model", "--from", *fit, "--validate", *validate, "--preset", "smoke", "--ep", "2",
                  "--max-error", "0.0001"], timeout=240)
    assert result.returncode == 1, f"--max-error 0.0001 should fail (exit 1), got {result.returncode}"

    # Mixed platforms: a copy of the fit whose CPU model differs is refused with exit 2, and nothing is written.
    other = tmp_path / "other.json"
    other.write_text(fit[1].read_text(encoding="utf-8").replace('"cpu_model": "', '"cpu_model": "other '),
                     encoding="utf-8")
    mixed = tmp_path / "mixed.json"
    result = run([epsuite, "model", "--from", *fit, other, "--preset", "smoke", "--ep", "2", "--json", mixed],
                 timeout=240)
    expect_usage_error(result, "allow-mixed", nothing_at=[mixed])
    result = run([epsuite, "model", "--from", *fit, other, "--preset", "smoke", "--ep", "2", "--allow-mixed"],
                 timeout=240)
    assert result.returncode == 0, f"--allow-mixed should fit mixed platforms, got {result.returncode}"
    if busy:
        pytest.skip(busy)


def judge(model_rc, results_schema, model_json, plots):
    """None when an attempt passed, else why not: the document is schema-valid, follows from its inputs
    (check_model) and `epsuite model --max-error` exited 0."""
    try:
        results_schema.check(model_json)
    except AssertionError:
        return "the model document is not schema-valid"
    failures = check_model(load_json(model_json), plots)
    for failure in failures:
        print(f"check_model: {failure}")
    if failures:
        return "check_model: the model document does not follow from its inputs (or a fit was withheld)"
    if model_rc != 0:
        return (f"epsuite model --max-error {MAX_ERROR} exited {model_rc}: a validation point with CPU share 1 is "
                f"beyond ±{MAX_ERROR:.0%} of its measured p50 (table above)")
    return None


# check_model: a kind-model document of the loop checked against its inputs, independently of the code under test:
# measured p50s are read from the input files, CPU shares re-derived from their oversubscription census
# (docs/results.md 9.5), the cost lines refitted here by weighted least squares (weights 1/y^2) from the fitted
# points, and every predicted value and error recomputed from them.


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def relative_fit(points):
    w = [1.0 / (y * y) for _, y in points]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, points)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, points)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, points))
    sxy = sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, points))
    slope = sxy / sxx
    return my - slope * mx, slope


def line_at(ranges, x):
    for r in ranges:
        if x <= r["bytes_max"]:
            return r["alpha_us"] + r["us_per_byte"] * x
    return ranges[-1]["alpha_us"] + ranges[-1]["us_per_byte"] * x


def find_case(document, entry):
    head = entry["series"].split(" ")[0].split("/")
    op, transport, mode, dtype = head[0], head[1], "/".join(head[2:-1]), head[-1]
    for case in document["results"]:
        if (case["op"], case["transport"], case["mode"], case["dtype"]) != (op, transport, mode, dtype):
            continue
        if case["sizes"]["ranks"] == entry["ranks"] and case["sizes"]["tokens"] == entry["tokens"]:
            return case
    return None


def cpu_share(document, case):
    census = document.get("oversubscribed")
    if not case.get("oversubscribed") or not census:
        return 1.0
    return max(1.0, census["ranks"] / census["cpus"])


def check_model(doc, plots):
    """The list of what does not hold (empty when the document follows from its inputs)."""
    failures = []

    def check(ok, message):
        if not ok:
            failures.append(message)

    model = doc["model"]
    inputs = {}
    for i in model["inputs"]:
        inputs[i["path"]] = load_json(i["path"])
        check(i["fingerprint"] == inputs[i["path"]]["platform"]["fingerprint"], f"{i['path']}: fingerprint")
    check(any(l["fabric"] == "shm" and l["measure"] == "put-bw" for l in model["links"]), "no shm put-bw link")
    ops = {o["series"]: o for o in model["ops"]}
    check(sorted(o["op"] for o in model["ops"]) == ["combine", "dispatch"], f"ops fitted: {list(ops)}")
    seen = {}
    for v in model["validation"]:
        source = inputs[v["source"]]
        case = find_case(source, v)
        check(case is not None, f"{v['source']}: no case for {v['series']} ranks {v['ranks']} tokens {v['tokens']}")
        if case is None:
            continue
        check(close(v["measured_p50_us"], case["stats"]["p50"]), f"measured p50 of {v}")
        check(close(v["cpu_share"], cpu_share(source, case)), f"cpu share of {v}")
        check(v["busiest_rank_bytes"] >= case["bytes"]["algo"], f"busiest bytes below the slowest rank's: {v}")
        op = ops[v["series"]]
        check(op["withheld"] is False, f"{v['series']} fit withheld: {op['reason']}")
        if op["withheld"]:
            continue
        check(close(v["predicted_us"], v["cpu_share"] * line_at(op["ranges"], v["busiest_rank_bytes"])),
              f"predicted of {v}")
        check(close(v["error"], v["predicted_us"] / v["measured_p50_us"] - 1), f"error of {v}")
        seen.setdefault(v["series"], set()).add((v["role"], v["ranks"], v["tokens"]))
    for series, op in ops.items():
        fitted = [(v["busiest_rank_bytes"], v["measured_p50_us"] / v["cpu_share"])
                  for v in model["validation"] if v["series"] == series and v["role"] == "fit"]
        check(len(fitted) == 6, f"{series}: {len(fitted)} fitted points, expected 6")
        if not op["withheld"] and len(op["ranges"]) == 1 and len(fitted) >= 3:
            intercept, slope = relative_fit(fitted)
            check(close(op["ranges"][0]["alpha_us"], intercept, 1e-6) and
                  close(op["ranges"][0]["us_per_byte"], slope, 1e-6), f"{series}: refitted line differs")
        roles = seen.get(series, set())
        for ranks in (3, 4, 8):
            check(("validation", ranks, 128) in roles, f"{series}: no validation at {ranks} ranks")
        for tokens in (192, 320):
            check(("validation", 2, tokens) in roles, f"{series}: no 2-rank validation at {tokens} tokens")
        check(series in model["worst_error"], f"{series}: no worst_error")
    for p in model["predictions"]:
        check(p["skipped"] is None, f"prediction skipped: {p}")
        if p["skipped"] is None:
            check(close(p["cpu_share"], max(1.0, min(8, p["ep"]) / 2)), f"prediction cpu share: {p}")
    check(sorted({p["ep"] for p in model["predictions"]}) == [2, 3, 4, 6, 8], "EP sizes predicted")
    for name in ("model_time.png", "model_bandwidth.png", "model_time.svg"):
        check((plots / name).is_file(), f"figure {name} missing")
    errors = [f"{v['ranks']}r/{v['tokens']}t {v['series'].split(' ')[0]}: {100 * v['error']:+.0f}%"
              for v in model["validation"] if v["role"] == "validation"]
    print("validation errors: " + "; ".join(errors))
    return failures
