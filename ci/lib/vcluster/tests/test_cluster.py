"""The subcommands on a fake machine (conftest.FakeSystem): what they run, what they leave behind, exit codes."""

import os
import signal

import pytest

from vcluster.cluster import ENTER_NODE


def test_up_builds_nodes_and_switch_and_writes_the_state(vc):
    assert vc.main("up", "2") == 0
    assert vc.system.namespaces == ["eps-vc-switch", "eps-vc-node0", "eps-vc-node1"]
    commands = vc.system.commands
    assert "ip -n eps-vc-node1 link add vc0 type veth peer name sw1 netns eps-vc-switch" in commands
    assert "ip -n eps-vc-node1 addr add 10.213.7.2/24 dev vc0" in commands
    assert "ip -n eps-vc-switch link set sw1 master br0" in commands
    # Nothing is created in the root namespace: every ip command names a namespace.
    for line in commands:
        if line.startswith("ip ") and " link " in line:
            assert line.startswith(("ip -n ", "ip netns exec ")), line
    assert open(os.path.join(vc.paths.etc_netns, "eps-vc-node1", "hosts")).read().endswith("10.213.7.2 node1\n")
    assert open(os.path.join(vc.paths.etc_netns, "eps-vc-node0", "resolv.conf")).read() == "nameserver 127.0.0.1\n"
    assert open(vc.paths.state).read().startswith("nodes 2\n")
    assert "vcluster: up: 2 node(s) on 10.213.7.0/24 (iface vc0), switch namespace eps-vc-switch" in vc.out.getvalue()


@pytest.mark.parametrize("failing, code", [
    ("ip -n eps-vc-node1 link add vc0", 3),  # the second node's veth: three namespaces exist
    ("ip netns add eps-vc-node1", 3),
    ("ip -n eps-vc-switch link set sw0 up", 1),  # a plain command of up
])
def test_a_partial_up_is_torn_down(vc, failing, code):
    vc.system.fail[failing] = (2, "RTNETLINK answers: Operation not permitted")
    vc.system.processes[7] = {"ns": "eps-vc-node0", "cmdline": "sleep 100"}
    assert vc.main("up", "2") == code
    assert "vcluster: up failed; removing what was built" in vc.err.getvalue()
    assert "RTNETLINK answers: Operation not permitted" in vc.err.getvalue()
    assert vc.system.namespaces == []
    assert vc.system.signals == [(7, signal.SIGTERM)]
    assert not os.path.exists(vc.paths.state_dir)
    assert not os.path.exists(vc.paths.etc_netns)
    # Nodes are removed before the switch.
    deletions = [c for c in vc.system.commands if c.startswith("ip netns del")]
    assert deletions[-1] == "ip netns del eps-vc-switch"


def test_a_signal_during_up_tears_down_and_exits_128_plus_it(vc):
    def interrupt_at_the_second_node(argv, run=vc.system.run):
        if argv[:4] == ["ip", "netns", "add", "eps-vc-node1"]:
            vc.system.signal_handler(signal.SIGTERM)
        return run(argv)

    vc.system.run = interrupt_at_the_second_node
    assert vc.main("up", "2") == 128 + signal.SIGTERM
    assert vc.system.namespaces == [] and not os.path.exists(vc.paths.state_dir)
    assert vc.system.signal_handler is None  # the handlers are restored


def test_up_refuses_a_cluster_that_is_up_or_left_over(vc):
    vc.up()
    assert vc.main("up", "2") == 1
    assert "a virtual cluster is already up (eps-vc-switch eps-vc-node0 eps-vc-node1)" in vc.err.getvalue()
    assert not any(c.startswith("ip netns add") for c in vc.system.commands)
    vc.system.namespaces = ["eps-vc-node3"]  # left over by a partial up whose teardown never ran
    os.remove(vc.paths.state)
    assert vc.main("up", "2") == 1


