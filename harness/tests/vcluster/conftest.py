"""The virtual cluster for the tests of this folder (2 nodes x 2 ranks, docs/fabrics.md 13), one per session:
under ctest (--vcluster-managed) the one ctest's fixture vcluster_up brought up for the whole label; run by hand,
one brought up here before the first test and taken down after the last, also when a test failed. Where network
namespaces cannot be made, every test skips with the reason (ctest: exit 77, SKIP_RETURN_CODE)."""

import os

import pytest

import virtual_cluster


@pytest.fixture(scope="session")
def cluster(pytestconfig, build):
    if pytestconfig.getoption("vcluster_managed"):
        marker = os.path.join(build.build_dir, virtual_cluster.UNAVAILABLE)
        if os.path.exists(marker):
            pytest.skip("unavailable: " + open(marker, encoding="utf-8").read().strip())
        up = virtual_cluster.Cluster(build)
        assert up.ctl("status", check=False).returncode == 0, \
            "the virtual cluster is not up (the vcluster_up fixture failed?)"
        yield up
        return
    reason = virtual_cluster.bring_up(build.source_dir)
    if reason:
        pytest.skip(f"unavailable: {reason}")
    try:
        yield virtual_cluster.Cluster(build)
    finally:
        virtual_cluster.bring_down(build.source_dir)
