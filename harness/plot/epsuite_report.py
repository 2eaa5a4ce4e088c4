#!/usr/bin/env python3
"""Writes report.md, the short summary of a ci/smoke run directory (README's main job).

usage: epsuite_report.py DIR   reads DIR/info.json, DIR/conformance.xml, DIR/bench-*.json and
                               DIR/plots/plots.json (each optional) and writes DIR/report.md atomically.

Sections: platform (hosts, CPU, provider, fingerprint, tags), conformance (tests, passed, failed, skipped,
counted from the GoogleTest XML: failed = test cases with a <failure>, skipped = with a <skipped>), bench
(one row per case: op, transport, mode, dtype, tokens, p50 / p99 in µs, algo / physical GB/s, check) and
links to every plot. Exit code 0; 2 when DIR holds none of those files.
"""
import glob
import json
import os
import sys
import xml.etree.ElementTree as ElementTree


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


def bench_section(paths):
    lines = ["## Bench (p50/p99 over repetitions, each the max over ranks; GB/s = bytes / p50)", "",
             "| op | transport | mode | dtype | tokens | p50 µs | p99 µs | algo GB/s | physical GB/s | check |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for c in json.load(f).get("results", []):
                lines.append(
                    f"| {c['op']} | {c['transport']} | {c['mode']} | {c['dtype']} | {c['sizes'].get('tokens', '')} "
                    f"| {c['stats']['p50']:.1f} | {c['stats']['p99']:.1f} | {c['bandwidth_gbps']['algo']:.3f} "
                    f"| {c['bandwidth_gbps']['physical']:.3f} | {check_text(c['check'])} |")
    lines.append("")
    lines.append("Results documents: " + ", ".join(f"[{os.path.basename(p)}]({os.path.basename(p)})" for p in paths))
    return lines + [""]


def plots_section(path):
    with open(path, encoding="utf-8") as f:
        plots = json.load(f)["plots"]
    lines = ["## Plots", ""]
    for plot in plots:
        title = plot["title"].split("\n")[0]
        lines.append(f"- {title}: [PNG](plots/{plot['files'][0]}), [SVG](plots/{plot['files'][1]})")
    return lines + [""]


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
    if os.path.isfile(info):
        sections += platform_section(info)
    if os.path.isfile(xml):
        sections += conformance_section(xml)
    if benches:
        sections += bench_section(benches)
    if os.path.isfile(plots):
        sections += plots_section(plots)
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
