#!/usr/bin/env python3
"""Checks a kind-model document of the validation loop (model_loop.cmake, docs/model.md 16) against its inputs.

usage: check_model.py MODEL.json PLOT_DIR   exit 0 when every check holds, 1 otherwise (each failure printed).

Independent of the code under test: measured p50s are read from the input files, CPU shares re-derived from
their oversubscription census (docs/results.md 9.5), the cost lines refitted here by weighted least squares
(weights 1/y^2) from the fitted points, and every predicted value and error recomputed from them.
"""
import json
import math
import os
import sys

failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def relative_fit(points):
    w = [1.0 / (y * y) for _, y in points]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, points)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, points)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, points))
    sxy = sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, points))
    slope = sxy / sxx
    return my - slope * mx, slope


def line_at(ranges, x):
    for r in ranges:
        if x <= r["bytes_max"]:
            return r["alpha_us"] + r["us_per_byte"] * x
    return ranges[-1]["alpha_us"] + ranges[-1]["us_per_byte"] * x


def find_case(document, entry):
    head = entry["series"].split(" ")[0].split("/")
    op, transport, mode, dtype = head[0], head[1], "/".join(head[2:-1]), head[-1]
    for case in document["results"]:
        if (case["op"], case["transport"], case["mode"], case["dtype"]) != (op, transport, mode, dtype):
            continue
        if case["sizes"]["ranks"] == entry["ranks"] and case["sizes"]["tokens"] == entry["tokens"]:
            return case
    return None


def cpu_share(document, case):
    census = document.get("oversubscribed")
    if not case.get("oversubscribed") or not census:
        return 1.0
    return max(1.0, census["ranks"] / census["cpus"])


def main(argv):
    with open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    model = doc["model"]
    inputs = {}
    for i in model["inputs"]:
        with open(i["path"], encoding="utf-8") as f:
            inputs[i["path"]] = json.load(f)
        check(i["fingerprint"] == inputs[i["path"]]["platform"]["fingerprint"], f"{i['path']}: fingerprint")
    check(any(l["fabric"] == "shm" and l["measure"] == "put-bw" for l in model["links"]), "no shm put-bw link")
    ops = {o["series"]: o for o in model["ops"]}
    check(sorted(o["op"] for o in model["ops"]) == ["combine", "dispatch"], f"ops fitted: {list(ops)}")
    seen = {}
    for v in model["validation"]:
        source = inputs[v["source"]]
        case = find_case(source, v)
        check(case is not None, f"{v['source']}: no case for {v['series']} ranks {v['ranks']} tokens {v['tokens']}")
        if case is None:
            continue
        check(close(v["measured_p50_us"], case["stats"]["p50"]), f"measured p50 of {v}")
        check(close(v["cpu_share"], cpu_share(source, case)), f"cpu share of {v}")
        check(v["busiest_rank_bytes"] >= case["bytes"]["algo"], f"busiest bytes below the slowest rank's: {v}")
        op = ops[v["series"]]
        check(op["withheld"] is False, f"{v['series']} fit withheld: {op['reason']}")
        if op["withheld"]:
            continue
        check(close(v["predicted_us"], v["cpu_share"] * line_at(op["ranges"], v["busiest_rank_bytes"])),
              f"predicted of {v}")
        check(close(v["error"], v["predicted_us"] / v["measured_p50_us"] - 1), f"error of {v}")
        seen.setdefault(v["series"], set()).add((v["role"], v["ranks"], v["tokens"]))
    for series, op in ops.items():
        fitted = [(v["busiest_rank_bytes"], v["measured_p50_us"] / v["cpu_share"])
                  for v in model["validation"] if v["series"] == series and v["role"] == "fit"]
        check(len(fitted) == 6, f"{series}: {len(fitted)} fitted points, expected 6")
        if not op["withheld"] and len(op["ranges"]) == 1 and len(fitted) >= 3:
            intercept, slope = relative_fit(fitted)
            check(close(op["ranges"][0]["alpha_us"], intercept, 1e-6) and
                  close(op["ranges"][0]["us_per_byte"], slope, 1e-6), f"{series}: refitted line differs")
        roles = seen.get(series, set())
        for ranks in (3, 4, 8):
            check(("validation", ranks, 128) in roles, f"{series}: no validation at {ranks} ranks")
        for tokens in (192, 320):
            check(("validation", 2, tokens) in roles, f"{series}: no 2-rank validation at {tokens} tokens")
        check(series in model["worst_error"], f"{series}: no worst_error")
    for p in model["predictions"]:
        check(p["skipped"] is None, f"prediction skipped: {p}")
        if p["skipped"] is None:
            check(close(p["cpu_share"], max(1.0, min(8, p["ep"]) / 2)), f"prediction cpu share: {p}")
    check(sorted({p["ep"] for p in model["predictions"]}) == [2, 3, 4, 6, 8], "EP sizes predicted")
    for name in ("model_time.png", "model_bandwidth.png", "model_time.svg"):
        check(os.path.isfile(os.path.join(argv[2], name)), f"figure {name} missing")
    for f in failures:
        print(f"check_model.py: {f}", file=sys.stderr)
    errors = [f"{v['ranks']}r/{v['tokens']}t {v['series'].split(' ')[0]}: {100 * v['error']:+.0f}%"
              for v in model["validation"] if v["role"] == "validation"]
    print("validation errors: " + "; ".join(errors))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
