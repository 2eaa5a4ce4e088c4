"""The pytest tree of the tests that run the `epsuite` binary (and the virtual cluster of ci/vcluster).

ctest runs each test (or a parametrized case) as one entry with the labels, timeouts and resources of
harness/tests/CMakeLists.txt; by hand, from the source root:

    python3 -m pytest harness/tests --build-dir build               # all of them (vcluster/ needs root)
    python3 -m pytest harness/tests/test_ref.py -k route --build-dir build

The build directory (--build-dir, else $EPS_BUILD_DIR, else ./build) holds epsuite-tests.json, written by CMake:
the paths of the programs under test, mpirun, the MPI test environment and the fabric backends built.

Fixtures: `build` (that file), `epsuite`, `mpirun` (support.Mpirun), `run` (support.run with a deadline),
`python_bridge` (support.PythonBridge: --python and the build's package), `results_schema`
(support.ResultsSchema); support.expect_usage_error is the one usage-error expectation.
"""

import os
import sys

import pytest

import support

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(HERE))


def pytest_addoption(parser):
    parser.addoption("--build-dir", default=os.environ.get("EPS_BUILD_DIR", os.path.join(SOURCE_DIR, "build")),
                     help="the CMake build directory holding epsuite-tests.json (default: $EPS_BUILD_DIR, ./build)")
    parser.addoption("--skip-exit-code", type=int, default=None,
                     help="exit with this code when every selected test was skipped (ctest's SKIP_RETURN_CODE)")
    parser.addoption("--python", default=sys.executable,
                     help="the interpreter the Python bridge (python/) was built for (default: this one)")
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
        self.transport_plugin_dir = self.config["transport_plugin_dir"]
        self.python_package_dir = self.config["python_package_dir"]

    def program(self, name):
        path = self.config["programs"][name]
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is not built")
        return path

    def transport_plugin(self, name):
        """The test plugin libepsuite-plugin-NAME.so of impls/transport/plugin/tests."""
        return os.path.join(self.transport_plugin_dir, f"libepsuite-plugin-{name}.so")


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
def python_bridge(build, pytestconfig):
    """The built Python bridge (docs/plugins.md 15.5): its interpreter and the environment that imports the package
    `epsuite` from the build (and the test adapters of python/tests); skips where the build has no bridge."""
    if not os.path.isdir(os.path.join(build.python_package_dir, "epsuite")):
        pytest.skip(f"the Python bridge is not built ({build.python_package_dir}: EPSUITE_WITH_PYTHON)")
    path = [build.python_package_dir, os.path.join(build.source_dir, "python", "tests")]
    if os.environ.get("PYTHONPATH"):
        path.append(os.environ["PYTHONPATH"])
    return support.PythonBridge(pytestconfig.getoption("python"),
                                {"PYTHONPATH": os.pathsep.join(path), "OMP_NUM_THREADS": "1"})


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
