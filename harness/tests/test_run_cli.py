"""`epsuite run` bad input under mpirun (the full run is test_ci_smoke.py): each case exits exactly 2 with one
message naming the problem, before anything is written (ctest run_cli_<case>)."""

import pytest

from support import expect_usage_error

# case -> (ranks, arguments of `epsuite run` before --out, what the message must say)
BAD_INPUTS = {
    "preset-ranks": (5, ["--preset", "smoke"], "24 experts cannot be split evenly over 5 ranks"),
    "unknown-preset": (2, ["--preset", "nope"], "--preset: must be one of"),
    "unknown-transport": (2, ["--preset", "smoke", "--transport", "bogus"], "bogus"),
    # fabric-order on the chaos fabric needs --allow-unsafe
    "unsafe-signal": (2, ["--preset", "smoke", "--signal", "fabric-order", "--chaos", "seed=1"],
                      "fabric-order needs an ordered fabric"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input(mpirun, epsuite, tmp_path, case):
    np, args, message = BAD_INPUTS[case]
    out = tmp_path / "out"
    expect_usage_error(mpirun(np, epsuite, "run", *args, "--out", out), message, nothing_at=[out])


@pytest.mark.parametrize("flags, message", [pytest.param([], "exists and is not empty", id="out-not-empty"),
                                            pytest.param(["--force"], "holds no earlier run", id="force-foreign")])
def test_existing_out(mpirun, epsuite, tmp_path, flags, message):
    """An existing non-empty --out is refused, so that no old file enters the report; --force replaces only an
    earlier run directory (one with info.json), never an arbitrary one. Nothing in it is touched."""
    out = tmp_path / "out"
    out.mkdir()
    stale = out / "bench-dispatch-ht.json"
    stale.write_text('{"stale": true}')
    expect_usage_error(mpirun(2, epsuite, "run", "--preset", "smoke", "--out", out, *flags), message)
    assert stale.read_text() == '{"stale": true}' and list(out.iterdir()) == [stale], \
        f"{out} was modified although the run was refused"
