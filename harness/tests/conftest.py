"""The pytest tree of the tests that run the `epsuite` binary (and the virtual cluster of ci/vcluster).

ctest runs each test (or a parametrized case) as one entry with the labels, timeouts and resources of
harness/tests/CMakeLists.txt; by hand, from the source root:

    python3 -m pytest harness/tests --build-dir build               # all of them (vcluster/ needs root)
    python3 -m pytest harness/tests/test_ref.py -k route --build-dir build

The build directory (--build-dir, else $EPS_BUILD_DIR, else ./build) holds epsuite-tests.json, written by CMake:
the paths of the programs under test, mpirun, the MPI test environment and the fabric backends built.

Fixtures: `build` (that file), `epsuite`, `mpirun` (support.Mpirun), `run` (support.run with a deadline),
`results_schema` (support.ResultsSchema); support.expect_usage_error is the one usage-error expectation.
"""

import os

import pytest

import support

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def pytest_addoption(parser):
    parser.addoption("--build-dir", default=os.environ.get("EPS_BUILD_DIR", os.path.join(SOURCE_DIR, "build")),
                     help="the CMake build directory holding epsuite-tests.json (default: $EPS_BUILD_DIR, ./build)")
    parser.addoption("--skip-exit-code", type=int, default=None,
                     help="exit with this code when every selected test was skipped (ctest's SKIP_RETURN_CODE)")
    parser.addoption("--vcluster-managed", action="store_true",
                     help="ctest's fixtures vcluster_up/vcluster_down bring the virtual cluster up and down: the "
                          "tests use it (or skip with the reason vcluster_up recorded) and leave it up")


class Build:
    """epsuite-tests.json of the build directory."""

    def __init__(self, build_dir):
        path = os.path.join(build_dir, "epsuite-tests.json")
        if not os.path.exists(path):
            raise pytest.UsageError(f"{path} is missing: configure the build (ci/build) or pass --build-dir")
        self.config = support.load_json(path)
        self.build_dir = self.config["build_dir"]
        self.source_dir = self.config["source_dir"]
        self.mpirun = self.config["mpirun"]
        self.mpi_environment = self.config["mpi_environment"]
        self.fabric_backends = self.config["fabric_backends"]
        self.device_test_plugin_dir = self.config["device_test_plugin_dir"]

    def program(self, name):
        path = self.config["programs"][name]
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is not built")
        return path


@pytest.fixture(scope="session")
def build(pytestconfig):
    return Build(pytestconfig.getoption("build_dir"))


@pytest.fixture(scope="session")
def epsuite(build):
    return build.program("epsuite")


@pytest.fixture(scope="session")
def mpirun(build):
    return support.Mpirun(build.mpirun, build.mpi_environment)


@pytest.fixture(scope="session")
def run():
    return support.run


@pytest.fixture(scope="session")
def results_schema(build):
    return support.ResultsSchema(build.source_dir)


def pytest_sessionfinish(session, exitstatus):
    """--skip-exit-code: a session whose every selected test was skipped (e.g. no network namespaces for the
    virtual cluster) exits with that code, so that ctest reports it as skipped instead of passed."""
    code = session.config.getoption("skip_exit_code")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if code is None or reporter is None or exitstatus != 0:
        return
    stats = reporter.stats
    if stats.get("skipped") and not any(stats.get(k) for k in ("passed", "failed", "error", "xpassed", "xfailed")):
        session.exitstatus = code
