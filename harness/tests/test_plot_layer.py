"""The MoE layer figures of `epsuite plot` and the MoE layer section of report.md (ctest plot_cli_layer,
plot_cli_layer-report, plot_cli_layer-no-phase).

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

from plot_support import (check_files, check_links, close, data, expect_plot_refused, load, plot, plot_and_report,
                          read_index, read_report, run_directory, section, table_rows, without)

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
FIXTURES = ["results_layer_tc.json", "results_layer_ec.json"]


def check_line(stem, entry, ylabel, series):
    assert entry["x"] == "mask ratio" and entry["y"] == ylabel, f"{stem}: axes '{entry['x']}', '{entry['y']}'"
    assert entry["tokens"] == 128 and EC_CONFIG in entry["title"], f"{stem}: title {entry['title']!r}"
    got = {s["label"]: s["points"] for s in entry["series"]}
    assert got.keys() == series.keys(), f"{stem}: series {sorted(got)}, expected {sorted(series)}"
    for label, points in series.items():
        assert len(got[label]) == len(points) and all(g[0] == e[0] and close(g[1], e[1])
                                                      for g, e in zip(got[label], points)), \
            f"{stem}: series '{label}': points {got[label]}, expected {points}"


def check_phases(stem, entry, bars):
    assert entry["x"] == "series" and entry["y"] == "µs per step (summed over layers)", f"{stem}: axes"
    got_bars = {b["label"]: (b["tokens"], b["mask_ratio"]) for b in entry["bars"]}
    expected_bars = {label: (tokens, mask) for label, (tokens, mask, _) in bars.items()}
    assert got_bars == expected_bars, f"{stem}: bars {got_bars}, expected {expected_bars}"
    assert [s["label"] for s in entry["series"]] == list(PHASES), f"{stem}: stacks {entry['series']}"
    for s in entry["series"]:
        got = dict(s["points"])
        expected = {label: phases[s["label"]] for label, (_, _, phases) in bars.items()}
        assert got.keys() == expected.keys() and all(close(got[k], v) for k, v in expected.items()), \
            f"{stem}: phase {s['label']}: {got}, expected {expected}"


def check_expert_load(stem, entry, label, masks, per_expert, experts):
    assert entry["label"] == label and entry["x"] == "mask ratio" and entry["y"] == "expert", f"{stem}: {entry}"
    assert entry["mask_ratios"] == masks, f"{stem}: mask ratios {entry['mask_ratios']}, expected {masks}"
    assert len(entry["load"]) == experts and all(row == per_expert for row in entry["load"]), \
        f"{stem}: load {entry['load']}, expected {experts} experts of {per_expert}"


def test_plots(run, epsuite, results_schema, tmp_path):
    inputs = [data(name) for name in FIXTURES]
    results_schema.check(*inputs)
    out = tmp_path / "plots"
    plot(run, epsuite, inputs, out)
    plots = read_index(out)
    expected = sorted([*LINES, *PHASE_BARS, *EXPERT_LOADS])
    # No bw_/ll_latency_/platforms_ figure: a layer step's p50 is no transport time.
    assert sorted(plots) == expected, f"figures {sorted(plots)}, expected {expected}"
    for stem, entry in plots.items():
        check_files(out, stem, entry)
    for stem, (ylabel, series) in LINES.items():
        check_line(stem, plots[stem], ylabel, series)
    for stem, bars in PHASE_BARS.items():
        check_phases(stem, plots[stem], bars)
    assert TC_CONFIG in plots[f"layer_phases_{TC}"]["title"], "the TC phase figure does not name its config"
    for stem, (label, masks, per_expert, experts) in EXPERT_LOADS.items():
        check_expert_load(stem, plots[stem], label, masks, per_expert, experts)


def test_report(run, epsuite, tmp_path):
    """A run directory with results_a.json and the layer fixtures as bench-*.json: report.md's MoE layer section."""
    folder = run_directory(tmp_path, {"bench-dispatch-ht.json": data("results_a.json"),
                                      "bench-layer-tc.json": data(FIXTURES[0]),
                                      "bench-layer-ec.json": data(FIXTURES[1])})
    plot_and_report(run, epsuite, folder)
    report = read_report(folder)
    plots = read_index(folder / "plots")
    layer = section(report, "MoE layer")
    assert REPORT_HEADER in layer, "the MoE layer table header is missing or different"
    for row in REPORT_ROWS:
        assert row in layer, f"the MoE layer table has no row\n{row}\n--- section:\n{layer}"
    rows = table_rows(layer)
    assert len(rows) == LAYER_ROWS + 1, f"the MoE layer table has {len(rows) - 1} rows, expected {LAYER_ROWS}"
    check_links(report, plots, "MoE layer", "layer", [*LINES, *PHASE_BARS, *EXPERT_LOADS])
    assert "| dispatch | mpi | ht-rank-major/ht-rank | bf16 | 64 | 20.0 | 30.0 | 2.000 |" in report, \
        "the bench table lost its dispatch rows"


def test_no_phase(run, epsuite, tmp_path):
    """A layer case without one of its phases: exit 2, one message, nothing drawn."""
    document = without(load(FIXTURES[0]), "results", 0, "phases_us", "route")
    expect_plot_refused(run, epsuite, tmp_path, document, "results[0].phases_us.route: missing")
