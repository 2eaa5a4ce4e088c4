#!/usr/bin/env python3
"""The installable package end to end (docs/plugins.md 15.6), what ctest `install_example_plugin` runs:

1. `cmake --install` of the build into a temporary prefix: the binary, the plot scripts, the plugin header, the CMake
   package, the pkg-config file and the Python package are where docs/plugins.md 15.6 says;
2. the out-of-tree example plugin (examples/ep_plugin_mpi) compiles with pkg-config's flags, and builds and installs
   with CMake against the installed package (find_package(epsuite), epsuite_add_plugin);
3. the installed epsuite finds it by name (plugin:example-mpi, from its own lib/) and `epsuite check` passes at
   R = 1, 2, 3 and 4; the plugin runs the same transport- and layer-suite cases as `mpi` (by name);
4. `epsuite run --transport mpi,plugin:example-mpi` passes, and the plugin is in the bench results, the plots and
   report.md beside `mpi`;
5. the installed Python package imports from the prefix;
6. `cpack -G DEB` packs the .deb with the same files under /usr.

usage: install_check.py --build DIR --source DIR --mpirun M --python P --workdir DIR [--ranks 1,2,3,4]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time


def run(command, cwd=None, env=None, timeout=900):
    start = time.monotonic()
    p = subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                       env={**os.environ, **(env or {})})
    print(f"$ {' '.join(command)}\n  -> exit {p.returncode} in {time.monotonic() - start:.1f} s", flush=True)
    return p


def expect(condition, what, process=None):
    if condition:
        return
    if process is not None:
        print(f"--- stdout ---\n{process.stdout[-8000:]}\n--- stderr ---\n{process.stderr[-8000:]}")
    raise AssertionError(what)


def check_tree(prefix):
    for path in ("bin/epsuite", "share/epsuite/plot/epsuite_plot.py", "share/epsuite/plot/epsuite_report.py",
                 "include/epsuite/ep_plugin_v1.h", "lib/cmake/epsuite/epsuiteConfig.cmake",
                 "lib/cmake/epsuite/epsuiteConfigVersion.cmake", "lib/cmake/epsuite/epsuiteTargets.cmake",
                 "lib/pkgconfig/epsuite.pc", "lib/python3/dist-packages/epsuite/check.py"):
        expect(os.path.exists(os.path.join(prefix, path)), f"installed: {path}")


def test_names(listing, transport):
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag in ("--build", "--source", "--mpirun", "--python", "--workdir"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--ranks", default="1,2,3,4")
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    prefix = os.path.join(args.workdir, "prefix")
    epsuite = os.path.join(prefix, "bin", "epsuite")
    mpirun = [args.mpirun, "--map-by", ":OVERSUBSCRIBE"]  # the listing below
    try:
        # readme-command: cmake --install build --prefix /opt/epsuite
        p = run(["cmake", "--install", args.build, "--prefix", prefix])
        expect(p.returncode == 0, "cmake --install", p)
        check_tree(prefix)

        example = os.path.join(args.source, "examples", "ep_plugin_mpi")
        pc = {"PKG_CONFIG_PATH": os.path.join(prefix, "lib", "pkgconfig")}
        cflags = run(["pkg-config", "--cflags", "epsuite"], env=pc)
        expect(cflags.returncode == 0 and os.path.samefile(cflags.stdout.strip()[2:], os.path.join(prefix, "include")),
               "pkg-config --cflags epsuite names the installed include directory", cflags)
        plugindir = run(["pkg-config", "--variable=plugindir", "epsuite"], env=pc)
        expect(os.path.samefile(plugindir.stdout.strip(), os.path.join(prefix, "lib")), "plugindir is <prefix>/lib",
               plugindir)
        mpi_flags = run(["mpicc", "--showme:compile"]).stdout.split()
        p = run(["cc", "-fsyntax-only", "-std=c11", "-Wall", "-Werror", *cflags.stdout.split(), *mpi_flags,
                 os.path.join(example, "ep_plugin_mpi.c")])
        expect(p.returncode == 0, "the example compiles with pkg-config's flags", p)

        build = os.path.join(args.workdir, "plugin-build")
        # readme-command: cmake -S examples/ep_plugin_mpi -B build-plugin -DCMAKE_PREFIX_PATH=/opt/epsuite
        p = run(["cmake", "-S", example, "-B", build, f"-DCMAKE_PREFIX_PATH={prefix}"])
        expect(p.returncode == 0, "the example configures against the installed package", p)
        # readme-command: cmake --build build-plugin
        p = run(["cmake", "--build", build])
        expect(p.returncode == 0 and "warning" not in p.stdout + p.stderr, "the example builds without warnings", p)
        # readme-command: cmake --install build-plugin
        p = run(["cmake", "--install", build])
        expect(p.returncode == 0 and os.path.exists(os.path.join(prefix, "lib", "libepsuite-plugin-example-mpi.so")),
               "the example installs into the suite's lib/", p)

        for ranks in args.ranks.split(","):
            # readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE /opt/epsuite/bin/epsuite check --transport plugin:example-mpi
            p = run([args.mpirun, "-np", ranks, "--map-by", ":OVERSUBSCRIBE", epsuite, "check", "--transport",
                     "plugin:example-mpi"])
            expect(p.returncode == 0, f"epsuite check --transport plugin:example-mpi at R = {ranks}", p)
            expect(re.search(r"#  plugin:example-mpi +run +run +run +run", p.stdout),
                   "every contract of the example runs (capability table)", p)
        listed = run(mpirun + ["-np", "2", epsuite, "check", "--transport", "mpi,plugin:example-mpi",
                               "--gtest_list_tests"])
        mpi, plugin = test_names(listed.stdout, "mpi"), test_names(listed.stdout, "plugin:example-mpi")
        expect(mpi and mpi == plugin, f"the plugin runs the same cases as mpi: only mpi {sorted(mpi - plugin)[:5]}, "
                                      f"only the plugin {sorted(plugin - mpi)[:5]}", listed)

        out = os.path.join(args.workdir, "run")
        # readme-command: mpirun -np 2 --map-by :OVERSUBSCRIBE /opt/epsuite/bin/epsuite run --transport mpi,plugin:example-mpi --out epsuite-out-plugin
        # (here with -n 3 -w 1: fewer iterations)
        p = run([args.mpirun, "-np", "2", "--map-by", ":OVERSUBSCRIBE", epsuite, "run", "--transport",
                 "mpi,plugin:example-mpi", "--out", out, "-n", "3", "-w", "1"], timeout=1500)
        expect(p.returncode == 0, "epsuite run --transport mpi,plugin:example-mpi passes", p)
        with open(os.path.join(out, "report.md")) as f:
            report = f.read()
        expect("plugin:example-mpi" in report and "| mpi" in report, "report.md shows the plugin beside mpi")
        with open(os.path.join(out, "bench-dispatch-ht.json")) as f:
            transports = {c["transport"] for c in json.load(f)["results"]}
        expect(transports == {"mpi", "plugin:example-mpi"}, f"bench results of both, got {sorted(transports)}")
        with open(os.path.join(out, "plots", "plots.json")) as f:
            expect("plugin:example-mpi" in f.read(), "the plots draw the plugin's series")

        p = run([args.python, "-c", "import epsuite, sys; p = epsuite.Problem(epsuite.default_shape(2), 'uniform', 0, 1, "
                 "0, 2); sys.exit(0 if p.check_layout(p.expected_layout())['passed'] else 1)"],
                env={"PYTHONPATH": os.path.join(prefix, "lib", "python3", "dist-packages")})
        expect(p.returncode == 0, "the installed Python package imports and checks", p)

        debs = os.path.join(args.workdir, "deb")
        p = run(["cpack", "-G", "DEB", "--config", os.path.join(args.build, "CPackConfig.cmake"), "-B", debs])
        found = [f for f in os.listdir(debs) if f.endswith(".deb")] if os.path.isdir(debs) else []
        expect(p.returncode == 0 and len(found) == 1, "cpack -G DEB makes one package", p)
        listing = run(["dpkg-deb", "-c", os.path.join(debs, found[0])]).stdout
        for path in ("./usr/bin/epsuite", "./usr/include/epsuite/ep_plugin_v1.h",
                     "./usr/lib/cmake/epsuite/epsuiteConfig.cmake", "./usr/lib/pkgconfig/epsuite.pc"):
            expect(path in listing, f"the .deb holds {path}")
    except AssertionError as e:
        print(f"FAIL: {e}")
        return 1
    print("install_check.py: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
