"""The command-line checks of docs/fabrics.md 6.6 and docs/results.md 9.8 under mpirun at 2 ranks on one node (ctest trust_cli_<case>): the fabric preflight
of docs/fabrics.md 6.6 (platform.fabric in info and bench results, --require-fabric exit 3 naming what was chosen
instead and why, an unknown name exit 2) and --repeat-check of docs/results.md 9.7 for check and soak."""

import json
import re

import pytest

RANKS = 2
UNMET = "the fabric chosen is shm instead, because every rank is on one node"


def test_info_json(mpirun, epsuite, tmp_path):
    result = mpirun(RANKS, epsuite, "info", "--json", "-", timeout=120, cwd=tmp_path)
    assert result.returncode == 0, f"info --json - exited {result.returncode}"
    fabric = json.loads(result.stdout)["platform"]["fabric"]
    assert fabric == {"requested": "auto", "chosen": "shm", "refused": []}, f"platform.fabric {fabric}"


@pytest.mark.parametrize("command", [
    ["info"],
    ["check", "--transport", "mpi"],
    ["bench", "dispatch", "--transport", "mpi", "--preset", "smoke", "--tokens", "64", "-n", "2", "-w", "1"],
], ids=["info", "check", "bench"])
def test_required_fabric_not_met(mpirun, epsuite, tmp_path, command):
    out = tmp_path / "out.json"
    extra = ["--json", out] if command[0] == "bench" else []
    result = mpirun(RANKS, epsuite, *command, *extra, "--require-fabric", "libfabric:tcp", timeout=240,
                    cwd=tmp_path)
    assert result.returncode == 3, f"an unmet --require-fabric must exit 3, got {result.returncode}"
    assert f"--require-fabric libfabric:tcp: {UNMET}" in result.stderr, "the error names the chosen fabric and why"
    assert not out.exists(), "a refused run writes no results file"


def test_required_fabric_unknown(mpirun, epsuite, tmp_path):
    result = mpirun(RANKS, epsuite, "info", "--require-fabric", "verbs:xyz", timeout=120, cwd=tmp_path)
    assert result.returncode == 2, f"an unknown --require-fabric must exit 2, got {result.returncode}"
    assert "--require-fabric: must be a registered fabric other than auto, got 'verbs:xyz'" in result.stderr


def test_required_fabric_met(mpirun, epsuite, tmp_path):
    result = mpirun(RANKS, epsuite, "check", "--transport", "mpi", "--require-fabric", "shm",
                    "--gtest_filter=FabricFactory.NamesAndChaosSpecs", timeout=240, cwd=tmp_path)
    assert result.returncode == 0, f"a met --require-fabric must pass, got {result.returncode}"
    assert "# fabric (docs/fabrics.md 6.6): auto -> shm" in result.stdout, "the preflight line of the table"


def test_bench_records_the_fabric(mpirun, epsuite, tmp_path):
    out = tmp_path / "out.json"
    result = mpirun(RANKS, epsuite, "bench", "dispatch", "--transport", "mpi", "--preset", "smoke", "--tokens", "64",
                    "-n", "2", "-w", "1", "--json", out, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, f"bench exited {result.returncode}"
    fabric = json.loads(out.read_text())["platform"]["fabric"]
    assert fabric == {"requested": "auto", "chosen": "shm", "refused": []}, f"platform.fabric {fabric}"


def test_repeat_check(mpirun, epsuite, tmp_path):
    result = mpirun(RANKS, epsuite, "check", "--transport", "mpi,direct", "--fabric", "shm", "--repeat-check",
                    "--gtest_filter=Transports/TransportContract.*_bf16_uniform", timeout=300, cwd=tmp_path)
    passed = re.search(r"\[  PASSED  \] (\d+) tests", result.stdout)
    assert result.returncode == 0 and passed and int(passed.group(1)) >= 6, \
        f"the contract cases run twice must agree, got exit {result.returncode}"


def test_soak_repeat_check(mpirun, epsuite, tmp_path):
    result = mpirun(RANKS, epsuite, "soak", "--transport", "direct", "--repeat-check", "--seeds", "2",
                    "--gtest_filter=Transports/TransportContract.*_bf16_uniform", timeout=300, cwd=tmp_path)
    assert result.returncode == 0 and "epsuite soak: PASS" in result.stdout, \
        f"the soak with --repeat-check must pass, got exit {result.returncode}"
