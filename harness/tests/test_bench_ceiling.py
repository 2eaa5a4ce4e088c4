"""Every row of a real `epsuite bench` run carries the machine's ceiling (docs/results.md 9.4, perf/bench/ceiling.hpp)
(ctest bench_ceiling_<case>). Two ranks on one node, two token counts, -c (the ceiling's copies are checked byte
for byte too); the results document must be schema-valid.

Per case of the document: ceiling {us, gbps, ratio, kind} with us > 0 and ratio > 0, kind "shm-copy" (every rank
on one node) or "fabric" (--ceiling fabric, the fabric ceiling that runs across nodes use), gbps = bytes.algo / us
and ratio = us / stats.p50 (recomputed here), stats.p10 <= p50 <= p90, the check passed; 2 token counts (64, 128)
per series. Per table row: the ceiling cells are numbers, not N/A, and there is one row per case.
"""

import pytest

from support import table_rows

TOKENS = [64, 128]
# case -> (op, --transport and the flags after it, series, ceiling kind)
CASES = {
    "dispatch": ("dispatch", ["mpi,direct", "--fabric", "shm"], 2, "shm-copy"),
    "combine": ("combine", ["mpi"], 1, "shm-copy"),
    "roundtrip": ("roundtrip", ["mpi"], 1, "shm-copy"),
    "layer": ("layer", ["mpi"], 1, "shm-copy"),
    # The fabric ceiling on one node: the row's bytes as raw puts of the unordered chaos(shm) fabric (immediates
    # after the local completions) and of libfabric:tcp when built.
    "dispatch-fabric-shm": ("dispatch", ["direct", "--fabric", "shm", "--ceiling", "fabric", "--chaos", "seed=5"], 1,
                            "fabric"),
    "dispatch-fabric-libfabric-tcp": ("dispatch", ["direct", "--fabric", "libfabric:tcp", "--ceiling", "fabric"], 1,
                                      "fabric"),
    "layer-fabric-shm": ("layer", ["mpi", "--fabric", "shm", "--ceiling", "fabric"], 1, "fabric"),
}


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def check_case(i, case, kind):
    ceiling = case.get("ceiling")
    assert isinstance(ceiling, dict), f"results[{i}] has no ceiling"
    assert ceiling.get("kind") == kind, f"results[{i}].ceiling.kind is {ceiling.get('kind')!r}, expected {kind!r}"
    us, gbps, ratio = ceiling["us"], ceiling["gbps"], ceiling["ratio"]
    assert us > 0 and ratio > 0, f"results[{i}].ceiling: us {us} and ratio {ratio} must be > 0"
    assert close(gbps, case["bytes"]["algo"] / (us * 1e3)), f"results[{i}].ceiling.gbps {gbps} is not bytes.algo / us"
    stats = case["stats"]
    assert close(ratio, us / stats["p50"]), f"results[{i}].ceiling.ratio {ratio} is not us / stats.p50"
    assert stats["p10"] <= stats["p50"] <= stats["p90"], f"results[{i}].stats: {stats} out of order"
    assert case["check"] is not None and case["check"]["passed"], f"results[{i}] not checked, or failed"


def check_row(op, row):
    """Transport tables have the ceiling p50, GB/s and ratio after physical (columns 7-9, 1-based); the layer table
    has the ceiling p50 and ceiling / step before #wrong."""
    cells = row[6:9] if op != "layer" else row[-3:-1]
    try:
        values = [float(c) for c in cells]
    except ValueError:
        pytest.fail(f"table row without a ceiling: {' '.join(row)}")
    # The times and the ratio are positive; GB/s is printed with two decimals and reads 0.00 when a loaded machine
    # stretches a small copy past a few milliseconds.
    assert values[0] > 0 and values[-1] > 0 and all(v >= 0 for v in values), \
        f"table row with a ceiling time or ratio <= 0: {' '.join(row)}"


@pytest.mark.parametrize("case", list(CASES))
def test_ceiling(mpirun, epsuite, build, results_schema, tmp_path, case):
    op, transports, series, kind = CASES[case]
    if "libfabric:tcp" in transports and "libfabric" not in build.fabric_backends:
        pytest.skip("libfabric is not built")
    json_path = tmp_path / "out.json"
    result = mpirun(2, epsuite, "bench", op, "--transport", *transports, "--tokens", ",".join(map(str, TOKENS)), "-n",
                    "3", "-w", "1", "-c", "--json", json_path)
    assert result.returncode == 0, f"epsuite bench {op} exited {result.returncode}"
    cases = results_schema.check(json_path)["results"]
    assert len(cases) == series * len(TOKENS), f"{len(cases)} cases, expected {series} series x {len(TOKENS)} tokens"
    for i, case_doc in enumerate(cases):
        assert case_doc["op"] == op, f"results[{i}].op is {case_doc['op']!r}, expected {op!r}"
        check_case(i, case_doc, kind)
    rows = table_rows(result.stdout)
    assert len(rows) == len(cases), f"{len(rows)} table rows for {len(cases)} cases"
    for row in rows:
        check_row(op, row)
