#!/usr/bin/env python3
"""Plots epsuite results documents (docs/results.md 9.1); run by `epsuite plot FILE... --out DIR`.

usage: epsuite_plot.py --out DIR FILE...

Reads only results JSON written by `epsuite bench` / `epsuite run` and writes, as PNG and SVG, for the
transport ops (dispatch, combine, roundtrip):
  bw_<op>_<mode>_<dtype>      algo bandwidth (GB/s, bytes / p50) against tokens per rank, one line per
                              transport (and platform when the files come from several), a shaded band from
                              bytes / p90 to bytes / p10 (p10 read back from times_us in files of older
                              builds), and, for the cases that carry one, the machine's ceiling
                              (docs/results.md 9.4: ceiling.gbps) as a dashed line of the series' colour;
  ll_latency_<op>_<dtype>     p50 latency (us) against tokens per rank for the LL mode (docs/dispatch.md 5.4);
  platforms_<op>              grouped bars: algo GB/s per platform (platform tags when present, else the
                              fingerprint prefix), one bar per transport/mode, at the largest token count
                              the op was measured at;
and for the MoE layer step (`epsuite bench layer`, op "layer"), whose series are one per transport, identity
(schedule, router, ...; the mask ratio is the x axis) and platform when the files come from several:
  layer_phases_<mode>_<dtype>  stacked bars of the phases of one step (route, dispatch, expert, combine,
                              shared; us summed over layers), one bar per series at its largest token count
                              and the mask ratio nearest 0.5;
  layer_time_vs_mask_<mode>_<dtype>_<tokens>, layer_tokens_per_s_vs_mask_..., layer_balancedness_vs_mask_...
                              p50 step time (us), tokens/s and β (min over layers) against the mask ratio,
                              one line per schedule, at each token count where a series has >= 2 mask ratios;
  layer_expert_load_<mode>_<dtype>_<tokens>_<transport>_<schedule>[_<identity>][_<platform>]
                              heatmap experts x mask ratio of the kept (token, slot) pairs summed over layers,
                              for each series with >= 2 mask ratios at that token count.
and for EPLB at run time (`epsuite bench eplb`, op "eplb", one case per load window), per mode, dtype and
workload, one series per policy (and transport, identity and platform where several):
  eplb_balancedness_<mode>_<dtype>_<workload>  β (docs/eplb.md 8.5) against the window's last step: realized
                              solid, predicted (the plan in force, under the loads it was planned from) dashed;
  eplb_step_time_<mode>_<dtype>_<workload>     mean step time (µs, max over ranks) of each window against its
                              last step;
  eplb_moved_bytes_<mode>_<dtype>_<workload>   stacked bars of the MB every rebalance moved (same rank, same
                              node, cross node), one bar per rebalance that moved an expert, labelled with its
                              policy and switch step.
A series with a case that ran oversubscribed (docs/results.md 9.5: the case's `oversubscribed` is true) is
labelled "[oversubscribed]" in the line figures, and its plots.json entry has "oversubscribed": true: its times
measure the scheduler, not the transport.
Layer and EPLB cases stay out of the transport figures: their p50 is a whole step (routing, expert FFNs and
shared experts besides dispatch and combine), so bytes / p50 is no transport bandwidth.
plots.json is the index: every figure with its kind, files, title, axes and what was drawn: series (label,
transport, platform, identity, points [[x, value], ...]; in bandwidth figures also band [[x, low, high], ...]
and, where drawn, ceiling [[x, GB/s], ...] with ceiling_linestyle); for layer_phases one series per phase with points
[[bar label, us], ...] and the bars (tokens, mask ratio); for layer_expert_load mask_ratios and load
[expert][mask ratio]; for eplb_balancedness series with realized and predicted points; for eplb_moved_bytes
one series per class with points [[bar label, MB], ...] and the bars (policy, switch step); so that tests and
tools can check what was drawn.

Exit codes (docs/errors.md 10): 0 written; 2 bad input (unreadable, truncated or foreign JSON, a schema version
newer than 1, an empty results list, a case without a field its figures need, such as a layer case's
phases_us), with one message naming the file and field; 3 matplotlib missing.
"""
import argparse
import json
import os
import re
import sys
import textwrap

