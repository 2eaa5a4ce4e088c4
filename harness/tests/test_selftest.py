"""End-to-end checks of the MPI-aware conformance runner and of the epsuite CLI (docs/errors.md 10), ctest
conformance_selftest_<case>: deliberately failing, skipping and hanging cases (conformance/tests/selftest_cases.cpp,
the program conformance_selftest; the EPLB rank failure in eplb_conformance) and `epsuite` under mpirun; exit codes,
what rank 0 printed and the reports it wrote."""

import json
import xml.etree.ElementTree as ET

import pytest

from support import expect_usage_error

DISABLED = "--gtest_also_run_disabled_tests"


@pytest.fixture
def selftest(build):
    return build.program("conformance_selftest")


def testcases(xml_path):
    return {case.get("name"): case for case in ET.parse(xml_path).getroot().iter("testcase")}


@pytest.mark.parametrize("np", [2, 3])
def test_rerun_failure(mpirun, selftest, tmp_path, np):
    """A failure raised only on the last rank reaches rank 0's report, names the rank, and the exit code is the
    maximum over ranks; rank 0 alone prints."""
    xml = tmp_path / f"fail_np{np}.xml"
    result = mpirun(np, selftest, DISABLED, "--gtest_filter=SelfTest.DISABLED_FailsOnTheLastRankOnly",
                    f"--gtest_output=xml:{xml}", timeout=90, cwd=tmp_path)
    assert result.returncode == 1, f"np {np}: exit code {result.returncode}, expected 1"
    assert result.stdout.count("[==========] Running 1 test") == 1, "the run banner must be printed by rank 0 only"
    assert xml.exists(), "rank 0 wrote no XML report"
    case = testcases(xml).get("DISABLED_FailsOnTheLastRankOnly")
    failures = case.findall("failure") if case is not None else []
    assert len(failures) == 1, f"expected one failure in the report, got {len(failures)}"
    text = failures[0].get("message", "")
    last = np - 1
    assert f"[rank {last}, host " in text and f"deliberate failure on rank {last}" in text, \
        f"the failure does not name rank {last}: {text!r}"
    assert "selftest_cases.cpp:" in text, f"the failure lost its file and line: {text!r}"
    leftovers = [f.name for f in tmp_path.iterdir() if f.name.startswith(f"fail_np{np}") and f != xml]
    assert not leftovers, f"other ranks wrote reports too: {leftovers}"


def test_skip_and_strict(mpirun, selftest, tmp_path):
    """A capability skip carries its reason; --strict (and EPSUITE_STRICT=1) turns it into a failure (exit 1)."""
    flags = [DISABLED, "--gtest_filter=SelfTest.DISABLED_SkipsForAMissingCapability"]
    xml = tmp_path / "skip.xml"
    result = mpirun(2, selftest, *flags, f"--gtest_output=xml:{xml}", timeout=90, cwd=tmp_path)
    assert result.returncode == 0, f"skip: exit code {result.returncode}, expected 0"
    assert xml.exists(), "skip: no XML report"
    skipped = testcases(xml)["DISABLED_SkipsForAMissingCapability"].find("skipped")
    assert skipped is not None and "the selftest capability is never present" in skipped.get("message", ""), \
        "skip: the report has no skip with its reason"
    result = mpirun(2, selftest, "--strict", *flags, f"--gtest_output=xml:{tmp_path / 'strict.xml'}", timeout=90,
                    cwd=tmp_path)
    assert result.returncode == 1, f"--strict: exit code {result.returncode}, expected 1"
    assert "--strict: a selected backend is unavailable" in result.stdout, "--strict: no failure printed"
    result = mpirun(2, selftest, *flags, extra=["-x", "EPSUITE_STRICT"], env={"EPSUITE_STRICT": "1"}, timeout=90,
                    cwd=tmp_path)
    assert result.returncode == 1, f"EPSUITE_STRICT=1: exit code {result.returncode}, expected 1"


def test_timeout_aborts(mpirun, selftest, tmp_path):
    """A rank whose deadline barrier expires reports what it waited for and ends the job with exit 3 while its peer
    is still asleep (no hang)."""
    result = mpirun(2, selftest, "--timeout", "0.5", DISABLED,
                    "--gtest_filter=SelfTest.DISABLED_BarrierTimesOutAndEndsTheJob", timeout=60, cwd=tmp_path)
    assert result.returncode == 3, f"timeout: exit code {result.returncode}, expected 3"
    assert "epsuite: error on host " in result.stderr and (
        ", rank 0: timed out after 0.500 s waiting for rank 1 in round 0 of a barrier on a communicator of 2 ranks"
        in result.stderr), "timeout: diagnostic missing"
    assert result.seconds < 30, f"timeout: took {result.seconds:.1f} s"


def test_eplb_move_failure(mpirun, build, tmp_path):
    """A rank that stops right after an EPLB plan's weight moves were posted (docs/eplb.md 8.7): the other ranks end
    the job with exit code 3 and say what they waited for, instead of hanging."""
    result = mpirun(3, build.program("eplb_conformance"), "--transport", "mpi", "--timeout", "2", DISABLED,
                    "--gtest_filter=EplbFailure.DISABLED_RankFailureDuringAMoveEndsTheJob", timeout=90, cwd=tmp_path)
    assert result.returncode == 3, f"eplb move failure: exit code {result.returncode}, expected 3"
    assert "epsuite: error on host " in result.stderr and "timed out after 2.000 s waiting for" in result.stderr, \
        "eplb move failure: diagnostic missing"
    assert result.seconds < 60, f"eplb move failure: took {result.seconds:.1f} s"


