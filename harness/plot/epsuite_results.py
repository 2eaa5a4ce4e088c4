#!/usr/bin/env python3
"""The one Python reader of epsuite results documents (docs/results.md 9.1, 9.6), used by epsuite_plot.py and
epsuite_report.py (the build copies the three next to the executable, in <dir of epsuite>/plot/).

read_document(path) reads a document and refuses, with InputError naming the file and field, an unreadable
file, invalid or truncated JSON, a foreign document (no schema_version), a schema version newer than
SCHEMA_VERSION, and a results value that is not a list. parse_case(path, index, case) reduces one case to the
values the plots and the report show:
  op, transport, mode, dtype, sizes, tokens (sizes.tokens, None when absent), p50_us, p99_us, algo_gbps,
  physical_gbps, band_gbps (bytes / p90, bytes / p10; p10 read back from times_us in files of older builds),
  ceiling (docs/results.md 9.4: {us, gbps, ratio, kind}, None when the case has none), identity (sorted
  (key, text) pairs, () in older files), oversubscribed (docs/results.md 9.5; False when absent), check (null or
  {passed, mismatches, first_mismatch} as written), and the op's own fields (docs/results.md 9.6):
  layer  (op layer, else None): phases_us {phase: µs}, tokens_per_s, mask_ratio, expert_load (per expert,
         summed over layers), balancedness (the minimum over layers), dropped_pairs and dropped_tokens (summed
         over layers);
  eplb   (op eplb, else None): policy, window, first_step, last_step, plan, predicted and realized β, step_us
         (stats.mean), switches, moved_experts {class: count}, moved_mb (all classes), stall_us, planner_us and
         rebalances [{switch_step, mb: {class: MB}}].
A case without a field it needs (a number below 0, a list that is empty) is an InputError naming the field:
"FILE: results[I].phases_us.shared: missing".
"""
import json

SCHEMA_VERSION = 1
LAYER_OP = "layer"
EPLB_OP = "eplb"
# The op fields' names, as the schema declares them (results/schema/results-v1.schema.json, $defs/<op>_fields).
PHASES_US = "phases_us"
PHASES = ("route", "dispatch", "expert", "combine", "shared")
TOKENS_PER_S = "tokens_per_s"
MASK_RATIO = "mask_ratio"
EXPERT_LOAD = "expert_load"
BALANCEDNESS = "balancedness"
DROPPED_PAIRS = "dropped_pairs"
DROPPED_TOKENS = "dropped_tokens"
POLICY = "policy"
WINDOW = "window"
FIRST_STEP = "first_step"
LAST_STEP = "last_step"
PLAN = "plan"
PREDICTED = "predicted"
REALIZED = "realized"
SWITCHES = "switches"
MOVED_EXPERTS = "moved_experts"
MOVED_BYTES = "moved_bytes"
MOVE_CLASSES = ("same_rank", "same_node", "cross_node")
STALL_US = "stall_us"
PLANNER_US = "planner_us"
REBALANCES = "rebalances"
SWITCH_STEP = "switch_step"


class InputError(Exception):
    pass


def read_document(path):
    """The document at path as read from JSON, its schema version and results list checked."""
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
    if not isinstance(document.get("results"), list):
        raise InputError(f"{path}: results: must be a list of cases")
    return document


def field(path, index, case, *keys):
    value = case
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise InputError(f"{path}: results[{index}].{'.'.join(keys)}: missing")
        value = value[key]
    return value


def number(path, index, case, *keys):
    return non_negative(path, index, ".".join(keys), field(path, index, case, *keys))


