"""Everything the virtual cluster does to the machine: the commands it runs (ip, tc, unshare, mpirun), the
processes it signals and reads, time and process replacement. The cluster (cluster.py) reaches the machine only
through one `System`, so unit tests give it a fake that records the commands and plays back their results."""

import dataclasses
import os
import shutil
import signal
import subprocess
import time


@dataclasses.dataclass
class Completed:
    returncode: int
    stdout: str = ""
    stderr: str = ""


class System:
    """The real machine."""

    def run(self, argv):
        """Runs argv to its end with its output captured; a missing program exits 127 as in a shell."""
        try:
            done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        except OSError as e:
            return Completed(127, "", f"{argv[0]}: {e.strerror}")
        return Completed(done.returncode, done.stdout, done.stderr)

    def has_tool(self, name):
        return shutil.which(name) is not None

    def is_root(self):
        return os.geteuid() == 0

    def pid(self):
        return os.getpid()

    def kill(self, pid, sig):
        """Sends sig; False when the process is gone (or not ours to signal)."""
        try:
            os.kill(pid, sig)
            return True
        except OSError:
            return False

    def alive(self, pid):
        return self.kill(pid, 0)

    def cmdline(self, pid):
        """The process's arguments joined by spaces, None when it is gone."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None

    def environ(self, pid):
        """The process's environment as NAME=VALUE strings, empty when it is gone."""
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                return [e.decode(errors="replace") for e in f.read().split(b"\0") if e]
        except OSError:
            return []

    def sleep(self, seconds):
        time.sleep(seconds)

    def exec(self, argv, env):
        """Replaces this process by argv (exec and the rsh agent pass the command's exit code through)."""
        try:
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            raise SystemExit(f"vcluster: cannot run {argv[0]}: {e.strerror}") from None

    def spawn(self, argv, env):
        """Starts argv in a session of its own (the package docstring says why), stdin shared; returns a Popen."""
        return subprocess.Popen(argv, env=env, start_new_session=True)

    def on_signals(self, handler):
        """Routes SIGINT, SIGTERM and SIGHUP to handler(signum); returns a function restoring the old ones."""
        signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = {s: signal.signal(s, lambda signum, _frame: handler(signum)) for s in signals}
        return lambda: [signal.signal(s, h) for s, h in old.items()]
