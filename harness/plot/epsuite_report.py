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
and the bench rows of oversubscribed cases carry a * after their p50. The bench documents are read with
epsuite_results.py, the reader the plots use. Exit code 0; 2 when DIR holds none of those files, or a bench
document that is not a readable results document (one message naming the file and field).
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

from epsuite_results import EPLB_OP, LAYER_OP, MOVE_CLASSES, PHASES, InputError, read_cases


def read_json(path):
    """info.json (not a results document: the run's platform, configuration and oversubscription)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def platform_section(path):
    platform = read_json(path).get("platform", {})
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


def oversubscription_lines(documents):
    """One line per distinct note of the `oversubscribed` objects of the given documents (docs/results.md 9.5)."""
    notes = []
    for document in documents:
        oversubscribed = document.get("oversubscribed")
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
    ceiling = case["ceiling"]
    if ceiling is None:
        return " | ".join(["n/a"] * (3 if with_gbps else 2))
    cells = [f"{ceiling['us']:.1f}"] + ([f"{ceiling['gbps']:.3f}"] if with_gbps else []) + [f"{ceiling['ratio']:.3f}"]
    return " | ".join(cells)


def bench_section(benches):
    """The bench table: every case of every bench document, benches = [(path, cases), ...]."""
    lines = ["## Bench (p50/p99 over repetitions, each the max over ranks; GB/s = bytes / p50; ceiling = the same "
             "bytes copied between the same ranks through shared memory, ratio = ceiling µs / p50)", "",
             "| op | transport | mode | dtype | tokens | p50 µs | p99 µs | algo GB/s | physical GB/s | ceiling µs "
             "| ceiling GB/s | ratio | check |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for _, cases in benches:
        for c in cases:
            lines.append(
                f"| {c['op']} | {c['transport']} | {c['mode']} | {c['dtype']} | {c['sizes'].get('tokens', '')} "
                f"| {c['p50_us']:.1f}{'*' if c['oversubscribed'] else ''} "
                f"| {c['p99_us']:.1f} | {c['algo_gbps']:.3f} "
                f"| {c['physical_gbps']:.3f} | {ceiling_cells(c)} | {check_text(c['check'])} |")
    lines.append("")
    if any(c["oversubscribed"] for _, cases in benches for c in cases):
        lines += ["\\* ran oversubscribed (more threads than CPUs on a node): the time measures the scheduler, "
                  "not the transport.", ""]
    lines.append("Results documents: " + ", ".join(f"[{os.path.basename(p)}]({os.path.basename(p)})"
                                                   for p, _ in benches))
    return lines + [""]


def op_cases(benches, op):
    return [c for _, cases in benches for c in cases if c["op"] == op]


def wrong_text(check):
    return "not checked" if check is None else str(check.get("mismatches"))


def layer_row(c):
    layer = c["layer"]
    phases = " | ".join(f"{layer['phases_us'][p]:.1f}" for p in PHASES)
    dropped = f"{layer['dropped_pairs']:.0f} / {layer['dropped_tokens']:.0f}"
    return (f"| {c['transport']} | {c['mode']} | {c['dtype']} | {c['sizes'].get('tokens', '')} "
            f"| {layer['mask_ratio']:g} | {dict(c['identity']).get('schedule', '')} | {c['p50_us']:.1f} "
            f"| {layer['tokens_per_s']:.0f} | {phases} | {layer['balancedness']:.3f} | {dropped} "
            f"| {wrong_text(c['check'])} | {ceiling_cells(c, False)} |")


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
    eplb = c["eplb"]
    moved = " / ".join(f"{eplb['moved_experts'][k]:.0f}" for k in MOVE_CLASSES)
    steps = f"{eplb['first_step']}-{eplb['last_step']}"
    return (f"| {c['transport']} | {eplb['policy']} | {dict(c['identity']).get('workload', '')} | {eplb['window']} "
            f"| {steps} | {eplb['plan']} | {eplb['predicted']:.3f} | {eplb['realized']:.3f} "
            f"| {eplb['step_us']:.1f} | {eplb['switches']} | {moved} "
            f"| {eplb['moved_mb']:.3f} | {eplb['stall_us']:.1f} | {eplb['planner_us']:.1f} "
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
    preset = read_json(info_path).get("config", {}).get("preset")
    return f"{preset} run" if preset else "run"


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = argv[0]
    sections = []
    info = os.path.join(out_dir, "info.json")
    xml = os.path.join(out_dir, "conformance.xml")
    try:
        documents = [(path, *read_cases(path)) for path in sorted(glob.glob(os.path.join(out_dir, "bench-*.json")))]
    except InputError as e:
        print(f"epsuite: error: {e}", file=sys.stderr)
        return 2
    benches = [(path, cases) for path, _, cases in documents]
    plots = os.path.join(out_dir, "plots", "plots.json")
    sections += oversubscription_lines(([read_json(info)] if os.path.isfile(info) else [])
                                       + [document for _, document, _ in documents])
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
