#!/usr/bin/env python3
"""Checks `epsuite plot` output for results_a.json + results_b.json (this folder).

usage: check_plots.py OUT_DIR   exit 0 when every expected figure, file and series is there, 1 otherwise.
       check_plots.py make-ceiling-inputs HERE WORK_DIR   writes results_a.json with a ceiling in every case
       check_plots.py check-ceiling OUT_DIR               the dashed ceiling lines and bands of those
       check_plots.py check-ceiling-report RUN_DIR        report.md's bench rows with their ceiling cells

Expected values are the fixtures' own numbers, computed by hand (bandwidth = algo bytes / p50):
  a (fingerprint aaaaaaaa..., no tags): HT 64 tok: 40000 B / 20 us = 2.0 GB/s; HT 128: 160000 / 40 = 4.0;
     LL 64: p50 6 us, 12000 / 6 = 2.0 GB/s; LL 128: p50 8 us, 32000 / 8 = 4.0 GB/s.
  b (tags gpu=H100, nic=efa; every time doubled): HT 1.0 and 2.0 GB/s; LL p50 12 and 16 us, 1.0 and 2.0 GB/s.
Bands (bytes / p90 .. bytes / p10; the fixtures have no stats.p10, so p10 = the 1st of 3 times = the minimum):
  a HT 64: 40000 / 30 us = 1.333.. .. 40000 / 10 = 4.0; HT 128: 160000 / 60 = 2.666.. .. 160000 / 20 = 8.0;
    LL 64: 12000 / 7 = 1.714.. .. 12000 / 5 = 2.4; LL 128: 32000 / 9 = 3.555.. .. 32000 / 7 = 4.571..
  b: every time doubled, every band value halved. Neither fixture has a ceiling: no dashed line.
Ceiling inputs (a with ceiling.us 5, 10, 3, 4 us for HT 64, HT 128, LL 64, LL 128): dashed lines at
  40000 / 5 = 8.0, 160000 / 10 = 16.0 GB/s (HT) and 12000 / 3 = 4.0, 32000 / 4 = 8.0 GB/s (LL).
"""
import json
import os
import sys

A = "aaaaaaaa"
B = "gpu=H100,nic=efa"
EXPECTED = {
    "bw_dispatch_ht-rank-major-ht-rank_bf16": {
        f"mpi @ {A}": [[64, 2.0], [128, 4.0]], f"mpi @ {B}": [[64, 1.0], [128, 2.0]]},
    "bw_dispatch_ll-ll-weighted_bf16": {
        f"mpi @ {A}": [[64, 2.0], [128, 4.0]], f"mpi @ {B}": [[64, 1.0], [128, 2.0]]},
    "ll_latency_dispatch_bf16": {
        f"mpi @ {A}": [[64, 6.0], [128, 8.0]], f"mpi @ {B}": [[64, 12.0], [128, 16.0]]},
    # Largest token count (128), one bar per transport/mode/dtype, one group per platform (sorted).
    "platforms_dispatch": {
        "mpi ht-rank-major/ht-rank bf16": [[A, 4.0], [B, 2.0]],
        "mpi ll/ll-weighted bf16": [[A, 4.0], [B, 2.0]]},
}
BANDS_A = {"bw_dispatch_ht-rank-major-ht-rank_bf16": [[64, 40000 / 30e3, 4.0], [128, 160000 / 60e3, 8.0]],
           "bw_dispatch_ll-ll-weighted_bf16": [[64, 12000 / 7e3, 2.4], [128, 32000 / 9e3, 32000 / 7e3]]}
CEILING_US = {("ht-rank-major/ht-rank", 64): 5.0, ("ht-rank-major/ht-rank", 128): 10.0, ("ll/ll-weighted", 64): 3.0,
              ("ll/ll-weighted", 128): 4.0}
CEILING_LINES = {"bw_dispatch_ht-rank-major-ht-rank_bf16": [[64, 8.0], [128, 16.0]],
                 "bw_dispatch_ll-ll-weighted_bf16": [[64, 4.0], [128, 8.0]]}
UNITS = {"bw": "algo bandwidth (GB/s)", "ll": "p50 latency (µs)", "platforms": "algo bandwidth (GB/s)"}


def fail(message):
    print(f"check_plots: {message}", file=sys.stderr)
    return 1


