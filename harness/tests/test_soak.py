"""`epsuite soak` end to end (docs/soak.md), under mpirun (ctest soak_cli_<case>)."""

import re
import shlex

import pytest

from support import expect_usage_error

SEEDS = 200
RANKS = 2
PROGRESS_EVERY = 50


def test_soak(mpirun, epsuite, tmp_path):
    """SEEDS seeds of the default cases (direct and proxy x the safe signal strategies, one layer scenario, the
    negative control) exit 0; the summary says SEEDS seeds, 0 mismatches and every negative control caught;
    rank 0 alone prints, one progress line per --progress-every seeds."""
    # 200 seeds here:
    # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite soak --seeds 1000 --fabric shm
    result = mpirun(RANKS, epsuite, "soak", "--seeds", SEEDS, "--fabric", "shm", "--progress-every", PROGRESS_EVERY,
                    "--timeout", "60", timeout=600, cwd=tmp_path)
    assert result.returncode == 0 and "epsuite soak: PASS (exit 0)" in result.stdout, \
        f"the soak must pass (exit 0), got {result.returncode}"
    assert (f"soak: seeds {SEEDS} (1..{SEEDS}), signals imm-seq,recv-count,sender-barrier, transports direct,proxy, "
            f"fabric shm, R = {RANKS}") in result.stdout, \
        "the summary names the seeds, signals, transports, fabric and R"
    ran = re.search(r"soak: cases run (\d+), unavailable (\d+).*, mismatches (\d+) in (\d+) seeds", result.stdout)
    assert ran and int(ran.group(1)) >= 10 * SEEDS and ran.groups()[1:] == ("0", "0", "0"), \
        "every case ran (>= 10 per seed), none unavailable, 0 mismatches"
    assert f"soak: negative controls caught {SEEDS}/{SEEDS} (100.0%)" in result.stdout, \
        "one negative control per seed, every one caught"
    progress = [line for line in result.stdout.splitlines() if re.match(r"soak: \d+/\d+ seeds", line)]
    assert len(progress) == (SEEDS - 1) // PROGRESS_EVERY, \
        f"one progress line per {PROGRESS_EVERY} seeds from rank 0 only, got {len(progress)}"
    assert "FAILED" not in result.stdout and "replay:" not in result.stdout, "no failure and no replay line"


def test_broken(mpirun, epsuite, tmp_path):
    """fabric-order soaked as if it were a safe strategy must fail: seeds alternate imm-seq (even seeds) and
    fabric-order (odd) over 64 back-to-back LL rounds, so exactly the fabric-order seeds fail (exit 1), each failing
    case prints a replay line, and that replay line, run as printed, fails too (exit 1), while the negative
    controls are still all caught."""
    result = mpirun(2, epsuite, "soak", "--seeds", "4", "--transport", "direct", "--fabric", "shm", "--signal",
                    "imm-seq,fabric-order", "--allow-unsafe", "--timeout", "60",
                    "--gtest_filter=Transports/TransportRobustness.*_ll_ll_weighted_bf16_uniform:NegativeControl.*",
                    timeout=300, cwd=tmp_path)
    assert result.returncode == 1 and "epsuite soak: FAIL (exit 1)" in result.stdout, \
        f"fabric-order soaked as a case must fail (exit 1), got {result.returncode}"
    assert "mismatches 2 in 2 seeds (1, 3)" in result.stdout, \
        "exactly the fabric-order seeds (1 and 3) fail, the imm-seq seeds (2 and 4) pass"
    assert "soak: negative controls caught 4/4 (100.0%)" in result.stdout, "the negative controls are still caught"
    replays = re.findall(r"^  replay: (.*)$", result.stdout, re.M)
    assert len(replays) == 2, f"one replay line per failing case, got {len(replays)}"
    for seed, replay in zip((1, 3), replays):
        assert re.search(rf"^mpirun -np 2 \S+ check --transport direct --fabric shm --signal fabric-order "
                         rf"--chaos seed={seed},window=\d+,split=\d+,delay=\d+,empty=\d+,backpressure=\d+ "
                         rf"--timeout 60 --allow-unsafe --gtest_filter=Transports/TransportRobustness\."
                         rf"BackToBackRoundsAndInterleaving/direct_ll_ll_weighted_bf16_uniform$", replay), \
            f"the replay line of seed {seed} is the exact check command: {replay}"
    argv = shlex.split(replays[0])
    assert argv[:3] == ["mpirun", "-np", "2"], "the replay line starts with mpirun -np 2"
    again = mpirun(2, *argv[3:], "--gtest_repeat=3", timeout=300, cwd=tmp_path)
    assert again.returncode == 1 and "FAILED" in again.stdout and "--chaos seed=1,window=" in again.stdout, \
        f"the replay line reproduces the failure (exit 1), got {again.returncode}"


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "--seeds: must be in [1, 1000000], got 0"),
    (["--signal", "carrier-pigeon"], "--signal: must be 'safe' or a comma-separated list of"),
    (["--signal", "fabric-order"], "--allow-unsafe"),
    (["--transport", "nope"], "nope"),
    (["--gtest_repeat=3"], "--gtest_repeat=3"),
    (["--gtest_filter=NoSuchSuite.*"], "--gtest_filter: 'NoSuchSuite.*' matches no case here"),
])
def test_bad_input(mpirun, epsuite, tmp_path, argv, message):
    """Bad flags exit 2 with one message naming the flag, before any case runs."""
    result = mpirun(2, epsuite, "soak", "--fabric", "shm", *argv, timeout=300, cwd=tmp_path)
    expect_usage_error(result, message)
    assert "soak: seeds" not in result.stdout, "a case ran"