from epsuite_results import EPLB_OP, LAYER_OP, MOVE_CLASSES, PHASES, InputError, parse_case, read_document

FINGERPRINT_PREFIX = 8
STEP_AXIS = "step (last of the load window)"
MAX_BARS_WIDTH = 16.0  # inches
MAX_BAR_LABELS = 40
PHASES_MASK_RATIO = 0.5
TOKENS_AXIS = "tokens per rank"
MASK_AXIS = "mask ratio"


def load_document(path):
    """A document to plot (epsuite_results.py reads it): its platform label, configuration text and cases; every
    case needs sizes.tokens. `bench fabric` cases (raw puts against message size, no tokens axis) are not drawn."""
    document = read_document(path)
    if not document["results"]:
        raise InputError(f"{path}: results: must be a non-empty list of cases")
    cases = []
    for i, raw in enumerate(document["results"]):
        if isinstance(raw, dict) and raw.get("op") == "fabric":
            continue
        case = parse_case(path, i, raw)
        if case["tokens"] is None:
            raise InputError(f"{path}: results[{i}].sizes.tokens: missing")
        cases.append(case)
    if not cases:
        raise InputError(f"{path}: results: only `bench fabric` cases, which epsuite plot does not draw yet")
    return {"path": path, "platform": platform_label(document), "config": config_text(document, cases),
            "cases": cases}


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


def collect_lines(documents, select, value_key, several_platforms, with_bands=False):
    """{figure key: {series label: {"transport", "platform", "identity", "points": {tokens: value}}}}; with_bands
    (bandwidth figures) adds "bands" {tokens: (low, high)} and "ceilings" {tokens: ceiling GB/s} of the cases that
    carry one."""
    grouped = {}
    for doc in documents:
        for case in doc["cases"]:
            key = select(case)
            if key is None:
                continue
            series = grouped.setdefault(key, {}).setdefault(
                (case["transport"], case["identity"], doc["platform"]),
                {"transport": case["transport"], "platform": doc["platform"], "identity": case["identity"],
                 "points": {}, "oversubscribed": False})
            series["points"][case["tokens"]] = case[value_key]
            series["oversubscribed"] |= case["oversubscribed"]
            if with_bands:
                series.setdefault("bands", {})[case["tokens"]] = case["band_gbps"]
                if case["ceiling"] is not None:
                    series.setdefault("ceilings", {})[case["tokens"]] = case["ceiling"]["gbps"]
    figures = {}
    for key, by_identity in grouped.items():
        keys = varying_keys([identity for (_, identity, _) in by_identity])
        figures[key] = {series_label(t, identity, keys, platform, several_platforms)
                        + (" [oversubscribed]" if series["oversubscribed"] else ""): series
                        for (t, identity, platform), series in by_identity.items()}
    return figures


def config_of(documents):
    configs = sorted({doc["config"] for doc in documents})
    return "; ".join(configs)


def wrapped(text, width=85):
    """text with each line broken at width characters: long titles and tick labels would be clipped."""
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def save(fig, out_dir, stem):
    files = []
    for ext in ("png", "svg"):
        name = f"{stem}.{ext}"
        fig.savefig(os.path.join(out_dir, name), dpi=110 if ext == "png" else None)
        files.append(name)
    return files


