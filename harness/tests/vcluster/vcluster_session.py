#!/usr/bin/env python3
"""ctest's fixtures of the label vcluster (harness/tests/vcluster/CMakeLists.txt): `up BUILD_DIR` brings a fresh
2-node virtual cluster up for all the vcluster tests, or, where this machine cannot create network namespaces (not
root, no veth...), records why in BUILD_DIR/vcluster-unavailable.txt so that every vcluster test skips as
unavailable (exit 77); `down BUILD_DIR` removes the cluster (never fails). The tests (run with --vcluster-managed)
use that cluster; run by hand without it, the `cluster` fixture of conftest.py brings one up and down itself."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(1, os.path.dirname(HERE))  # harness/tests: support.py

import virtual_cluster  # noqa: E402  (after the path above)


def main(argv):
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        print(f"usage: {sys.argv[0]} up|down BUILD_DIR", file=sys.stderr)
        return 2
    if argv[0] == "down":
        return virtual_cluster.bring_down(SOURCE_DIR)
    try:
        reason = virtual_cluster.bring_up(SOURCE_DIR, os.path.join(argv[1], virtual_cluster.UNAVAILABLE))
    except RuntimeError as e:
        print(e, file=sys.stderr)
        return 1
    if reason:
        print(reason)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
