#!/usr/bin/env bash
# The vcluster ctest fixture (harness/tests/vcluster/CMakeLists.txt): `up BUILD_DIR` brings a fresh 2-node
# virtual cluster up, or, where this machine cannot create network namespaces (not root, no veth...), records
# why in BUILD_DIR/vcluster-unavailable.txt so that every vcluster test reports itself unavailable (skipped);
# `down BUILD_DIR` removes the cluster (never fails).
set -euo pipefail
script="$(cd "$(dirname "$0")/../../.." && pwd)/ci/vcluster"
action=$1
build=$2
marker="$build/vcluster-unavailable.txt"
case $action in
  up)
    rm -f "$marker"
    set +e
    reason=$("$script" check 2>&1)
    rc=$?
    set -e
    if [ "$rc" -eq 3 ]; then
      printf '%s\n' "$reason" | tee "$marker"
      exit 0
    fi
    [ "$rc" -eq 0 ] || { printf '%s\n' "$reason" >&2; exit 1; }
    "$script" down >/dev/null 2>&1 || true
    exec "$script" up 2
    ;;
  down)
    exec "$script" down
    ;;
  *)
    echo "usage: $0 up|down BUILD_DIR" >&2
    exit 2
    ;;
esac
