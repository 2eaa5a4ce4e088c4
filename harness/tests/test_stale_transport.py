"""A deliberately broken transport must be caught, next to the working `mpi` baseline in the same command:
`stale` (conformance/tests/stale_transport.hpp) stops writing after its first call; `epsuite_stale` is epsuite
plus that test-only registration (ctest stale_transport_caught_<case>)."""

import pytest

from support import load_json


@pytest.mark.parametrize("op", ["dispatch", "combine", "roundtrip"])
def test_bench_catches_it(mpirun, build, tmp_path, op):
    """`bench OP --transport mpi,stale -c --json` exits 1, and the results document says mpi passed and stale
    failed with wrong elements counted."""
    json_path = tmp_path / "bench.json"
    result = mpirun(2, build.program("epsuite_stale"), "bench", op, "--transport", "mpi,stale", "-c", "-n", "3", "-w",
                    "1", "--tokens", "64", "--json", json_path, cwd=tmp_path)
    assert result.returncode == 1, f"expected exit 1 (wrong results caught), got {result.returncode}"
    cases = load_json(json_path)["results"]
    mpi = [case for case in cases if case["transport"] == "mpi"]
    stale = [case for case in cases if case["transport"] == "stale"]
    assert mpi and stale, f"expected an mpi case and a stale case in {json_path}"
    for case in mpi:
        assert case["check"]["passed"] is True and case["check"]["mismatches"] == 0, \
            f"the working mpi baseline was reported wrong ({case['check']['mismatches']} mismatches)"
    for case in stale:
        assert case["check"]["passed"] is not True and case["check"]["mismatches"] != 0, \
            "bench -c did not catch the stale transport"
    print(f"caught: stale has {stale[-1]['check']['mismatches']} wrong elements, mpi none")


def test_check_catches_it(mpirun, build, tmp_path):
    """`check --transport stale` (back-to-back rounds) exits 1 and names the stale results."""
    result = mpirun(2, build.program("epsuite_stale"), "check", "--transport", "stale",
                    "--gtest_filter=*TransportRobustness*", cwd=tmp_path)
    assert result.returncode == 1, f"expected exit 1 (wrong results caught), got {result.returncode}"
    assert "FAILED" in result.stdout, "the conformance suite did not report the stale transport failing"
