"""README's main job, `ci/smoke`, after the build (--no-build) with 4 ranks and 3 timed iterations per point
(ctest ci_smoke): the exit code; info.json, conformance.xml, report.md and the logs exist; every
bench-<op>-<mode>.json (3 ops x 2 modes), the layer step's bench-layer-*.json and the EPLB step's bench-eplb.json
validate against the results schema; the EPLB step checked every window with 0 wrong values; the plot index lists
the 12 transport figures of one platform (6 bandwidth, 3 LL latency, 3 per-platform bars), some layer figures and
the 3 EPLB figures, each as PNG and SVG on disk; report.md holds the conformance verdict, a checked bench row of
every case that ran, the MoE layer and EPLB sections and a link per figure; with fewer than 4 CPUs the run says
that it was oversubscribed (docs/results.md 9.5)."""

import os

from support import load_json


def test_ci_smoke(run, build, results_schema, tmp_path):
    # ci/smoke runs the README's main job into a scratch folder (not epsuite-out, so no --force) with 3 + 1
    # iterations:
    # readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE build/epsuite run --preset smoke --out epsuite-out --force
    out = tmp_path / "run"
    env = {**os.environ, "BUILD_DIR": build.build_dir, "EPS_SMOKE_ITERS": "3", "EPS_SMOKE_WARMUP": "1"}
    result = run([os.path.join(build.source_dir, "ci", "smoke"), "--no-build", out], timeout=540, env=env)
    assert result.returncode == 0, f"ci/smoke exited {result.returncode}"
    for step in ("[1/6] platform", "[2/6] conformance", "[3/6] bench", "[4/6] layer", "[5/6] eplb: deepseek",
                 "[6/6] report"):
        assert step in result.stdout, f"no progress line '{step}'"
    # docs/results.md 9.5: on a machine with fewer than 4 CPUs the 4 ranks are oversubscribed, and the main job,
    # info.json and report.md say so (the line the README shows).
    cpus = os.cpu_count()
    if cpus < 4:
        line = f"4 ranks on {cpus} CPUs: timings measure the scheduler, not the transport"
        note = (load_json(out / "info.json").get("oversubscribed") or {}).get("note")
        assert f"\n  oversubscribed: {line}\n" in result.stdout and note == line and \
            f"**Oversubscribed:** {line}." in (out / "report.md").read_text(encoding="utf-8"), \
            f"{cpus} CPUs: the main job, info.json (note {note!r}) and report.md must say '{line}'"
    # A quiet main job: the numbered steps, one line each, and the verdict; the details are in logs/.
    lines = result.stdout.count("\n")
    assert lines <= 40, f"the main job printed {lines} lines, expected at most 40"
    for name in ("info.json", "conformance.xml", "report.md", "bench-eplb.json", "logs/platform.log",
                 "logs/conformance.log", "logs/bench.log", "logs/eplb.log", "logs/report.log"):
        assert (out / name).exists(), f"missing {out / name}"
    documents = [out / f"bench-{op}-{mode}.json" for op in ("dispatch", "combine", "roundtrip")
                 for mode in ("ht", "ll")]
    layer_documents = sorted(out.glob("bench-layer-*.json"))
    assert layer_documents, f"the layer step wrote no {out}/bench-layer-*.json"
    results_schema.check(*documents, *layer_documents, out / "bench-eplb.json")

    plots = load_json(out / "plots" / "plots.json")["plots"]
    counts = {"layer": 0, "eplb": 0, "transport": 0}
    for entry in plots:
        counts[entry["op"] if entry["op"] in ("layer", "eplb") else "transport"] += 1
        for name in (entry["files"][0], entry["files"][1]):
            assert (out / "plots" / name).exists(), f"plots.json names {name}, which is not in {out}/plots"
    assert counts["transport"] == 12, f"plots.json lists {counts['transport']} transport figures, expected 12"
    assert counts["layer"] > 0, "plots.json lists no layer figure"
    assert counts["eplb"] == 3, (f"plots.json lists {counts['eplb']} EPLB figures, expected 3 (balancedness, step "
                                 "time, moved bytes)")
    # The EPLB step: every load window checked, 0 wrong values.
    for i, case in enumerate(load_json(out / "bench-eplb.json")["results"]):
        assert case["check"]["passed"] is True, f"bench-eplb.json: window case {i} was not checked or failed"

    # report.md: the conformance verdict with counts, the layer section, a bench row of each op, a link to each
    # figure's PNG.
    report = (out / "report.md").read_text(encoding="utf-8")
    for expected in ("PASS: ", " 0 failed", "## MoE layer", "## EPLB", "[PNG](plots/"):
        assert expected in report, f"report.md does not contain '{expected}'"
    # Every transport that ran (every case of every bench document) has its rows in report.md, each checked.
    for document in documents:
        for i, case in enumerate(load_json(document)["results"]):
            assert case["check"]["passed"] is True, \
                f"{document}: case {i} ({case['op']} {case['transport']}) was not checked or failed"
            assert f"| {case['op']} | {case['transport']} |" in report, \
                f"report.md has no row of {case['op']} over {case['transport']}, which ran ({document})"
    links = report.count("[PNG](plots/")
    assert links == len(plots), f"report.md links {links} PNG figures, plots.json lists {len(plots)}"
