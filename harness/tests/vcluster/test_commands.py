"""ci/vcluster's subcommands on real namespaces (ctest vcluster_commands; their unit tests without namespaces are
ci/lib/vcluster/tests): each node has its host name, address and /etc/hosts, EPS_VC_NODE inside it; a cut shows
in status and heals; a second `up` is refused; bad NODE arguments and a kill that matches nothing fail cleanly."""

import re


def test_commands(cluster):
    status = cluster.ctl("status").stdout
    for k in (0, 1):
        assert re.search(rf"^{k} +node{k} +10\.213\.7\.{k + 1} +eps-vc-node{k} +exists +up +", status, re.M), status
    for k in (0, 1):
        assert cluster.ctl("exec", str(k), "hostname").stdout.strip() == f"node{k}"
        assert cluster.ctl("exec", str(k), "sh", "-c", "echo $EPS_VC_NODE").stdout.strip() == str(k)
        address = cluster.ctl("exec", str(k), "ip", "-o", "-4", "addr", "show", "dev", "vc0").stdout
        assert f"inet 10.213.7.{k + 1}/24" in address, address
        # Only the node's loopback and the other nodes: no default route.
        assert "default" not in cluster.ctl("exec", str(k), "ip", "route").stdout
    assert cluster.ctl("exec", "0", "getent", "hosts", "node1").stdout.split()[0] == "10.213.7.2"
    assert cluster.ctl("exec", "1", "sh", "-c", "exit 7", check=False).returncode == 7  # passed through
    try:
        cluster.ctl("cut", "1")
        assert re.search(r"^1 +node1 .* cut ", cluster.ctl("status").stdout, re.M)
    finally:
        cluster.ctl("heal", "1")
    assert re.search(r"^1 +node1 .* up ", cluster.ctl("status").stdout, re.M)
    up = cluster.ctl("up", "2", check=False)
    assert up.returncode == 1 and "a virtual cluster is already up" in up.stderr
    bad = cluster.ctl("exec", "2", "true", check=False)
    assert bad.returncode == 2 and "no node 2 (the cluster has nodes 0..1)" in bad.stderr
    none = cluster.ctl("kill", "1", "^no-such-process-anywhere$", check=False)
    assert none.returncode == 1 and "node1: no process matches" in none.stderr
