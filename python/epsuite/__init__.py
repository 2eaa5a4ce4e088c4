"""epsuite's Python bridge (docs/plugins.md 15.5): check and benchmark an EP library that is Python first.

- `Problem(shape, workload, rank, routing_seed, step, payload_seed)`: the seeded dispatch/combine problem of
  the C++ suite for one rank (the same bytes): inputs, the reference's expected outputs, the bit-exact checks
  (fixed or open receive order, docs/dispatch.md 5.9) and the expert side of combine, on NumPy arrays.
- `default_shape(ranks, workload, dtype)`, `preset(name, ranks)`: the suite's shapes.
- `as_numpy(value, name)`: NumPy arrays, torch tensors and any DLPack producer as NumPy (bf16 as uint16 bits).
- `python3 -m epsuite.check --backend MODULE:CLASS`: the runner (epsuite/check.py) under mpirun or torchrun.

bf16 values are uint16 bit patterns, fp8 values uint8 e4m3fn codes with float32 scales (one per 128).
"""
from epsuite._epsuite import (Problem, ResultsWriter, cpu_model, default_shape, git_sha, platform_json, preset,
                              preset_names, suite_version)
from epsuite.arrays import as_numpy, as_numpy_dict

__all__ = ["Problem", "ResultsWriter", "as_numpy", "as_numpy_dict", "cpu_model", "default_shape", "git_sha",
           "platform_json", "preset", "preset_names", "suite_version"]