@pytest.mark.parametrize("argv, message", [
    (["up"], "up takes exactly one argument, the node count"),
    (["up", "0"], "node count must be 1..64, got '0'"),
    (["up", "65"], "node count must be 1..64, got '65'"),
    (["up", "two"], "node count must be 1..64, got 'two'"),
    (["check", "--bogus"], "check takes only --netem"),
    (["down", "now"], "down takes no arguments"),
    (["status", "x"], "status takes no arguments"),
    (["exec", "0"], "exec needs NODE and a command"),
    (["mpirun"], "mpirun needs arguments (e.g. -np 4 PROGRAM)"),
    (["cut"], "cut takes exactly one NODE"),
    (["heal", "0", "1"], "heal takes exactly one NODE"),
    (["netem", "0"], "netem needs NODE and a netem SPEC"),
    (["shape", "0"], "shape takes NODE and a RATE"),
    (["kill", "0"], "kill takes NODE PATTERN [--one]"),
    (["kill", "0", "x", "--all"], "kill: third argument must be --one, got '--all'"),
    (["frobnicate"], "unknown subcommand 'frobnicate'"),
])
def test_usage_errors_exit_2_before_anything_runs(vc, argv, message):
    vc.system.root = False  # checked after the arguments
    assert vc.main(*argv) == 2
    assert message in vc.err.getvalue() and "usage: ci/vcluster check|up N|" in vc.err.getvalue()
    assert vc.system.commands == []


def test_not_root_or_a_missing_tool_is_the_environment(vc):
    vc.system.root = False
    assert vc.main("up", "2") == 3
    assert "must run as root" in vc.err.getvalue()
    vc.system.root = True
    vc.system.tools.discard("unshare")
    assert vc.main("check") == 3
    assert "required tool 'unshare' not found" in vc.err.getvalue()


@pytest.mark.parametrize("argv", [["status"], ["exec", "0", "true"], ["cut", "0"], ["netem", "0", "off"],
                                  ["kill", "0", "x"], ["mpirun", "-np", "2", "true"]])
def test_subcommands_need_a_cluster(vc, argv):
    code = vc.main(*argv)
    if argv == ["status"]:
        assert code == 1 and vc.out.getvalue() == "vcluster: not up\n"
    else:
        assert code == 1 and "no virtual cluster is up" in vc.err.getvalue()


def test_status_names_leftovers_and_cut_links(vc):
    vc.system.namespaces = ["eps-vc-node0", "other"]
    assert vc.main("status") == 1
    assert "vcluster: not up (leftover namespaces: eps-vc-node0 - run 'ci/vcluster down')" in vc.out.getvalue()
    vc.system.namespaces = []
    vc.up()
    links = {"sw0": "5: sw0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500", "sw1": "6: sw1@if2: <BROADCAST> mtu"}
    qdiscs = {"eps-vc-node1": "qdisc netem 8001: dev vc0 root refcnt 2 limit 1000 delay 5ms loss 1%\n"}
    run = vc.system.run

    def answer(argv):
        if argv[:4] == ["ip", "-n", "eps-vc-switch", "-o"]:
            return type(run(argv))(0, links[argv[-1]])
        if argv[-3:] == ["dev", "vc0", "root"] and argv[:3] == ["ip", "netns", "exec"]:
            return type(run(argv))(0, qdiscs.get(argv[3], ""))
        return run(argv)

    vc.system.run = answer
    vc.system.namespaces.remove("eps-vc-node1")
    assert vc.main("status") == 0
    lines = vc.out.getvalue().splitlines()[-3:]
    assert lines[0].split() == ["node", "host", "address", "namespace", "namespace", "link", "qdisc"]
    assert lines[1].split() == ["0", "node0", "10.213.7.1", "eps-vc-node0", "exists", "up", "-"]
    assert lines[2].split() == ["1", "node1", "10.213.7.2", "eps-vc-node1", "MISSING", "cut", "netem", "8001:",
                                "limit", "1000", "delay", "5ms", "loss", "1%"]


def test_down_removes_everything_and_never_fails(vc):
    vc.up()
    vc.system.processes = {11: {"ns": "eps-vc-node1", "cmdline": "epsuite", "ignores_term": True},
                           12: {"ns": "eps-vc-node0", "cmdline": "orted"}}
    assert vc.main("down") == 0
    assert vc.system.signals == [(12, signal.SIGTERM), (11, signal.SIGTERM), (11, signal.SIGKILL)]
    assert vc.system.slept == pytest.approx(2.0)  # the grace before SIGKILL
    assert vc.system.namespaces == [] and not os.path.exists(vc.paths.state_dir)
    assert vc.main("down") == 0  # nothing to remove
    vc.system.tools.discard("ip")
    assert vc.main("down") == 0


