"""The installable package end to end (docs/plugins.md 15.6; ctest install_example_plugin):

1. `cmake --install` of the build into a temporary prefix: the binary, the plot scripts, the plugin header, the CMake
   package, the pkg-config file and the Python package are where docs/plugins.md 15.6 says;
2. the out-of-tree example plugin (examples/ep_plugin_mpi) compiles with pkg-config's flags, and builds and installs
   with CMake against the installed package (find_package(epsuite), epsuite_add_plugin);
3. the installed epsuite finds it by name (plugin:example-mpi, from its own lib/) and `epsuite check` passes at
   R = 1, 2, 3 and 4; the plugin runs the same transport- and layer-suite cases as `mpi` (by name);
4. `epsuite run --transport mpi,plugin:example-mpi` passes, and the plugin is in the bench results, the plots and
   report.md beside `mpi`;
5. the installed Python package imports from the prefix (with the interpreter of --python);
6. `cpack -G DEB` packs the .deb with the same files under /usr.
"""

import os
import re

from support import load_json, run

INSTALLED = ("bin/epsuite", "share/epsuite/plot/epsuite_plot.py", "share/epsuite/plot/epsuite_report.py",
             "include/epsuite/ep_plugin_v1.h", "lib/cmake/epsuite/epsuiteConfig.cmake",
             "lib/cmake/epsuite/epsuiteConfigVersion.cmake", "lib/cmake/epsuite/epsuiteTargets.cmake",
             "lib/pkgconfig/epsuite.pc", "lib/python3/dist-packages/epsuite/check.py")
IN_THE_DEB = ("./usr/bin/epsuite", "./usr/include/epsuite/ep_plugin_v1.h", "./usr/lib/cmake/epsuite/epsuiteConfig.cmake",
              "./usr/lib/pkgconfig/epsuite.pc")
STEP_TIMEOUT_S = 900


def step(argv, env=None, **kwargs):
    """One step of the installation (a deadline of STEP_TIMEOUT_S unless told), in the test environment plus env."""
    return run(argv, env={**os.environ, **(env or {})}, timeout=kwargs.pop("timeout", STEP_TIMEOUT_S), **kwargs)


def contract_names(listing, transport):
    """The conformance tests of `transport` in a --gtest_list_tests listing, with the transport's name taken out."""
    names, suite = set(), ""
    ident = re.sub(r"[^A-Za-z0-9]", "_", transport)
    for line in listing.splitlines():
        if not line.startswith(" "):
            suite = line.strip()
        else:
            test, _, param = line.split("#")[0].strip().rpartition("/")  # Test/<transport>_<rest>
            if param == ident or param.startswith(ident + "_"):
                names.add(f"{suite}{test}/T{param[len(ident):]}")
    return names


def install_example_plugin(build, prefix, plugin_build):
    """Steps 1 and 2: the suite into prefix, then the example plugin built (plugin_build) and installed into it."""
    # readme-command: cmake --install build --prefix /opt/epsuite
    p = step(["cmake", "--install", build.build_dir, "--prefix", prefix])
    assert p.returncode == 0, "cmake --install"
    for path in INSTALLED:
        assert os.path.exists(os.path.join(prefix, path)), f"not installed: {path}"

    example = os.path.join(build.source_dir, "examples", "ep_plugin_mpi")
    pc = {"PKG_CONFIG_PATH": os.path.join(prefix, "lib", "pkgconfig")}
    cflags = step(["pkg-config", "--cflags", "epsuite"], env=pc)
    assert cflags.returncode == 0 and os.path.samefile(cflags.stdout.strip()[2:], os.path.join(prefix, "include")), \
        "pkg-config --cflags epsuite names the installed include directory"
    plugindir = step(["pkg-config", "--variable=plugindir", "epsuite"], env=pc)
    assert os.path.samefile(plugindir.stdout.strip(), os.path.join(prefix, "lib")), "plugindir is <prefix>/lib"
    mpi_flags = step(["mpicc", "--showme:compile"]).stdout.split()
    p = step(["cc", "-fsyntax-only", "-std=c11", "-Wall", "-Werror", *cflags.stdout.split(), *mpi_flags,
              os.path.join(example, "ep_plugin_mpi.c")])
    assert p.returncode == 0, "the example compiles with pkg-config's flags"

    # readme-command: cmake -S examples/ep_plugin_mpi -B build-plugin -DCMAKE_PREFIX_PATH=/opt/epsuite
    p = step(["cmake", "-S", example, "-B", plugin_build, f"-DCMAKE_PREFIX_PATH={prefix}"])
    assert p.returncode == 0, "the example configures against the installed package"
    # readme-command: cmake --build build-plugin
    p = step(["cmake", "--build", plugin_build])
    assert p.returncode == 0 and "warning" not in p.output, "the example builds without warnings"
    # readme-command: cmake --install build-plugin
    p = step(["cmake", "--install", plugin_build])
    assert p.returncode == 0 and os.path.exists(os.path.join(prefix, "lib", "libepsuite-plugin-example-mpi.so")), \
        "the example installs into the suite's lib/"


