#!/usr/bin/env python3
"""`epsuite planner` as a process (docs/eplb.md 8.7): the key's absence, its secrecy, the listening line and a
clean stop on SIGTERM.

usage: planner_cli.py --epsuite EXE --workdir DIR

Checks: without EPSUITE_EPLB_KEY (and with a key that is too short) it exits 2 naming the variable; with a
recognisable key (hex, and as @FILE) it prints "planner: listening on 127.0.0.1:PORT (policies: ...)" with
the real port, rejects a connection that sends garbage with one log line, and stops with exit 0 on SIGTERM;
the key shows nowhere in its output or its --log file.
"""
import argparse
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

KEY = "0123456789abcdeffedcba98765432100123456789abcdeffedcba9876543210"
WRONG_KEY = "f" * 64
LISTENING = re.compile(r"^planner: listening on 127\.0\.0\.1:(\d+) \(policies: [a-z0-9-]+(, [a-z0-9-]+)*\)$")


def shows_key(text):
    lowered = text.lower()
    return any(KEY[i:i + 16] in lowered for i in range(0, len(KEY) - 15, 8))


class Driver:
    def __init__(self, args):
        self.epsuite = args.epsuite
        self.mpirun = args.mpirun
        self.workdir = args.workdir
        self.failures = []
        shutil.rmtree(self.workdir, ignore_errors=True)
        os.makedirs(self.workdir)

    def expect(self, condition, what, detail=""):
        if not condition:
            self.failures.append(what)
            print(f"FAIL: {what}\n{detail}")

    def environment(self, key):
        env = {k: v for k, v in os.environ.items() if k != "EPSUITE_EPLB_KEY"}
        if key is not None:
            env["EPSUITE_EPLB_KEY"] = key
        return env

    def refuses(self, key, what):
        p = subprocess.run([self.epsuite, "planner", "--listen", "127.0.0.1:0"], env=self.environment(key),
                           capture_output=True, text=True, timeout=30)
        output = p.stdout + p.stderr
        print(f"{what}: exit {p.returncode}: {output.strip()}")
        self.expect(p.returncode == 2, f"{what}: exit code 2", output)
        self.expect("EPSUITE_EPLB_KEY" in p.stderr, f"{what}: the message names EPSUITE_EPLB_KEY", output)
        self.expect(not shows_key(output), f"{what}: the output shows no key", output)
        self.expect("listening" not in output, f"{what}: nothing listens", output)

    # Reads stdout lines until one arrives or the deadline passes.
    @staticmethod
    def first_line(process, seconds):
        ready, _, _ = select.select([process.stdout], [], [], seconds)
        return process.stdout.readline().rstrip("\n") if ready else ""

    def serves_and_stops(self, key, what, log_path=None):
        command = [self.epsuite, "planner", "--listen", "127.0.0.1:0"]
        if log_path:
            command += ["--log", log_path]
        process = subprocess.Popen(command, env=self.environment(key), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        try:
            line = self.first_line(process, 30)
            print(f"{what}: {line}")
            match = LISTENING.match(line)
            self.expect(match is not None, f"{what}: the listening line", line)
            if match:
                port = int(match.group(1))
                self.expect(port != 0, f"{what}: the real port is printed", line)
                with socket.create_connection(("127.0.0.1", port), timeout=10) as attacker:
                    # A length field above the 16 MiB cap, then noise: refused at once.
                    attacker.sendall(b"\xff\xff\xff\xff" + os.urandom(60))
                    attacker.settimeout(10)
                    self.expect(attacker.recv(4096) == b"", f"{what}: garbage gets no reply, only a close")
                if self.mpirun and log_path is None:
                    self.bench_through(port, KEY, f"{what}: bench eplb with the key", 0)
                    self.bench_through(port, WRONG_KEY, f"{what}: bench eplb with a wrong key", 3)
            time.sleep(0.2)  # the log line is written on the serving thread
            process.send_signal(signal.SIGTERM)
            stdout, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        log = open(log_path).read() if log_path else stderr
        output = line + stdout + stderr + log
        print(f"{what}: exit {process.returncode}; log:\n{log}")
        self.expect(process.returncode == 0, f"{what}: SIGTERM stops it with exit 0", output)
        self.expect(re.search(r"^planner: closed 127\.0\.0\.1:\d+: ", log, re.M) is not None,
                    f"{what}: the rejected connection is logged with its peer", output)
        self.expect("rejected" in log, f"{what}: the closing summary", output)
        self.expect(not shows_key(output), f"{what}: the key shows nowhere", output)

    # `bench eplb --planner` (2 ranks, checked) through the planner: with its key every step is right; with
    # another key rank 0's frames are refused, the run ends with exit 3 and the planner keeps serving.
    def bench_through(self, port, key, what, want_exit):
        command = [self.mpirun, "-np", "2", "--map-by", ":OVERSUBSCRIBE", self.epsuite, "bench", "eplb",
                   "--preset", "smoke", "--workload", "drift", "--steps", "8", "--lb-interval", "2",
                   "--transport", "mpi", "--policy", "deepseek", "--timeout", "10", "--planner",
                   f"127.0.0.1:{port}", "-c"]
        p = subprocess.run(command, env=self.environment(key), capture_output=True, text=True, timeout=180)
        print(f"{what}: exit {p.returncode}")
        output = p.stdout + p.stderr
        self.expect(p.returncode == want_exit, f"{what}: exit {p.returncode}, expected {want_exit}", output)
        if want_exit == 0:
            self.expect(re.search(r"^ +3 +6-7 .* 0$", p.stdout, re.M) is not None,
                        f"{what}: four windows, the last with 0 wrong", output)
        self.expect(not shows_key(output), f"{what}: the key shows nowhere", output)

    def run(self):
        self.refuses(None, "no key")
        self.refuses("abcdef", "short key")
        self.serves_and_stops(KEY, "hex key")
        key_file = os.path.join(self.workdir, "key.hex")
        with open(key_file, "w") as f:
            f.write(KEY + "\n")
        self.serves_and_stops("@" + key_file, "@file key", log_path=os.path.join(self.workdir, "planner.log"))
        return 1 if self.failures else 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epsuite", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--mpirun", help="also run `bench eplb --planner` through the planner process")
    return Driver(parser.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
