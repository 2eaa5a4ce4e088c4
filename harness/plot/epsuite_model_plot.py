#!/usr/bin/env python3
"""Figures of a kind-model document of `epsuite model` (docs/model.md 16.6).

usage: epsuite_model_plot.py --out DIR MODEL.json

Writes DIR/model_time.{png,svg} (predicted time of each fitted series against the EP size, log-log) and
DIR/model_bandwidth.{png,svg} (the busiest rank's bytes / predicted time). One line per series (op,
transport, mode, identity); skipped EP sizes leave a gap. Measured points overlay the lines where they
exist: every fitted or validation case of the series with the predicted preset and tokens, drawn as
markers (hollow for validation) and labelled with the validation error. Exit 2 for bad input, 3 when
matplotlib is missing.
"""
import json
import os
import sys


def fail(code, message):
    print(f"epsuite: error: {message}", file=sys.stderr)
    sys.exit(code)


def short_name(series):
    head = series.split(" ")[0]  # op/transport/mode/dtype
    parts = head.split("/")
    return " ".join([parts[0], parts[1]] + parts[2:3]) if len(parts) >= 3 else head


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError) as e:
        fail(2, f"{path}: cannot read a model document: {e}")
    if document.get("kind") != "model" or "model" not in document:
        fail(2, f"{path}: kind: not a model document (epsuite model --json)")
    return document


def draw(document, out_dir, plt):
    model = document["model"]
    config = document.get("config", {})
    preset = config.get("preset", "")
    predictions = [p for p in model["predictions"] if p.get("skipped") is None]
    series = []
    for p in model["predictions"]:
        if p["series"] not in series:
            series.append(p["series"])
    tokens = {p["series"]: p["tokens"] for p in model["predictions"]}
    written = []
    for name, key, ylabel in (("model_time", "time_us", "predicted time (us)"),
                              ("model_bandwidth", "gbps", "busiest rank GB/s")):
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for index, s in enumerate(series):
            color = f"C{index % 10}"
            points = sorted((p["ep"], p[key]) for p in predictions if p["series"] == s)
            if points:
                ax.plot([x for x, _ in points], [y for _, y in points], "-", color=color, label=short_name(s))
            for v in model["validation"]:
                if v["series"] != s or v.get("preset") != preset or v["tokens"] != tokens.get(s):
                    continue
                y = v["measured_p50_us"]
                if key == "gbps":
                    y = v["busiest_rank_bytes"] / v["measured_p50_us"] / 1e3 if v["measured_p50_us"] > 0 else 0
                hollow = v["role"] == "validation"
                ax.plot([v["ranks"]], [y], "o", color=color, markerfacecolor="none" if hollow else color)
                if hollow:
                    ax.annotate(f"{100 * v['error']:+.0f}%", (v["ranks"], y), textcoords="offset points",
                                xytext=(4, 4), fontsize=7, color=color)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("EP size (ranks)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"epsuite model: {preset} (lines predicted; filled = fitted, hollow = validation)",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if series:
            ax.legend(fontsize=7)
        fig.tight_layout()
        for ext in ("png", "svg"):
            path = os.path.join(out_dir, f"{name}.{ext}")
            fig.savefig(path, dpi=80)
            written.append(path)
        plt.close(fig)
    return written


def main(argv):
    if len(argv) != 4 or argv[1] != "--out":
        fail(2, "usage: epsuite_model_plot.py --out DIR MODEL.json")
    out_dir, path = argv[2], argv[3]
    document = load(path)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail(3, "plot: matplotlib is missing (ci/setup installs python3-matplotlib)")
    os.makedirs(out_dir, exist_ok=True)
    for path in draw(document, out_dir, plt):
        print(f"# wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
