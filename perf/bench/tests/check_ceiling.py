#!/usr/bin/env python3
"""Checks that every row of an `epsuite bench` run carries the machine's ceiling (docs/results.md 9.4).

usage: check_ceiling.py OP RESULTS_JSON TABLE_TXT SERIES [KIND]   exit 0 when it does, 1 otherwise.

Per case of the document: ceiling {us, gbps, ratio, kind} with us > 0 and ratio > 0, kind KIND (default
"shm-copy", every rank on one node; "fabric" with --ceiling fabric), gbps = bytes.algo / us and ratio = us / stats.p50 (recomputed here), stats.p10 <= p50 <= p90; 2
token counts (64, 128) per series. Per table row (a line that does not start with '#'): the ceiling cells are
numbers, not N/A, and there is one row per case.
"""
import json
import sys

TOKENS = [64, 128]
KIND = ["shm-copy"]  # the expected ceiling kind (argument 5)


def fail(message):
    print(f"check_ceiling: {message}", file=sys.stderr)
    return 1


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def check_case(i, case):
    ceiling = case.get("ceiling")
    if not isinstance(ceiling, dict):
        return f"results[{i}] has no ceiling"
    if ceiling.get("kind") != KIND[0]:
        return f"results[{i}].ceiling.kind is {ceiling.get('kind')!r}, expected {KIND[0]!r}"
    us, gbps, ratio = ceiling["us"], ceiling["gbps"], ceiling["ratio"]
    if not (us > 0 and ratio > 0):
        return f"results[{i}].ceiling: us {us} and ratio {ratio} must be > 0"
    if not close(gbps, case["bytes"]["algo"] / (us * 1e3)):
        return f"results[{i}].ceiling.gbps {gbps} is not bytes.algo / us"
    if not close(ratio, us / case["stats"]["p50"]):
        return f"results[{i}].ceiling.ratio {ratio} is not us / stats.p50"
    stats = case["stats"]
    if not stats["p10"] <= stats["p50"] <= stats["p90"]:
        return f"results[{i}].stats: p10 {stats['p10']}, p50 {stats['p50']}, p90 {stats['p90']} out of order"
    if case["check"] is None or not case["check"]["passed"]:
        return f"results[{i}] was not checked, or failed: {case['check']}"
    return None


def table_rows(path):
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip() and not line.startswith("#")]


def check_rows(op, rows):
    """The ceiling cells of each row: transport tables have ceiling p50, GB/s and ratio after physical (columns
    7-9, 1-based); the layer table has the ceiling p50 and ceiling / step before #wrong."""
    for row in rows:
        cells = row[6:9] if op != "layer" else row[-3:-1]
        try:
            values = [float(c) for c in cells]
        except ValueError:
            return f"table row without a ceiling: {' '.join(row)}"
        # The times and the ratio are positive; GB/s is printed with two decimals and reads 0.00 when a loaded
        # machine stretches a small copy past a few milliseconds.
        if not (all(v > 0 for v in (values[0], values[-1])) and all(v >= 0 for v in values)):
            return f"table row with a ceiling time or ratio <= 0: {' '.join(row)}"
    return None


def main(op, results_path, table_path, series):
    with open(results_path, encoding="utf-8") as f:
        cases = json.load(f)["results"]
    if len(cases) != series * len(TOKENS):
        return fail(f"{len(cases)} cases, expected {series} series x {len(TOKENS)} token counts")
    for i, case in enumerate(cases):
        if case["op"] != op:
            return fail(f"results[{i}].op is {case['op']!r}, expected {op!r}")
        problem = check_case(i, case)
        if problem:
            return fail(problem)
    rows = table_rows(table_path)
    if len(rows) != len(cases):
        return fail(f"{len(rows)} table rows for {len(cases)} cases")
    problem = check_rows(op, rows)
    if problem:
        return fail(problem)
    print(f"check_ceiling: {len(cases)} {op} cases and rows carry their ceiling")
    return 0


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    if len(sys.argv) == 6:
        KIND[0] = sys.argv[5]
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
