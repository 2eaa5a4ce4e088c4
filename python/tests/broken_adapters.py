"""Adapters that the runner must catch (harness/tests/test_python_runner.py): each returns something wrong from the
example adapter's correct result, on every rank, so that the case fails and the runner goes on."""
import torch

from epsuite.adapters.torch_alltoall import AllToAllAdapter


class DropsARow(AllToAllAdapter):
    """recv_x of a rank-major dispatch one row short: the wrong shape."""

    def dispatch(self, layout, x, x_scales, topk_idx, topk_weights):
        outputs, handle = super().dispatch(layout, x, x_scales, topk_idx, topk_weights)
        outputs["recv_x"] = outputs["recv_x"][:-1] if layout == "ht-rank-major" else outputs["recv_x"]
        return outputs, handle


class WeightsInDouble(AllToAllAdapter):
    """recv_topk_weights in float64: the wrong dtype."""

    def dispatch(self, layout, x, x_scales, topk_idx, topk_weights):
        outputs, handle = super().dispatch(layout, x, x_scales, topk_idx, topk_weights)
        if "recv_topk_weights" in outputs:
            outputs["recv_topk_weights"] = outputs["recv_topk_weights"].double()
        return outputs, handle


class FlipsABit(AllToAllAdapter):
    """The right shapes, one wrong payload bit in the first received row of every dispatch."""

    def dispatch(self, layout, x, x_scales, topk_idx, topk_weights):
        outputs, handle = super().dispatch(layout, x, x_scales, topk_idx, topk_weights)
        rows = outputs["recv_x"].view(torch.uint8).reshape(-1)
        if rows.numel() > 0:
            rows[0] ^= 1
        return outputs, handle


class CombineRaises(AllToAllAdapter):
    """combine raises on every rank."""

    def combine(self, plan, tree, x, bias0=None, bias1=None):
        raise RuntimeError("this adapter's combine always fails")


class BadDeclarations(AllToAllAdapter):
    """Declares a layout that does not exist: a usage error (exit 2) before anything runs."""

    capabilities = dict(AllToAllAdapter.capabilities, layouts=["ht-rank-major", "xl"])
