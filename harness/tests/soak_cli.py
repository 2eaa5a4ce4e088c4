#!/usr/bin/env python3
"""`epsuite soak` end to end (docs/soak.md), under mpirun with the loopback-only environment ctest gives it.

usage: soak_cli.py CASE --mpirun M --epsuite EXE --workdir DIR [--seeds N] [--np R]

CASE soak: N seeds of the default cases (direct and proxy x the safe signal strategies, one layer scenario, the
  negative control) exit 0; the summary says N seeds, 0 mismatches and every negative control caught (N/N);
  rank 0 alone prints, one progress line per --progress-every seeds.
CASE broken: fabric-order soaked as if it were a safe strategy must fail: seeds alternate imm-seq (even seeds)
  and fabric-order (odd) over 64 back-to-back LL rounds, so exactly the fabric-order seeds fail (exit 1), each failing
  case prints a replay line, and that replay line, run as printed, fails too (exit 1), while the negative
  controls are still all caught.
CASE bad-input: bad flags exit 2 with one message naming the flag, before any case runs.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time


class Driver:
    def __init__(self, args):
        self.args = args
        self.failures = []
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)

    def run(self, np, *argv, timeout=300):
        command = [self.args.mpirun, "-np", str(np), "--map-by", ":OVERSUBSCRIBE", *argv]
        start = time.monotonic()
        p = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=self.args.workdir)
        p.seconds = time.monotonic() - start
        print(f"$ {' '.join(command)}\n  -> exit {p.returncode} in {p.seconds:.1f} s")
        return p

    def expect(self, condition, what, process=None):
        if condition:
            return
        self.failures.append(what)
        print(f"FAIL: {what}")
        if process is not None:
            print(f"--- stdout ---\n{process.stdout}\n--- stderr ---\n{process.stderr}")

    def soak(self):
        # 200 seeds by default (ctest):
        # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite soak --seeds 1000 --fabric shm
        seeds, every = self.args.seeds, 50
        p = self.run(self.args.np, self.args.epsuite, "soak", "--seeds", str(seeds), "--fabric", "shm",
                     "--progress-every", str(every), "--timeout", "60", timeout=600)
        print("\n".join(line for line in p.stdout.splitlines() if line.startswith(("soak:", "epsuite soak"))))
        self.expect(p.returncode == 0 and "epsuite soak: PASS (exit 0)" in p.stdout,
                    f"the soak must pass (exit 0), got {p.returncode}", p)
        self.expect(f"soak: seeds {seeds} (1..{seeds}), signals imm-seq,recv-count,sender-barrier, "
                    f"transports direct,proxy, fabric shm, R = {self.args.np}" in p.stdout,
                    "the summary names the seeds, signals, transports, fabric and R", p)
        run = re.search(r"soak: cases run (\d+), unavailable (\d+).*, mismatches (\d+) in (\d+) seeds", p.stdout)
        self.expect(run is not None and int(run.group(1)) >= 10 * seeds and run.group(2) == "0"
                    and run.group(3) == "0" and run.group(4) == "0",
                    "every case ran (>= 10 per seed), none unavailable, 0 mismatches", p)
        self.expect(f"soak: negative controls caught {seeds}/{seeds} (100.0%)" in p.stdout,
                    "one negative control per seed, every one caught", p)
        progress = [line for line in p.stdout.splitlines() if re.match(r"soak: \d+/\d+ seeds", line)]
        self.expect(len(progress) == (seeds - 1) // every,
                    f"one progress line per {every} seeds from rank 0 only, got {len(progress)}", p)
        self.expect("FAILED" not in p.stdout and "replay:" not in p.stdout, "no failure and no replay line", p)

    def broken(self):
        p = self.run(2, self.args.epsuite, "soak", "--seeds", "4", "--transport", "direct", "--fabric", "shm",
                     "--signal", "imm-seq,fabric-order", "--allow-unsafe", "--timeout", "60",
                     "--gtest_filter=Transports/TransportRobustness.*_ll_ll_weighted_bf16_uniform:NegativeControl.*")
        print(p.stdout)
        self.expect(p.returncode == 1 and "epsuite soak: FAIL (exit 1)" in p.stdout,
                    f"fabric-order soaked as a case must fail (exit 1), got {p.returncode}", p)
        self.expect("mismatches 2 in 2 seeds (1, 3)" in p.stdout,
                    "exactly the fabric-order seeds (1 and 3) fail, the imm-seq seeds (2 and 4) pass", p)
        self.expect("soak: negative controls caught 4/4 (100.0%)" in p.stdout,
                    "the negative controls are still caught", p)
        replays = re.findall(r"^  replay: (.*)$", p.stdout, re.M)
        self.expect(len(replays) == 2, f"one replay line per failing case, got {len(replays)}", p)
        if not replays:
            return
        for seed, replay in zip((1, 3), replays):
            self.expect(re.search(rf"^mpirun -np 2 \S+ check --transport direct --fabric shm --signal fabric-order "
                                  rf"--chaos seed={seed},window=\d+,split=\d+,delay=\d+,empty=\d+,backpressure=\d+ "
                                  rf"--timeout 60 --allow-unsafe --gtest_filter=Transports/TransportRobustness\."
                                  rf"BackToBackRoundsAndInterleaving/direct_ll_ll_weighted_bf16_uniform$", replay),
                        f"the replay line of seed {seed} is the exact check command: {replay}", p)
        argv = shlex.split(replays[0])
        self.expect(argv[:3] == ["mpirun", "-np", "2"], "the replay line starts with mpirun -np 2")
        r = self.run(2, *argv[3:], "--gtest_repeat=3")
        self.expect(r.returncode == 1 and "FAILED" in r.stdout and "--chaos seed=1,window=" in r.stdout,
                    f"the replay line reproduces the failure (exit 1), got {r.returncode}", r)

    def bad_input(self):
        soak = [self.args.epsuite, "soak", "--fabric", "shm"]
        for argv, needle in (
            (["--seeds", "0"], "--seeds: must be in [1, 1000000], got 0"),
            (["--signal", "carrier-pigeon"], "--signal: must be 'safe' or a comma-separated list of"),
            (["--signal", "fabric-order"], "--allow-unsafe"),
            (["--transport", "nope"], "nope"),
            (["--gtest_repeat=3"], "--gtest_repeat=3"),
            (["--gtest_filter=NoSuchSuite.*"], "--gtest_filter: 'NoSuchSuite.*' matches no case here"),
        ):
            p = self.run(2, *soak, *argv)
            self.expect(p.returncode == 2 and needle in p.stderr and p.stderr.count("epsuite: error") == 1
                        and "soak: seeds" not in p.stdout,
                        f"soak {' '.join(argv)} must exit 2 once naming '{needle}'", p)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["soak", "broken", "bad-input"])
    parser.add_argument("--mpirun", required=True)
    parser.add_argument("--epsuite", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--np", type=int, default=2)
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
