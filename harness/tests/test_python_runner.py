"""`python3 -m epsuite.check` end to end under mpirun (docs/plugins.md 15.5), the Python bridge built and the test
adapters of python/tests/broken_adapters.py on the path (ctest python_runner_<case>):

- gloo: the example adapter over torch.distributed gloo at 2 and 4 ranks: every conformance case passes (3 contracts
  x 2 dtypes x 7 workloads), the checked bench sweep writes a results document that is valid against the schema, that
  `epsuite compare` accepts against itself and `epsuite plot` draws;
- broken: adapters returning a row too few, float64 weights, a flipped bit, or raising in combine: the cases fail
  (exit 1) naming the array and the shape it must have, the mismatch, or the exception; the runner never crashes;
- usage: a backend that cannot be imported, a class that is not there and declarations outside the contract exit 2
  with one message.
"""

import os
import re

import pytest

from support import load_json, run

ADAPTER = "epsuite.adapters.torch_alltoall:AllToAllAdapter"
CONFORMANCE_SUMMARY = re.compile(r"# conformance: (\d+) passed, (\d+) failed")


def check(mpirun, python_bridge, np, *argv, cwd, timeout=600):
    """`python3 -m epsuite.check ARGV` on np ranks, the package reaching every rank through -x PYTHONPATH."""
    return mpirun(np, python_bridge.python, "-m", "epsuite.check", *argv, extra=["-x", "PYTHONPATH"],
                  env=python_bridge.environment, cwd=cwd, timeout=timeout)


@pytest.mark.parametrize("np", [2, 4], ids=["np2", "np4"])
def test_gloo(mpirun, python_bridge, epsuite, results_schema, tmp_path, np):
    out = tmp_path / "results.json"
    # readme-command: PYTHONPATH=build/python mpirun -np 4 --map-by :OVERSUBSCRIBE /usr/bin/python3 -m epsuite.check --backend epsuite.adapters.torch_alltoall:AllToAllAdapter --bench -c --out epsuite-out-torch.json
    # (at 2 and 4 ranks, with -n 3 -w 1: fewer iterations; PYTHONPATH reaches the ranks through -x)
    p = check(mpirun, python_bridge, np, "--backend", ADAPTER, "--bench", "-c", "-n", "3", "-w", "1", "--out", out,
              cwd=tmp_path)
    assert p.returncode == 0, f"the example adapter passes (exit 0), got {p.returncode}"
    summary = CONFORMANCE_SUMMARY.search(p.stdout)
    assert summary is not None and summary.groups() == ("42", "0"), \
        "every case ran and passed: 3 contracts x 2 dtypes x 7 workloads"
    assert "Traceback" not in p.stderr, "nothing raised"
    cases = results_schema.check(out)["results"]
    assert len(cases) == 12, f"2 contracts x 2 ops x the smoke preset's 3 token counts = 12 bench cases, got {len(cases)}"
    assert all(c["transport"] == "python:torch-alltoall" and c["check"]["passed"] for c in cases), \
        "every bench case is the adapter's and checked"
    c = run([epsuite, "compare", out, out], timeout=120, cwd=tmp_path)
    assert c.returncode == 0, "epsuite compare reads it (against itself: no regression)"
    plot = run([epsuite, "plot", out, "--out", tmp_path / "plots"], timeout=120, cwd=tmp_path)
    assert plot.returncode == 0 and os.path.exists(tmp_path / "plots" / "plots.json"), "epsuite plot draws it"


BROKEN = {
    "DropsARow": r"recv_x: expected uint16 or int16 \[(\d+), 256\] \(bf16 bit patterns\), got int16 \[(\d+), 256\]",
    "WeightsInDouble": r"recv_topk_weights: expected float32 \[\d+, 4\], got float64 \[\d+, 4\]",
    "FlipsABit": r"(recv_x|packed_recv_x) rank \d src \(\d+, \d+\) column 0: expected 0x[0-9a-f]+ actual",
    "CombineRaises": r"combine: RuntimeError: this adapter's combine always fails \(broken_adapters\.py:\d+\)",
}


@pytest.mark.parametrize("adapter", list(BROKEN))
def test_broken(mpirun, python_bridge, tmp_path, adapter):
    p = check(mpirun, python_bridge, 2, "--backend", f"broken_adapters:{adapter}", "--workload", "uniform",
              "--dtypes", "bf16", cwd=tmp_path, timeout=300)
    assert p.returncode == 1, f"{adapter}: the cases fail with exit 1, got {p.returncode}"
    assert re.search(r"\[  FAILED  \] [a-z-]+/[a-z-]+/bf16/uniform: rank \d: .*" + BROKEN[adapter], p.stdout), \
        f"{adapter}: the failure names what is wrong ({BROKEN[adapter]})"
    assert "Traceback" not in p.stderr and "epsuite.check: FAIL (exit 1)" in p.stdout, \
        f"{adapter}: the runner itself did not crash"
    summary = CONFORMANCE_SUMMARY.search(p.stdout)
    assert summary is not None and int(summary.group(1)) + int(summary.group(2)) == 3, f"{adapter}: every case ran"


@pytest.mark.parametrize("argv, wanted", [
    pytest.param(["--backend", "no_such_module:X"], "--backend: cannot import module 'no_such_module'",
                 id="no-module"),
    pytest.param(["--backend", "epsuite.adapters.torch_alltoall:Nope"],
                 "--backend: module 'epsuite.adapters.torch_alltoall' has no 'Nope'", id="no-class"),
    pytest.param(["--backend", "broken_adapters"], "--backend: expected MODULE:CLASS", id="no-colon"),
    pytest.param(["--backend", "broken_adapters:BadDeclarations"],
                 "capabilities.layouts: must be a list of ht-rank-major, ht-expert-major, ll", id="bad-declarations"),
])
def test_usage(mpirun, python_bridge, tmp_path, argv, wanted):
    p = check(mpirun, python_bridge, 1, *argv, cwd=tmp_path, timeout=120)
    assert p.returncode == 2, f"{argv}: exit 2, got {p.returncode}"
    assert wanted in p.stderr and p.stderr.count("error:") == 1, f"{argv}: one message: {wanted}"
