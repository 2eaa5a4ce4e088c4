#!/usr/bin/env python3
"""Checks the MoE layer figures of `epsuite plot` and the MoE layer section of report.md.

usage: check_layer.py plots OUT_DIR   the plots of results_layer_tc.json + results_layer_ec.json (this folder)
       check_layer.py report RUN_DIR  report.md of a run directory holding results_a.json and those two as
                                      bench-*.json, with their plots in RUN_DIR/plots
Exit 0 when every expected figure, series, value and row is there, 1 otherwise.

The fixtures are trimmed `epsuite bench layer` documents of one platform (fingerprint fdb518d8...):
  results_layer_tc.json  preset smoke (token choice, schedule none, fp8), mpi and direct, 64 and 256 tokens per
                         rank, mask ratio 0.5 only: one phase figure, at 256 tokens; no figure against the mask.
  results_layer_ec.json  preset ec-dlm-owt-smoke (expert choice, bf16), mpi, 128 tokens per rank; schedule
                         linear_reverse at mask ratios 0, 0.5, 1 and schedule static at 0, 0.75, 1 (two sample
                         runs joined), so that the phase bar of static is the one nearest 0.5: 0.75. Every
                         measured β was 1; static at 0.75 has β [1, 0.8, 0.9, 1] so that the minimum shows.
The expected numbers below are the fixtures' own (stats.p50, tokens_per_s, phases_us, expert_load summed over
the 4 layers: EC keeps the same count for every expert).
"""
import json
import os
import re
import sys

EC = "ht-rank-major-ht-rank_bf16"
TC = "ht-rank-major-ht-rank_fp8"
LR = "schedule linear_reverse"
STATIC = "schedule static"
TC_DIRECT = "direct, schedule none"  # fabric and signal follow the transport: not in the label
TC_MPI = "mpi, schedule none"
PHASES = ("route", "dispatch", "expert", "combine", "shared")
EC_CONFIG = "preset ec-dlm-owt-smoke, H 128, K 48, E 48, ranks 2"
TC_CONFIG = "preset smoke, H 256, K 4, E 24, ranks 2"

LINES = {
    f"layer_time_vs_mask_{EC}_128": ("p50 step time (µs)", {
        LR: [[0.0, 118670.12499999999], [0.5, 88201.1920000001], [1.0, 39079.07300000035]],
        STATIC: [[0.0, 78458.14600000001], [0.75, 77794.37500000009], [1.0, 78583.7899999997]]}),
    f"layer_tokens_per_s_vs_mask_{EC}_128": ("tokens/s", {
        LR: [[0.0, 2157.2405017690853], [0.5, 2902.4551051418866], [1.0, 6550.820691166285]],
        STATIC: [[0.0, 3262.8861762805354], [0.75, 3290.7263539298274], [1.0, 3257.669297955736]]}),
    f"layer_balancedness_vs_mask_{EC}_128": ("β (mean / max expert work over ranks, worst layer)", {
        LR: [[0.0, 1.0], [0.5, 1.0], [1.0, 1.0]],
        STATIC: [[0.0, 1.0], [0.75, 0.8], [1.0, 1.0]]}),
}
# Bars: label -> (tokens, mask ratio, {phase: µs}).
PHASE_BARS = {
    f"layer_phases_{EC}": {
        LR: (128, 0.5, {"route": 658.0300000000001, "dispatch": 2672.395, "expert": 64480.718,
                        "combine": 1709.092, "shared": 11710.552}),
        STATIC: (128, 0.75, {"route": 642.261, "dispatch": 1339.403, "expert": 63743.72099999999,
                             "combine": 1676.812, "shared": 11433.765})},
    f"layer_phases_{TC}": {
        TC_DIRECT: (256, 0.5, {"route": 530.4010000000001, "dispatch": 1899.449, "expert": 23695.016,
                               "combine": 3361.371, "shared": 10316.937}),
        TC_MPI: (256, 0.5, {"route": 528.419, "dispatch": 1443.838, "expert": 24688.212, "combine": 6810.857,
                            "shared": 10166.928})},
}
# Heatmaps: label, mask ratios, the load of every expert at each ratio, the expert count.
EXPERT_LOADS = {
    f"layer_expert_load_{EC}_128_mpi_linear-reverse": (LR, [0.0, 0.5, 1.0], [672.0, 416.0, 160.0], 48),
    f"layer_expert_load_{EC}_128_mpi_static": (STATIC, [0.0, 0.75, 1.0], [416.0, 416.0, 416.0], 48),
}
# report.md rows (values rounded as the report prints them), and how many layer rows there are.
REPORT_ROWS = [
    "| mpi | ht-rank-major/ht-rank | bf16 | 128 | 0.75 | static | 77794.4 | 3291 | 642.3 | 1339.4 | 63743.7 "
    "| 1676.8 | 11433.8 | 0.800 | 0 / 0 | not checked |",
    "| mpi | ht-rank-major/ht-rank | bf16 | 128 | 1 | linear_reverse | 39079.1 | 6551 | 453.4 | 1073.0 | 25749.4 "
    "| 3610.7 | 11215.5 | 1.000 | 0 / 1 | not checked |",
    "| direct | ht-rank-major/ht-rank | fp8 | 256 | 0.5 | none | 36627.5 | 13979 | 530.4 | 1899.4 | 23695.0 "
    "| 3361.4 | 10316.9 | 0.970 | 0 / 0 | 0 |",
    "| mpi | ht-rank-major/ht-rank | fp8 | 64 | 0.5 | none | 9805.8 | 13053 | 134.7 | 435.4 | 6513.3 | 1090.1 "
    "| 2514.9 | 0.928 | 0 / 0 | 0 |",
]
LAYER_ROWS = 10
REPORT_HEADER = ("| transport | mode | dtype | tokens | mask ratio | schedule | p50 step µs | tokens/s | route µs "
                 "| dispatch µs | expert µs | combine µs | shared µs | β | dropped | #wrong |")


