#!/usr/bin/env python3
"""Plots epsuite results documents (docs/results.md 9.1); run by `epsuite plot FILE... --out DIR`.

usage: epsuite_plot.py --out DIR FILE...

Reads only results JSON written by `epsuite bench` / `epsuite run` and writes, as PNG and SVG:
  bw_<op>_<mode>_<dtype>      algo bandwidth (GB/s, bytes / p50) against tokens per rank, one line per
                              transport (and platform when the files come from several);
  ll_latency_<op>_<dtype>     p50 latency (us) against tokens per rank for the LL mode (docs/dispatch.md 5.4);
  platforms_<op>              grouped bars: algo GB/s per platform (platform tags when present, else the
                              fingerprint prefix), one bar per transport/mode, at the largest token count
                              the op was measured at.
and plots.json, the index: every figure with its files, axes and series (label, transport, platform,
points [[tokens, value], ...]) so that tests and tools can check what was drawn.

Exit codes (docs/errors.md 10): 0 written; 2 bad input (unreadable, truncated or foreign JSON, a schema version
newer than 1, an empty results list), with one message naming the file and field; 3 matplotlib missing.
"""
import argparse
import json
import os
import re
import sys

SCHEMA_VERSION = 1
FINGERPRINT_PREFIX = 8


class InputError(Exception):
    pass


def load_document(path):
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not valid JSON (truncated or corrupt): {e}")
    if not isinstance(document, dict) or "schema_version" not in document:
        raise InputError(f"{path}: schema_version: missing; not an epsuite results document")
    version = document["schema_version"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        raise InputError(f"{path}: schema_version: must be in [1, {SCHEMA_VERSION}], got {version!r}")
    results = document.get("results")
    if not isinstance(results, list) or not results:
        raise InputError(f"{path}: results: must be a non-empty list of cases")
    # `bench fabric` cases (raw puts against message size, no tokens axis) are not drawn by this script.
    cases = [parse_case(path, i, c) for i, c in enumerate(results)
             if not (isinstance(c, dict) and c.get("op") == "fabric")]
    if not cases:
        raise InputError(f"{path}: results: only `bench fabric` cases, which epsuite plot does not draw yet")
    return {"path": path, "platform": platform_label(document), "config": config_text(document, cases),
            "cases": cases}


def field(path, index, case, *keys):
    value = case
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise InputError(f"{path}: results[{index}].{'.'.join(keys)}: missing")
        value = value[key]
    return value


def number(path, index, case, *keys):
    value = field(path, index, case, *keys)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise InputError(f"{path}: results[{index}].{'.'.join(keys)}: must be a number >= 0, got {value!r}")
    return value


def parse_case(path, index, case):
    sizes = field(path, index, case, "sizes")
    return {"op": str(field(path, index, case, "op")),
            "transport": str(field(path, index, case, "transport")),
            "mode": str(field(path, index, case, "mode")),
            "dtype": str(field(path, index, case, "dtype")),
            "tokens": int(number(path, index, case, "sizes", "tokens")),
            "p50_us": float(number(path, index, case, "stats", "p50")),
            "algo_gbps": float(number(path, index, case, "bandwidth_gbps", "algo")),
            "sizes": sizes if isinstance(sizes, dict) else {},
            "identity": identity_of(case)}


def identity_of(case):
    """The rest of the case identity (docs/results.md 9.3) as sorted (key, text) pairs; {} in older files."""
    identity = case.get("identity")
    if not isinstance(identity, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in identity.items()))


def platform_label(document):
    platform = document.get("platform") if isinstance(document.get("platform"), dict) else {}
    tags = platform.get("tags")
    if isinstance(tags, dict) and tags:
        return ",".join(f"{k}={v}" for k, v in sorted(tags.items()))
    if isinstance(tags, list) and tags:
        return ",".join(str(t) for t in tags)
    fingerprint = platform.get("fingerprint")
    return str(fingerprint)[:FINGERPRINT_PREFIX] if fingerprint else "unknown"


def config_text(document, cases):
    config = document.get("config") if isinstance(document.get("config"), dict) else {}
    sizes = cases[0]["sizes"]
    parts = [f"preset {config.get('preset', '?')}"]
    for key, name in (("hidden", "H"), ("top_k", "K"), ("experts", "E"), ("ranks", "ranks")):
        if key in sizes:
            parts.append(f"{name} {sizes[key]}")
    return ", ".join(parts)


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")


def varying_keys(identities):
    """The identity keys whose values differ between the given identities (each a tuple of pairs)."""
    values = {}
    for identity in identities:
        for key, value in identity:
            values.setdefault(key, set()).add(value)
    keys = {key for key, seen in values.items() if len(seen) > 1}
    keys |= {key for identity in identities for key, _ in identity if any(key not in dict(i) for i in identities)}
    return sorted(keys)


def series_label(transport, identity, keys, platform, several_platforms):
    """The transport, then every identity entry that tells this series from another of the figure: two
    identities are never drawn as one series (docs/results.md 9.3)."""
    named = dict(identity)
    extra = ", ".join(f"{k}={named[k]}" for k in keys if k in named)
    label = transport + (f" ({extra})" if extra else "")
    return f"{label} @ {platform}" if several_platforms else label


def collect_lines(documents, select, value_key, several_platforms):
    """{figure key: {series label: {"transport", "platform", "identity", "points": {tokens: value}}}}."""
    grouped = {}
    for doc in documents:
        for case in doc["cases"]:
            key = select(case)
            if key is None:
                continue
            series = grouped.setdefault(key, {}).setdefault(
                (case["transport"], case["identity"], doc["platform"]),
                {"transport": case["transport"], "platform": doc["platform"], "identity": case["identity"],
                 "points": {}})
            series["points"][case["tokens"]] = case[value_key]
    figures = {}
    for key, by_identity in grouped.items():
        keys = varying_keys([identity for (_, identity, _) in by_identity])
        figures[key] = {series_label(t, identity, keys, platform, several_platforms): series
                        for (t, identity, platform), series in by_identity.items()}
    return figures


