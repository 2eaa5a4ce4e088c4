"""`epsuite plot` of transport results (ctest plot_cli_<case>): the fixtures plot_data/results_a.json and
results_b.json give the expected figures, files and series; identities that differ only in the fabric stay two
series; ceilings are drawn dashed with a p10-p90 band and carried into report.md; each bad input exits exactly 2
with one message and draws nothing.

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

import pytest

from plot_support import (data, expect_plot_refused, load, plot, plot_and_report, read_index, read_report,
                          run_directory, without)

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


def close_points(got, expected):
    return len(got) == len(expected) and all(
        len(g) == len(e) and all(abs(x - y) <= 1e-9 for x, y in zip(g, e)) for g, e in zip(got, expected))


def svg(out_dir, stem):
    with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
        return f.read()


def bandwidth_plots(out_dir):
    return {stem: p for stem, p in read_index(out_dir).items() if p.get("kind") == "bandwidth"}


def test_two_files(run, epsuite, results_schema, tmp_path):
    """Every expected figure, file and series of results_a.json + results_b.json."""
    # Two files of two platforms, as the README plots a run's files with another machine's:
    # readme-command: build/epsuite plot epsuite-out/bench-*.json other-machine.json --out compared-plots
    inputs = [data("results_a.json"), data("results_b.json")]
    results_schema.check(*inputs)
    out = tmp_path / "plots"
    plot(run, epsuite, inputs, out)
    plots = read_index(out)
    assert sorted(plots) == sorted(EXPECTED), f"figures {sorted(plots)}, expected {sorted(EXPECTED)}"
    for stem, series in EXPECTED.items():
        entry = plots[stem]
        assert entry["files"] == [f"{stem}.png", f"{stem}.svg"], f"{stem}: files {entry['files']}"
        for name in entry["files"]:
            path = out / name
            assert path.is_file() and path.stat().st_size >= 1000, f"{path}: missing or empty"
        assert (out / f"{stem}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{stem}.png is not a PNG"
        assert "<svg" in svg(out, stem), f"{stem}.svg is not an SVG"
        assert entry["y"] == UNITS[stem.split("_")[0]], f"{stem}: y axis '{entry['y']}'"
        assert "preset smoke, H 256, K 4, E 24, ranks 4" in entry["title"], f"{stem}: title {entry['title']!r}"
        got = {s["label"]: s["points"] for s in entry["series"]}
        assert got.keys() == series.keys(), f"{stem}: series {sorted(got)}, expected {sorted(series)}"
        for label, points in series.items():
            assert len(got[label]) == len(points) and all(
                g[0] == e[0] and abs(g[1] - e[1]) <= 1e-9 for g, e in zip(got[label], points)), \
                f"{stem}: series '{label}': points {got[label]}, expected {points}"
    # The fixtures carry no ceiling: no dashed line, and bands from times_us (p10) and stats.p90.
    for stem, band in BANDS_A.items():
        by_label = {s["label"]: s for s in plots[stem]["series"]}
        halved = [[t, low / 2, high / 2] for t, low, high in band]
        for label, expected in ((f"mpi @ {A}", band), (f"mpi @ {B}", halved)):
            assert close_points(by_label[label].get("band", []), expected), \
                f"{stem}: '{label}' band {by_label[label].get('band')}, expected {expected}"
            assert "ceiling" not in by_label[label], f"{stem}: '{label}' has a ceiling line but its cases have none"
        assert "stroke-dasharray" not in svg(out, stem), f"{stem}.svg has a dashed line but no case has a ceiling"


def test_identities(run, epsuite, tmp_path):
    """Two documents of one platform, both `direct`, one over shm and one over libfabric:shm (identities that
    differ only in the fabric): they must stay two series (docs/results.md 9.3)."""
    inputs = []
    for fabric in ("shm", "libfabric:shm"):
        doc = load("results_a.json")
        for case in doc["results"]:
            case["transport"] = "direct"
            case["identity"] = {"fabric": fabric, "signal": "fabric-order", "chaos": "off"}
        path = tmp_path / f"direct_{fabric.replace(':', '_')}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        inputs.append(path)
    out = tmp_path / "plots"
    plot(run, epsuite, inputs, out)
    expected = {"direct (fabric=libfabric:shm)", "direct (fabric=shm)"}
    for stem, entry in bandwidth_plots(out).items():
        labels = {s["label"] for s in entry["series"]}
        assert labels == expected, f"{stem}: series {sorted(labels)}, expected {sorted(expected)}"


def test_ceiling(run, epsuite, results_schema, tmp_path):
    """A run directory whose bench-dispatch.json is results_a.json with a ceiling in every case ({us, gbps, ratio,
    kind}, gbps and ratio from the fixture's bytes and p50, and stats.p10, as epsuite bench writes them now): every
    bandwidth figure draws each ceiling as a dashed line and a p10-p90 band, and report.md's bench rows carry the
    ceiling cells."""
    doc = load("results_a.json")
    for case in doc["results"]:
        us = CEILING_US[(case["mode"], case["sizes"]["tokens"])]
        case["ceiling"] = {"us": us, "gbps": case["bytes"]["algo"] / (us * 1e3), "ratio": us / case["stats"]["p50"],
                           "kind": "shm-copy"}
        case["stats"]["p10"] = min(case["times_us"])
    with_ceiling = tmp_path / "with_ceiling.json"
    with_ceiling.write_text(json.dumps(doc), encoding="utf-8")
    results_schema.check(with_ceiling)
    folder = run_directory(tmp_path, {"bench-dispatch.json": with_ceiling})
    plot_and_report(run, epsuite, folder)
    report = read_report(folder)
    for row in CEILING_REPORT_ROWS:
        assert row in report, f"report.md has no bench row\n{row}"
    assert "| ceiling µs | ceiling GB/s | ratio | check |" in report, "report.md's bench table has no ceiling columns"
    plots = bandwidth_plots(folder / "plots")
    assert sorted(plots) == sorted(CEILING_LINES), f"bandwidth figures {sorted(plots)}"
    for stem, expected in CEILING_LINES.items():
        (series,) = plots[stem]["series"]
        assert close_points(series.get("ceiling", []), expected), f"{stem}: ceiling {series.get('ceiling')}"
        assert series.get("ceiling_linestyle") == "--", f"{stem}: the ceiling is drawn " \
                                                        f"'{series.get('ceiling_linestyle')}', not dashed"
        assert close_points(series.get("band", []), BANDS_A[stem]), f"{stem}: band {series.get('band')}"
        assert "stroke-dasharray" in svg(folder / "plots", stem), f"{stem}.svg has no dashed line"


def bad_documents():
    """case -> (the bad document, as text or JSON, what the message must say)."""
    good = open(data("results_a.json"), encoding="utf-8").read()
    empty = dict(json.loads(good), results=[])
    return {
        "foreign": ('{"name": "not a results document", "results": []}\n', "not an epsuite results document"),
        "truncated": (good[:300], "bad.json"),
        "future-schema": (good.replace('"schema_version": 1', '"schema_version": 7'), "schema_version 7 is newer"),
        "empty-results": (empty, "results: the document holds no cases"),
        # Schema-valid (sizes are free-form) but not plottable: the script's own check answers.
        "no-tokens": (without(json.loads(good), "results", 0, "sizes", "tokens"), "results[0].sizes.tokens: missing"),
    }


@pytest.mark.parametrize("case", ["foreign", "truncated", "future-schema", "empty-results", "no-tokens"])
def test_bad_input(run, epsuite, tmp_path, case):
    document, message = bad_documents()[case]
    expect_plot_refused(run, epsuite, tmp_path, document, message)
