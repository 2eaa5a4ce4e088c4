"""The fuzz targets' seeds and regressions replayed (docs/fuzzing.md), ctest <target>_replay (label fuzz, only in a
build with EPSUITE_FUZZ=ON): every file of fuzz/corpus/<target> and fuzz/regressions/<target> runs through the
target once; given files, libFuzzer runs each once and exits non-zero on the first crash or failed property."""

import os

import pytest

FUZZ = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fuzz")
FOLDERS = [os.path.join(FUZZ, "corpus"), os.path.join(FUZZ, "regressions")]
TARGETS = sorted({name for folder in FOLDERS if os.path.isdir(folder) for name in os.listdir(folder)})


@pytest.mark.parametrize("target", TARGETS)
def test_replay(run, build, target):
    if not build.config["fuzz"]:
        pytest.skip("not a build of the fuzz targets (EPSUITE_FUZZ=ON with clang: ci/fuzz)")
    program = os.path.join(build.build_dir, "fuzz", target)
    assert os.access(program, os.X_OK), f"{program} is not built"
    files = sorted(os.path.join(root, name) for folder in FOLDERS for root, _, names in
                   os.walk(os.path.join(folder, target)) for name in names)
    assert files, f"no inputs for {target}"
    result = run([program, "-runs=1", *files], timeout=300, quiet=True)
    assert result.returncode == 0, f"{target} failed ({result.returncode}) on one of {len(files)} inputs:\n" \
                                   f"{result.stderr[-6000:]}"
    print(f"{len(files)} inputs replayed")