class Mismatch(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Mismatch(message)


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def read_index(out_dir):
    with open(os.path.join(out_dir, "plots.json"), encoding="utf-8") as f:
        return {os.path.splitext(p["files"][0])[0]: p for p in json.load(f)["plots"]}


def check_files(out_dir, stem, plot):
    expect(plot["files"] == [f"{stem}.png", f"{stem}.svg"], f"{stem}: files {plot['files']}")
    with open(os.path.join(out_dir, f"{stem}.png"), "rb") as f:
        expect(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{stem}.png is not a PNG")
    with open(os.path.join(out_dir, f"{stem}.svg"), encoding="utf-8") as f:
        expect("<svg" in f.read(), f"{stem}.svg is not an SVG")


def check_line(stem, plot, ylabel, series):
    expect(plot["x"] == "mask ratio" and plot["y"] == ylabel, f"{stem}: axes '{plot['x']}', '{plot['y']}'")
    expect(plot["tokens"] == 128 and EC_CONFIG in plot["title"], f"{stem}: title {plot['title']!r}")
    got = {s["label"]: s["points"] for s in plot["series"]}
    expect(got.keys() == series.keys(), f"{stem}: series {sorted(got)}, expected {sorted(series)}")
    for label, points in series.items():
        expect(len(got[label]) == len(points) and all(g[0] == e[0] and close(g[1], e[1])
                                                      for g, e in zip(got[label], points)),
               f"{stem}: series '{label}': points {got[label]}, expected {points}")


def check_phases(stem, plot, bars):
    expect(plot["x"] == "series" and plot["y"] == "µs per step (summed over layers)", f"{stem}: axes")
    got_bars = {b["label"]: (b["tokens"], b["mask_ratio"]) for b in plot["bars"]}
    expected_bars = {label: (tokens, mask) for label, (tokens, mask, _) in bars.items()}
    expect(got_bars == expected_bars, f"{stem}: bars {got_bars}, expected {expected_bars}")
    expect([s["label"] for s in plot["series"]] == list(PHASES), f"{stem}: stacks {plot['series']}")
    for s in plot["series"]:
        got = dict(s["points"])
        expected = {label: phases[s["label"]] for label, (_, _, phases) in bars.items()}
        expect(got.keys() == expected.keys() and all(close(got[k], v) for k, v in expected.items()),
               f"{stem}: phase {s['label']}: {got}, expected {expected}")


def check_expert_load(stem, plot, label, masks, per_expert, experts):
    expect(plot["label"] == label and plot["x"] == "mask ratio" and plot["y"] == "expert", f"{stem}: {plot}")
    expect(plot["mask_ratios"] == masks, f"{stem}: mask ratios {plot['mask_ratios']}, expected {masks}")
    expect(len(plot["load"]) == experts and all(row == per_expert for row in plot["load"]),
           f"{stem}: load {plot['load']}, expected {experts} experts of {per_expert}")


def check_plots(out_dir):
    plots = read_index(out_dir)
    expected = sorted([*LINES, *PHASE_BARS, *EXPERT_LOADS])
    # No bw_/ll_latency_/platforms_ figure: a layer step's p50 is no transport time.
    expect(sorted(plots) == expected, f"figures {sorted(plots)}, expected {expected}")
    for stem, plot in plots.items():
        check_files(out_dir, stem, plot)
    for stem, (ylabel, series) in LINES.items():
        check_line(stem, plots[stem], ylabel, series)
    for stem, bars in PHASE_BARS.items():
        check_phases(stem, plots[stem], bars)
    expect(TC_CONFIG in plots[f"layer_phases_{TC}"]["title"], "the TC phase figure does not name its config")
    for stem, (label, masks, per_expert, experts) in EXPERT_LOADS.items():
        check_expert_load(stem, plots[stem], label, masks, per_expert, experts)
    print(f"check_layer: {len(plots)} layer figures as expected")


def section(report, title):
    """The text of the '## title' section of report.md, up to the next '## '."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", report, re.S | re.M)
    expect(match is not None, f"report.md has no '## {title}' section")
    return match.group(1)


def png_links(text):
    return re.findall(r"\[PNG\]\(plots/([^)]+)\.png\)", text)


def check_links(report, plots, title, op, expected):
    """Every figure linked once: those of `op` (the stems `expected`) under the '## title' section, the others
    under Plots. Returns the op's stems."""
    stems = sorted(stem for stem, plot in plots.items() if plot.get("op") == op)
    expect(stems == sorted(expected), f"{op} figures {stems}, expected {sorted(expected)}")
    links = png_links(section(report, title))
    expect(sorted(links) == stems, f"the {title} section links {links}")
    others = sorted(stem for stem in plots if stem not in stems)
    expect(others and sorted(png_links(section(report, "Plots"))) == others, "the Plots section's links")
    expect(len(png_links(report)) == len(plots), f"report.md links {len(png_links(report))} PNG figures")
    return stems


def check_report(run_dir):
    with open(os.path.join(run_dir, "report.md"), encoding="utf-8") as f:
        report = f.read()
    plots = read_index(os.path.join(run_dir, "plots"))
    layer = section(report, "MoE layer")
    expect(REPORT_HEADER in layer, "the MoE layer table header is missing or different")
    for row in REPORT_ROWS:
        expect(row in layer, f"the MoE layer table has no row\n{row}\n--- section:\n{layer}")
    rows = [line for line in layer.splitlines() if line.startswith("| ") and "---" not in line]
    expect(len(rows) == LAYER_ROWS + 1, f"the MoE layer table has {len(rows) - 1} rows, expected {LAYER_ROWS}")
    layer_stems = check_links(report, plots, "MoE layer", "layer", [*LINES, *PHASE_BARS, *EXPERT_LOADS])
    expect("| dispatch | mpi | ht-rank-major/ht-rank | bf16 | 64 | 20.0 | 30.0 | 2.000 |" in report,
           "the bench table lost its dispatch rows")
    print(f"check_layer: report.md holds the MoE layer section ({LAYER_ROWS} rows, {len(layer_stems)} figures)")


def run_checks(tool, usage, checks, argv):
    """`tool plots DIR` / `tool report DIR`: runs checks[argv[0]] on argv[1]; 0 when it passes, 1 on a
    mismatch (printed), 2 on bad usage."""
    if len(argv) != 2 or argv[0] not in checks:
        print(usage, file=sys.stderr)
        return 2
    try:
        checks[argv[0]](argv[1])
    except (Mismatch, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"{tool}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_checks("check_layer", __doc__, {"plots": check_plots, "report": check_report}, sys.argv[1:]))
