"""The Python bridge's problems, references and checkers (docs/plugins.md 15.5), without MPI: pytest tests (ctest
python_bridge runs `python3 -m pytest python/tests/test_bridge.py` with PYTHONPATH at the built package and EPSUITE
naming the epsuite binary).

- The routing is the suite's: `epsuite ref dispatch` (a separate code path: the reference tool over JSON) gives
  the same layouts and receive metadata for the routing the Python problems hand out.
- Any rank regenerates any peer's data: the rows rank q expects from (r, t) are rank r's x[t].
- The expected outputs pass their own checks in both orders; rows reversed inside their blocks pass only the open
  order (docs/dispatch.md 5.9); a changed bit fails and is named.
- Arrays of the wrong dtype or shape, or missing, are a ValueError naming the array and the shape it must have;
  int64 indices, int16 bf16 bits and bool masks are taken; torch tensors come in through DLPack.
"""
import json
import os
import subprocess
import tempfile

import numpy as np

import epsuite
from epsuite import Problem

RANKS = 3


def problems(dtype="bf16", workload="uniform", alignment=1):
    shape = epsuite.default_shape(RANKS, workload, dtype)
    shape["alignment"] = alignment
    return [Problem(shape, workload, r, 11, 0, 12) for r in range(RANKS)]


def test_routing_matches_the_reference_tool():
    ps = problems()
    request = {"num_ranks": RANKS, "num_experts": ps[0].shape["experts"], "top_k": ps[0].shape["top_k"],
               "max_tokens_per_rank": ps[0].shape["max_tokens"],
               "ranks": [{"topk_idx": p.topk_idx.tolist(), "topk_weights": p.topk_weights.tolist()} for p in ps]}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "in.json"), "w") as f:
            json.dump(request, f)
        subprocess.run([os.environ["EPSUITE"], "ref", "dispatch", "--in", os.path.join(d, "in.json"), "--out",
                        os.path.join(d, "out.json")], check=True, capture_output=True)
        with open(os.path.join(d, "out.json")) as f:
            reference = json.load(f)
    for q, p in enumerate(ps):
        layout = p.expected_layout()
        assert layout["rank_prefix_matrix"].tolist() == reference["rank_prefix_matrix"]
        assert layout["num_tokens_per_rank"].tolist() == reference["layout"][q]["num_tokens_per_rank"]
        assert layout["is_token_in_rank"].tolist() == reference["layout"][q]["is_token_in_rank"]
        expected = p.expected_dispatch("ht-rank-major")
        rows = reference["ht_rank_major"][q]["rows"]
        assert expected["recv_topk_idx"].tolist() == [row["recv_topk_idx"] for row in rows]
        # The tool writes the fp32 weights as their shortest decimal: compare them as fp32.
        assert np.array_equal(expected["recv_topk_weights"],
                              np.array([row["recv_topk_weights"] for row in rows], dtype=np.float32))