def test_example_plugin(build, mpirun, pytestconfig, tmp_path):
    prefix = str(tmp_path / "prefix")
    epsuite = os.path.join(prefix, "bin", "epsuite")
    install_example_plugin(build, prefix, str(tmp_path / "plugin-build"))

    for ranks in (1, 2, 3, 4):
        # readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE /opt/epsuite/bin/epsuite check --transport plugin:example-mpi
        p = mpirun(ranks, epsuite, "check", "--transport", "plugin:example-mpi", timeout=STEP_TIMEOUT_S)
        assert p.returncode == 0, f"epsuite check --transport plugin:example-mpi at R = {ranks}"
        assert re.search(r"#  plugin:example-mpi +run +run +run +run", p.stdout), \
            "every contract of the example runs (capability table)"
    listed = mpirun(2, epsuite, "check", "--transport", "mpi,plugin:example-mpi", "--gtest_list_tests")
    mpi, plugin = contract_names(listed.stdout, "mpi"), contract_names(listed.stdout, "plugin:example-mpi")
    # Plugin ABI v1 describes ht-two-level's nodes only as equal groups of consecutive ranks, so the cases on
    # uneven node layouts leave plugins out (docs/plugins.md): every other case runs for both.
    mpi = {name for name in mpi if not name.startswith("Transports/TransportUnevenNodes.")}
    assert mpi and mpi == plugin, \
        f"the plugin runs the same cases as mpi: only mpi {sorted(mpi - plugin)[:5]}, only the plugin " \
        f"{sorted(plugin - mpi)[:5]}"

    out = tmp_path / "run"
    # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE /opt/epsuite/bin/epsuite run --transport mpi,plugin:example-mpi --out epsuite-out-plugin
    # (here with -n 3 -w 1: fewer iterations)
    p = mpirun(2, epsuite, "run", "--transport", "mpi,plugin:example-mpi", "--out", out, "-n", "3", "-w", "1",
               timeout=1500)
    assert p.returncode == 0, "epsuite run --transport mpi,plugin:example-mpi passes"
    report = (out / "report.md").read_text()
    assert "plugin:example-mpi" in report and "| mpi" in report, "report.md shows the plugin beside mpi"
    transports = {c["transport"] for c in load_json(out / "bench-dispatch-ht.json")["results"]}
    assert transports == {"mpi", "plugin:example-mpi"}, f"bench results of both, got {sorted(transports)}"
    assert "plugin:example-mpi" in (out / "plots" / "plots.json").read_text(), "the plots draw the plugin's series"

    p = step([pytestconfig.getoption("python"), "-c",
              "import epsuite, sys; p = epsuite.Problem(epsuite.default_shape(2), 'uniform', 0, 1, 0, 2); "
              "sys.exit(0 if p.check_layout(p.expected_layout())['passed'] else 1)"],
             env={"PYTHONPATH": os.path.join(prefix, "lib", "python3", "dist-packages")})
    assert p.returncode == 0, "the installed Python package imports and checks"

    debs = tmp_path / "deb"
    p = step(["cpack", "-G", "DEB", "--config", os.path.join(build.build_dir, "CPackConfig.cmake"), "-B", debs])
    found = sorted(debs.glob("*.deb")) if debs.is_dir() else []
    assert p.returncode == 0 and len(found) == 1, "cpack -G DEB makes one package"
    listing = step(["dpkg-deb", "-c", found[0]], quiet=True).stdout
    for path in IN_THE_DEB:
        assert path in listing, f"the .deb holds {path}"
