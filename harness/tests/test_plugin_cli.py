"""`--transport plugin:NAME|PATH` end to end (docs/plugins.md) under mpirun, with the test plugins of
impls/transport/plugin/tests (ctest plugin_cli_<case>):

- open order: the test plugin reversing the rows inside every block passes the transport suite when it declares the
  order open and fails it (exit 1, the dispatch checks) when it declares it fixed (SPEC 14.3);
- refused: plugins of another ABI version, without the v1 symbol, with a NULL entry or with bad declarations, and a
  name found nowhere, are refused by check (and the first also by bench and soak) as a usage error naming what is
  wrong;
- faults: a plugin call that returns an error fails its cases with the plugin's message and the suite goes on
  (exit 1); one that hangs ends the job after the deadline, and one that crashes ends it at once, both with exit 3
  and a message naming the plugin and the call;
- bench: `epsuite bench dispatch -c` of the `mpi` transport and of the same transport through the ABI, found by name
  through EPSUITE_PLUGIN_PATH, in one run: both checked, both in the results document.
"""

import re

import pytest

from support import expect_usage_error, load_json

CONTRACTS_UNIFORM = "--gtest_filter=*TransportContract*_uniform"


def plugin_run(mpirun, epsuite, np, *argv, env=None, cwd, timeout=240):
    """epsuite ARGV on np ranks with the test plugin's environment variables `env` passed to every rank (-x)."""
    forwarded = [flag for name in (env or {}) for flag in ("-x", name)]
    return mpirun(np, epsuite, *argv, extra=forwarded, env=env, cwd=cwd, timeout=timeout)


@pytest.fixture
def test_mpi(build):
    """The `mpi` transport behind the ABI (libepsuite-plugin-test-mpi.so), as a --transport spec."""
    return f"plugin:{build.transport_plugin('test-mpi')}"


def test_open_order(mpirun, epsuite, test_mpi, tmp_path):
    permuted = {"EPS_TEST_PLUGIN_PERMUTE": "1", "EPS_TEST_PLUGIN_ORDER": "open"}
    p = plugin_run(mpirun, epsuite, 3, "check", "--transport", test_mpi, CONTRACTS_UNIFORM, env=permuted,
                   cwd=tmp_path)
    assert p.returncode == 0, f"permuted rows declared open must pass, got exit {p.returncode}"
    passed = re.search(r"\[  PASSED  \] (\d+) tests", p.stdout)
    assert passed is not None and int(passed.group(1)) >= 8, "every contract of the plugin ran"

    p = plugin_run(mpirun, epsuite, 3, "check", "--transport", test_mpi, CONTRACTS_UNIFORM,
                   env={"EPS_TEST_PLUGIN_PERMUTE": "1"}, cwd=tmp_path)
    assert p.returncode == 1, f"permuted rows declared fixed must fail with exit 1, got {p.returncode}"
    for layout in ("ht-rank-major", "ht-expert-major", "ll"):
        assert f"{layout} dispatch" in p.stdout, f"the fixed-order {layout} dispatch check fails"
    assert "combine (docs/dispatch.md 5.5)" not in p.stdout, "combine stays right under the permutation"


REFUSALS = {
    "bad-version": "table has abi_version 2, this epsuite speaks version 1",
    "other-version": "it has no symbol eps_ep_plugin_v1, only eps_ep_plugin_v2",
    "null-entry": "entry 'combine' of its eps_ep_plugin_v1 table is NULL",
    "bad-trees": "properties.trees: ht-rank and ht-two-level follow ht-rank-major",
    "no-such-plugin": "libepsuite-plugin-no-such-plugin.so is neither in EPSUITE_PLUGIN_PATH nor on the library path",
}


@pytest.mark.parametrize("plugin", list(REFUSALS))
def test_refused(mpirun, epsuite, build, tmp_path, plugin):
    spec = plugin if plugin == "no-such-plugin" else build.transport_plugin(plugin)
    commands = [["check"]] + ([["bench", "dispatch"], ["soak", "--seeds", "1"]] if plugin == "bad-version" else [])
    for command in commands:
        p = mpirun(1, epsuite, *command, "--transport", f"mpi,plugin:{spec}", cwd=tmp_path)
        expect_usage_error(p, REFUSALS[plugin])


def test_faults(mpirun, epsuite, test_mpi, tmp_path):
    p = plugin_run(mpirun, epsuite, 2, "check", "--transport", test_mpi, CONTRACTS_UNIFORM,
                   env={"EPS_TEST_PLUGIN_FAULT": "error:combine"}, cwd=tmp_path)
    assert p.returncode == 1, f"a plugin error fails the cases (exit 1), got {p.returncode}"
    failed = re.search(r"\[  FAILED  \] (\d+) tests?, listed below", p.stdout)
    assert failed is not None and int(failed.group(1)) >= 8, "every case ran and failed: the suite went on"
    assert "plugin:test-mpi combine: injected failure (EPS_TEST_PLUGIN_FAULT=error:combine)" in p.stdout, \
        "the case names the plugin's message"

    p = plugin_run(mpirun, epsuite, 2, "check", "--transport", test_mpi, "--timeout", "2", CONTRACTS_UNIFORM,
                   env={"EPS_TEST_PLUGIN_FAULT": "hang:dispatch"}, cwd=tmp_path, timeout=60)
    assert p.returncode == 3, f"a hung plugin call ends the job with exit 3, got {p.returncode}"
    assert p.seconds < 40, f"the deadline (2 s + 2 s) ends it, not ctest's timeout ({p.seconds:.0f} s)"
    assert re.search(r"plugin:test-mpi \(.*libepsuite-plugin-test-mpi\.so\): dispatch did not return within 4\.0 s",
                     p.stderr), "the message names the plugin and the call"

    p = plugin_run(mpirun, epsuite, 2, "check", "--transport", test_mpi, CONTRACTS_UNIFORM,
                   env={"EPS_TEST_PLUGIN_FAULT": "crash:combine:1"}, cwd=tmp_path, timeout=60)
    assert p.returncode == 3, f"a crash in a plugin call ends the job with exit 3, got {p.returncode}"
    assert re.search(r"error on host .*, rank 1: plugin:test-mpi \(.*\) crashed in combine: signal 11 \(SIGSEGV\)",
                     p.stderr), "the message names the rank, the plugin, the call and the signal"


def test_bench(mpirun, epsuite, build, tmp_path):
    out = tmp_path / "bench.json"
    p = plugin_run(mpirun, epsuite, 2, "bench", "dispatch", "--transport", "mpi,plugin:test-mpi", "-c", "-n", "3",
                   "-w", "1", "--json", out, env={"EPSUITE_PLUGIN_PATH": build.transport_plugin_dir}, cwd=tmp_path)
    assert p.returncode == 0, f"bench of mpi and plugin:test-mpi passes, got {p.returncode}"
    cases = load_json(out)["results"]
    transports = sorted({c["transport"] for c in cases})
    assert transports == ["mpi", "plugin:test-mpi"], f"both transports are in the results, got {transports}"
    assert all(c["check"] is not None and c["check"]["passed"] for c in cases), "every case is checked and passes"
    assert "plugin:test-mpi (" in p.stdout and "ABI v1" in p.stdout, "the header names the plugin's file and ABI"