def config_of(documents):
    configs = sorted({doc["config"] for doc in documents})
    return "; ".join(configs)


def save(fig, out_dir, stem):
    files = []
    for ext in ("png", "svg"):
        name = f"{stem}.{ext}"
        fig.savefig(os.path.join(out_dir, name), dpi=110 if ext == "png" else None)
        files.append(name)
    return files


def line_figure(plt, out_dir, stem, title, ylabel, series_map):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    index_series = []
    for label in sorted(series_map):
        s = series_map[label]
        points = sorted(s["points"].items())
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        index_series.append({"label": label, "transport": s["transport"], "platform": s["platform"],
                             "identity": dict(s["identity"]), "points": [[t, v] for t, v in points]})
    ax.set_xscale("log", base=2)
    ticks = sorted({t for s in index_series for t, _ in s["points"]})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("tokens per rank")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files = save(fig, out_dir, stem)
    plt.close(fig)
    return {"files": files, "title": title, "x": "tokens per rank", "y": ylabel, "series": index_series}


def bar_figure(plt, out_dir, documents, op):
    """Grouped bars for one op: x = platform, one bar per transport/mode/dtype, at the largest tokens."""
    tokens = max(c["tokens"] for d in documents for c in d["cases"] if c["op"] == op)
    platforms = sorted({d["platform"] for d in documents})
    chosen = [(doc, c) for doc in documents for c in doc["cases"] if c["op"] == op and c["tokens"] == tokens]
    keys = varying_keys([c["identity"] for _, c in chosen])
    bars = {}
    for doc, c in chosen:
        label = series_label(f"{c['transport']} {c['mode']} {c['dtype']}", c["identity"], keys, "", False)
        bars.setdefault(label, {"transport": c["transport"], "values": {}})
        bars[label]["values"][doc["platform"]] = c["algo_gbps"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / max(len(bars), 1)
    index_series = []
    for i, label in enumerate(sorted(bars)):
        values = bars[label]["values"]
        xs = [p + i * width for p in range(len(platforms)) if platforms[p] in values]
        ys = [values[p] for p in platforms if p in values]
        ax.bar(xs, ys, width, label=label)
        index_series.append({"label": label, "transport": bars[label]["transport"],
                             "points": [[p, values[p]] for p in platforms if p in values]})
    ax.set_xticks([p + width * (len(bars) - 1) / 2 for p in range(len(platforms))])
    ax.set_xticklabels(platforms, fontsize=8)
    ax.set_xlabel("platform (tags, else fingerprint prefix)")
    ylabel = "algo bandwidth (GB/s)"
    ax.set_ylabel(ylabel)
    title = f"{op}: algo bandwidth per platform at {tokens} tokens/rank\n{config_of(documents)}"
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    files = save(fig, out_dir, f"platforms_{slug(op)}")
    plt.close(fig)
    return {"kind": "platform-bars", "op": op, "tokens": tokens, "files": files, "title": title,
            "x": "platform", "y": ylabel, "series": index_series}


def plot_all(documents, out_dir, plt):

    several = len({d["platform"] for d in documents}) > 1
    config = config_of(documents)
    index = []
    bandwidth = collect_lines(documents, lambda c: (c["op"], c["mode"], c["dtype"]), "algo_gbps", several)
    for (op, mode, dtype), series in sorted(bandwidth.items()):
        title = f"{op} {mode} {dtype}: algo bandwidth (bytes / p50)\n{config}"
        entry = line_figure(plt, out_dir, f"bw_{slug(op)}_{slug(mode)}_{slug(dtype)}", title,
                            "algo bandwidth (GB/s)", series)
        index.append({"kind": "bandwidth", "op": op, "mode": mode, "dtype": dtype, **entry})
    latency = collect_lines(documents, lambda c: (c["op"], c["dtype"]) if c["mode"].startswith("ll") else None,
                            "p50_us", several)
    for (op, dtype), series in sorted(latency.items()):
        title = f"{op} LL {dtype}: p50 latency (max over ranks)\n{config}"
        entry = line_figure(plt, out_dir, f"ll_latency_{slug(op)}_{slug(dtype)}", title, "p50 latency (µs)",
                            series)
        index.append({"kind": "ll-latency", "op": op, "mode": "ll", "dtype": dtype, **entry})
    for op in sorted({c["op"] for d in documents for c in d["cases"]}):
        index.append(bar_figure(plt, out_dir, documents, op))
    return index


def main(argv):
    parser = argparse.ArgumentParser(prog="epsuite plot", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory (created when missing)")
    parser.add_argument("files", nargs="+", help="results JSON documents (docs/results.md 9.1)")
    args = parser.parse_args(argv)
    try:
        documents = [load_document(p) for p in args.files]
    except InputError as e:
        print(f"epsuite: error: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        print(f"epsuite: error: --out: cannot create {args.out}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("epsuite: error: plot: matplotlib is not installed (ci/setup installs python3-matplotlib)",
              file=sys.stderr)
        return 3
    index = plot_all(documents, args.out, plt)
    document = {"inputs": [d["path"] for d in documents], "plots": index}
    temp = os.path.join(args.out, ".plots.json.tmp")
    with open(temp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=1)
    os.replace(temp, os.path.join(args.out, "plots.json"))
    print(f"epsuite plot: {len(index)} figures ({2 * len(index)} files) in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