def non_negative(path, index, where, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise InputError(f"{path}: results[{index}].{where}: must be a number >= 0, got {value!r}")
    return value


def number_list(path, index, value, where):
    if not isinstance(value, list) or not value:
        raise InputError(f"{path}: results[{index}].{where}: must be a non-empty list of numbers")
    return [float(non_negative(path, index, f"{where}[{i}]", v)) for i, v in enumerate(value)]


def nearest_rank(sorted_values, p):
    """docs/results.md 9.1 nearest-rank percentile: the ceil(p/100 * n)-th smallest (1-based)."""
    rank = -(-p * len(sorted_values) // 100)
    return sorted_values[min(max(int(rank), 1), len(sorted_values)) - 1]


def band_gbps(path, index, case):
    """(bytes / p90, bytes / p10) in GB/s: the spread of the bandwidth over the repetitions. p10 is in the stats
    of newer files; older ones give it from times_us."""
    algo_bytes = float(number(path, index, case, "bytes", "algo"))
    p90 = float(number(path, index, case, "stats", "p90"))
    stats = field(path, index, case, "stats")
    if "p10" in stats:
        p10 = float(number(path, index, case, "stats", "p10"))
    else:
        p10 = nearest_rank(sorted(number_list(path, index, case.get("times_us"), "times_us")), 10)
    return (algo_bytes / (p90 * 1e3) if p90 > 0 else 0.0, algo_bytes / (p10 * 1e3) if p10 > 0 else 0.0)


def parse_ceiling(path, index, case):
    """The case's ceiling (docs/results.md 9.4) as {"us", "gbps", "ratio", "kind"}; None when the case has none
    (not measured, or a file of an older build)."""
    if "ceiling" not in case:
        return None
    kind = field(path, index, case, "ceiling", "kind")
    if kind not in ("shm-copy", "fabric"):
        raise InputError(f"{path}: results[{index}].ceiling.kind: must be shm-copy or fabric, got {kind!r}")
    return {"us": float(number(path, index, case, "ceiling", "us")),
            "gbps": float(number(path, index, case, "ceiling", "gbps")),
            "ratio": float(number(path, index, case, "ceiling", "ratio")), "kind": kind}


def identity_of(case):
    """The rest of the case identity (docs/results.md 9.3) as sorted (key, text) pairs; () in older files."""
    identity = case.get("identity")
    if not isinstance(identity, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in identity.items()))


def parse_case(path, index, case):
    if not isinstance(case, dict):
        raise InputError(f"{path}: results[{index}]: must be a case object")
    sizes = field(path, index, case, "sizes")
    tokens = sizes.get("tokens") if isinstance(sizes, dict) else None
    return {"op": str(field(path, index, case, "op")),
            "transport": str(field(path, index, case, "transport")),
            "mode": str(field(path, index, case, "mode")),
            "dtype": str(field(path, index, case, "dtype")),
            "tokens": None if tokens is None else int(number(path, index, case, "sizes", "tokens")),
            "p50_us": float(number(path, index, case, "stats", "p50")),
            "p99_us": float(number(path, index, case, "stats", "p99")),
            "algo_gbps": float(number(path, index, case, "bandwidth_gbps", "algo")),
            "physical_gbps": float(number(path, index, case, "bandwidth_gbps", "physical")),
            "band_gbps": band_gbps(path, index, case),
            "ceiling": parse_ceiling(path, index, case),
            "sizes": sizes if isinstance(sizes, dict) else {},
            "identity": identity_of(case),
            "oversubscribed": case.get("oversubscribed") is True,
            "check": case.get("check"),
            "layer": parse_layer(path, index, case) if case.get("op") == LAYER_OP else None,
            "eplb": parse_eplb(path, index, case) if case.get("op") == EPLB_OP else None}


def parse_layer(path, index, case):
    """The layer step's own fields: phases, tokens/s, the mask ratio, the expert load summed over layers, β as
    the minimum over layers (the worst layer bounds the step) and the drops summed over layers."""
    loads = field(path, index, case, EXPERT_LOAD)
    if not isinstance(loads, list) or not loads:
        raise InputError(f"{path}: results[{index}].{EXPERT_LOAD}: must be a non-empty [layer][expert] table")
    per_layer = [number_list(path, index, row, f"{EXPERT_LOAD}[{i}]") for i, row in enumerate(loads)]
    if len({len(row) for row in per_layer}) != 1:
        raise InputError(f"{path}: results[{index}].{EXPERT_LOAD}: the layers list different expert counts")
    balancedness = number_list(path, index, field(path, index, case, BALANCEDNESS), BALANCEDNESS)
    return {"phases_us": {p: float(number(path, index, case, PHASES_US, p)) for p in PHASES},
            "tokens_per_s": float(number(path, index, case, TOKENS_PER_S)),
            "mask_ratio": float(number(path, index, case, MASK_RATIO)),
            "expert_load": [sum(column) for column in zip(*per_layer)],
            "balancedness": min(balancedness),
            "dropped_pairs": sum(number_list(path, index, field(path, index, case, DROPPED_PAIRS), DROPPED_PAIRS)),
            "dropped_tokens": sum(number_list(path, index, field(path, index, case, DROPPED_TOKENS),
                                              DROPPED_TOKENS))}


def parse_eplb(path, index, case):
    """The EPLB window's own fields: policy, the window and its steps, the plan in force, β predicted and
    realized, the mean step time, and the rebalances that switched in it (their moves, stall and planner time)."""
    policy = field(path, index, case, POLICY)
    if not isinstance(policy, str) or not policy:
        raise InputError(f"{path}: results[{index}].{POLICY}: must be a policy name, got {policy!r}")
    rebalances = field(path, index, case, REBALANCES)
    if not isinstance(rebalances, list):
        raise InputError(f"{path}: results[{index}].{REBALANCES}: must be a list")
    moves = []
    for i, r in enumerate(rebalances):
        def moved(*keys):
            value = r
            for key in keys:
                if not isinstance(value, dict) or key not in value:
                    raise InputError(f"{path}: results[{index}].{REBALANCES}[{i}].{'.'.join(keys)}: missing")
                value = value[key]
            return non_negative(path, index, f"{REBALANCES}[{i}].{'.'.join(keys)}", value)
        moves.append({"switch_step": int(moved(SWITCH_STEP)),
                      "mb": {k: float(moved(MOVED_BYTES, k)) / 1e6 for k in MOVE_CLASSES}})
    return {"policy": policy,
            "window": int(number(path, index, case, WINDOW)),
            "first_step": int(number(path, index, case, FIRST_STEP)),
            "last_step": int(number(path, index, case, LAST_STEP)),
            "plan": int(number(path, index, case, PLAN)),
            "predicted": float(number(path, index, case, BALANCEDNESS, PREDICTED)),
            "realized": float(number(path, index, case, BALANCEDNESS, REALIZED)),
            "step_us": float(number(path, index, case, "stats", "mean")),
            "switches": int(number(path, index, case, SWITCHES)),
            "moved_experts": {k: float(number(path, index, case, MOVED_EXPERTS, k)) for k in MOVE_CLASSES},
            "moved_mb": sum(float(number(path, index, case, MOVED_BYTES, k)) for k in MOVE_CLASSES) / 1e6,
            "stall_us": float(number(path, index, case, STALL_US)),
            "planner_us": float(number(path, index, case, PLANNER_US)),
            "rebalances": moves}


def read_cases(path):
    """Every case of the document at path, parsed: (document, [case, ...])."""
    document = read_document(path)
    return document, [parse_case(path, i, c) for i, c in enumerate(document["results"])]
