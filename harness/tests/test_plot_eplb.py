"""The EPLB figures of `epsuite plot` and the EPLB section of report.md (ctest plot_cli_eplb, plot_cli_eplb-report,
plot_cli_eplb-no-policy).

The fixture is an `epsuite bench eplb --transport mpi --preset smoke --workload drift --policy deepseek,static
--steps 8 --lb-interval 2 -c` document of 4 ranks (expert_load left out): P = 28 slots, windows of 2 steps
ending at steps 1, 3, 5, 7. deepseek switched once, before step 5, moving 12 experts within their rank and 42
within the node (49152 B each: 3 x H 256 x F 128 bf16); static switched twice to the same placement, moving
nothing, so the moved-bytes figure has one bar. The expected numbers are the fixture's own.
"""

from plot_support import (check_files, check_links, close, data, expect_plot_refused, load, plot, plot_and_report,
                          read_index, read_report, run_directory, section, table_rows, without)

TAIL = "ht-expert-major-ll-weighted_fp8_drift-8"
BALANCEDNESS = f"eplb_balancedness_{TAIL}"
STEP_TIME = f"eplb_step_time_{TAIL}"
MOVED = f"eplb_moved_bytes_{TAIL}"
STEPS = [1, 3, 5, 7]
STATIC_BETA = 0.5951758209822726  # the initial static placement under window 0's loads
REALIZED = {
    "deepseek": [STATIC_BETA, 0.7477181453085068, 0.9287981859410431, 0.6504684770525647],
    "static": [STATIC_BETA, 0.7477181453085068, 0.7540500736377025, 0.6984993178717599],
}
PREDICTED = {
    "deepseek": [STATIC_BETA, STATIC_BETA, 0.9951409135082604, 0.9951409135082604],
    "static": [STATIC_BETA] * 4,
}
STEP_US = {
    "deepseek": [36214.78499984741, 35039.91950035095, 29520.086499214172, 31472.35350036621],
    "static": [31445.188000679016, 28605.1265001297, 28928.871000289917, 33407.059500694275],
}
BAR = "deepseek @ step 5"
BAR_MB = {"same_rank": 2.359296, "same_node": 8.257536, "cross_node": 0.0}
CONFIG = "preset smoke, H 256, K 4, E 24, ranks 4"
# report.md: the table header and deepseek's window 2 row (values rounded as the report prints them).
REPORT_HEADER = ("| transport | policy | workload | window | steps | plan | β predicted | β realized | step µs "
                 "| switches | moved experts (rank / node / cross) | moved MB | stall µs | planner µs | #wrong |")
REPORT_ROW = "| mpi | deepseek | drift:8 | 2 | 4-5 | 1 | 0.995 | 0.929 | 29520.1 | 1 | 12 / 42 / 0 | 10.617 |"
EPLB_ROWS = 8
FIXTURE = "results_eplb.json"


def points(steps, values):
    return [[s, v] for s, v in zip(steps, values)]


def check_points(stem, label, got, expected):
    assert len(got) == len(expected) and all(g[0] == e[0] and close(g[1], e[1]) for g, e in zip(got, expected)), \
        f"{stem}: series '{label}': points {got}, expected {expected}"


def test_plots(run, epsuite, results_schema, tmp_path):
    results_schema.check(data(FIXTURE))
    out = tmp_path / "plots"
    plot(run, epsuite, [data(FIXTURE)], out)
    plots = read_index(out)
    expected = sorted([BALANCEDNESS, STEP_TIME, MOVED])
    # No bw_/ll_latency_/platforms_ figure: an EPLB window's p50 is a whole step, no transport time.
    assert sorted(plots) == expected, f"figures {sorted(plots)}, expected {expected}"
    for stem, entry in plots.items():
        check_files(out, stem, entry)
        assert entry["op"] == "eplb" and entry["workload"] == "drift:8" and CONFIG in entry["title"], \
            f"{stem}: op {entry['op']}, workload {entry['workload']}, title {entry['title']!r}"
    beta = plots[BALANCEDNESS]
    assert beta["kind"] == "eplb-balancedness" and beta["x"].startswith("step"), f"{BALANCEDNESS}: {beta['kind']}"
    got = {s["label"]: s for s in beta["series"]}
    assert sorted(got) == ["deepseek", "static"], f"{BALANCEDNESS}: series {sorted(got)}"
    for policy, series in got.items():
        check_points(BALANCEDNESS, policy, series["points"], points(STEPS, REALIZED[policy]))
        check_points(BALANCEDNESS, f"{policy} predicted", series["predicted"], points(STEPS, PREDICTED[policy]))
    time = plots[STEP_TIME]
    assert time["kind"] == "eplb-step-time", f"{STEP_TIME}: {time['kind']}"
    got = {s["label"]: s for s in time["series"]}
    assert sorted(got) == ["deepseek", "static"], f"{STEP_TIME}: series {sorted(got)}"
    for policy, series in got.items():
        assert series["policy"] == policy, f"{STEP_TIME}: series {policy} names policy {series['policy']}"
        check_points(STEP_TIME, policy, series["points"], points(STEPS, STEP_US[policy]))
    moved = plots[MOVED]
    assert moved["kind"] == "eplb-moved-bytes", f"{MOVED}: {moved['kind']}"
    assert [(b["label"], b["policy"], b["switch_step"]) for b in moved["bars"]] == [(BAR, "deepseek", 5)], \
        f"{MOVED}: bars {moved['bars']}"
    assert [s["label"] for s in moved["series"]] == list(BAR_MB), f"{MOVED}: stacks {moved['series']}"
    for s in moved["series"]:
        assert len(s["points"]) == 1 and s["points"][0][0] == BAR and close(s["points"][0][1], BAR_MB[s["label"]]), \
            f"{MOVED}: {s['label']}: {s['points']}, expected {BAR_MB[s['label']]} MB"


def test_report(run, epsuite, tmp_path):
    """A run directory with results_a.json and the EPLB fixture as bench-*.json: report.md's EPLB section."""
    folder = run_directory(tmp_path, {"bench-dispatch-ht.json": data("results_a.json"),
                                      "bench-eplb.json": data(FIXTURE)})
    plot_and_report(run, epsuite, folder)
    report = read_report(folder)
    plots = read_index(folder / "plots")
    eplb = section(report, "EPLB")
    assert REPORT_HEADER in eplb, "the EPLB table header is missing or different"
    assert REPORT_ROW in eplb, f"the EPLB table has no row starting\n{REPORT_ROW}\n--- section:\n{eplb}"
    rows = table_rows(eplb)
    assert len(rows) == EPLB_ROWS + 1, f"the EPLB table has {len(rows) - 1} rows, expected {EPLB_ROWS}"
    check_links(report, plots, "EPLB", "eplb", [BALANCEDNESS, STEP_TIME, MOVED])


def test_no_policy(run, epsuite, tmp_path):
    """An EPLB case without its policy: exit 2, one message, nothing drawn."""
    document = without(load(FIXTURE), "results", 0, "policy")
    expect_plot_refused(run, epsuite, tmp_path, document, "results[0].policy: missing")
