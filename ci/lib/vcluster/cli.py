"""The command line of ci/vcluster: subcommand dispatch, messages and exit codes (the package docstring)."""

import sys

from . import __doc__ as DESIGN
from .cluster import Cluster, Interrupted
from .state import Error, UsageError

USAGE_LINE = ("usage: ci/vcluster check|up N|status|exec NODE CMD...|mpirun ARGS...|cut NODE|heal NODE|"
              "netem NODE SPEC...|netem NODE off|shape NODE RATE|kill NODE PATTERN|down  (ci/vcluster --help)")


def usage():
    """The subcommand table of the package docstring."""
    table = DESIGN.split("\n\n")[1]
    return (table + "\n\nSee ci/lib/vcluster/__init__.py for the design, mpirun options and exit codes.\n")


def main(argv, cluster=None):
    """Runs `ci/vcluster ARGV...`; returns the exit code (exec, the agent and mpirun pass their command's)."""
    cluster = cluster or Cluster()
    if not argv:
        print(usage(), file=cluster.err, end="")
        return 2
    sub, args = argv[0], argv[1:]
    commands = {
        "check": cluster.check,
        "up": cluster.up,
        "down": cluster.down,
        "status": cluster.status,
        "exec": cluster.exec,
        "mpirun": cluster.mpirun,
        "cut": lambda a: cluster.cut_heal("cut", a),
        "heal": lambda a: cluster.cut_heal("heal", a),
        "netem": cluster.netem,
        "shape": cluster.shape,
        "kill": cluster.kill,
        "__agent": cluster.agent,
    }
    if sub in ("-h", "--help", "help"):
        print(usage(), file=cluster.out, end="")
        return 0
    try:
        if sub not in commands:
            raise UsageError(f"unknown subcommand '{sub}'")
        return commands[sub](args) or 0
    except UsageError as e:
        print(f"vcluster: {e}\n{USAGE_LINE}", file=cluster.err)
        return e.code
    except Error as e:
        if str(e):
            print(f"vcluster: {e}", file=cluster.err)
        return e.code
    except Interrupted as e:
        return e.code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
