"""Names, addresses and the state file of the virtual cluster (see the package docstring for the layout)."""

import dataclasses
import os
import re

SWITCH_NS = "eps-vc-switch"
NODE_NS_PREFIX = "eps-vc-node"
BRIDGE = "br0"
IFACE = "vc0"
NET = "10.213.7"  # private /24, exists only between the namespaces; node K = NET.(K+1)
PREFIXLEN = 24
MAX_NODES = 64
OUR_NAMESPACE = re.compile(rf"^({NODE_NS_PREFIX}[0-9]+|{SWITCH_NS})$")


class Error(Exception):
    """A failure with the exit code of the package docstring; the message is printed as `vcluster: MESSAGE`."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class UsageError(Error):
    """Exit 2, with the one-line usage after the message."""

    def __init__(self, message):
        super().__init__(2, message)


@dataclasses.dataclass(frozen=True)
class Paths:
    """Where the cluster keeps its files; unit tests point both at a temporary directory."""

    state_dir: str = "/run/eps-vcluster"
    etc_netns: str = "/etc/netns"

    @property
    def state(self):
        return os.path.join(self.state_dir, "state")

    @property
    def lock(self):
        return os.path.join(self.state_dir, "lock")


@dataclasses.dataclass(frozen=True)
class Node:
    index: int
    namespace: str
    address: str
    host: str
    switch_port: str


def node(k):
    """Node k as `up` builds it."""
    return Node(k, f"{NODE_NS_PREFIX}{k}", f"{NET}.{k + 1}", f"node{k}", f"sw{k}")


@dataclasses.dataclass(frozen=True)
class State:
    """What `up` built. File format, one record a line:
        nodes N
        switch NS BRIDGE
        net PREFIX/LEN IFACE
        node K NAMESPACE ADDRESS HOSTNAME SWITCH_PORT
    """

    nodes: tuple

    @staticmethod
    def of(n):
        return State(tuple(node(k) for k in range(n)))

    def text(self):
        lines = [f"nodes {len(self.nodes)}", f"switch {SWITCH_NS} {BRIDGE}", f"net {NET}.0/{PREFIXLEN} {IFACE}"]
        lines += [f"node {n.index} {n.namespace} {n.address} {n.host} {n.switch_port}" for n in self.nodes]
        return "\n".join(lines) + "\n"

    @staticmethod
    def parse(text, where):
        """The state in `text` (read from `where`); Error(1) when it is not a whole cluster."""
        count, nodes = 0, {}
        for line in text.splitlines():
            words = line.split()
            try:
                if words[:1] == ["nodes"]:
                    count = int(words[1])
                elif words[:1] == ["node"] and len(words) == 6:
                    nodes[int(words[1])] = Node(int(words[1]), *words[2:])
            except (IndexError, ValueError):
                break
        if count < 1 or sorted(nodes) != list(range(count)):
            raise Error(1, f"corrupt state file {where}; run 'ci/vcluster down'")
        return State(tuple(nodes[k] for k in range(count)))

    def write(self, paths):
        """Written to a temporary file and renamed into place: a reader sees all of it or nothing."""
        temporary = paths.state + ".tmp"
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(self.text())
        os.replace(temporary, paths.state)

    @staticmethod
    def load(paths):
        try:
            with open(paths.state, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            raise Error(1, f"no virtual cluster is up (no {paths.state}); run 'ci/vcluster up N' first") from None
        return State.parse(text, paths.state)

    def node_index(self, word):
        """The node a NODE argument names; UsageError when it is not a node of this cluster."""
        if not re.fullmatch(r"[0-9]+", word or ""):
            raise UsageError(f"NODE must be a node index 0..{len(self.nodes) - 1}, got '{word or ''}'")
        k = int(word, 10)
        if k >= len(self.nodes):
            raise UsageError(f"no node {k} (the cluster has nodes 0..{len(self.nodes) - 1})")
        return k

    def find_host(self, host):
        """The node whose address, host name or namespace is `host`, else None."""
        return next((n for n in self.nodes if host in (n.address, n.host, n.namespace)), None)


def hosts_file(n):
    """/etc/hosts inside every node: localhost and node0..nodeN-1."""
    return "127.0.0.1 localhost\n" + "".join(f"{NET}.{k + 1} node{k}\n" for k in range(n))