def make_identity_inputs(here, work_dir):
    """Two documents of one platform, both `direct`, one over shm and one over libfabric:shm (identities that
    differ only in the fabric): they must stay two series (docs/results.md 9.3)."""
    with open(os.path.join(here, "results_a.json"), encoding="utf-8") as f:
        base = json.load(f)
    paths = []
    for fabric in ("shm", "libfabric:shm"):
        doc = json.loads(json.dumps(base))
        for case in doc["results"]:
            case["transport"] = "direct"
            case["identity"] = {"fabric": fabric, "signal": "fabric-order", "chaos": "off"}
        path = os.path.join(work_dir, f"direct_{fabric.replace(':', '_')}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        paths.append(path)
    print(" ".join(paths))
    return 0


def close(got, expected):
    return len(got) == len(expected) and all(
        len(g) == len(e) and all(abs(x - y) <= 1e-9 for x, y in zip(g, e)) for g, e in zip(got, expected))


def make_ceiling_inputs(here, work_dir):
    """results_a.json with a ceiling in every case ({us, gbps, ratio, kind}, gbps and ratio from the fixture's
    bytes and p50) and stats.p10, as epsuite bench writes them now."""
    with open(os.path.join(here, "results_a.json"), encoding="utf-8") as f:
        doc = json.load(f)
    for case in doc["results"]:
        us = CEILING_US[(case["mode"], case["sizes"]["tokens"])]
        case["ceiling"] = {"us": us, "gbps": case["bytes"]["algo"] / (us * 1e3),
                           "ratio": us / case["stats"]["p50"], "kind": "shm-copy"}
        case["stats"]["p10"] = min(case["times_us"])
    path = os.path.join(work_dir, "with_ceiling.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f)
    print(path)
    return 0


def bandwidth_plots(out_dir):
    with open(os.path.join(out_dir, "plots.json"), encoding="utf-8") as f:
        index = json.load(f)
    return {os.path.splitext(p["files"][0])[0]: p for p in index["plots"] if p.get("kind") == "bandwidth"}


def check_ceiling(out_dir):
    plots = bandwidth_plots(out_dir)
    if sorted(plots) != sorted(CEILING_LINES):
        return fail(f"bandwidth figures {sorted(plots)}, expected {sorted(CEILING_LINES)}")
    for stem, expected in CEILING_LINES.items():
        (series,) = plots[stem]["series"]
        if not close(series.get("ceiling", []), expected):
            return fail(f"{stem}: ceiling {series.get('ceiling')}, expected {expected}")
        if series.get("ceiling_linestyle") != "--":
            return fail(f"{stem}: the ceiling is drawn '{series.get('ceiling_linestyle')}', not dashed")
        if not close(series.get("band", []), BANDS_A[stem]):
            return fail(f"{stem}: band {series.get('band')}, expected {BANDS_A[stem]}")
        with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
            if "stroke-dasharray" not in f.read():
                return fail(f"{stem}.svg has no dashed line")
    print(f"check_plots: {len(CEILING_LINES)} bandwidth figures with a dashed ceiling and a p10-p90 band")
    return 0


# report.md bench rows of the ceiling inputs: ... | physical GB/s | ceiling µs | ceiling GB/s | ratio | check |,
# ratio = ceiling us / p50 (5 / 20, 10 / 40, 3 / 6, 4 / 8).
CEILING_REPORT_ROWS = [
    "| dispatch | mpi | ht-rank-major/ht-rank | bf16 | 64 | 20.0 | 30.0 | 2.000 | 2.000 | 5.0 | 8.000 | 0.250 "
    "| not checked |",
    "| dispatch | mpi | ht-rank-major/ht-rank | bf16 | 128 | 40.0 | 60.0 | 4.000 | 4.000 | 10.0 | 16.000 | 0.250 "
    "| not checked |",
    "| dispatch | mpi | ll/ll-weighted | bf16 | 64 | 6.0 | 7.0 | 2.000 | 2.000 | 3.0 | 4.000 | 0.500 | not checked |",
    "| dispatch | mpi | ll/ll-weighted | bf16 | 128 | 8.0 | 9.0 | 4.000 | 4.000 | 4.0 | 8.000 | 0.500 | not checked |",
]


def check_ceiling_report(run_dir):
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as f:
        report = f.read()
    for row in CEILING_REPORT_ROWS:
        if row not in report:
            return fail(f"report.md has no bench row\n{row}\n--- report:\n{report}")
    if "| ceiling µs | ceiling GB/s | ratio | check |" not in report:
        return fail("report.md's bench table has no ceiling columns")
    print(f"check_plots: report.md carries the ceiling of {len(CEILING_REPORT_ROWS)} bench rows")
    return 0


def check_bands_without_ceiling(out_dir, plots):
    """The fixtures carry no ceiling: no dashed line, and bands from times_us (p10) and stats.p90."""
    for stem, band in BANDS_A.items():
        by_label = {s["label"]: s for s in plots[stem]["series"]}
        halved = [[t, low / 2, high / 2] for t, low, high in band]
        for label, expected in ((f"mpi @ {A}", band), (f"mpi @ {B}", halved)):
            if not close(by_label[label].get("band", []), expected):
                return fail(f"{stem}: '{label}' band {by_label[label].get('band')}, expected {expected}")
            if "ceiling" in by_label[label]:
                return fail(f"{stem}: '{label}' has a ceiling line but its cases have none")
        with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
            if "stroke-dasharray" in f.read():
                return fail(f"{stem}.svg has a dashed line but no case has a ceiling")
    return 0


def check_identities(out_dir):
    with open(os.path.join(out_dir, "plots.json"), encoding="utf-8") as f:
        index = json.load(f)
    expected = {"direct (fabric=libfabric:shm)", "direct (fabric=shm)"}
    for plot in index["plots"]:
        if plot.get("kind") != "bandwidth":
            continue
        labels = {s["label"] for s in plot["series"]}
        if labels != expected:
            return fail(f"{plot['files'][0]}: series {sorted(labels)}, expected {sorted(expected)}")
    return 0


def main(out_dir):
    with open(os.path.join(out_dir, "plots.json"), encoding="utf-8") as f:
        index = json.load(f)
    plots = {os.path.splitext(p["files"][0])[0]: p for p in index["plots"]}
    if sorted(plots) != sorted(EXPECTED):
        return fail(f"figures {sorted(plots)}, expected {sorted(EXPECTED)}")
    for stem, series in EXPECTED.items():
        plot = plots[stem]
        if plot["files"] != [f"{stem}.png", f"{stem}.svg"]:
            return fail(f"{stem}: files {plot['files']}")
        for name in plot["files"]:
            path = os.path.join(out_dir, name)
            if not os.path.isfile(path) or os.path.getsize(path) < 1000:
                return fail(f"{path}: missing or empty")
        with open(os.path.join(out_dir, f"{stem}.png"), "rb") as f:
            if f.read(8) != b"\x89PNG\r\n\x1a\n":
                return fail(f"{stem}.png is not a PNG")
        with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
            svg = f.read()
        if "<svg" not in svg:
            return fail(f"{stem}.svg is not an SVG")
        if plot["y"] != UNITS[stem.split("_")[0]]:
            return fail(f"{stem}: y axis '{plot['y']}'")
        if "preset smoke, H 256, K 4, E 24, ranks 4" not in plot["title"]:
            return fail(f"{stem}: the title does not name the config: {plot['title']!r}")
        got = {s["label"]: s["points"] for s in plot["series"]}
        if got.keys() != series.keys():
            return fail(f"{stem}: series {sorted(got)}, expected {sorted(series)}")
        for label, points in series.items():
            if len(got[label]) != len(points) or any(
                    g[0] != e[0] or abs(g[1] - e[1]) > 1e-9 for g, e in zip(got[label], points)):
                return fail(f"{stem}: series '{label}': points {got[label]}, expected {points}")
    if check_bands_without_ceiling(out_dir, plots) != 0:
        return 1
    print(f"check_plots: {len(EXPECTED)} figures as expected")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "make-identity-inputs":
        sys.exit(make_identity_inputs(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "check-identities":
        sys.exit(check_identities(sys.argv[2]))
    if sys.argv[1] == "make-ceiling-inputs":
        sys.exit(make_ceiling_inputs(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "check-ceiling":
        sys.exit(check_ceiling(sys.argv[2]))
    if sys.argv[1] == "check-ceiling-report":
        sys.exit(check_ceiling_report(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
