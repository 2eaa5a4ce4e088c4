#!/usr/bin/env python3
"""End-to-end checks of the MPI-aware conformance runner and of the epsuite CLI (docs/errors.md 10).

usage: selftest_driver.py CASE --mpirun M --selftest EXE --epsuite EXE --workdir DIR

Every case runs programs under `mpirun --map-by :OVERSUBSCRIBE` with the environment ctest gives it
(loopback-only Open MPI) and checks exit codes, what rank 0 printed and the reports it wrote.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


class Driver:
    def __init__(self, args):
        self.args = args
        self.failures = []
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)

    def path(self, name):
        return os.path.join(self.args.workdir, name)

    def run(self, np, program, *argv, timeout=90):
        command = [self.args.mpirun, "-np", str(np), "--map-by", ":OVERSUBSCRIBE", program, *argv]
        start = time.monotonic()
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        p.seconds = time.monotonic() - start
        # Ranks write through Open MPI's pseudo-terminals, so GoogleTest colors its output.
        p.stdout = ANSI_ESCAPE.sub("", p.stdout)
        p.stderr = ANSI_ESCAPE.sub("", p.stderr)
        print(f"$ {' '.join(command)}\n  -> exit {p.returncode} in {p.seconds:.1f} s")
        return p

    def expect(self, condition, what, process=None):
        if condition:
            return
        self.failures.append(what)
        print(f"FAIL: {what}")
        if process is not None:
            print(f"--- stdout ---\n{process.stdout}\n--- stderr ---\n{process.stderr}")

    def testcases(self, xml_path):
        return {case.get("name"): case for case in ET.parse(xml_path).getroot().iter("testcase")}

    # A failure raised only on the last rank reaches rank 0's report, names the rank, and the exit code
    # is the maximum over ranks; rank 0 alone prints.
    def rerun_failure(self):
        for np in (2, 3):
            xml = self.path(f"fail_np{np}.xml")
            p = self.run(np, self.args.selftest, "--gtest_also_run_disabled_tests",
                         "--gtest_filter=SelfTest.DISABLED_FailsOnTheLastRankOnly", f"--gtest_output=xml:{xml}")
            self.expect(p.returncode == 1, f"np {np}: exit code {p.returncode}, expected 1", p)
            self.expect(p.stdout.count("[==========] Running 1 test") == 1,
                        f"np {np}: the run banner must be printed by rank 0 only", p)
            self.expect(os.path.exists(xml), f"np {np}: rank 0 wrote no XML report", p)
            if not os.path.exists(xml):
                continue
            case = self.testcases(xml).get("DISABLED_FailsOnTheLastRankOnly")
            failures = case.findall("failure") if case is not None else []
            self.expect(len(failures) == 1, f"np {np}: expected one failure in the report, got {len(failures)}")
            text = failures[0].get("message", "") if failures else ""
            last = np - 1
            self.expect(f"[rank {last}, host " in text and f"deliberate failure on rank {last}" in text,
                        f"np {np}: the failure does not name rank {last}: {text!r}")
            self.expect("selftest_cases.cpp:" in text, f"np {np}: the failure lost its file and line: {text!r}")
            leftovers = [f for f in os.listdir(self.args.workdir) if f.startswith(f"fail_np{np}") and f != f"fail_np{np}.xml"]
            self.expect(not leftovers, f"np {np}: other ranks wrote reports too: {leftovers}")

    # A capability skip carries its reason; --strict turns it into a failure (exit 1).
    def skip_and_strict(self):
        xml = self.path("skip.xml")
        flags = ["--gtest_also_run_disabled_tests", "--gtest_filter=SelfTest.DISABLED_SkipsForAMissingCapability"]
        p = self.run(2, self.args.selftest, *flags, f"--gtest_output=xml:{xml}")
        self.expect(p.returncode == 0, f"skip: exit code {p.returncode}, expected 0", p)
        if os.path.exists(xml):
            case = self.testcases(xml)["DISABLED_SkipsForAMissingCapability"]
            skipped = case.find("skipped")
            self.expect(skipped is not None and "the selftest capability is never present" in skipped.get("message", ""),
                        "skip: the report has no skip with its reason")
        else:
            self.expect(False, "skip: no XML report", p)
        strict_xml = self.path("strict.xml")
        p = self.run(2, self.args.selftest, "--strict", *flags, f"--gtest_output=xml:{strict_xml}")
        self.expect(p.returncode == 1, f"--strict: exit code {p.returncode}, expected 1", p)
        self.expect("--strict: a selected backend is unavailable" in p.stdout, "--strict: no failure printed", p)
        env = dict(os.environ, EPSUITE_STRICT="1")
        command = [self.args.mpirun, "-x", "EPSUITE_STRICT", "-np", "2", "--map-by", ":OVERSUBSCRIBE",
                   self.args.selftest, *flags]
        q = subprocess.run(command, capture_output=True, text=True, timeout=90, env=env)
        self.expect(q.returncode == 1, f"EPSUITE_STRICT=1: exit code {q.returncode}, expected 1", q)

    # A rank whose deadline barrier expires reports what it waited for and ends the job with exit 3
    # while its peer is still asleep (no hang).
    def timeout_aborts(self):
        p = self.run(2, self.args.selftest, "--timeout", "0.5", "--gtest_also_run_disabled_tests",
                     "--gtest_filter=SelfTest.DISABLED_BarrierTimesOutAndEndsTheJob", timeout=60)
        self.expect(p.returncode == 3, f"timeout: exit code {p.returncode}, expected 3", p)
        self.expect("epsuite: error on host " in p.stderr and ", rank 0: timed out after 0.500 s waiting for "
                    "rank 1 in round 0 of a barrier on a communicator of 2 ranks" in p.stderr, "timeout: diagnostic missing", p)
        self.expect(p.seconds < 30, f"timeout: took {p.seconds:.1f} s")

    # A rank that stops right after an EPLB plan's weight moves were posted (docs/eplb.md 8.7): the other ranks
    # end the job with exit code 3 and say what they waited for, instead of hanging.
    def eplb_move_failure(self):
        p = self.run(3, self.args.selftest, "--transport", "mpi", "--timeout", "2", "--gtest_also_run_disabled_tests",
                     "--gtest_filter=EplbFailure.DISABLED_RankFailureDuringAMoveEndsTheJob", timeout=90)
        self.expect(p.returncode == 3, f"eplb move failure: exit code {p.returncode}, expected 3", p)
        self.expect("epsuite: error on host " in p.stderr and "timed out after 2.000 s waiting for" in p.stderr,
                    "eplb move failure: diagnostic missing", p)
        self.expect(p.seconds < 60, f"eplb move failure: took {p.seconds:.1f} s")

    # `epsuite check` runs the suite in-process, passes gtest flags through, refuses unknown flags.
    def check_cli(self):
        report = self.path("check.json")
        p = self.run(2, self.args.epsuite, "check", "--timeout", "30", f"--gtest_output=json:{report}")
        self.expect(p.returncode == 0, f"check: exit code {p.returncode}, expected 0", p)
        self.expect(p.stdout.startswith("# epsuite ") and "#  timeout          30" in p.stdout,
                    "check: no # header with the effective configuration", p)
        if os.path.exists(report):
            with open(report, encoding="utf-8") as f:
                doc = json.load(f)
            self.expect(doc["tests"] >= 8 and doc["failures"] == 0, f"check: report says {doc['tests']} tests, "
                        f"{doc['failures']} failures")
        else:
            self.expect(False, "check: no JSON report", p)
        p = self.run(2, self.args.epsuite, "check", "--gtest_filter=*RejectsMoreTokensThanTmax*")
        self.expect(p.returncode == 0 and "[==========] 3 tests from 1 test suite ran." in p.stdout,
                    "check: --gtest_filter not applied", p)
        p = self.run(2, self.args.epsuite, "check", "--bogus")
        self.expect(p.returncode == 2 and "unknown argument '--bogus'" in p.stderr
                    and p.stderr.count("epsuite: error") == 1, "check: an unknown flag must exit 2 once", p)
        p = self.run(2, self.args.epsuite, "check", "--timeout", "-1")
        self.expect(p.returncode == 2 and "--timeout: must be in [0.001, 86400], got -1" in p.stderr,
                    "check: out-of-range --timeout must exit 2 naming the range", p)
        p = self.run(2, self.args.epsuite, "check", "--help")
        self.expect(p.returncode == 0 and p.stdout.count("--strict") == 1 and "--gtest_filter" in p.stdout
                    and "EPSUITE_TIMEOUT" in p.stdout, "check --help: printed once, every flag explained", p)

    # docs/fabrics.md 6.2-6.3 from the command line: the negative control (fabric-order trusted on the
    # chaos fabric) must be caught (exit 1); unsafe or malformed fabric choices are refused once (exit 2);
    # a safe strategy under chaos passes.
    # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite check --transport direct --fabric libfabric:shm --signal fabric-order --chaos seed=1 --allow-unsafe
    def fabric_cli(self):
        for transport in ("direct", "proxy"):
            p = self.run(2, self.args.epsuite, "check", "--transport", transport, "--timeout", "30", "--fabric",
                         "libfabric:shm", "--signal", "fabric-order", "--chaos", "seed=1", "--allow-unsafe",
                         timeout=300)
            self.expect(p.returncode == 1 and "FAILED" in p.stdout,
                        f"negative control ({transport}): exit {p.returncode}, expected 1 (the chaos fabric must "
                        "break fabric-order)", p)
        check = [self.args.epsuite, "check", "--transport", "direct", "--timeout", "30"]
        p = self.run(2, *check, "--fabric", "libfabric:shm", "--signal", "fabric-order", "--chaos", "seed=1")
        self.expect(p.returncode == 2 and "fabric-order needs an ordered fabric" in p.stderr
                    and "--allow-unsafe" in p.stderr and p.stderr.count("epsuite: error") == 1,
                    "fabric-order on chaos without --allow-unsafe must exit 2 once", p)
        p = self.run(2, *check, "--fabric", "carrier-pigeon")
        self.expect(p.returncode == 2 and "unknown fabric 'carrier-pigeon'; registered: auto, shm" in p.stderr,
                    "an unknown --fabric must exit 2 listing the registered ones", p)
        p = self.run(2, *check, "--chaos", "window=3")
        self.expect(p.returncode == 2 and "--chaos" in p.stderr and "seed" in p.stderr,
                    "a --chaos without seed must exit 2 naming it", p)
        p = self.run(3, *check, "--fabric", "shm", "--signal", "imm-seq", "--chaos", "seed=5",
                     "--gtest_filter=*_ll_*", timeout=300)
        self.expect(p.returncode == 0 and "PASSED" in p.stdout, "imm-seq under chaos must pass", p)

    # `epsuite info`: # block and JSON; presets refused with exit 2 when the rank count does not fit.
    def info_cli(self):
        out = self.path("info.json")
        p = self.run(3, self.args.epsuite, "info", "--preset", "smoke", "--json", out)
        self.expect(p.returncode == 0, f"info: exit code {p.returncode}", p)
        self.expect(p.stdout.count("# epsuite ") == 1 and "#  ranks            3 on 1 host(s)" in p.stdout
                    and "Open MPI" in p.stdout and "L 8 on 3 ranks" in p.stdout, "info: # block", p)
        if os.path.exists(out):
            with open(out, encoding="utf-8") as f:
                doc = json.load(f)
            self.expect(doc["ranks"] == 3 and len(doc["platform"]["ranks"]) == 3 and
                        doc["preset"]["local_experts"] == 8 and doc["config"]["preset"] == "smoke",
                        f"info: JSON content {doc}")
        else:
            self.expect(False, "info: --json wrote nothing", p)
        p = self.run(5, self.args.epsuite, "info", "--preset", "smoke")
        self.expect(p.returncode == 2 and "24 experts cannot be split evenly over 5 ranks" in p.stderr
                    and p.stderr.count("epsuite: error") == 1, "info: E % R != 0 must exit 2 once", p)
        p = self.run(1, self.args.epsuite, "info", "--preset", "tiny")
        self.expect(p.returncode == 2 and "--preset: must be one of {ht-deepseek-v3, ll-deepseek-v3, pplx-v2lite, "
                    "ec-dlm-owt, ec-dlm-8b, smoke, ec-dlm-owt-smoke, ec-dlm-8b-smoke}, got 'tiny'" in p.stderr,
                    "info: unknown preset must list the valid names", p)
        p = self.run(2, self.args.epsuite, "info", "--json", "-")
        self.expect(p.returncode == 0 and json.loads(p.stdout)["ranks"] == 2, "info --json -: JSON on stdout", p)
        p = self.run(2, self.args.epsuite, "--version")
        self.expect(p.returncode == 0 and p.stdout.count("epsuite ") == 1, "--version once", p)
        p = self.run(2, self.args.epsuite, "--help")
        self.expect(p.returncode == 0 and all(c in p.stdout for c in ("check", "info", "ref")),
                    "--help lists the subcommands", p)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["rerun-failure", "skip-and-strict", "timeout-aborts", "check-cli",
                                         "info-cli", "fabric-cli", "eplb-move-failure"])
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--selftest", required=True)
    parser.add_argument("--epsuite", required=True)
    parser.add_argument("--workdir", required=True)
    args = parser.parse_args()
    driver = Driver(args)
    getattr(driver, args.case.replace("-", "_"))()
    if driver.failures:
        print(f"{len(driver.failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