def test_every_rank_regenerates_every_peer():
    for dtype in ("bf16", "fp8"):
        ps = problems(dtype)
        expected = ps[1].expected_dispatch("ht-rank-major")
        sources = [(r, t) for r in range(RANKS) for t in range(ps[r].tokens)
                   if any(e // (ps[0].shape["experts"] // RANKS) == 1 for e in ps[r].topk_idx[t] if e >= 0)]
        assert len(sources) == expected["recv_x"].shape[0]
        for row, (r, t) in enumerate(sources):
            assert np.array_equal(expected["recv_x"][row], ps[r].x[t])
            if dtype == "fp8":
                assert np.array_equal(expected["recv_x_scales"][row], ps[r].x_scales[t])


def test_expected_outputs_pass_in_both_orders():
    for dtype in ("bf16", "fp8"):
        for layout in ("ht-rank-major", "ht-expert-major", "ll"):
            p = problems(dtype, alignment=4)[0]
            outputs = dict(p.expected_dispatch(layout), **p.expected_layout())
            for fixed in (True, False):
                report, rows = p.check_dispatch(layout, outputs, fixed)
                assert report["passed"], (layout, fixed, report)
            assert p.check_layout(outputs)["passed"]


def reversed_in_blocks(p, outputs):
    """Rank-major rows reversed inside each source rank's block (docs/dispatch.md 5.9)."""
    prefix = p.expected_layout()["rank_prefix_matrix"][:, p.rank]
    out = {k: v.copy() for k, v in outputs.items()}
    begin = 0
    for end in prefix:
        for name in ("recv_x", "recv_x_scales", "recv_topk_idx", "recv_topk_weights"):
            if name in out:
                out[name][begin:end] = outputs[name][begin:end][::-1]
        begin = end
    return out


def test_rows_reversed_in_their_blocks_pass_only_the_open_order():
    p = problems("fp8")[0]
    permuted = reversed_in_blocks(p, p.expected_dispatch("ht-rank-major"))
    assert not np.array_equal(permuted["recv_x"], p.expected_dispatch("ht-rank-major")["recv_x"])
    assert p.check_dispatch("ht-rank-major", permuted, False)[0]["passed"]
    fixed = p.check_dispatch("ht-rank-major", permuted, True)[0]
    assert not fixed["passed"] and fixed["first"].startswith(f"{fixed['mismatches']} mismatches; first: recv_x")


def test_a_changed_bit_is_named():
    p = problems()[0]
    outputs = p.expected_dispatch("ll")
    count = outputs["packed_recv_count"]
    expert = int(np.nonzero(count)[0][0])
    outputs["recv_x"][expert, 0, 3] ^= 1
    report = p.check_dispatch("ll", outputs, True)[0]
    assert report["mismatches"] == 1
    assert "packed_recv_x rank 0" in report["first"] and "column 3" in report["first"], report


def test_wrong_arrays_are_named_with_the_shape_they_must_have():
    p = problems()[0]
    outputs = p.expected_dispatch("ht-rank-major")
    rows, hidden = outputs["recv_x"].shape

    def refused(changed, wanted):
        try:
            p.check_dispatch("ht-rank-major", dict(outputs, **changed), True)
        except ValueError as e:
            assert wanted in str(e), str(e)
            return
        raise AssertionError(f"not refused: {list(changed)}")

    refused({"recv_x": outputs["recv_x"][:-1]},
            f"recv_x: expected uint16 or int16 [{rows}, {hidden}] (bf16 bit patterns), got uint16 "
            f"[{rows - 1}, {hidden}]")
    refused({"recv_topk_weights": outputs["recv_topk_weights"].astype(np.float64)},
            f"recv_topk_weights: expected float32 [{rows}, 4], got float64 [{rows}, 4]")
    refused({"recv_topk_idx": None}, f"recv_topk_idx: missing; expected int32 [{rows}, 4]")
    refused({"recv_topk_idx": outputs["recv_topk_idx"].tolist()}, "recv_topk_idx: expected a NumPy array")
    # Other accepted forms of the same values.
    accepted = dict(outputs, recv_topk_idx=outputs["recv_topk_idx"].astype(np.int64),
                    recv_x=outputs["recv_x"].view(np.int16))
    assert p.check_dispatch("ht-rank-major", accepted, True)[0]["passed"]
    layout = p.expected_layout()
    assert p.check_layout(dict(layout, is_token_in_rank=layout["is_token_in_rank"].astype(bool)))["passed"]


def test_torch_tensors_come_in_through_dlpack():
    import torch

    p = problems()[0]
    outputs = p.expected_dispatch("ht-rank-major")
    tensors = {k: torch.from_numpy(v.view(np.int16) if v.dtype == np.uint16 else v) for k, v in outputs.items()}
    tensors["recv_x"] = torch.from_numpy(outputs["recv_x"].view(np.int16)).view(torch.bfloat16)
    converted = epsuite.as_numpy_dict(tensors, "outputs")
    assert converted["recv_x"].dtype == np.int16
    assert p.check_dispatch("ht-rank-major", converted, True)[0]["passed"]


def test_the_expected_combine_passes_its_check_and_a_wrong_row_fails():
    p = problems()[1]
    for tree, with_bias in (("ht-rank", True), ("ht-two-level", True), ("ll-weighted", False)):
        out = p.expected_combine(tree, with_bias)
        assert out.shape == (p.tokens, p.shape["hidden"]) and out.dtype == np.uint16
        assert p.check_combine(tree, with_bias, out)["passed"], tree
        out[0, 0] ^= 1
        report = p.check_combine(tree, with_bias, out)
        assert report["mismatches"] == 1 and "combined_x rank 1 src (1, 0) column 0" in report["first"], report


def test_bad_shapes_of_the_problem_are_refused():
    for shape, wanted in (({"ranks": 2, "experts": 3, "top_k": 1}, "num_experts"), ({"ranks": 2, "bogus": 1}, "unknown field"),
                          ({"dtype": "fp16"}, "shape.dtype: must be bf16 or fp8")):
        try:
            Problem(dict(epsuite.default_shape(2), **shape), "uniform", 0, 1, 0, 2)
        except ValueError as e:
            assert wanted in str(e), str(e)
            continue
        raise AssertionError(f"not refused: {shape}")

