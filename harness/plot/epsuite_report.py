#!/usr/bin/env python3
"""Writes report.md, the short summary of a ci/smoke run directory (README's main job).

usage: epsuite_report.py DIR   reads DIR/info.json, DIR/conformance.xml, DIR/bench-*.json and
                               DIR/plots/plots.json (each optional) and writes DIR/report.md atomically.

Sections: platform (hosts, CPU, provider, fingerprint, tags), conformance (tests, passed, failed, skipped,
counted from the GoogleTest XML: failed = test cases with a <failure>, skipped = with a <skipped>), bench
(one row per case: op, transport, mode, dtype, tokens, p50 / p99 in µs, algo / physical GB/s, the machine's
ceiling (docs/results.md 9.4): its µs, GB/s and ratio = ceiling µs / p50, "n/a" where a case has none, check), MoE
layer when a bench document holds `epsuite bench layer` cases (one row per case: transport, mode, dtype,
tokens, mask ratio, schedule, p50 step µs, tokens/s, the µs of each phase, β as the minimum over layers,
dropped (token, slot) pairs / tokens summed over layers, wrong elements, ceiling µs and ceiling / step; then links to the layer figures), EPLB
when a bench document holds `epsuite bench eplb` cases (one row per load window: transport, policy, workload,
window, steps, plan, β predicted and realized, mean step µs, switches, moved experts same rank / same node /
cross node, MB moved, stall µs, planner µs, wrong elements; then links to the EPLB figures) and links to every
other plot. When the run, or one of its bench documents, ran oversubscribed (docs/results.md 9.5: the
`oversubscribed` object of info.json or of a bench document), the report says so in one line under its title,
and the bench rows of oversubscribed cases carry a * after their p50. Exit code 0; 2 when DIR holds none of
those files.
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

LAYER_OP = "layer"
EPLB_OP = "eplb"
PHASES = ("route", "dispatch", "expert", "combine", "shared")


def platform_section(path):
    with open(path, encoding="utf-8") as f:
        platform = json.load(f).get("platform", {})
    hosts = sorted(set(platform.get("hostnames", [])))
    lines = ["## Platform", "",
             f"- hosts: {', '.join(hosts) or '?'} ({len(platform.get('ranks', []))} ranks)",
             f"- CPU: {platform.get('cpu_model', '?')}",
             f"- provider: {platform.get('provider', '?')}",
             f"- fingerprint: `{platform.get('fingerprint', '?')}`"]
    tags = platform.get("tags")
    if tags:
        lines.append("- tags: " + ", ".join(f"{k}={v}" for k, v in sorted(tags.items())))
    return lines + [""]


def oversubscription_lines(paths):
    """One line per distinct note of the `oversubscribed` objects of the given documents (docs/results.md 9.5)."""
    notes = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            oversubscribed = json.load(f).get("oversubscribed")
        if isinstance(oversubscribed, dict) and oversubscribed.get("note") not in notes:
            notes.append(oversubscribed.get("note"))
    return [f"**Oversubscribed:** {note}." for note in notes] + ([""] if notes else [])


def conformance_section(path):
    cases = ElementTree.parse(path).getroot().iter("testcase")
    total = failed = skipped = 0
    for case in cases:
        total += 1
        if case.find("failure") is not None:
            failed += 1
        elif case.find("skipped") is not None:
            skipped += 1
    verdict = "PASS" if failed == 0 else "FAIL"
    return ["## Conformance", "",
            f"{verdict}: {total} tests, {total - failed - skipped} passed, {failed} failed, {skipped} skipped "
            f"([GoogleTest XML]({os.path.basename(path)}))", ""]


def check_text(check):
    if check is None:
        return "not checked"
    return "ok" if check.get("passed") else f"{check.get('mismatches')} wrong"


def ceiling_cells(case, with_gbps=True):
    """The ceiling's cells of a row (docs/results.md 9.4): µs, GB/s (with_gbps) and ratio; n/a without one."""
    ceiling = case.get("ceiling")
    if not isinstance(ceiling, dict):
        return " | ".join(["n/a"] * (3 if with_gbps else 2))
    cells = [f"{ceiling['us']:.1f}"] + ([f"{ceiling['gbps']:.3f}"] if with_gbps else []) + [f"{ceiling['ratio']:.3f}"]
    return " | ".join(cells)


