"""The state file and node arguments (vcluster/state.py)."""

import pytest

from vcluster.state import Error, Paths, State, UsageError, hosts_file


def test_state_file_round_trip(tmp_path):
    paths = Paths(state_dir=str(tmp_path), etc_netns=str(tmp_path / "etc"))
    State.of(3).write(paths)
    text = open(paths.state, encoding="utf-8").read()
    assert text == ("nodes 3\nswitch eps-vc-switch br0\nnet 10.213.7.0/24 vc0\n"
                    "node 0 eps-vc-node0 10.213.7.1 node0 sw0\n"
                    "node 1 eps-vc-node1 10.213.7.2 node1 sw1\n"
                    "node 2 eps-vc-node2 10.213.7.3 node2 sw2\n")
    assert State.load(paths) == State.of(3)
    assert not (tmp_path / "state.tmp").exists()


def test_no_state_file_means_not_up(tmp_path):
    with pytest.raises(Error, match=r"no virtual cluster is up \(no .*state\); run 'ci/vcluster up N' first") as e:
        State.load(Paths(state_dir=str(tmp_path)))
    assert e.value.code == 1


@pytest.mark.parametrize("text", [
    "",
    "nodes 0\n",
    "nodes 2\nnode 0 eps-vc-node0 10.213.7.1 node0 sw0\n",  # a node missing
    "nodes 1\nnode 1 eps-vc-node1 10.213.7.2 node1 sw1\n",  # not 0..N-1
    "nodes x\n",
])
def test_a_corrupt_state_file_says_so(tmp_path, text):
    with pytest.raises(Error, match="corrupt state file .*; run 'ci/vcluster down'") as e:
        State.parse(text, "STATE")
    assert e.value.code == 1


def test_node_arguments():
    state = State.of(2)
    assert state.node_index("1") == 1
    assert state.node_index("01") == 1  # decimal, never octal
    with pytest.raises(UsageError, match=r"NODE must be a node index 0..1, got 'x'"):
        state.node_index("x")
    with pytest.raises(UsageError, match=r"NODE must be a node index 0..1, got '-1'"):
        state.node_index("-1")
    with pytest.raises(UsageError, match=r"no node 2 \(the cluster has nodes 0..1\)"):
        state.node_index("2")


def test_hosts_are_found_by_address_name_or_namespace():
    state = State.of(2)
    for host in ("10.213.7.2", "node1", "eps-vc-node1"):
        assert state.find_host(host).index == 1
    assert state.find_host("10.213.7.3") is None


def test_hosts_file():
    assert hosts_file(2) == "127.0.0.1 localhost\n10.213.7.1 node0\n10.213.7.2 node1\n"