def test_exec_enters_the_node_with_its_host_name(vc):
    vc.up()
    assert vc.main("exec", "1", "hostname", "-s") == 0
    argv, env = vc.system.execed
    assert argv == ["ip", "netns", "exec", "eps-vc-node1", "unshare", "--uts", "sh", "-c", ENTER_NODE,
                    "vcluster-exec", "node1", "hostname", "-s"]
    assert env["EPS_VC_NODE"] == "1"
    assert vc.main("exec", "2", "true") == 2


def test_the_agent_maps_a_host_to_its_node(vc):
    vc.up()
    assert vc.main("__agent", "-x", "10.213.7.2", "orted", "--daemonize", "-mca", "x 'y z'") == 0
    argv, env = vc.system.execed
    assert argv[:11] == ["ip", "netns", "exec", "eps-vc-node1", "unshare", "--uts", "sh", "-c", ENTER_NODE,
                         "vcluster-agent", "node1"]
    assert argv[11:] == ["/bin/sh", "-c", "orted --daemonize -mca x 'y z'"]  # ssh semantics: words joined
    assert env["EPS_VC_NODE"] == "1"
    assert vc.main("__agent", "10.213.7.9", "true") == 255
    assert "agent: unknown host '10.213.7.9'" in vc.err.getvalue()
    assert vc.main("__agent", "node1") == 255


def test_mpirun_runs_in_node0_with_the_added_options(vc, monkeypatch):
    vc.up()
    monkeypatch.setenv("OMPI_MCA_btl_tcp_if_exclude", "lo")
    monkeypatch.setenv("EPSUITE_TIMEOUT", "8")
    vc.system.process.code = 3
    assert vc.main("mpirun", "-np", "4", "--mca", "btl", "tcp,self", "prog", "-np", "1") == 3
    argv, env = vc.system.spawned
    assert argv[:11] == ["ip", "netns", "exec", "eps-vc-node0", "unshare", "--uts", "sh", "-c", ENTER_NODE,
                         "vcluster-mpirun", "node0"]
    mpirun = argv[11:]
    assert mpirun[:3] == ["mpirun", "--host", "10.213.7.1:2,10.213.7.2:2"]
    assert mpirun[-6:] == ["-np", "4", "--mca", "btl", "tcp,self", "prog", "-np", "1"][-6:]
    assert ["--mca", "btl", "self,vader,tcp"] not in [mpirun[i:i + 3] for i in range(len(mpirun))]
    assert "--mca plm_rsh_agent /src/ci/vcluster __agent" in " ".join(mpirun)
    assert "-x EPSUITE_TIMEOUT" in " ".join(mpirun) and "-x EPS_VC_RUN" in " ".join(mpirun)
    assert "-x EPS_VC_NODE" not in " ".join(mpirun)
    assert env["FI_TCP_IFACE"] == "vc0" and env["SHELL"] == "/bin/sh" and env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert env["EPS_VC_NODE"] == "0" and "OMPI_MCA_btl_tcp_if_exclude" not in env


def test_mpirun_forwards_signals_and_reaps_the_run(vc):
    vc.up()
    run = {}

    def wait():
        run["id"] = vc.system.spawned[1]["EPS_VC_RUN"]
        vc.system.signal_handler(signal.SIGINT)  # Ctrl-C while mpirun runs
        vc.system.processes = {
            31: {"ns": "eps-vc-node1", "cmdline": "epsuite", "environ": [f"EPS_VC_RUN={run['id']}"]},
            32: {"ns": "eps-vc-node1", "cmdline": "other", "environ": ["EPS_VC_RUN=another-run"]}}
        return -signal.SIGINT

    vc.system.process.wait = wait
    assert vc.main("mpirun", "-np", "2", "prog") == 128 + signal.SIGINT
    assert vc.system.process.signals == [signal.SIGINT]
    # Only this run's leftover, after the 3 s grace.
    assert vc.system.signals == [(31, signal.SIGKILL)]
    assert vc.system.slept == pytest.approx(3.0)
    assert "killing 1 process(es) left in the nodes after mpirun: 31" in vc.err.getvalue()
    assert vc.system.signal_handler is None


