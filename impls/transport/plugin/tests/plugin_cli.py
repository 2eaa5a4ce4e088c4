#!/usr/bin/env python3
"""`--transport plugin:NAME|PATH` end to end (docs/plugins.md), under mpirun with the loopback-only environment
ctest gives it. Each case is a pytest-style `test_<case>(run)` function; `main` runs the one named on the command
line.

usage: plugin_cli.py CASE --mpirun M --epsuite EXE --plugins DIR --workdir DIR

CASE open-order: the test plugin reversing the rows inside every block passes the transport suite when it declares
  the order open and fails it (exit 1, the dispatch checks) when it declares it fixed (SPEC 14.3).
CASE refused: plugins of another ABI version, without the v1 symbol, with a NULL entry or with bad declarations, and
  a name found nowhere, are refused by check (and the first also by bench and soak) with exit 2 and one message
  naming what is wrong.
CASE faults: a plugin call that returns an error fails its cases with the plugin's message and the suite goes on
  (exit 1); one that hangs ends the job after the deadline, and one that crashes ends it at once, both with exit 3
  and a message naming the plugin and the call.
CASE bench: `epsuite bench dispatch -c` of the `mpi` transport and of the same transport through the ABI, found by
  name through EPSUITE_PLUGIN_PATH, in one run: both checked, both in the results document.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class Runner:
    def __init__(self, args):
        self.args = args
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)

    def plugin(self, name):
        return os.path.join(self.args.plugins, f"libepsuite-plugin-{name}.so")

    def __call__(self, np, *argv, env=None, timeout=240):
        command = [self.args.mpirun, "-np", str(np), "--map-by", ":OVERSUBSCRIBE"]
        for name in (env or {}):
            command += ["-x", name]
        command += [self.args.epsuite, *argv]
        start = time.monotonic()
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.args.workdir,
                           env={**os.environ, **(env or {})})
        p.seconds = time.monotonic() - start
        p.stdout = ANSI_ESCAPE.sub("", p.stdout)
        p.stderr = ANSI_ESCAPE.sub("", p.stderr)
        print(f"$ {' '.join(f'{k}={v}' for k, v in (env or {}).items())} {' '.join(command)}\n"
              f"  -> exit {p.returncode} in {p.seconds:.1f} s")
        return p


def expect(condition, what, process=None):
    if condition:
        return
    if process is not None:
        print(f"--- stdout ---\n{process.stdout[-6000:]}\n--- stderr ---\n{process.stderr[-6000:]}")
    raise AssertionError(what)


def test_open_order(run):
    spec = "plugin:" + run.plugin("test-mpi")
    only = "--gtest_filter=*TransportContract*_uniform"
    permuted = {"EPS_TEST_PLUGIN_PERMUTE": "1", "EPS_TEST_PLUGIN_ORDER": "open"}
    p = run(3, "check", "--transport", spec, only, env=permuted)
    expect(p.returncode == 0, f"permuted rows declared open must pass, got exit {p.returncode}", p)
    passed = re.search(r"\[  PASSED  \] (\d+) tests", p.stdout)
    expect(passed is not None and int(passed.group(1)) >= 8, "every contract of the plugin ran", p)

    p = run(3, "check", "--transport", spec, only, env={"EPS_TEST_PLUGIN_PERMUTE": "1"})
    expect(p.returncode == 1, f"permuted rows declared fixed must fail with exit 1, got {p.returncode}", p)
    for layout in ("ht-rank-major", "ht-expert-major", "ll"):
        expect(f"{layout} dispatch" in p.stdout, f"the fixed-order {layout} dispatch check fails", p)
    expect("combine (docs/dispatch.md 5.5)" not in p.stdout, "combine stays right under the permutation", p)


def test_refused(run):
    cases = {
        run.plugin("bad-version"): "table has abi_version 2, this epsuite speaks version 1",
        run.plugin("other-version"): "it has no symbol eps_ep_plugin_v1, only eps_ep_plugin_v2",
        run.plugin("null-entry"): "entry 'combine' of its eps_ep_plugin_v1 table is NULL",
        run.plugin("bad-trees"): "properties.trees: ht-rank and ht-two-level follow ht-rank-major",
        "no-such-plugin": "libepsuite-plugin-no-such-plugin.so is neither in EPSUITE_PLUGIN_PATH nor on the "
                          "library path",
    }
    for i, (spec, message) in enumerate(cases.items()):
        commands = [["check"]] + ([["bench", "dispatch"], ["soak", "--seeds", "1"]] if i == 0 else [])
        for command in commands:
            p = run(1, *command, "--transport", f"mpi,plugin:{spec}")
            expect(p.returncode == 2, f"{command[0]} --transport plugin:{spec} must exit 2, got {p.returncode}", p)
            expect(message in p.stderr, f"{command[0]}: the refusal names what is wrong: {message}", p)
            expect(p.stderr.count("epsuite: error") == 1, f"{command[0]}: one message", p)


def test_faults(run):
    spec = "plugin:" + run.plugin("test-mpi")
    only = "--gtest_filter=*TransportContract*_uniform"
    p = run(2, "check", "--transport", spec, only, env={"EPS_TEST_PLUGIN_FAULT": "error:combine"})
    expect(p.returncode == 1, f"a plugin error fails the cases (exit 1), got {p.returncode}", p)
    failed = re.search(r"\[  FAILED  \] (\d+) tests?, listed below", p.stdout)
    expect(failed is not None and int(failed.group(1)) >= 8, "every case ran and failed: the suite went on", p)
    expect("plugin:test-mpi combine: injected failure (EPS_TEST_PLUGIN_FAULT=error:combine)" in p.stdout,
           "the case names the plugin's message", p)

    p = run(2, "check", "--transport", spec, "--timeout", "2", only, env={"EPS_TEST_PLUGIN_FAULT": "hang:dispatch"},
            timeout=60)
    expect(p.returncode == 3, f"a hung plugin call ends the job with exit 3, got {p.returncode}", p)
    expect(p.seconds < 40, f"the deadline (2 s + 2 s) ends it, not ctest's timeout ({p.seconds:.0f} s)", p)
    expect(re.search(r"plugin:test-mpi \(.*libepsuite-plugin-test-mpi\.so\): dispatch did not return within 4\.0 s",
                     p.stderr), "the message names the plugin and the call", p)

    p = run(2, "check", "--transport", spec, only, env={"EPS_TEST_PLUGIN_FAULT": "crash:combine:1"}, timeout=60)
    expect(p.returncode == 3, f"a crash in a plugin call ends the job with exit 3, got {p.returncode}", p)
    expect(re.search(r"error on host .*, rank 1: plugin:test-mpi \(.*\) crashed in combine: signal 11 \(SIGSEGV\)",
                     p.stderr), "the message names the rank, the plugin, the call and the signal", p)


def test_bench(run):
    out = os.path.join(run.args.workdir, "bench.json")
    p = run(2, "bench", "dispatch", "--transport", "mpi,plugin:test-mpi", "-c", "-n", "3", "-w", "1", "--json", out,
            env={"EPSUITE_PLUGIN_PATH": run.args.plugins})
    expect(p.returncode == 0, f"bench of mpi and plugin:test-mpi passes, got {p.returncode}", p)
    with open(out) as f:
        cases = json.load(f)["results"]
    transports = sorted({c["transport"] for c in cases})
    expect(transports == ["mpi", "plugin:test-mpi"], f"both transports are in the results, got {transports}")
    expect(all(c["check"] is not None and c["check"]["passed"] for c in cases), "every case is checked and passes")
    expect("plugin:test-mpi (" in p.stdout and "ABI v1" in p.stdout, "the header names the plugin's file and ABI", p)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case")
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--epsuite", required=True)
    parser.add_argument("--plugins", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    test = globals().get("test_" + args.case.replace("-", "_"))
    if test is None:
        parser.error(f"unknown case {args.case}")
    try:
        test(Runner(args))
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    print(f"plugin_cli.py {args.case}: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
