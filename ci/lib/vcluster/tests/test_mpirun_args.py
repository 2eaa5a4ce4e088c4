"""The scan of mpirun's option grammar and the options ci/vcluster adds (vcluster/mpirun_args.py)."""

import pytest

from vcluster import mpirun_args
from vcluster.mpirun_args import Scan, forwarded, options, scan, slots
from vcluster.state import UsageError


@pytest.mark.parametrize("args, np", [
    (["-np", "4", "prog"], "4"),
    (["--np", "3", "prog"], "3"),
    (["-n", "2", "prog"], "2"),
    (["-c", "5", "prog"], "5"),
    (["-np=6", "prog"], "6"),
    (["--np=7", "prog"], "7"),
    (["-n=8", "prog"], "8"),
    (["-np", "4", "-np", "9", "prog"], "4"),  # the first one counts
    (["prog", "-np", "4"], ""),  # the program's own arguments are not mpirun's
    (["-np"], ""),  # a missing value
])
def test_np_is_the_first_value_before_the_program(args, np):
    assert scan(args).np == np


@pytest.mark.parametrize("args, field", [
    (["-H", "a,b", "-np", "2", "prog"], "user_host"),
    (["--host", "a", "prog"], "user_host"),
    (["-host", "a", "prog"], "user_host"),
    (["--hostfile", "f", "prog"], "user_host"),
    (["-machinefile", "f", "prog"], "user_host"),
    (["--default-hostfile", "f", "prog"], "user_host"),
    (["--host=a,b", "prog"], "user_host"),
    (["--machinefile=f", "prog"], "user_host"),
    (["--map-by", "node", "prog"], "user_map"),
    (["-map-by", "node", "prog"], "user_map"),
    (["--map-by=node", "prog"], "user_map"),
    (["--wdir", "/tmp", "prog"], "user_wdir"),
    (["-wd", "/tmp", "prog"], "user_wdir"),
])
def test_overrides_are_seen(args, field):
    found = scan(args)
    assert getattr(found, field)
    others = {"user_host", "user_map", "user_wdir"} - {field}
    assert not any(getattr(found, other) for other in others)


def test_mca_names_are_collected_with_their_two_values():
    found = scan(["--mca", "btl", "self,tcp", "-gmca", "plm_rsh_agent", "ssh", "-np", "2", "prog", "--mca", "x", "y"])
    assert found.user_mca == {"btl", "plm_rsh_agent"}
    assert found.np == "2"


@pytest.mark.parametrize("option", ["-x", "--bind-to", "-rank-by", "--npernode", "-N", "--prefix",
                                    "--output-filename", "--timeout", "-am", "--tune", "--path", "--preload-files",
                                    "--app", "--cpu-list", "--cpus-per-proc", "-bind-to-core", "--stdin"])
def test_an_options_value_is_not_the_program(option):
    # Were the value taken for the program, the -np after it would be missed.
    assert scan([option, "value", "-np", "4", "prog"]).np == "4"


def test_a_flag_without_a_value_is_skipped():
    assert scan(["--enable-recovery", "--report-bindings", "-np", "4", "prog"]) == Scan(np="4")


def test_slots_from_np_rounded_up_over_the_nodes():
    assert slots(Scan(np="4"), 2, "") == 2
    assert slots(Scan(np="5"), 2, "") == 3
    assert slots(Scan(np="1"), 3, "") == 1
    assert slots(Scan(np=""), 2, "") == 1
    assert slots(Scan(np="0"), 2, "") == 1
    assert slots(Scan(np="x"), 2, "") == 1


def test_vcluster_slots_wins_and_must_be_positive():
    assert slots(Scan(np="4"), 2, "7") == 7
    for bad in ("0", "-1", "two", "01"):
        with pytest.raises(UsageError, match="VCLUSTER_SLOTS must be a positive integer"):
            slots(Scan(np="4"), 2, bad)


def test_forwarded_environment():
    environ = {"EPS_X": "1", "EPSUITE_TIMEOUT": "3", "FI_TCP_IFACE": "vc0", "GTEST_COLOR": "no", "OMP_N": "2",
               "UCX_TLS": "tcp", "HOME": "/root", "MY_VAR": "a", "PATH": "/bin"}
    assert forwarded(environ, "") == ["EPSUITE_TIMEOUT", "EPS_X", "FI_TCP_IFACE", "GTEST_COLOR", "OMP_N", "UCX_TLS"]
    # Names of VCLUSTER_ENV once each, only when set, only valid names.
    assert forwarded(environ, "MY_VAR EPS_X UNSET bad-name MY_VAR") == [
        "EPSUITE_TIMEOUT", "EPS_X", "FI_TCP_IFACE", "GTEST_COLOR", "MY_VAR", "OMP_N", "UCX_TLS"]


def test_options_default_and_overridden():
    addresses = ["10.213.7.1", "10.213.7.2"]
    opts = options(Scan(np="4"), addresses, 2, "/src/ci/vcluster __agent", "/work", ["EPS_VC_RUN"])
    assert opts == ["--host", "10.213.7.1:2,10.213.7.2:2", "--map-by", ":OVERSUBSCRIBE", "--wdir", "/work",
                    "--mca", "plm", "rsh", "--mca", "plm_rsh_agent", "/src/ci/vcluster __agent",
                    "--mca", "plm_rsh_no_tree_spawn", "1", "--mca", "oob_tcp_if_include", "vc0",
                    "--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "vc0", "-x", "EPS_VC_RUN"]
    found = scan(["--host", "a", "--map-by", "node", "--wdir", "/x", "--mca", "btl", "tcp,self", "prog"])
    opts = options(found, addresses, 1, "agent", "/work", [])
    assert "--host" not in opts and "--map-by" not in opts and "--wdir" not in opts
    assert "btl" not in opts and "btl_tcp_if_include" in opts


def test_the_grammar_lists_are_disjoint():
    lists = [mpirun_args.NP_OPTIONS, mpirun_args.HOST_OPTIONS, mpirun_args.MAP_OPTIONS, mpirun_args.WDIR_OPTIONS,
             mpirun_args.MCA_OPTIONS, mpirun_args.VALUE_OPTIONS]
    words = [w for options_list in lists for w in options_list]
    assert len(words) == len(set(words))