def test_faults_cut_heal_kill(vc):
    vc.up()
    assert vc.main("cut", "1") == 0 and vc.system.commands[-1] == "ip -n eps-vc-switch link set dev sw1 down"
    assert vc.main("heal", "1") == 0 and vc.system.commands[-1] == "ip -n eps-vc-switch link set dev sw1 up"
    vc.system.processes = {40: {"ns": "eps-vc-node1", "cmdline": "/b/epsuite bench dispatch"},
                           30: {"ns": "eps-vc-node1", "cmdline": "/b/epsuite bench dispatch"},
                           20: {"ns": "eps-vc-node0", "cmdline": "/b/epsuite bench dispatch"},
                           vc.system.my_pid: {"ns": "eps-vc-node1", "cmdline": "/b/epsuite bench dispatch"}}
    assert vc.main("kill", "1", "^/b/epsuite bench", "--one") == 0
    assert vc.system.signals == [(30, signal.SIGKILL)]  # the lowest pid of node 1 only
    assert "vcluster: node1: killed 30: /b/epsuite bench dispatch" in vc.out.getvalue()
    assert vc.main("kill", "1", "epsuite") == 0
    assert vc.system.signals[1:] == [(40, signal.SIGKILL)]  # never ci/vcluster itself
    assert vc.main("kill", "1", "nothing-like-this") == 1
    assert "node1: no process matches 'nothing-like-this'" in vc.err.getvalue()


@pytest.mark.parametrize("stderr, code", [
    ('Error: Specified qdisc kind is unknown.', 3),
    ('RTNETLINK answers: No such file or directory', 3),
    ('Error: Illegal "loss" percentage', 2),
])
def test_netem_refusals(vc, stderr, code):
    vc.up()
    vc.system.fail["tc qdisc replace dev vc0 root netem"] = (2, stderr)
    assert vc.main("netem", "1", "delay", "5ms", "loss", "1%") == code
    assert stderr in vc.err.getvalue()
    assert vc.main("netem", "1", "delay", "5ms") == 0
    assert vc.system.commands[-1] == "ip netns exec eps-vc-node1 tc qdisc replace dev vc0 root netem delay 5ms"
    assert vc.main("netem", "1", "off") == 0
    assert vc.system.commands[-1] == "ip netns exec eps-vc-node1 tc qdisc del dev vc0 root"


def test_shape(vc):
    vc.up()
    assert vc.main("shape", "0", "20mbit") == 0
    assert vc.system.commands[-1] == ("ip netns exec eps-vc-node0 tc qdisc replace dev vc0 root tbf rate 20mbit "
                                      "burst 16kb limit 24kb")
    vc.system.fail["tbf"] = (1, "Error: Specified qdisc kind is unknown.")
    assert vc.main("shape", "0", "20mbit") == 3
    vc.system.fail["tbf"] = (1, 'Error: invalid rate "fast"')
    assert vc.main("shape", "0", "fast") == 2
    assert "tc rejected the shape 'rate fast burst 16kb limit 24kb'" in vc.err.getvalue()
    assert vc.main("shape", "0", "off") == 0


def test_check_builds_and_removes_two_namespaces(vc):
    assert vc.main("check") == 0
    assert "namespaces, veth, bridge, host names: available" in vc.out.getvalue()
    assert "netem: available" in vc.out.getvalue() and "mpirun (Open MPI) 4.1.4" in vc.out.getvalue()
    assert vc.system.namespaces == []


def test_check_reports_what_is_unavailable(vc):
    vc.system.fail["link add vc0 type veth"] = (2, "RTNETLINK answers: Operation not supported")
    assert vc.main("check") == 3
    assert ("vcluster check: unavailable: cannot create a veth pair across namespaces: RTNETLINK answers: "
            "Operation not supported") in vc.err.getvalue()
    assert vc.system.namespaces == []
    vc.system.fail["root netem delay 1ms"] = (2, "Error: Specified qdisc kind is unknown.")
    assert vc.main("check") == 0
    assert "netem: unavailable (sch_netem: Error: Specified qdisc kind is unknown.)" in vc.out.getvalue()
    vc.system.fail["root netem delay 1ms"] = (2, "Error: Specified qdisc kind is unknown.")
    assert vc.main("check", "--netem") == 3