def test_check_cli(mpirun, epsuite, tmp_path):
    """`epsuite check` runs the suite in-process, passes gtest flags through, refuses unknown flags."""
    report = tmp_path / "check.json"
    result = mpirun(2, epsuite, "check", "--timeout", "30", f"--gtest_output=json:{report}", timeout=90, cwd=tmp_path)
    assert result.returncode == 0, f"check: exit code {result.returncode}, expected 0"
    assert result.stdout.startswith("# epsuite ") and "#  timeout          30" in result.stdout, \
        "check: no # header with the effective configuration"
    assert report.exists(), "check: no JSON report"
    doc = json.loads(report.read_text(encoding="utf-8"))
    assert doc["tests"] >= 8 and doc["failures"] == 0, f"check: {doc['tests']} tests, {doc['failures']} failures"
    result = mpirun(2, epsuite, "check", "--gtest_filter=*RejectsMoreTokensThanTmax*", timeout=90, cwd=tmp_path)
    assert result.returncode == 0 and "[==========] 3 tests from 1 test suite ran." in result.stdout, \
        "check: --gtest_filter not applied"
    expect_usage_error(mpirun(2, epsuite, "check", "--bogus", timeout=90, cwd=tmp_path),
                       "unknown argument '--bogus'")
    expect_usage_error(mpirun(2, epsuite, "check", "--timeout", "-1", timeout=90, cwd=tmp_path),
                       "--timeout: must be in [0.001, 86400], got -1")
    result = mpirun(2, epsuite, "check", "--help", timeout=90, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.count("--strict") == 1 and "--gtest_filter" in result.stdout \
        and "EPSUITE_TIMEOUT" in result.stdout, "check --help: printed once, every flag explained"


def test_fabric_cli(mpirun, epsuite, tmp_path):
    """docs/fabrics.md 6.2-6.3 from the command line: the negative control (fabric-order trusted on the chaos
    fabric) must be caught (exit 1); unsafe or malformed fabric choices are refused once (exit 2); a safe strategy
    under chaos passes."""
    # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE build/epsuite check --transport direct --fabric libfabric:shm --signal fabric-order --chaos seed=1 --allow-unsafe
    for transport in ("direct", "proxy"):
        result = mpirun(2, epsuite, "check", "--transport", transport, "--timeout", "30", "--fabric", "libfabric:shm",
                        "--signal", "fabric-order", "--chaos", "seed=1", "--allow-unsafe", timeout=300, cwd=tmp_path)
        assert result.returncode == 1 and "FAILED" in result.stdout, \
            f"negative control ({transport}): exit {result.returncode}, expected 1 (chaos must break fabric-order)"
    check = [epsuite, "check", "--transport", "direct", "--timeout", "30"]
    expect_usage_error(mpirun(2, *check, "--fabric", "libfabric:shm", "--signal", "fabric-order", "--chaos", "seed=1",
                              timeout=90, cwd=tmp_path),
                       "fabric-order needs an ordered fabric", "--allow-unsafe")
    expect_usage_error(mpirun(2, *check, "--fabric", "carrier-pigeon", timeout=90, cwd=tmp_path),
                       "unknown fabric 'carrier-pigeon'; registered: auto, shm")
    expect_usage_error(mpirun(2, *check, "--chaos", "window=3", timeout=90, cwd=tmp_path), "--chaos", "seed")
    result = mpirun(3, *check, "--fabric", "shm", "--signal", "imm-seq", "--chaos", "seed=5", "--gtest_filter=*_ll_*",
                    timeout=300, cwd=tmp_path)
    assert result.returncode == 0 and "PASSED" in result.stdout, "imm-seq under chaos must pass"


def test_info_cli(mpirun, epsuite, tmp_path):
    """`epsuite info`: # block and JSON; presets refused with exit 2 when the rank count does not fit."""
    out = tmp_path / "info.json"
    result = mpirun(3, epsuite, "info", "--preset", "smoke", "--json", out, timeout=90, cwd=tmp_path)
    assert result.returncode == 0, f"info: exit code {result.returncode}"
    assert result.stdout.count("# epsuite ") == 1 and "#  ranks            3 on 1 host(s)" in result.stdout \
        and "Open MPI" in result.stdout and "L 8 on 3 ranks" in result.stdout, "info: # block"
    assert out.exists(), "info: --json wrote nothing"
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["ranks"] == 3 and len(doc["platform"]["ranks"]) == 3 and doc["preset"]["local_experts"] == 8 \
        and doc["config"]["preset"] == "smoke", f"info: JSON content {doc}"
    expect_usage_error(mpirun(5, epsuite, "info", "--preset", "smoke", timeout=90, cwd=tmp_path),
                       "24 experts cannot be split evenly over 5 ranks")
    expect_usage_error(mpirun(1, epsuite, "info", "--preset", "tiny", timeout=90, cwd=tmp_path),
                       "--preset: must be one of {ht-deepseek-v3, ll-deepseek-v3, pplx-v2lite, ec-dlm-owt, "
                       "ec-dlm-8b, smoke, ec-dlm-owt-smoke, ec-dlm-8b-smoke}, got 'tiny'")
    result = mpirun(2, epsuite, "info", "--json", "-", timeout=90, cwd=tmp_path)
    assert result.returncode == 0 and json.loads(result.stdout)["ranks"] == 2, "info --json -: JSON on stdout"
    result = mpirun(2, epsuite, "--version", timeout=90, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.count("epsuite ") == 1, "--version once"
    result = mpirun(2, epsuite, "--help", timeout=90, cwd=tmp_path)
    assert result.returncode == 0 and all(c in result.stdout for c in ("check", "info", "ref")), \
        "--help lists the subcommands"
