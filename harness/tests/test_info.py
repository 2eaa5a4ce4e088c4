"""`epsuite info` on a node without a usable GPU (EPS_DEVICE_PLUGIN_DIR names a directory without plugins):
exit 0; "#  gpus" gives the reason of cuda and of hip, "#  gpudirect" says why not; the JSON has the same note, an
empty gpu_devices and the gpudirect line (ctest harness_platform_info_without_gpu)."""

import json
import re


def test_info_without_gpu(run, epsuite, mpirun, tmp_path):
    no_plugins = tmp_path / "no_device_plugins"
    no_plugins.mkdir()
    env = mpirun.env({"EPS_DEVICE_PLUGIN_DIR": str(no_plugins)})
    result = run([epsuite, "info"], timeout=120, env=env)
    assert result.returncode == 0, f"epsuite info exited {result.returncode}"
    assert re.search(r"#  gpus +none: cuda: libeps_device_cuda\.so cannot be loaded: [^\n]+; hip: "
                     r"libeps_device_hip\.so cannot be loaded: [^\n]+\n", result.stdout), \
        "no gpus line with the reason of each backend"
    assert re.search(r"\n#  gpudirect +not possible: no GPU\n", result.stdout), "no gpudirect line"

    result = run([epsuite, "info", "--json", "-"], timeout=120, env=env)
    assert result.returncode == 0, f"epsuite info --json - exited {result.returncode}"
    platform = json.loads(result.stdout)["platform"]
    assert re.match(r"none: cuda: .+; hip: .+", platform["gpu_note"]), f"gpu_note {platform['gpu_note']!r}"
    assert platform["gpu_devices"] == [] and platform["gpus"] == [], \
        f"{len(platform['gpus'])} gpus, {len(platform['gpu_devices'])} gpu_devices"
    assert platform["gpudirect"] == "not possible: no GPU", f"gpudirect {platform['gpudirect']!r}"
