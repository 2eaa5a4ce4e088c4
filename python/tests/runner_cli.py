#!/usr/bin/env python3
"""`python3 -m epsuite.check` end to end under mpirun (docs/plugins.md 15.5). pytest-style `test_<case>(run)`
functions; `main` runs the one named on the command line.

usage: runner_cli.py CASE --mpirun M --python P --epsuite EXE --schema S --validator V --workdir DIR [--np N]

CASE gloo: the example adapter over torch.distributed gloo at N ranks: every conformance case passes (3 contracts x
  2 dtypes x 7 workloads), the checked bench sweep writes a results document that is valid against the schema,
  that `epsuite compare` accepts against itself and `epsuite plot` draws.
CASE broken: adapters returning a row too few, float64 weights, a flipped bit, or raising in combine: the cases fail
  (exit 1) naming the array and the shape it must have, the mismatch, or the exception; the runner never crashes.
CASE usage: a backend that cannot be imported, a class that is not there and declarations outside the contract exit
  2 with one message.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ADAPTER = "epsuite.adapters.torch_alltoall:AllToAllAdapter"


class Runner:
    def __init__(self, args):
        self.args = args
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)

    def path(self, name):
        return os.path.join(self.args.workdir, name)

    def check(self, np_, *argv, timeout=600):
        command = [self.args.mpirun, "-np", str(np_), "--map-by", ":OVERSUBSCRIBE", "-x", "PYTHONPATH",
                   self.args.python, "-m", "epsuite.check", *argv]
        return self.command(command, timeout)

    def command(self, command, timeout=120):
        start = time.monotonic()
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.args.workdir)
        print(f"$ {' '.join(command)}\n  -> exit {p.returncode} in {time.monotonic() - start:.1f} s")
        return p


def expect(condition, what, process=None):
    if condition:
        return
    if process is not None:
        print(f"--- stdout ---\n{process.stdout[-8000:]}\n--- stderr ---\n{process.stderr[-8000:]}")
    raise AssertionError(what)


def test_gloo(run):
    out = run.path("results.json")
    # readme-command: PYTHONPATH=build/python mpirun -np 4 --map-by :OVERSUBSCRIBE /usr/bin/python3 -m epsuite.check --backend epsuite.adapters.torch_alltoall:AllToAllAdapter --bench -c --out epsuite-out-torch.json
    # (at 2 and 4 ranks, with -n 3 -w 1: fewer iterations; PYTHONPATH reaches the ranks through -x)
    p = run.check(run.args.np, "--backend", ADAPTER, "--bench", "-c", "-n", "3", "-w", "1", "--out", out)
    expect(p.returncode == 0, f"the example adapter passes (exit 0), got {p.returncode}", p)
    summary = re.search(r"# conformance: (\d+) passed, (\d+) failed", p.stdout)
    expect(summary is not None and summary.group(1) == "42" and summary.group(2) == "0",
           "every case ran and passed: 3 contracts x 2 dtypes x 7 workloads", p)
    expect("Traceback" not in p.stderr, "nothing raised", p)
    v = run.command([run.args.python, run.args.validator, run.args.schema, out])
    expect(v.returncode == 0, "the results document is valid against the schema", v)
    with open(out) as f:
        cases = json.load(f)["results"]
    expect(len(cases) == 12, f"2 contracts x 2 ops x the smoke preset's 3 token counts = 12 bench cases, got "
                             f"{len(cases)}")
    expect(all(c["transport"] == "python:torch-alltoall" and c["check"]["passed"] for c in cases),
           "every bench case is the adapter's and checked")
    c = run.command([run.args.epsuite, "compare", out, out])
    expect(c.returncode == 0, "epsuite compare reads it (against itself: no regression)", c)
    plot = run.command([run.args.epsuite, "plot", out, "--out", run.path("plots")])
    expect(plot.returncode == 0 and os.path.exists(run.path("plots/plots.json")), "epsuite plot draws it", plot)


def test_broken(run):
    cases = {
        "DropsARow": r"recv_x: expected uint16 or int16 \[(\d+), 256\] \(bf16 bit patterns\), got int16 \[(\d+), 256\]",
        "WeightsInDouble": r"recv_topk_weights: expected float32 \[\d+, 4\], got float64 \[\d+, 4\]",
        "FlipsABit": r"(recv_x|packed_recv_x) rank \d src \(\d+, \d+\) column 0: expected 0x[0-9a-f]+ actual",
        "CombineRaises": r"combine: RuntimeError: this adapter's combine always fails \(broken_adapters\.py:\d+\)",
    }
    for adapter, wanted in cases.items():
        p = run.check(2, "--backend", f"broken_adapters:{adapter}", "--workload", "uniform", "--dtypes", "bf16",
                      timeout=300)
        expect(p.returncode == 1, f"{adapter}: the cases fail with exit 1, got {p.returncode}", p)
        expect(re.search(r"\[  FAILED  \] [a-z-]+/[a-z-]+/bf16/uniform: rank \d: .*" + wanted, p.stdout),
               f"{adapter}: the failure names what is wrong ({wanted})", p)
        expect("Traceback" not in p.stderr and "epsuite.check: FAIL (exit 1)" in p.stdout,
               f"{adapter}: the runner itself did not crash", p)
        summary = re.search(r"# conformance: (\d+) passed, (\d+) failed", p.stdout)
        expect(summary is not None and int(summary.group(1)) + int(summary.group(2)) == 3,
               f"{adapter}: every case ran", p)


def test_usage(run):
    for argv, wanted in ((["--backend", "no_such_module:X"], "--backend: cannot import module 'no_such_module'"),
                         (["--backend", "epsuite.adapters.torch_alltoall:Nope"],
                          "--backend: module 'epsuite.adapters.torch_alltoall' has no 'Nope'"),
                         (["--backend", "broken_adapters"], "--backend: expected MODULE:CLASS"),
                         (["--backend", "broken_adapters:BadDeclarations"],
                          "capabilities.layouts: must be a list of ht-rank-major, ht-expert-major, ll")):
        p = run.check(1, *argv)
        expect(p.returncode == 2, f"{argv}: exit 2, got {p.returncode}", p)
        expect(wanted in p.stderr and p.stderr.count("error:") == 1, f"{argv}: one message: {wanted}", p)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("case", "--mpirun", "--python", "--epsuite", "--schema", "--validator", "--workdir"):
        parser.add_argument(flag)
    parser.add_argument("--np", type=int, default=2)
    args = parser.parse_args()
    test = globals().get("test_" + args.case.replace("-", "_"))
    if test is None:
        parser.error(f"unknown case {args.case}")
    try:
        test(Runner(args))
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    print(f"runner_cli.py {args.case}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
