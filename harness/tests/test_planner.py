"""`epsuite planner` as a process (docs/eplb.md 8.7), ctest planner_cli: without EPSUITE_EPLB_KEY (and with a key
that is too short) it exits 2 naming the variable; with a recognisable key (hex, and as @FILE) it prints
"planner: listening on 127.0.0.1:PORT (policies: ...)" with the real port, rejects a connection that sends garbage
with one log line, serves `bench eplb --planner` (right with the key, exit 3 with another key) and stops with
exit 0 on SIGTERM; the key shows nowhere in its output or its --log file."""

import os
import re
import select
import signal
import socket
import subprocess
import time

import pytest

from support import expect_usage_error

KEY = "0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210"
WRONG_KEY = "f" * 64
LISTENING = re.compile(r"^planner: listening on 127\.0\.0\.1:(\d+) \(policies: [a-z0-9-]+(, [a-z0-9-]+)*\)$")


def shows_key(text):
    lowered = text.lower()
    return any(KEY[i:i + 16] in lowered for i in range(0, len(KEY) - 15, 8))


def environment(mpirun, key):
    env = {k: v for k, v in mpirun.env().items() if k != "EPSUITE_EPLB_KEY"}
    if key is not None:
        env["EPSUITE_EPLB_KEY"] = key
    return env


@pytest.mark.parametrize("key", [None, "abcdef"], ids=["no-key", "short-key"])
def test_refuses_without_a_key(run, epsuite, mpirun, key):
    result = run([epsuite, "planner", "--listen", "127.0.0.1:0"], timeout=30, env=environment(mpirun, key))
    expect_usage_error(result, "EPSUITE_EPLB_KEY")
    assert not shows_key(result.output), "the output shows the key"
    assert "listening" not in result.output, "something listens"


def first_line(process, seconds):
    """The first stdout line, or "" when none arrives within the deadline."""
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return process.stdout.readline().rstrip("\n") if ready else ""


def bench_through(mpirun, epsuite, port, key, want_exit):
    """`bench eplb --planner` (2 ranks, checked) through the planner: with its key every step is right; with another
    key rank 0's frames are refused, the run ends with exit 3 and the planner keeps serving."""
    result = mpirun(2, epsuite, "bench", "eplb", "--preset", "smoke", "--workload", "drift", "--steps", "8",
                    "--lb-interval", "2", "--transport", "mpi", "--policy", "deepseek", "--timeout", "10", "--planner",
                    f"127.0.0.1:{port}", "-c", timeout=180, env={"EPSUITE_EPLB_KEY": key})
    assert result.returncode == want_exit, f"bench eplb through the planner: exit {result.returncode}"
    if want_exit == 0:
        assert re.search(r"^ +3 +6-7 .* 0$", result.stdout, re.M), "four windows, the last with 0 wrong"
    assert not shows_key(result.output), "the bench output shows the key"


@pytest.mark.parametrize("as_file", [False, True], ids=["hex-key", "file-key"])
def test_serves_and_stops(epsuite, mpirun, tmp_path, as_file):
    """With the hex key it also serves `bench eplb --planner`; with @FILE it logs into --log."""
    key, log_path = KEY, None
    command = [epsuite, "planner", "--listen", "127.0.0.1:0"]
    if as_file:
        key_file = tmp_path / "key.hex"
        key_file.write_text(KEY + "\n")
        key, log_path = f"@{key_file}", tmp_path / "planner.log"
        command += ["--log", str(log_path)]
    process = subprocess.Popen(command, env=environment(mpirun, key), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = first_line(process, 30)
        print(f"planner: {line}")
        match = LISTENING.match(line)
        assert match, f"the listening line: {line!r}"
        port = int(match.group(1))
        assert port != 0, "the real port is printed"
        with socket.create_connection(("127.0.0.1", port), timeout=10) as attacker:
            # A length field above the 16 MiB cap, then noise: refused at once.
            attacker.sendall(b"\xff\xff\xff\xff" + os.urandom(60))
            attacker.settimeout(10)
            assert attacker.recv(4096) == b"", "garbage gets no reply, only a close"
        if not as_file:
            bench_through(mpirun, epsuite, port, KEY, 0)
            bench_through(mpirun, epsuite, port, WRONG_KEY, 3)
        time.sleep(0.2)  # the log line is written on the serving thread
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    log = log_path.read_text() if log_path else stderr
    print(f"planner: exit {process.returncode}; log:\n{log}")
    assert process.returncode == 0, "SIGTERM stops it with exit 0"
    assert re.search(r"^planner: closed 127\.0\.0\.1:\d+: ", log, re.M), "the rejected connection is logged"
    assert "rejected" in log, "the closing summary"
    assert not shows_key(line + stdout + stderr + log), "the key shows somewhere"
