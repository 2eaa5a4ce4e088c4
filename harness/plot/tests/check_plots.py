#!/usr/bin/env python3
"""Checks `epsuite plot` output for results_a.json + results_b.json (this folder).

usage: check_plots.py OUT_DIR   exit 0 when every expected figure, file and series is there, 1 otherwise.

Expected values are the fixtures' own numbers, computed by hand (bandwidth = algo bytes / p50):
  a (fingerprint aaaaaaaa..., no tags): HT 64 tok: 40000 B / 20 us = 2.0 GB/s; HT 128: 160000 / 40 = 4.0;
     LL 64: p50 6 us, 12000 / 6 = 2.0 GB/s; LL 128: p50 8 us, 32000 / 8 = 4.0 GB/s.
  b (tags gpu=H100, nic=efa; every time doubled): HT 1.0 and 2.0 GB/s; LL p50 12 and 16 us, 1.0 and 2.0 GB/s.
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
    print(f"check_plots: {len(EXPECTED)} figures as expected")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "make-identity-inputs":
        sys.exit(make_identity_inputs(sys.argv[2], sys.argv[3]))
    if sys.argv[1] == "check-identities":
        sys.exit(check_identities(sys.argv[2]))
    sys.exit(main(sys.argv[1]))
