"""Start-up cost: which fabric libraries an epsuite command loads, from the dynamic loader's LD_DEBUG=libs trace
(it lists every library whose constructors run: "calling init: <path>"). The fabric libraries are dlopen'ed,
never linked (impls/runtime/dynamic_library.hpp), because Debian's libfabric pulls in libpsm_infinipath, whose
constructor sleeps ~200 ms."""

import os
import re

LIBRARIES = ["libfabric", "libibverbs", "libefa", "libpsm_infinipath", "libpsm2", "libeps_device_cuda",
             "libeps_device_hip", "libcudart", "libamdhip64"]


def constructors_run(run, argv, env):
    """How often each of LIBRARIES had its constructors run by argv."""
    result = run(argv, timeout=120, env={**env, "LD_DEBUG": "libs"}, quiet=True)
    assert result.returncode == 0, f"{' '.join(argv)} exited {result.returncode}: {result.stderr[-4000:]}"
    inits = re.findall(r"calling init: [^\n]*", result.stderr)
    assert inits, f"LD_DEBUG=libs printed no 'calling init:' lines; cannot check: {result.stderr[-4000:]}"
    return {lib: sum(1 for init in inits if re.search(rf"/{lib}[.][^/]*$", init)) for lib in LIBRARIES}


def test_epsuite_starts_without_fabric_libraries(run, epsuite):
    """`epsuite --version` loads none of them."""
    for lib, count in constructors_run(run, [epsuite, "--version"], os.environ).items():
        assert count == 0, f"epsuite --version loads {lib}; it must be loaded with dlopen when used, not linked"


def test_epsuite_mpi_loads_fabric_libraries_once(run, epsuite, mpirun):
    """`epsuite info` (an MPI singleton) runs each constructor at most once; Open MPI unloads libpsm_infinipath
    after MPI_Init unless libfabric was loaded first (fabric_registry.hpp)."""
    for lib, count in constructors_run(run, [epsuite, "info"], mpirun.env()).items():
        assert count <= 1, (f"epsuite info runs the constructors of {lib} {count} times; load the fabric libraries "
                            "before MPI_Init (fabric::load_fabric_libraries)")
