#!/usr/bin/env python3
"""One multi-node test on the virtual cluster (ci/vcluster, docs/fabrics.md 13): 2 nodes x 2 ranks.

    vcluster_case.py CASE --source DIR --build DIR --work DIR

Cases (each a ctest with label `vcluster`, sharing one cluster brought up by the `vcluster_up` fixture):

  fabric           the fabric suite over --fabric auto (shm inside a node, libfabric:tcp between nodes), plain
                   and under chaos: the auto cases must run, not skip
  transport-plain  the transport conformance over --fabric auto with every signal strategy (ht-two-level on
                   the two real nodes); the proxy transport too under imm-seq
  transport-chaos  the same under --chaos seed=7 with every strategy that tolerates reordering; the proxy
                   transport too under sender-barrier
  run-smoke        the README main command (`epsuite run --preset smoke`) across the nodes: exit 0, both
                   hosts in the platform block, the direct transport's fabric recorded as auto(shm+...)
  bench-tcp        `bench roundtrip` of direct over libfabric:tcp between the nodes against mpi, checked (-c),
                   every row with its fabric ceiling
  fault-cut        node1's link is cut during a bench: the job exits 3 within --timeout + 5 s, a rank names
                   the peer it waited for, and a results file written before the fault stays valid JSON
  fault-kill       one rank of node1 is SIGKILLed mid-dispatch (mpirun --enable-recovery): the same
  fault-slow       node1's link is slowed and lossy (netem delay 5ms loss 1%, or where the kernel has no
                   sch_netem a tbf rate limit whose short queue drops packets): results stay bit-exact

Exit codes: 0 pass, 1 fail, 77 unavailable (no namespaces here: ctest SKIP_RETURN_CODE).
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

SKIP = 77
TIMEOUT = 8.0  # --timeout of the fault runs
GRACE = 5.0  # the bound: every rank ends within --timeout + 5 s of the fault


class Failure(Exception):
    pass


class Cluster:
    def __init__(self, source, build, work):
        self.script = os.path.join(source, "ci", "vcluster")
        self.epsuite = os.path.join(build, "epsuite")
        self.build = build
        self.work = work

    def ctl(self, *args, check=True):
        done = subprocess.run([self.script, *args], capture_output=True, text=True)
        if check and done.returncode != 0:
            raise Failure(f"ci/vcluster {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def mpirun(self, args, extra=(), timeout=600):
        """Runs `ci/vcluster mpirun -np 4 [extra] args`; returns (rc, output, seconds)."""
        cmd = [self.script, "mpirun", "-np", "4", *extra, *args]
        print("$", " ".join(cmd), flush=True)
        start = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.work)
        output = done.stdout + done.stderr
        return done.returncode, output, time.monotonic() - start


class Watched:
    """An mpirun in the background whose output lines are time-stamped as they arrive."""

    def __init__(self, cluster, args, extra=()):
        cmd = [cluster.script, "mpirun", "-np", "4", *extra, *args]
        print("$", " ".join(cmd), flush=True)
        self.start = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=cluster.work, start_new_session=True)
        self.lines = []  # (seconds since start, text)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.start, line.rstrip("\n")))

    def wait_for(self, pattern, limit):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if any(re.search(pattern, text) for _, text in self.lines):
                return True
            if self.proc.poll() is not None and not self.reader.is_alive():
                return False
            time.sleep(0.05)
        return False

    def wait_end(self, limit):
        """Waits up to `limit` seconds for mpirun to end, without killing it."""
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            pass

    def finish(self, limit):
        """Waits up to `limit` seconds for mpirun; kills its session after that. Returns the exit code."""
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                return self.proc.wait()
        finally:
            self.reader.join(timeout=5)

    def text(self):
        return "\n".join(f"[{t:7.2f}s] {line}" for t, line in self.lines)


def expect(condition, message, output=""):
    if not condition:
        raise Failure(message + ("\n--- output ---\n" + output[-6000:] if output else ""))


def expect_ok(rc, output, what):
    expect(rc == 0, f"{what} exited {rc}", output)


# --- Conformance over the auto fabric ----------------------------------------------------------------------

def case_fabric(c):
    rc, out, secs = c.mpirun([os.path.join(c.build, "fabric_conformance"), "--fabric", "auto"])
    expect_ok(rc, out, "the fabric suite over auto")
    ran = re.findall(r"\[\s+OK \] Fabrics/\S+/(chaos_)?auto\b", out)
    # Atomics may be unavailable between nodes (libfabric:tcp keeps write ordering instead, docs/fabrics.md):
    # their cases skip, after SupportIsDeclaredAndRefusalsAreClear checked that the refusal is clear.
    skipped = re.findall(r"\[\s+SKIPPED \] Fabrics/(?!FabricAtomics\.|OrderedFabric\.Atomic)\S+/(chaos_)?auto\b", out)
    refusal = re.findall(r"\[\s+OK \] Fabrics/FabricAtomics\.SupportIsDeclaredAndRefusalsAreClear/(chaos_)?auto\b", out)
    expect(len(ran) > 0 and not skipped, f"auto cases: {len(ran)} ran, {len(skipped)} skipped", out)
    expect(len(refusal) == 2, "the atomics support case did not pass on auto and chaos(auto)", out)
    print(f"fabric suite over auto: {len(ran)} auto cases passed in {secs:.1f} s")


# The proxy transport runs beside direct for one strategy of each kind of run (each run of it adds about as
# much as direct's whole run on the 2-core cluster).
PROXY_SIGNALS = {False: "imm-seq", True: "sender-barrier"}


def transport_runs(c, signals, chaos):
    for sig in signals:
        transports = "direct,proxy" if sig == PROXY_SIGNALS[chaos] else "direct"
        args = [os.path.join(c.build, "transport_conformance"), "--transport", transports, "--fabric", "auto",
                "--signal", sig]
        if chaos:
            args += ["--chaos", "seed=7"]
        # The proxy across nodes is opt-in (docs/channel.md); ci/vcluster forwards EPS_* variables.
        os.environ["EPS_PROXY_ACROSS_NODES"] = "1" if "proxy" in transports else "0"
        rc, out, secs = c.mpirun(args)
        expect_ok(rc, out, f"transport conformance (signal {sig}{', chaos' if chaos else ''})")
        expect(re.search(r"\[\s+OK \] \S*[Hh]t_?[Tt]wo_?[Ll]evel|ht-two-level", out) is not None,
               "no ht-two-level case ran", out)
        if "proxy" in transports:
            expect(re.search(r"\[\s+OK \] \S+/proxy_", out) is not None and
                   re.search(r"\[\s+SKIPPED \] \S+proxy", out) is None,
                   "no proxy case ran across the nodes", out)
        passed = re.search(r"\[\s+PASSED\s+\] (\d+) test", out)
        print(f"signal {sig}{' under chaos' if chaos else ''} ({transports}): "
              f"{passed.group(1) if passed else '?'} tests passed in {secs:.1f} s")


def case_transport_plain(c):
    transport_runs(c, ["fabric-order", "imm-seq", "recv-count", "sender-barrier"], chaos=False)


def case_transport_chaos(c):
    transport_runs(c, ["imm-seq", "recv-count", "sender-barrier"], chaos=True)


# --- The main job and a bench across the nodes -------------------------------------------------------------

def case_run_smoke(c):
    out_dir = os.path.join(c.work, "run-smoke")
    rc, out, secs = c.mpirun([c.epsuite, "run", "--preset", "smoke", "--out", out_dir, "--force"])
    expect_ok(rc, out, "epsuite run --preset smoke")
    report = open(os.path.join(out_dir, "report.md"), encoding="utf-8").read()
    expect("node0" in report and "node1" in report, "the platform block does not list both hosts", report)
    fabrics = set()
    for name in os.listdir(out_dir):
        if name.startswith("bench-") and name.endswith(".json"):
            for case in json.load(open(os.path.join(out_dir, name), encoding="utf-8"))["results"]:
                if case.get("transport") == "direct":
                    fabrics.add(case.get("identity", {}).get("fabric"))
    expect(fabrics == {"auto(shm+libfabric:tcp)"}, f"direct recorded fabrics {sorted(fabrics)}")
    print(f"epsuite run --preset smoke on 2 nodes x 2 ranks: exit 0 in {secs:.1f} s; direct over {fabrics.pop()}")


def case_bench_tcp(c):
    json_path = os.path.join(c.work, "bench-tcp.json")
    rc, out, secs = c.mpirun([c.epsuite, "bench", "roundtrip", "--preset", "smoke", "--transport",
                              "mpi,direct", "--fabric", "libfabric:tcp", "-c", "--json", json_path])
    expect_ok(rc, out, "bench roundtrip over libfabric:tcp")
    cases = json.load(open(json_path, encoding="utf-8"))["results"]
    expect(all(k["check"]["mismatches"] == 0 for k in cases), "a checked case had mismatches", out)
    p50 = {}
    for k in cases:
        p50.setdefault(k["transport"], []).append(k["stats"]["p50"])
    expect(set(p50) == {"mpi", "direct"}, f"transports measured: {sorted(p50)}", out)
    # Across nodes every row carries the fabric ceiling (docs/results.md 9.4), its copies checked too.
    expect(all(k.get("ceiling", {}).get("kind") == "fabric" and k["ceiling"]["us"] > 0 for k in cases),
           "a case across nodes without its fabric ceiling", out)
    ratio = sum(p50["mpi"]) / sum(p50["direct"])
    ceiling = sum(k["ceiling"]["ratio"] for k in cases if k["transport"] == "direct") / len(p50["direct"])
    print(f"bench roundtrip, libfabric:tcp between namespaces: direct {ratio:.2f}x mpi (sum of p50s), "
          f"{ceiling:.2f}x its fabric ceiling (mean ratio), 0 wrong")


# --- Faults ------------------------------------------------------------------------------------------------

FAULT_BENCH = ["bench", "dispatch", "--preset", "smoke", "--transport", "direct", "--iters", "100000",
               "--warmup", "1", "--timeout", str(TIMEOUT)]
DIAGNOSTIC = r"epsuite: error on host node\d, rank \d: "
# Every rank runs under this wrapper, which reports the rank's own exit code (mpirun's says little once
# --enable-recovery keeps the job alive past a failed rank).
EXIT_WRAPPER = ["sh", "-c", '"$@"; echo "vcluster-exit rank $OMPI_COMM_WORLD_RANK code $?" >&2', "sh"]
EXIT_LINE = r"vcluster-exit rank (\d+) code (\d+)"


def valid_results_before_fault(c):
    """A checked bench whose results file the fault must leave valid."""
    path = os.path.join(c.work, "before-fault.json")
    rc, out, _ = c.mpirun([c.epsuite, "bench", "dispatch", "--preset", "smoke", "--transport", "direct", "-c",
                           "--json", path])
    expect_ok(rc, out, "the bench before the fault")
    return path


def start_fault_bench(c):
    return Watched(c, [*EXIT_WRAPPER, c.epsuite, *FAULT_BENCH, "--json", os.path.join(c.work, "during-fault.json")],
                   extra=["--enable-recovery"])


def mid_dispatch(w):
    """Returns the time once the bench is iterating: its table header printed, then 2 s of dispatches."""
    expect(w.wait_for(r"^#\s*tokens\s+bytes", 120), "the bench printed no table header", w.text())
    time.sleep(2.0)
    expect(w.proc.poll() is None, "the bench ended before the fault", w.text())
    return time.monotonic() - w.start


def epsuite_processes(c):
    """Pids of epsuite ranks still alive in any node namespace."""
    found = []
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    for ns in (n for n in listing if n.startswith("eps-vc-node")):
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if cmdline.startswith(c.epsuite + " bench"):
                found.append(f"{ns}: {pid}")
    return found


def check_fault_outcome(w, fault_at, survivors, timed, what):
    """Every surviving rank ended: each that reported its exit code exited 3 (a rank the job's abort
    killed first reports none; that it was gone by the bound is checked by the caller), those in `timed`
    within the bound; at least one exited 3 by itself, and a diagnostic names the peer it waited for."""
    out = w.text()
    exits = {int(m.group(1)): (t, int(m.group(2))) for t, line in w.lines for m in [re.search(EXIT_LINE, line)] if m}
    reported = [r for r in survivors if r in exits]
    expect(reported, f"{what}: no surviving rank reported its exit", out)
    wrong = {r: exits[r][1] for r in reported if exits[r][1] != 3}
    expect(not wrong, f"{what}: surviving ranks exited with codes other than 3: {wrong}", out)
    late = {r: round(exits[r][0] - fault_at, 1) for r in timed if r in exits and exits[r][0] - fault_at > TIMEOUT + GRACE}
    expect(not late, f"{what}: ranks exited later than --timeout + {GRACE:g} s after the fault: {late}", out)
    diagnostics = [line for _, line in w.lines if re.search(DIAGNOSTIC, line)]
    named = [line for line in diagnostics if re.search(r"(waiting for|to) rank \d+", line)]
    expect(named, f"{what}: no diagnostic names the peer", out)
    slowest = max(exits[r][0] for r in reported) - fault_at
    aborted = sorted(set(survivors) - set(reported))
    print(f"{what}: ranks {reported} exited 3 (the last {slowest:.1f} s after the fault, --timeout {TIMEOUT:g})"
          f"{f', ranks {aborted} ended by the job abort' if aborted else ''}; e.g. {named[0][:240]}")


def check_still_valid(path):
    """The results file written before the fault parses; whatever the faulty run left parses too (results
    are written atomically: a temporary file renamed into place), and no temporary file is left."""
    with open(path, encoding="utf-8") as f:
        json.load(f)
    folder = os.path.dirname(path)
    for name in os.listdir(folder):
        expect(".tmp." not in name, f"a temporary results file was left behind: {name}")
        if name.endswith(".json"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                json.load(f)


def case_fault_cut(c):
    before = valid_results_before_fault(c)
    w = start_fault_bench(c)
    try:
        fault_at = mid_dispatch(w)
        c.ctl("cut", "1")
        # node1's output reaches mpirun only over the cut link: its ranks are checked to be gone at the bound
        # instead. Open MPI never notices a permanent cut, so heal afterwards to let it clean up.
        time.sleep(max(0.0, fault_at + TIMEOUT + GRACE - (time.monotonic() - w.start)))
        alive = epsuite_processes(c)
    finally:
        c.ctl("heal", "1", check=False)
    w.finish(60)
    expect(not alive, f"link cut: ranks still running {TIMEOUT + GRACE:g} s after the fault: {alive}", w.text())
    check_fault_outcome(w, fault_at, survivors=[0, 1, 2, 3], timed=[0, 1], what="link cut")
    check_still_valid(before)


def case_fault_kill(c):
    before = valid_results_before_fault(c)
    w = start_fault_bench(c)
    fault_at = mid_dispatch(w)
    killed = c.ctl("kill", "1", "^" + re.escape(c.epsuite) + " bench dispatch", "--one")
    print(killed.stdout.strip())
    victim_pid = int(re.search(r"killed (\d+)", killed.stdout).group(1))
    w.wait_end(max(0.0, fault_at + TIMEOUT + GRACE - (time.monotonic() - w.start)))
    alive = epsuite_processes(c)
    w.finish(30)
    expect(not alive, f"rank SIGKILLed: ranks still running {TIMEOUT + GRACE:g} s after the fault: {alive}", w.text())
    codes = {int(m.group(1)): int(m.group(2)) for _, line in w.lines for m in [re.search(EXIT_LINE, line)] if m}
    victim = [rank for rank, code in codes.items() if code == 128 + signal.SIGKILL]
    expect(len(victim) == 1, f"rank SIGKILLed (pid {victim_pid}): exit lines {codes}", w.text())
    survivors = [r for r in range(4) if r != victim[0]]
    check_fault_outcome(w, fault_at, survivors=survivors, timed=survivors, what=f"rank {victim[0]} SIGKILLed")
    check_still_valid(before)


def dropped_packets():
    stats = subprocess.run(["ip", "netns", "exec", "eps-vc-node1", "tc", "-s", "qdisc", "show", "dev", "vc0"],
                           capture_output=True, text=True).stdout
    match = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", stats)
    return (int(match.group(2)), int(match.group(1))) if match else (0, 0)


def case_fault_slow(c):
    netem = c.ctl("netem", "1", "delay", "5ms", "loss", "1%", check=False)
    if netem.returncode == 0:
        how = "netem delay 5ms loss 1%"
    else:
        expect(netem.returncode == 3, f"netem failed: {netem.stderr.strip()}")
        c.ctl("shape", "1", "20mbit")
        how = "tbf 20 Mbit/s with a short queue (no sch_netem here)"
    try:
        json_path = os.path.join(c.work, "slow.json")
        rc, out, secs = c.mpirun([c.epsuite, "bench", "roundtrip", "--preset", "smoke", "--transport", "mpi,direct",
                                  "-c", "--iters", "3", "--warmup", "1", "--json", json_path, "--timeout", "60"])
        dropped, sent = dropped_packets()
    finally:
        c.ctl("netem", "1", "off", check=False)
        c.ctl("shape", "1", "off", check=False)
    expect_ok(rc, out, f"bench roundtrip -c under {how}")
    cases = json.load(open(json_path, encoding="utf-8"))["results"]
    wrong = sum(k["check"]["mismatches"] for k in cases)
    expect(wrong == 0, f"{wrong} mismatches on the degraded link", out)
    print(f"degraded link ({how}; node1 dropped {dropped} of {sent + dropped} packets): bench roundtrip -c exit 0 "
          f"in {secs:.1f} s, 0 wrong")


CASES = {
    "fabric": case_fabric,
    "transport-plain": case_transport_plain,
    "transport-chaos": case_transport_chaos,
    "run-smoke": case_run_smoke,
    "bench-tcp": case_bench_tcp,
    "fault-cut": case_fault_cut,
    "fault-kill": case_fault_kill,
    "fault-slow": case_fault_slow,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=sorted(CASES))
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--work", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)  # nothing from an earlier run may count
    os.makedirs(args.work)
    os.environ["GTEST_COLOR"] = "no"  # ci/vcluster passes GTEST_* to the ranks
    c = Cluster(os.path.abspath(args.source), os.path.abspath(args.build), os.path.abspath(args.work))
    unavailable = os.path.join(c.build, "vcluster-unavailable.txt")
    if os.path.exists(unavailable):
        print("unavailable:", open(unavailable, encoding="utf-8").read().strip())
        return SKIP
    if c.ctl("status", check=False).returncode != 0:
        print("FAIL: the virtual cluster is not up (the vcluster_up fixture failed?)", file=sys.stderr)
        return 1
    try:
        CASES[args.case](c)
    except (Failure, subprocess.TimeoutExpired, OSError, KeyError, ValueError) as error:
        print(f"FAIL {args.case}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
