"""`ci/vcluster mpirun ARGS`: what ARGS say (a scan of Open MPI 4.1's mpirun option grammar up to the program) and
the options ci/vcluster adds to them (the package docstring lists them)."""

import dataclasses
import re

from .state import IFACE, UsageError

# Options whose value is the next word, by what ci/vcluster learns from them.
NP_OPTIONS = ("-np", "--np", "-n", "-c")
NP_EQUALS = ("-np=", "--np=", "-n=")
HOST_OPTIONS = ("-H", "-host", "--host", "-hostfile", "--hostfile", "-machinefile", "--machinefile",
                "--default-hostfile", "-default-hostfile")
HOST_EQUALS = ("--host=", "--hostfile=", "--machinefile=")
MAP_OPTIONS = ("-map-by", "--map-by")
WDIR_OPTIONS = ("-wdir", "--wdir", "-wd", "--wd")
MCA_OPTIONS = ("-mca", "--mca", "-gmca", "--gmca")  # two values: NAME VALUE
# Other options of mpirun that take one value (so that the value is not taken for the program).
VALUE_OPTIONS = ("-x", "-bind-to", "--bind-to", "-rank-by", "--rank-by", "-npernode", "--npernode", "-N", "-prefix",
                 "--prefix", "-output-filename", "--output-filename", "-timeout", "--timeout",
                 "-report-bindings-file", "-am", "--am", "-tune", "--tune", "-path", "--path", "-preload-files",
                 "--preload-files", "-app", "--app", "-cpu-list", "--cpu-list", "-cpus-per-proc", "--cpus-per-proc",
                 "-bind-to-core", "-stdin", "--stdin")
# Variables passed to the ranks with -x, besides those named in $VCLUSTER_ENV.
FORWARDED_PREFIXES = ("EPSUITE_", "EPS_", "FI_", "UCX_", "GTEST_", "OMP_")


@dataclasses.dataclass(frozen=True)
class Scan:
    """What mpirun's own options (the words before the program) set."""

    np: str = ""  # the first -np value, as written
    user_host: bool = False
    user_map: bool = False
    user_wdir: bool = False
    user_mca: frozenset = frozenset()  # MCA parameter names given with --mca


def scan(args):
    """Scans `args` up to the first word that is neither an option nor an option's value (the program)."""
    np, host, mapping, wdir, mca = "", False, False, False, set()
    i = 0
    while i < len(args):
        a = args[i]
        if a in NP_OPTIONS:
            i += 1
            np = np or (args[i] if i < len(args) else "")
        elif a.startswith(NP_EQUALS):
            np = np or a.split("=", 1)[1]
        elif a in HOST_OPTIONS:
            host, i = True, i + 1
        elif a.startswith(HOST_EQUALS):
            host = True
        elif a in MAP_OPTIONS:
            mapping, i = True, i + 1
        elif a.startswith("--map-by="):
            mapping = True
        elif a in WDIR_OPTIONS:
            wdir, i = True, i + 1
        elif a in MCA_OPTIONS:
            i += 1
            if i < len(args) and args[i]:
                mca.add(args[i])
            i += 1
        elif a in VALUE_OPTIONS:
            i += 1
        elif not a.startswith("-"):
            break  # the program: the rest are its arguments
        i += 1
    return Scan(np, host, mapping, wdir, frozenset(mca))


def slots(found, nodes, vcluster_slots):
    """Slots per node: $VCLUSTER_SLOTS, else ceil(NP / nodes) for a -np NP, else 1."""
    if vcluster_slots:
        if not re.fullmatch(r"[1-9][0-9]*", vcluster_slots):
            raise UsageError("VCLUSTER_SLOTS must be a positive integer")
        return int(vcluster_slots)
    if re.fullmatch(r"[0-9]+", found.np) and int(found.np) > 0:
        return (int(found.np) + nodes - 1) // nodes
    return 1


def forwarded(environ, vcluster_env):
    """Names of the variables passed with -x: every set variable with a forwarded prefix, in name order, then
    those named in $VCLUSTER_ENV (`vcluster_env`) that are set; each once."""
    extra = vcluster_env.split()
    names = []
    for name in [*sorted(environ), *extra]:
        if not (name.startswith(FORWARDED_PREFIXES) or name in extra):
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) and name in environ and name not in names:
            names.append(name)
    return names


def options(found, addresses, slots_per_node, agent, cwd, env_names):
    """The options ci/vcluster puts before ARGS: each left out when ARGS set the same thing."""
    opts = []
    if not found.user_host:
        opts += ["--host", ",".join(f"{address}:{slots_per_node}" for address in addresses)]
    if not found.user_map:
        opts += ["--map-by", ":OVERSUBSCRIBE"]
    if not found.user_wdir:
        opts += ["--wdir", cwd]
    for name, value in (("plm", "rsh"), ("plm_rsh_agent", agent), ("plm_rsh_no_tree_spawn", "1"),
                        ("oob_tcp_if_include", IFACE), ("btl", "self,vader,tcp"), ("btl_tcp_if_include", IFACE)):
        if name not in found.user_mca:
            opts += ["--mca", name, value]
    for name in env_names:
        opts += ["-x", name]
    return opts