def bench_section(paths):
    lines = ["## Bench (p50/p99 over repetitions, each the max over ranks; GB/s = bytes / p50; ceiling = the same "
             "bytes copied between the same ranks through shared memory, ratio = ceiling µs / p50)", "",
             "| op | transport | mode | dtype | tokens | p50 µs | p99 µs | algo GB/s | physical GB/s | ceiling µs "
             "| ceiling GB/s | ratio | check |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for path in paths:
        for c in read_results(path):
            lines.append(
                f"| {c['op']} | {c['transport']} | {c['mode']} | {c['dtype']} | {c['sizes'].get('tokens', '')} "
                f"| {c['stats']['p50']:.1f}{'*' if c.get('oversubscribed') is True else ''} "
                f"| {c['stats']['p99']:.1f} | {c['bandwidth_gbps']['algo']:.3f} "
                f"| {c['bandwidth_gbps']['physical']:.3f} | {ceiling_cells(c)} | {check_text(c['check'])} |")
    lines.append("")
    if any(c.get("oversubscribed") is True for path in paths for c in read_results(path)):
        lines += ["\\* ran oversubscribed (more threads than CPUs on a node): the time measures the scheduler, "
                  "not the transport.", ""]
    lines.append("Results documents: " + ", ".join(f"[{os.path.basename(p)}]({os.path.basename(p)})" for p in paths))
    return lines + [""]


def read_results(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("results", [])


def op_cases(paths, op):
    return [c for path in paths for c in read_results(path) if c.get("op") == op]


def wrong_text(check):
    return "not checked" if check is None else str(check.get("mismatches"))


def layer_row(c):
    phases = " | ".join(f"{c['phases_us'][p]:.1f}" for p in PHASES)
    dropped = f"{sum(c['dropped_pairs']):.0f} / {sum(c['dropped_tokens']):.0f}"
    return (f"| {c['transport']} | {c['mode']} | {c['dtype']} | {c['sizes'].get('tokens', '')} | {c['mask_ratio']:g} "
            f"| {c['identity'].get('schedule', '')} | {c['stats']['p50']:.1f} | {c['tokens_per_s']:.0f} | {phases} "
            f"| {min(c['balancedness']):.3f} | {dropped} | {wrong_text(c['check'])} | {ceiling_cells(c, False)} |")


def layer_section(cases, plots):
    """The layer step's cases (docs/layer.md 4.4) and links to the layer figures of plots."""
    lines = ["## MoE layer", "",
             "p50 of one step over repetitions, each the max over ranks; phases in µs per step, summed over layers; "
             "β = mean / max expert work over ranks, of the worst layer; dropped = (token, slot) pairs / tokens, "
             "summed over layers; ceiling = the step's wire bytes copied between the ranks through shared memory, "
             "ceiling / step = its µs / the p50 step.", "",
             "| transport | mode | dtype | tokens | mask ratio | schedule | p50 step µs | tokens/s | "
             + " | ".join(f"{p} µs" for p in PHASES) + " | β | dropped | #wrong | ceiling µs | ceiling / step |",
             "|---|---|---|---:|---:|---|---:|---:|" + "---:|" * len(PHASES) + "---:|---:|---:|---:|---:|"]
    lines += [layer_row(c) for c in cases]
    if plots:
        lines += ["", "Figures:", ""] + plot_links(plots)
    return lines + [""]


def eplb_row(c):
    moved = c["moved_experts"]
    steps = f"{c['first_step']}-{c['last_step']}"
    return (f"| {c['transport']} | {c['policy']} | {c['identity'].get('workload', '')} | {c['window']} | {steps} "
            f"| {c['plan']} | {c['balancedness']['predicted']:.3f} | {c['balancedness']['realized']:.3f} "
            f"| {c['stats']['mean']:.1f} | {c['switches']} "
            f"| {moved['same_rank']:.0f} / {moved['same_node']:.0f} / {moved['cross_node']:.0f} "
            f"| {sum(c['moved_bytes'].values()) / 1e6:.3f} | {c['stall_us']:.1f} | {c['planner_us']:.1f} "
            f"| {wrong_text(c['check'])} |")


def eplb_section(cases, plots):
    """The EPLB windows (docs/eplb.md 8.5, 8.6) and links to the EPLB figures of plots."""
    lines = ["## EPLB", "",
             "One row per load window; β = mean / max rank load (even split): predicted = the plan in force under "
             "the loads it was planned from, realized = under the window's loads; step µs = the mean over the "
             "window of the max over ranks; moved, stall and planner time of the rebalances that switched in the "
             "window.", "",
             "| transport | policy | workload | window | steps | plan | β predicted | β realized | step µs "
             "| switches | moved experts (rank / node / cross) | moved MB | stall µs | planner µs | #wrong |",
             "|---|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    lines += [eplb_row(c) for c in cases]
    if plots:
        lines += ["", "Figures:", ""] + plot_links(plots)
    return lines + [""]


def is_layer_plot(plot):
    return plot.get("op") == LAYER_OP


def is_eplb_plot(plot):
    return plot.get("op") == EPLB_OP


def plot_links(plots):
    lines = []
    for plot in plots:
        title = plot["title"].split("\n")[0]
        lines.append(f"- {title}: [PNG](plots/{plot['files'][0]}), [SVG](plots/{plot['files'][1]})")
    return lines


def plots_section(plots):
    return ["## Plots", ""] + plot_links(plots) + [""]


def read_plots(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)["plots"]


def preset_name(info_path):
    """'<preset> run' from info.json's config.preset (epsuite run), else 'run'."""
    if not os.path.isfile(info_path):
        return "run"
    with open(info_path, encoding="utf-8") as f:
        preset = json.load(f).get("config", {}).get("preset")
    return f"{preset} run" if preset else "run"


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[0]
    sections = []
    info = os.path.join(out_dir, "info.json")
    xml = os.path.join(out_dir, "conformance.xml")
    benches = sorted(glob.glob(os.path.join(out_dir, "bench-*.json")))
    plots = os.path.join(out_dir, "plots", "plots.json")
    sections += oversubscription_lines(([info] if os.path.isfile(info) else []) + benches)
    if os.path.isfile(info):
        sections += platform_section(info)
    if os.path.isfile(xml):
        sections += conformance_section(xml)
    plot_index = read_plots(plots) if os.path.isfile(plots) else None
    if benches:
        sections += bench_section(benches)
    layer = op_cases(benches, LAYER_OP)
    eplb = op_cases(benches, EPLB_OP)
    # Each figure is linked once: the layer and EPLB figures under their tables, the others under Plots.
    if layer:
        sections += layer_section(layer, [p for p in plot_index or [] if is_layer_plot(p)])
    if eplb:
        sections += eplb_section(eplb, [p for p in plot_index or [] if is_eplb_plot(p)])
    others = [p for p in plot_index or [] if not (layer and is_layer_plot(p)) and not (eplb and is_eplb_plot(p))]
    if plot_index is not None and (others or not (layer or eplb)):
        sections += plots_section(others)
    if not sections:
        print(f"epsuite: error: {out_dir}: holds no info.json, conformance.xml, bench-*.json or plots", file=sys.stderr)
        return 2
    temp = os.path.join(out_dir, ".report.md.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        f.write("\n".join([f"# epsuite {preset_name(info)} report", ""] + sections))
    os.replace(temp, os.path.join(out_dir, "report.md"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
