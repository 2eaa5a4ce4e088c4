"""The virtual cluster (ci/vcluster, docs/fabrics.md 13) as the vcluster tests use it: bringing it up and down
(for the `cluster` fixture of conftest.py, and for ctest's fixtures vcluster_up/vcluster_down through
vcluster_session.py), its subcommands, and mpirun across its nodes, in the foreground or watched in the
background."""

import os
import re
import signal
import subprocess
import threading
import time

import support

NODES = 2
RANKS = 4
UNAVAILABLE = "vcluster-unavailable.txt"  # in the build directory: why vcluster_up found no namespaces here


def script(source_dir):
    return os.path.join(source_dir, "ci", "vcluster")


def bring_up(source_dir, marker=None):
    """A fresh NODES-node cluster (one left over is taken down first). Returns None, or the reason why network
    namespaces cannot be made here (written to `marker` too, when given)."""
    if marker and os.path.exists(marker):
        os.remove(marker)
    check = subprocess.run([script(source_dir), "check"], capture_output=True, text=True, check=False)
    if check.returncode == 3:
        reason = (check.stdout + check.stderr).strip()
        if marker:
            with open(marker, "w", encoding="utf-8") as f:
                f.write(reason + "\n")
        return reason
    if check.returncode != 0:
        raise RuntimeError(f"ci/vcluster check exited {check.returncode}: {check.stdout}{check.stderr}")
    subprocess.run([script(source_dir), "down"], capture_output=True, check=False)
    up = subprocess.run([script(source_dir), "up", str(NODES)], capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise RuntimeError(f"ci/vcluster up {NODES} exited {up.returncode}: {up.stdout}{up.stderr}")
    print(up.stdout, end="")
    return None


def bring_down(source_dir):
    """Removes the cluster (never fails)."""
    return subprocess.run([script(source_dir), "down"], check=False).returncode


class Cluster:
    """The cluster that is up: ci/vcluster subcommands and mpirun with RANKS ranks across the nodes."""

    def __init__(self, build):
        self.script = script(build.source_dir)
        self.build = build
        self.epsuite = build.program("epsuite")

    def ctl(self, *args, check=True):
        done = subprocess.run([self.script, *args], capture_output=True, text=True, check=False)
        assert not check or done.returncode == 0, \
            f"ci/vcluster {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}"
        return done

    @staticmethod
    def env(extra=None):
        # GTEST_* reaches the ranks through ci/vcluster's -x.
        return {**os.environ, "GTEST_COLOR": "no", **(extra or {})}

    def command(self, args, extra=(), ranks=RANKS):
        return [self.script, "mpirun", "-np", str(ranks), *extra, *args]

    def mpirun(self, args, cwd, extra=(), timeout=600, env=None, ranks=RANKS):
        """`ci/vcluster mpirun -np ranks [extra] args` to its end (ranks fill node0's slots first: 3 ranks on the
        2 nodes are 2 + 1)."""
        return support.run(self.command(args, extra, ranks), timeout=timeout, cwd=cwd, env=self.env(env))

    def epsuite_processes(self):
        """epsuite bench ranks still alive in any node namespace, as 'namespace: pid'."""
        found = []
        listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout.split()
        for ns in (n for n in listing if n.startswith("eps-vc-node")):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                                  check=False).stdout.split()
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        cmdline = f.read().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                if cmdline.startswith(self.epsuite + " bench"):
                    found.append(f"{ns}: {pid}")
        return found


class Watched:
    """`ci/vcluster mpirun` in the background (a session of its own) whose output lines are time-stamped as they
    arrive."""

    def __init__(self, cluster, args, cwd, extra=()):
        cmd = cluster.command(args, extra)
        print("$", " ".join(cmd), flush=True)
        self.start = time.monotonic()
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                                     env=cluster.env(), start_new_session=True)
        self.lines = []  # (seconds since start, text)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append((time.monotonic() - self.start, line.rstrip("\n")))

    def wait_for(self, pattern, limit):
        """True once a line matches pattern; False when mpirun ended without one, or after `limit` seconds."""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if any(re.search(pattern, text) for _, text in self.lines):
                return True
            if self.proc.poll() is not None and not self.reader.is_alive():
                return False
            time.sleep(0.05)
        return False

    def wait_end(self, limit):
        """Waits up to `limit` seconds for mpirun to end, without killing it."""
        try:
            self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            pass

    def finish(self, limit):
        """Waits up to `limit` seconds for mpirun; stops its session after that. Returns the exit code."""
        try:
            return self.proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                return self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                return self.proc.wait()
        finally:
            self.reader.join(timeout=5)

    def text(self):
        return "\n".join(f"[{t:7.2f}s] {line}" for t, line in self.lines)
