"""Arrays in and out of an adapter (docs/plugins.md 15.5).

An adapter may return NumPy arrays, torch tensors, or any object that speaks DLPack (`__dlpack__`); the runner
turns each into a NumPy array on the host before checking it. bf16 tensors become uint16 bit patterns (NumPy has
no bf16), tensors on a GPU are copied to the host first. Anything else is a ValueError naming the array, which the
runner reports as the case's failure.
"""
import numpy as np


def _torch_to_numpy(tensor):
    import torch

    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)  # the bit patterns; NumPy has no bf16
    t = t.contiguous()
    try:
        return np.from_dlpack(t)
    except (TypeError, RuntimeError, BufferError):
        return t.numpy()  # dtypes NumPy's DLPack import does not take (bool on NumPy < 1.25)


def as_numpy(value, name):
    """`value` as a NumPy array; ValueError naming `name` when it is not an array."""
    if isinstance(value, np.ndarray):
        return value
    module = type(value).__module__ or ""
    if module.startswith("torch"):
        return _torch_to_numpy(value)
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (TypeError, RuntimeError, BufferError) as e:
            raise ValueError(f"{name}: cannot be read through DLPack: {e}") from e
    raise ValueError(f"{name}: expected a NumPy array, a torch tensor or a DLPack producer, got "
                     f"{type(value).__name__}")


def as_numpy_dict(values, what):
    """Every entry of the dict `values` as a NumPy array (None entries stay None)."""
    if not isinstance(values, dict):
        raise ValueError(f"{what}: expected a dict of arrays, got {type(values).__name__}")
    return {key: None if value is None else as_numpy(value, key) for key, value in values.items()}