def line_figure(plt, out_dir, stem, title, ylabel, series_map, xlabel=TOKENS_AXIS, log2_x=True):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    index_series = []
    for label in sorted(series_map):
        s = series_map[label]
        points = sorted(s["points"].items())
        (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
        entry = {"label": label, "transport": s["transport"], "platform": s["platform"],
                 "identity": dict(s["identity"]), "points": [[t, v] for t, v in points]}
        if s.get("oversubscribed"):
            entry["oversubscribed"] = True
        entry.update(draw_band_and_ceiling(ax, s, label, line.get_color()))
        index_series.append(entry)
    if log2_x:
        ax.set_xscale("log", base=2)
    ticks = sorted({t for s in index_series for t, _ in s["points"]})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(wrapped(title), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    files = save(fig, out_dir, stem)
    plt.close(fig)
    return {"files": files, "title": title, "x": xlabel, "y": ylabel, "series": index_series}


def draw_band_and_ceiling(ax, series, label, color):
    """The p10-p90 band (shaded) and the ceiling (dashed) of a bandwidth series, in the line's colour; what was
    drawn, for plots.json."""
    drawn = {}
    bands = sorted(series.get("bands", {}).items())
    if bands:
        ax.fill_between([t for t, _ in bands], [b[0] for _, b in bands], [b[1] for _, b in bands], color=color,
                        alpha=0.2, linewidth=0)
        drawn["band"] = [[t, low, high] for t, (low, high) in bands]
    ceilings = sorted(series.get("ceilings", {}).items())
    if ceilings:
        (line,) = ax.plot([t for t, _ in ceilings], [g for _, g in ceilings], linestyle="--", color=color,
                          label=f"{label} ceiling")
        drawn["ceiling"] = [[t, g] for t, g in ceilings]
        drawn["ceiling_linestyle"] = line.get_linestyle()
    return drawn


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


def layer_series(documents):
    """The layer cases by (mode, dtype), as series: one per transport, identity less the mask ratio, and
    platform, each {"transport", "platform", "identity", "configs", "cases": {(tokens, mask ratio): case},
    "label", "stem"}, sorted by label."""
    groups = {}
    for doc in documents:
        for case in doc["cases"]:
            if case["layer"] is None:
                continue
            identity = tuple((k, v) for k, v in case["identity"] if k != "mask_ratio")
            series = groups.setdefault((case["mode"], case["dtype"]), {}).setdefault(
                (case["transport"], identity, doc["platform"]),
                {"transport": case["transport"], "platform": doc["platform"], "identity": identity,
                 "configs": set(), "cases": {}})
            series["configs"].add(doc["config"])
            series["cases"][(case["tokens"], case["layer"]["mask_ratio"])] = case
    named = {}
    for key, by_identity in groups.items():
        series_list = list(by_identity.values())
        name_layer_series(series_list)
        named[key] = sorted(series_list, key=lambda s: s["label"])
    return named


def name_layer_series(series_list):
    """Sets the label and the file name tail of every series of one (mode, dtype): the schedule, the transport
    when there are several, every other identity entry that tells two series apart (docs/results.md 9.3) and
    that the transport does not already tell (fabric, signal), and the platform when there are several."""
    several_transports = len({s["transport"] for s in series_list}) > 1
    keys = [k for k in varying_keys([s["identity"] for s in series_list])
            if k != "schedule" and not (several_transports and follows_transport(series_list, k))]
    several_platforms = len({s["platform"] for s in series_list}) > 1
    for s in series_list:
        named = dict(s["identity"])
        schedule = named.get("schedule", "?")
        extra = ", ".join(f"{k}={named[k]}" for k in keys if k in named)
        platform = s["platform"] if several_platforms else ""
        label = (f"{s['transport']}, " if several_transports else "") + f"schedule {schedule}"
        label += f" ({extra})" if extra else ""
        s["label"] = f"{label} @ {platform}" if platform else label
        s["stem"] = "_".join(slug(part) for part in (s["transport"], schedule, extra, platform) if part)


def follows_transport(series_list, key):
    """Whether the identity entry key has one value per transport among these series."""
    values = {}
    for s in series_list:
        values.setdefault(s["transport"], set()).add(dict(s["identity"]).get(key))
    return all(len(seen) == 1 for seen in values.values())


def configs_of(series_list):
    return "; ".join(sorted(set().union(*(s["configs"] for s in series_list))))


def phases_case(series):
    """(tokens, mask ratio, case) drawn for a series in the phase figure: its largest token count, and there
    the mask ratio nearest 0.5, the middle of a denoising trajectory (a tie goes to the smaller ratio)."""
    tokens = max(t for t, _ in series["cases"])
    mask = min((m for t, m in series["cases"] if t == tokens), key=lambda m: (abs(m - PHASES_MASK_RATIO), m))
    return tokens, mask, series["cases"][(tokens, mask)]


def finish_stacked_bars(plt, fig, ax, out_dir, stem, title, xlabel, ylabel):
    """Axes, title, grid and legend of a stacked bar figure, then its files (returned)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(wrapped(title), fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    # Top to bottom as stacked, beside the bars so that it hides none.
    ax.legend(handles[::-1], labels[::-1], fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    files = save(fig, out_dir, stem)
    plt.close(fig)
    return files


def phases_figure(plt, out_dir, mode, dtype, series_list):
    """Stacked bars of the phases of one step, one bar per series."""
    bars = [(s, *phases_case(s)) for s in series_list]
    xs = list(range(len(bars)))
    fig, ax = plt.subplots(figsize=(max(7.0, 2.0 * len(bars) + 2), 4.8))
    bottoms = [0.0] * len(bars)
    index_series = []
    for phase in PHASES:
        values = [case["layer"]["phases_us"][phase] for _, _, _, case in bars]
        ax.bar(xs, values, 0.6, bottom=bottoms, label=phase)
        bottoms = [b + v for b, v in zip(bottoms, values)]
        index_series.append({"label": phase, "points": [[s["label"], v] for (s, _, _, _), v in zip(bars, values)]})
    ax.set_xticks(xs, [wrapped(f"{s['label']}\n{t} tokens/rank, mask {m:g}", 26) for s, t, m, _ in bars],
                  fontsize=7)
    ylabel = "µs per step (summed over layers)"
    title = f"layer {mode} {dtype}: phases of one step\n{configs_of(series_list)}"
    files = finish_stacked_bars(plt, fig, ax, out_dir, f"layer_phases_{slug(mode)}_{slug(dtype)}", title,
                                "series (largest token count, mask ratio nearest 0.5)", ylabel)
    return {"kind": "layer-phases", "op": LAYER_OP, "mode": mode, "dtype": dtype, "files": files, "title": title,
            "x": "series", "y": ylabel,
            "bars": [{"label": s["label"], "transport": s["transport"], "platform": s["platform"],
                      "identity": dict(s["identity"]), "tokens": t, "mask_ratio": m} for s, t, m, _ in bars],
            "series": index_series}


def mask_sweeps(series_list):
    """{tokens: [(series, {mask ratio: case}), ...]} at the token counts where some series has at least two
    mask ratios; a series with one ratio there stays in as a single point."""
    by_tokens = {}
    for s in series_list:
        for (tokens, mask), case in s["cases"].items():
            by_tokens.setdefault(tokens, {}).setdefault(s["label"], (s, {}))[1][mask] = case
    return {tokens: list(sweeps.values()) for tokens, sweeps in by_tokens.items()
            if any(len(cases) > 1 for _, cases in sweeps.values())}


MASK_LINES = (
    {"stem": "layer_time_vs_mask", "kind": "layer-time-vs-mask", "what": "p50 step time",
     "y": "p50 step time (µs)", "value": lambda case: case["p50_us"]},
    {"stem": "layer_tokens_per_s_vs_mask", "kind": "layer-tokens-per-s-vs-mask", "what": "tokens/s (all ranks)",
     "y": "tokens/s", "value": lambda case: case["layer"]["tokens_per_s"]},
    {"stem": "layer_balancedness_vs_mask", "kind": "layer-balancedness-vs-mask", "what": "β of the worst layer",
     "y": "β (mean / max expert work over ranks, worst layer)",
     "value": lambda case: case["layer"]["balancedness"]},
)


def mask_line_figures(plt, out_dir, mode, dtype, tokens, sweeps):
    """Step time, tokens/s and β against the mask ratio at one token count, one line per series."""
    config = configs_of([s for s, _ in sweeps])
    index = []
    for line in MASK_LINES:
        series_map = {s["label"]: {**s, "points": {mask: line["value"](case) for mask, case in cases.items()}}
                      for s, cases in sweeps}
        title = f"layer {mode} {dtype}: {line['what']} against mask ratio, {tokens} tokens/rank\n{config}"
        stem = f"{line['stem']}_{slug(mode)}_{slug(dtype)}_{tokens}"
        entry = line_figure(plt, out_dir, stem, title, line["y"], series_map, xlabel=MASK_AXIS, log2_x=False)
        index.append({"kind": line["kind"], "op": LAYER_OP, "mode": mode, "dtype": dtype, "tokens": tokens,
                      **entry})
    return index


def expert_load_figure(plt, out_dir, mode, dtype, tokens, series, cases):
    """Heatmap experts x mask ratio of one series' kept (token, slot) pairs, summed over layers."""
    masks = sorted(cases)
    load = [list(row) for row in zip(*(cases[m]["layer"]["expert_load"] for m in masks))]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    image = ax.imshow(load, aspect="auto", origin="lower", interpolation="nearest", cmap="viridis")
    ax.set_xticks(range(len(masks)), [str(m) for m in masks])
    ax.set_xlabel(MASK_AXIS)
    ax.set_ylabel("expert")
    colorbar = "kept (token, slot) pairs, summed over layers"
    fig.colorbar(image, ax=ax, label=colorbar)
    title = f"layer {mode} {dtype}: expert load, {series['label']}, {tokens} tokens/rank\n{configs_of([series])}"
    ax.set_title(wrapped(title, 75), fontsize=9)
    fig.tight_layout()
    files = save(fig, out_dir, f"layer_expert_load_{slug(mode)}_{slug(dtype)}_{tokens}_{series['stem']}")
    plt.close(fig)
    return {"kind": "layer-expert-load", "op": LAYER_OP, "mode": mode, "dtype": dtype, "tokens": tokens,
            "label": series["label"], "transport": series["transport"], "platform": series["platform"],
            "identity": dict(series["identity"]), "files": files, "title": title, "x": MASK_AXIS, "y": "expert",
            "colorbar": colorbar, "mask_ratios": masks, "load": load}


def layer_figures(documents, out_dir, plt):
    index = []
    for (mode, dtype), series_list in sorted(layer_series(documents).items()):
        index.append(phases_figure(plt, out_dir, mode, dtype, series_list))
        for tokens, sweeps in sorted(mask_sweeps(series_list).items()):
            index += mask_line_figures(plt, out_dir, mode, dtype, tokens, sweeps)
            index += [expert_load_figure(plt, out_dir, mode, dtype, tokens, s, cases)
                      for s, cases in sweeps if len(cases) > 1]
    return index


def eplb_series(documents):
    """The EPLB cases by (mode, dtype, workload), as series: one per policy, transport, identity (less policy
    and workload) and platform, each {"policy", "transport", "platform", "identity", "configs", "windows":
    {last step: case}, "label"}, sorted by label. The label is the policy, then the transport when there are
    several, every other identity entry that tells two series apart, and the platform when there are several."""
    groups = {}
    for doc in documents:
        for case in doc["cases"]:
            if case["eplb"] is None:
                continue
            named = dict(case["identity"])
            identity = tuple((k, v) for k, v in case["identity"] if k not in ("policy", "workload"))
            policy = case["eplb"]["policy"]
            series = groups.setdefault((case["mode"], case["dtype"], named.get("workload", "?")), {}).setdefault(
                (policy, case["transport"], identity, doc["platform"]),
                {"policy": policy, "transport": case["transport"], "platform": doc["platform"],
                 "identity": identity, "configs": set(), "windows": {}})
            series["configs"].add(doc["config"])
            series["windows"][case["eplb"]["last_step"]] = case
    named_groups = {}
    for key, by_key in groups.items():
        series_list = list(by_key.values())
        several_transports = len({s["transport"] for s in series_list}) > 1
        keys = [k for k in varying_keys([s["identity"] for s in series_list])
                if not (several_transports and follows_transport(series_list, k))]
        several_platforms = len({s["platform"] for s in series_list}) > 1
        for s in series_list:
            named = dict(s["identity"])
            extra = ", ".join(f"{k}={named[k]}" for k in keys if k in named)
            label = s["policy"] + (f", {s['transport']}" if several_transports else "")
            label += f" ({extra})" if extra else ""
            s["label"] = f"{label} @ {s['platform']}" if several_platforms else label
        named_groups[key] = sorted(series_list, key=lambda s: s["label"])
    return named_groups


def index_entry(s, points):
    return {"label": s["label"], "policy": s["policy"], "transport": s["transport"], "platform": s["platform"],
            "identity": dict(s["identity"]), "points": points}


def eplb_balancedness_figure(plt, out_dir, mode, dtype, workload, series_list):
    """β against step, one colour per series: realized solid, predicted dashed."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    index_series = []
    for i, s in enumerate(series_list):
        steps = sorted(s["windows"])
        realized = [s["windows"][t]["eplb"]["realized"] for t in steps]
        predicted = [s["windows"][t]["eplb"]["predicted"] for t in steps]
        color = f"C{i % 10}"
        ax.plot(steps, realized, color=color, marker="o", linestyle="-", label=f"{s['label']} realized")
        ax.plot(steps, predicted, color=color, marker="x", linestyle="--", label=f"{s['label']} predicted")
        entry = index_entry(s, [[t, v] for t, v in zip(steps, realized)])
        entry["predicted"] = [[t, v] for t, v in zip(steps, predicted)]
        index_series.append(entry)
    ax.set_xlabel(STEP_AXIS)
    ylabel = "β = mean / max rank load (even split)"
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.05)
    title = f"eplb {mode} {dtype}, workload {workload}: balancedness per load window\n{configs_of(series_list)}"
    ax.set_title(wrapped(title), fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    files = save(fig, out_dir, f"eplb_balancedness_{slug(mode)}_{slug(dtype)}_{slug(workload)}")
    plt.close(fig)
    return {"kind": "eplb-balancedness", "op": EPLB_OP, "mode": mode, "dtype": dtype, "workload": workload,
            "files": files, "title": title, "x": STEP_AXIS, "y": ylabel, "series": index_series}


def eplb_step_time_figure(plt, out_dir, mode, dtype, workload, series_list):
    """The mean step time of each window against its last step, one line per series."""
    series_map = {s["label"]: {**s, "points": {t: c["eplb"]["step_us"] for t, c in s["windows"].items()}}
                  for s in series_list}
    title = f"eplb {mode} {dtype}, workload {workload}: mean step time per load window\n{configs_of(series_list)}"
    stem = f"eplb_step_time_{slug(mode)}_{slug(dtype)}_{slug(workload)}"
    entry = line_figure(plt, out_dir, stem, title, "mean step time (µs, max over ranks)", series_map,
                        xlabel=STEP_AXIS, log2_x=False)
    for indexed in entry["series"]:
        indexed["policy"] = next(s["policy"] for s in series_list if s["label"] == indexed["label"])
    return {"kind": "eplb-step-time", "op": EPLB_OP, "mode": mode, "dtype": dtype, "workload": workload, **entry}


def eplb_moved_bytes_figure(plt, out_dir, mode, dtype, workload, series_list):
    """Stacked bars of the MB each rebalance moved (same rank, same node, cross node), one bar per rebalance
    that moved an expert, in series then switch-step order."""
    bars = []
    for s in series_list:
        for t in sorted(s["windows"]):
            for r in s["windows"][t]["eplb"]["rebalances"]:
                if sum(r["mb"].values()) > 0:
                    bars.append((s, r))
    fig, ax = plt.subplots(figsize=(min(MAX_BARS_WIDTH, max(7.0, 0.5 * len(bars) + 3)), 4.8))
    xs = list(range(len(bars)))
    labels = [f"{s['label']} @ step {r['switch_step']}" for s, r in bars]
    bottoms = [0.0] * len(bars)
    index_series = []
    for name in MOVE_CLASSES:
        values = [r["mb"][name] for _, r in bars]
        ax.bar(xs, values, 0.6, bottom=bottoms, label=name.replace("_", " "))
        bottoms = [b + v for b, v in zip(bottoms, values)]
        index_series.append({"label": name, "points": [[label, v] for label, v in zip(labels, values)]})
    # At most MAX_BAR_LABELS tick labels, so that a long run stays readable (plots.json names every bar).
    every = max(1, -(-len(bars) // MAX_BAR_LABELS))
    shown = [(x, label) for x, label in zip(xs, labels) if x % every == 0]
    ax.set_xticks([x for x, _ in shown], [wrapped(label, 18) for _, label in shown], fontsize=6, rotation=45,
                  ha="right")
    if not bars:
        ax.text(0.5, 0.5, "no rebalance moved an expert", ha="center", va="center", transform=ax.transAxes)
    ylabel = "moved expert weights (MB)"
    title = f"eplb {mode} {dtype}, workload {workload}: bytes moved per rebalance\n{configs_of(series_list)}"
    files = finish_stacked_bars(plt, fig, ax, out_dir, f"eplb_moved_bytes_{slug(mode)}_{slug(dtype)}_{slug(workload)}",
                                title, "rebalance (policy @ first step under the new placement)", ylabel)
    return {"kind": "eplb-moved-bytes", "op": EPLB_OP, "mode": mode, "dtype": dtype, "workload": workload,
            "files": files, "title": title, "x": "rebalance", "y": ylabel,
            "bars": [{"label": label, "policy": s["policy"], "series": s["label"], "switch_step": r["switch_step"]}
                     for label, (s, r) in zip(labels, bars)],
            "series": index_series}


def eplb_figures(documents, out_dir, plt):
    index = []
    for (mode, dtype, workload), series_list in sorted(eplb_series(documents).items()):
        index.append(eplb_balancedness_figure(plt, out_dir, mode, dtype, workload, series_list))
        index.append(eplb_step_time_figure(plt, out_dir, mode, dtype, workload, series_list))
        index.append(eplb_moved_bytes_figure(plt, out_dir, mode, dtype, workload, series_list))
    return index


def transport_documents(documents):
    """The documents with their layer and EPLB cases left out, and those left with none dropped: such a case's
    p50 is a whole step (routing, expert FFNs, shared experts besides dispatch and combine), so bytes / p50 is no
    transport bandwidth; the layer and EPLB figures draw those cases."""
    kept = [{**doc, "cases": [c for c in doc["cases"] if c["layer"] is None and c["eplb"] is None]}
            for doc in documents]
    return [doc for doc in kept if doc["cases"]]


def transport_figures(documents, out_dir, plt):
    if not documents:
        return []
    several = len({d["platform"] for d in documents}) > 1
    config = config_of(documents)
    index = []
    bandwidth = collect_lines(documents, lambda c: (c["op"], c["mode"], c["dtype"]), "algo_gbps", several,
                              with_bands=True)
    for (op, mode, dtype), series in sorted(bandwidth.items()):
        title = (f"{op} {mode} {dtype}: algo bandwidth (bytes / p50; band p10-p90; dashed: the machine's "
                 f"ceiling)\n{config}")
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


def plot_all(documents, out_dir, plt):
    return (transport_figures(transport_documents(documents), out_dir, plt) + layer_figures(documents, out_dir, plt)
            + eplb_figures(documents, out_dir, plt))


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
