#!/usr/bin/env python3
"""Checks the EPLB figures of `epsuite plot` and the EPLB section of report.md.

usage: check_eplb.py plots OUT_DIR   the plots of results_eplb.json (this folder)
       check_eplb.py report RUN_DIR  report.md of a run directory holding results_a.json and results_eplb.json
                                     as bench-*.json, with their plots in RUN_DIR/plots
Exit 0 when every expected figure, series, value and row is there, 1 otherwise.

The fixture is an `epsuite bench eplb --transport mpi --preset smoke --workload drift --policy deepseek,static
--steps 8 --lb-interval 2 -c` document of 4 ranks (expert_load left out): P = 28 slots, windows of 2 steps
ending at steps 1, 3, 5, 7. deepseek switched once, before step 5, moving 12 experts within their rank and 42
within the node (49152 B each: 3 x H 256 x F 128 bf16); static switched twice to the same placement, moving
nothing, so the moved-bytes figure has one bar. The expected numbers are the fixture's own.
"""
import os
import sys

from check_layer import check_files, check_links, close, expect, read_index, run_checks, section

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


def points(steps, values):
    return [[s, v] for s, v in zip(steps, values)]


def check_points(stem, label, got, expected):
    expect(len(got) == len(expected) and all(g[0] == e[0] and close(g[1], e[1]) for g, e in zip(got, expected)),
           f"{stem}: series '{label}': points {got}, expected {expected}")


def check_plots(out_dir):
    plots = read_index(out_dir)
    expected = sorted([BALANCEDNESS, STEP_TIME, MOVED])
    # No bw_/ll_latency_/platforms_ figure: an EPLB window's p50 is a whole step, no transport time.
    expect(sorted(plots) == expected, f"figures {sorted(plots)}, expected {expected}")
    for stem, plot in plots.items():
        check_files(out_dir, stem, plot)
        expect(plot["op"] == "eplb" and plot["workload"] == "drift:8" and CONFIG in plot["title"],
               f"{stem}: op {plot['op']}, workload {plot['workload']}, title {plot['title']!r}")
    beta = plots[BALANCEDNESS]
    expect(beta["kind"] == "eplb-balancedness" and beta["x"].startswith("step"), f"{BALANCEDNESS}: {beta['kind']}")
    got = {s["label"]: s for s in beta["series"]}
    expect(sorted(got) == ["deepseek", "static"], f"{BALANCEDNESS}: series {sorted(got)}")
    for policy in got:
        check_points(BALANCEDNESS, policy, got[policy]["points"], points(STEPS, REALIZED[policy]))
        check_points(BALANCEDNESS, f"{policy} predicted", got[policy]["predicted"], points(STEPS, PREDICTED[policy]))
    time = plots[STEP_TIME]
    expect(time["kind"] == "eplb-step-time", f"{STEP_TIME}: {time['kind']}")
    got = {s["label"]: s for s in time["series"]}
    expect(sorted(got) == ["deepseek", "static"], f"{STEP_TIME}: series {sorted(got)}")
    for policy in got:
        expect(got[policy]["policy"] == policy, f"{STEP_TIME}: series {policy} names policy {got[policy]['policy']}")
        check_points(STEP_TIME, policy, got[policy]["points"], points(STEPS, STEP_US[policy]))
    moved = plots[MOVED]
    expect(moved["kind"] == "eplb-moved-bytes", f"{MOVED}: {moved['kind']}")
    expect([(b["label"], b["policy"], b["switch_step"]) for b in moved["bars"]] == [(BAR, "deepseek", 5)],
           f"{MOVED}: bars {moved['bars']}")
    expect([s["label"] for s in moved["series"]] == list(BAR_MB), f"{MOVED}: stacks {moved['series']}")
    for s in moved["series"]:
        expect(len(s["points"]) == 1 and s["points"][0][0] == BAR and close(s["points"][0][1], BAR_MB[s["label"]]),
               f"{MOVED}: {s['label']}: {s['points']}, expected {BAR_MB[s['label']]} MB")
    print(f"check_eplb: {len(plots)} EPLB figures as expected")


def check_report(run_dir):
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as f:
        report = f.read()
    plots = read_index(os.path.join(run_dir, "plots"))
    eplb = section(report, "EPLB")
    expect(REPORT_HEADER in eplb, "the EPLB table header is missing or different")
    expect(REPORT_ROW in eplb, f"the EPLB table has no row starting\n{REPORT_ROW}\n--- section:\n{eplb}")
    rows = [line for line in eplb.splitlines() if line.startswith("| ") and "---" not in line]
    expect(len(rows) == EPLB_ROWS + 1, f"the EPLB table has {len(rows) - 1} rows, expected {EPLB_ROWS}")
    eplb_stems = check_links(report, plots, "EPLB", "eplb", [BALANCEDNESS, STEP_TIME, MOVED])
    print(f"check_eplb: report.md holds the EPLB section ({EPLB_ROWS} rows, {len(eplb_stems)} figures)")


if __name__ == "__main__":
    sys.exit(run_checks("check_eplb", __doc__, {"plots": check_plots, "report": check_report}, sys.argv[1:]))
