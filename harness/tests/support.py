"""What the tests that run the binary share (conftest.py turns the configured parts into fixtures): running a
command with a deadline, the MPI launcher, the usage-error expectation and the results-document validation."""

import dataclasses
import importlib.util
import json
import os
import re
import signal
import subprocess
import time

ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
ERROR_LINE = "epsuite: error"
STOP_GRACE_S = 10  # a command past its deadline gets SIGTERM, then SIGKILL this much later


@dataclasses.dataclass
class Result:
    """A finished command. Ranks write through Open MPI's pseudo-terminals, so GoogleTest colours its output:
    the colour codes are taken out of stdout and stderr."""

    argv: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self):
        return self.stdout + self.stderr


def run(argv, *, timeout, env=None, cwd=None, quiet=False):
    """Runs argv to its end with stdout and stderr captured. Past `timeout` seconds it is stopped (SIGTERM, then
    SIGKILL) and the test fails with what it printed. The command line, exit code, time and output are printed
    (pytest shows them when the test fails); `quiet` leaves out the output."""
    argv = [str(a) for a in argv]
    print(f"$ {' '.join(argv)}", flush=True)
    start = time.monotonic()
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                          errors="replace", env=env, cwd=cwd) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stdout, stderr = stop(process)
            print(f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")
            raise AssertionError(f"{argv[0]} did not end within {timeout} s (stopped)") from None
    result = Result(argv, process.returncode, ANSI_ESCAPE.sub("", stdout), ANSI_ESCAPE.sub("", stderr),
                    time.monotonic() - start)
    print(f"  -> exit {result.returncode} in {result.seconds:.1f} s")
    if not quiet:
        print(f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}", flush=True)
    return result


def stop(process):
    """SIGTERM (mpirun then ends its ranks), SIGKILL after STOP_GRACE_S; returns what it printed."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        process.send_signal(sig)
        try:
            return process.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            continue
    return "", "(output lost: a child still holds the pipes)"


class Mpirun:
    """`mpirun -np N --map-by :OVERSUBSCRIBE [extra] PROGRAM ARGS` in the loopback-only, root-allowed environment
    of every MPI test (cmake/EpsMpi.cmake, docs/architecture.md)."""

    def __init__(self, mpirun, environment):
        self.mpirun = mpirun
        self.environment = environment

    def env(self, extra=None):
        return {**os.environ, **self.environment, **(extra or {})}

    def command(self, np, argv, extra=()):
        return [self.mpirun, "-np", str(np), "--map-by", ":OVERSUBSCRIBE", *extra, *argv]

    def __call__(self, np, *argv, extra=(), timeout=240, env=None, cwd=None, quiet=False):
        return run(self.command(np, argv, extra), timeout=timeout, env=self.env(env), cwd=cwd, quiet=quiet)


@dataclasses.dataclass
class PythonBridge:
    """The interpreter the Python bridge was built for and the environment under which it imports the package
    `epsuite` of the build (PYTHONPATH; ranks get it through `mpirun -x PYTHONPATH`)."""

    python: str
    environment: dict


def expect_usage_error(result, *needles, nothing_at=()):
    """A usage error (docs/errors.md 10): exit 2, exactly one `epsuite: error` line in all the output (one message
    for the whole job, never one per rank), on stderr; stderr says each needle (a string, or a compiled pattern
    searched for); and nothing was written: no path of `nothing_at` exists."""
    assert result.returncode == 2, f"expected exit code 2, got {result.returncode}"
    errors = [line for line in result.output.splitlines() if ERROR_LINE in line]
    assert len(errors) == 1, f"expected exactly one '{ERROR_LINE}' line, got {len(errors)}: {errors}"
    assert ERROR_LINE in result.stderr, "the error is not on stderr"
    for needle in needles:
        found = needle.search(result.stderr) if isinstance(needle, re.Pattern) else needle in result.stderr
        assert found, f"stderr does not say {needle!r}"
    for path in nothing_at:
        assert not os.path.exists(path), f"{path} was written although the input was refused"


class ResultsSchema:
    """The results document's schema (docs/results.md 9.1), checked by results/schema/validate_results.py."""

    def __init__(self, source_dir):
        folder = os.path.join(source_dir, "results", "schema")
        self.schema = os.path.join(folder, "results-v1.schema.json")
        spec = importlib.util.spec_from_file_location("validate_results", os.path.join(folder, "validate_results.py"))
        self.validator = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.validator)

    def check(self, *paths):
        """Every document valid (each error is printed); returns the last one, parsed."""
        assert paths, "no results document to validate"
        assert self.validator.main(["validate_results.py", self.schema, *map(str, paths)]) == 0, \
            f"not valid against {self.schema}: {', '.join(map(str, paths))}"
        return load_json(paths[-1])


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def table_rows(text):
    """The rows of an nccl-tests-style table (house style 6): lines that are neither empty nor `#` header lines,
    split into cells."""
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]
