"""Unit tests of ci/vcluster without namespaces: a fake machine (FakeSystem) plays the `ip` commands, the
processes and the signals, and records every command. The real thing runs under the ctest label vcluster."""

import io
import os
import signal
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from vcluster.cluster import Cluster  # noqa: E402
from vcluster.state import Paths  # noqa: E402
from vcluster.system import Completed  # noqa: E402


class FakeProcess:
    """A spawned mpirun: wait() returns `code`; signals sent to it are recorded."""

    def __init__(self, code):
        self.code = code
        self.signals = []

    def wait(self):
        return self.code

    def send_signal(self, signum):
        self.signals.append(signum)


class FakeSystem:
    """A machine with network namespaces (a set), processes living in them, and commands that fail on demand.

    fail: {substring of a command line: (exit code, stderr)}: the first command containing it fails.
    processes: {pid: {"ns": namespace, "cmdline": text, "environ": [...], "ignores_term": bool}}.
    """

    def __init__(self):
        self.commands = []
        self.namespaces = []
        self.fail = {}
        self.processes = {}
        self.signals = []  # (pid, signal)
        self.slept = 0.0
        self.root = True
        self.tools = {"ip", "unshare", "tc", "mpirun"}
        self.execed = None  # (argv, env) of exec
        self.spawned = None  # (argv, env) of spawn
        self.process = FakeProcess(0)
        self.signal_handler = None
        self.my_pid = 4242

    def run(self, argv):
        line = " ".join(argv)
        self.commands.append(line)
        for needle, (code, err) in list(self.fail.items()):
            if needle in line:
                del self.fail[needle]
                return Completed(code, "", err)
        if argv[:3] == ["ip", "netns", "add"]:
            self.namespaces.append(argv[3])
        elif argv[:3] == ["ip", "netns", "del"]:
            if argv[3] not in self.namespaces:
                return Completed(1, "", f'Cannot remove namespace file "/run/netns/{argv[3]}"')
            self.namespaces.remove(argv[3])
            for pid in [p for p, proc in self.processes.items() if proc["ns"] == argv[3]]:
                del self.processes[pid]
        elif argv[:3] == ["ip", "netns", "list"]:
            return Completed(0, "".join(f"{ns} (id: {i})\n" for i, ns in enumerate(self.namespaces)))
        elif argv[:3] == ["ip", "netns", "pids"]:
            if argv[3] not in self.namespaces:
                return Completed(1, "", "Cannot open network namespace")
            return Completed(0, "".join(f"{p}\n" for p, proc in self.processes.items() if proc["ns"] == argv[3]))
        elif argv[:2] == ["mpirun", "--version"]:
            return Completed(0, "mpirun (Open MPI) 4.1.4\n")
        return Completed(0)

    def has_tool(self, name):
        return name in self.tools

    def is_root(self):
        return self.root

    def pid(self):
        return self.my_pid

    def kill(self, pid, sig):
        if pid not in self.processes:
            return False
        if sig != 0:
            self.signals.append((pid, sig))
        if sig == signal.SIGKILL or (sig == signal.SIGTERM and not self.processes[pid].get("ignores_term")):
            del self.processes[pid]
        return True

    def alive(self, pid):
        return pid in self.processes

    def cmdline(self, pid):
        return self.processes[pid]["cmdline"] if pid in self.processes else None

    def environ(self, pid):
        return self.processes[pid].get("environ", []) if pid in self.processes else []

    def sleep(self, seconds):
        self.slept += seconds

    def exec(self, argv, env):
        self.execed = (argv, env)

    def spawn(self, argv, env):
        self.spawned = (argv, env)
        return self.process

    def on_signals(self, handler):
        self.signal_handler = handler
        return lambda: setattr(self, "signal_handler", None)


class Harness:
    """A Cluster on a FakeSystem with its files under a temporary directory; output captured."""

    def __init__(self, tmp_path):
        self.system = FakeSystem()
        self.paths = Paths(state_dir=str(tmp_path / "run"), etc_netns=str(tmp_path / "etc-netns"))
        self.out, self.err = io.StringIO(), io.StringIO()
        self.cluster = Cluster(self.system, self.paths, "/src/ci/vcluster", self.out, self.err)

    def main(self, *argv):
        from vcluster.cli import main  # pylint: disable=import-outside-toplevel
        return main(list(argv), self.cluster)

    def up(self, n=2):
        assert self.main("up", str(n)) == 0, self.err.getvalue()
        self.system.commands.clear()


@pytest.fixture
def vc(tmp_path):
    return Harness(tmp_path)
