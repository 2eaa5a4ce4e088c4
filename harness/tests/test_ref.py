"""`epsuite ref`: the README worked examples run exactly as documented (from the source root, examples/) and
checked against hand computations and golden vectors of the docs, never against the program; bad inputs exit 2
naming the field, writing nothing."""

import re

from support import expect_usage_error, load_json


def ref(run, epsuite, build, tool, input_path, out, cwd=None):
    result = run([epsuite, "ref", tool, "--in", input_path, "--out", out], timeout=60, cwd=cwd or build.source_dir)
    assert result.returncode == 0, f"epsuite ref {tool} exited {result.returncode}"
    return load_json(out)


def same(actual, expected):
    """Equal and of the same JSON type (an integer 0 is not the number 0.0)."""
    return actual == expected and type(actual) is type(expected)


def all_same(actual, expected):
    return len(actual) == len(expected) and all(same(a, e) for a, e in zip(actual, expected))


def flat(value):
    """The scalars of a JSON value in document order (arrays flattened)."""
    if isinstance(value, list):
        return [scalar for item in value for scalar in flat(item)]
    return [value]


def row_values(rows, fields):
    """The `fields` of every row, row after row, flattened; a padding row (one with a `padding` key) gives "pad"."""
    return [v for row in rows for v in (["pad"] if "padding" in row else [x for f in fields for x in flat(row[f])])]


def test_readme_ref_eplb_example(run, epsuite, build, tmp_path):
    """docs/eplb.md 8.2: the golden phy2log rows."""
    # readme-command: build/epsuite ref eplb --in examples/eplb_deepseek.json --out eplb.json
    doc = ref(run, epsuite, build, "eplb", f"{build.source_dir}/examples/eplb_deepseek.json", tmp_path / "eplb.json")
    expected = [[5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1], [7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1]]
    for layer in (0, 1):
        assert all_same(doc["phy2log"][layer], expected[layer]), f"phy2log[{layer}] = {doc['phy2log'][layer]}"


def test_readme_ref_route(run, epsuite, build, tmp_path):
    """docs/routing.md 3, the hand computation of harness/ref/tests (HandComputedExpertChoice): J_i per token,
    sample 0 (c = 2) then sample 1 (c = 1); tokens 3, 6, 7 are dropped."""
    # readme-command: build/epsuite ref route --in examples/route_ec.json --out route.json
    doc = ref(run, epsuite, build, "route", f"{build.source_dir}/examples/route_ec.json", tmp_path / "route.json")
    expected = [[0, 2, 3], [0, 1, 2], [1, 3], [], [0, 2, 3], [1], [], []]
    for t, experts in enumerate(expected):
        assert all_same(doc["tokens"][t]["experts"], experts), f"tokens[{t}].experts = {doc['tokens'][t]['experts']}"
    assert all_same(doc["k_per_sample"][:2], [2, 1]) and same(doc["dropped_tokens"], 3)


def test_ref_route_bad_input_exits_2(run, epsuite, tmp_path):
    bad, out = tmp_path / "route_bad_k_min.json", tmp_path / "route_bad_k_min.out.json"
    bad.write_text('{"router": {"type": "ec", "k": 20, "schedule": "linear_reverse", "k_min": 33, "k_max": 32},\n'
                   ' "seq_len": 1, "mask_ratio": [0.5], "logits": [[' + ", ".join(map(str, range(34))) + ']]}')
    result = run([epsuite, "ref", "route", "--in", bad, "--out", out], timeout=60)
    expect_usage_error(result, re.compile(r"router\.k_min: must be <= router\.k_max, got 33 > 32"), nothing_at=[out])


def test_readme_ref_dispatch(run, epsuite, build, tmp_path):
    """examples/README_ref_dispatch.md, checked against values computed by hand from the docs/dispatch.md 5
    running example (T_max = 4, expert_alignment 2, bf16, H = 128), not taken from the program."""
    # readme-command: build/epsuite ref dispatch --in examples/dispatch_small.json --out dispatch.json
    doc = ref(run, epsuite, build, "dispatch", "examples/dispatch_small.json", tmp_path / "dispatch.json")
    # 5.1. Rank 0: t0 [0, 3] -> {0, 1}, t1 [1, 0] -> {0}, t2 masked -> {}. Rank 1: t0 [2, 3] -> {1}, t1 [3, 0] ->
    # {0, 1}. Experts 0, 1 live on rank 0 and 2, 3 on rank 1.
    assert all_same(flat(doc["rank_prefix_matrix"]), [2, 1, 3, 3])
    layout = doc["layout"]
    assert all_same(flat(layout[0]["num_tokens_per_rank"]), [2, 1])
    assert all_same(flat(layout[0]["num_tokens_per_expert"]), [2, 1, 0, 1])
    assert all_same(flat(layout[0]["is_token_in_rank"]), [1, 1, 1, 0, 0, 0])
    assert all_same(flat(layout[1]["num_tokens_per_rank"]), [1, 2])
    assert all_same(flat(layout[1]["num_tokens_per_expert"]), [1, 0, 1, 2])
    assert all_same(flat(layout[1]["is_token_in_rank"]), [0, 1, 1, 1])
    # 5.2: rows (src_rank, src_token, recv_topk_idx [2], recv_topk_weights [2]); counts [3, 1] and [1, 3] rounded
    # up to multiples of 2.
    rank_major = ["src_rank", "src_token", "recv_topk_idx", "recv_topk_weights"]
    assert all_same(row_values(doc["ht_rank_major"][0]["rows"], rank_major), [
        0, 0, 0, -1, 0.5, 0.0,  # (0, t0): expert 0 here, expert 3 on rank 1
        0, 1, 1, 0, 0.75, 0.125,  # (0, t1): experts 1 and 0 both here
        1, 1, -1, 0, 0.0, 0.0625])  # (1, t1): expert 3 on rank 1, expert 0 here
    assert all_same(row_values(doc["ht_rank_major"][1]["rows"], rank_major), [
        0, 0, -1, 1, 0.0, 0.25,
        1, 0, 0, 1, 0.625, 0.375,
        1, 1, 1, -1, 0.875, 0.0])
    assert all_same(flat(doc["ht_rank_major"][0]["num_recv_tokens_per_expert"]), [4, 2])
    assert all_same(flat(doc["ht_rank_major"][1]["num_recv_tokens_per_expert"]), [2, 4])
    # 5.3 with alignment 2: rows (src_rank, src_token, k, weight) sorted by (l, r, t), each segment padded to a
    # multiple of 2. Rank 1 is the diagram [l0: (1,t0)] [pad] [l1: (0,t0) (1,t0) (1,t1)] [pad].
    expert_major = ["src_rank", "src_token", "k", "weight"]
    for q, l, expected in ((0, 0, [0, 0, 0, 0.5, 0, 1, 1, 0.125, 1, 1, 1, 0.0625, "pad"]),
                           (0, 1, [0, 1, 0, 0.75, "pad"]),
                           (1, 0, [1, 0, 0, 0.625, "pad"]),
                           (1, 1, [0, 0, 1, 0.25, 1, 0, 1, 0.375, 1, 1, 0, 0.875, "pad"])):
        rows = row_values(doc["ht_expert_major"][q]["experts"][l]["rows"], expert_major)
        assert all_same(rows, expected), f"expert-major rows of rank {q}, local expert {l}: {rows}"
    experts_1 = doc["ht_expert_major"][1]["experts"]
    assert same(experts_1[0]["count"], 1)
    assert same(experts_1[1]["segment_begin"], 2) and same(experts_1[1]["segment_length"], 4)
    # 5.4 (C = R·T_max = 8): per local expert the count, layout_range (begin, count) per source rank and the
    # src_info of its rows; rank 1 is the table of 5.4.
    for q, l, count, ranges, src_info in ((0, 0, 3, [0, 2, 2, 1], [0, 1, 1]), (0, 1, 1, [0, 1, 1, 0], [1]),
                                          (1, 0, 1, [0, 0, 0, 1], [0]), (1, 1, 3, [0, 1, 1, 2], [0, 0, 1])):
        expert = doc["ll"][q]["experts"][l]
        assert same(expert["packed_recv_count"], count), f"LL count of rank {q}, local expert {l}"
        assert all_same(flat(expert["layout_range"]), ranges), f"LL layout_range of rank {q}, local expert {l}"
        assert all_same(row_values(expert["rows"], ["src_info"]), src_info), f"LL src_info of rank {q}, expert {l}"
    assert same(doc["ll"][1]["capacity"], 8)
    # 5.6, 256-byte rows: each rank receives and sends 3 HT rows (one across the boundary) and 4 LL selections
    # (one across), in both directions.
    for rank in (0, 1):
        for direction in ("recv", "send"):
            for op, algo in (("ht_dispatch", 768), ("ht_combine", 768), ("ll_dispatch", 1024), ("ll_combine", 1024)):
                counted = doc["bytes"][rank][op][direction]
                assert same(counted["algo"], algo) and same(counted["physical"], 256), f"bytes {rank} {op} {direction}"


def test_ref_dispatch_bad_input_exits_2(run, epsuite, tmp_path):
    """The expert id 4 is outside [-1, E) for E = 4, which DispatchPlan::make rejects (docs/dispatch.md 5)."""
    bad, out = tmp_path / "dispatch_bad_expert.json", tmp_path / "dispatch_bad_expert.out.json"
    bad.write_text('{"num_ranks": 2, "num_experts": 4, "top_k": 2,\n'
                   ' "ranks": [{"topk_idx": [[0, 3], [1, 0], [-1, -1]], "topk_weights": [[0.5, 0.25], [0.75, 0.125], '
                   '[0, 0]]},\n'
                   '           {"topk_idx": [[2, 3], [3, 4]], "topk_weights": [[0.625, 0.375], [0.875, 0.0625]]}]}')
    result = run([epsuite, "ref", "dispatch", "--in", bad, "--out", out], timeout=60)
    expect_usage_error(result, re.compile(r"ranks\[1\]\.topk_idx\[1\]\[1\]: must be in \[-1, 3\], got 4"),
                       nothing_at=[out])


def test_readme_ref_layer(run, epsuite, build, tmp_path):
    """docs/routing.md 3.3 and docs/layer.md 4.3 facts stated in README: c_b = max(floor(8 * 1 / 4), 1) = 2 tokens
    per expert and sample, so every expert computes 4 rows; a token no expert picked has routed = +0 in every
    value."""
    # readme-command: build/epsuite ref layer --in examples/layer_ec.json --out layer.json
    out = tmp_path / "layer.json"
    doc = ref(run, epsuite, build, "layer", f"{build.source_dir}/examples/layer_ec.json", out)
    text = out.read_text(encoding="utf-8")
    assert (doc["num_tokens"], doc["expert_rows"], doc["kernel"]) == (16, 16, "vectorized")
    assert all(same(doc["routing"]["expert_load"][e], 4) for e in range(4)), doc["routing"]["expert_load"]
    dropped = 0
    for t in range(16):
        assert len(doc["out"][t]) == 64, f"out[{t}] has {len(doc['out'][t])} hex digits, expected 64"
        if not doc["routing"]["tokens"][t]["experts"]:
            dropped += 1
            assert doc["routed"][t] == "0000" * 16, f"token {t} has no slot but routed = {doc['routed'][t]}"
    assert same(doc["routing"]["dropped_tokens"], dropped)
    assert "simd_path" in doc
    # The excerpt README.md shows is the real output: every bf16 row (64 hex digits) it quotes must be in it.
    readme = open(f"{build.source_dir}/README.md", encoding="utf-8").read()
    at = readme.find("Excerpt of the real output")
    assert at != -1, "README.md lost the ref layer excerpt"
    excerpt = readme[at:at + 1500]
    rows = [row for row in re.findall(r'"[0-9a-f]+"', excerpt) if len(row) == 66]
    for row in rows:
        assert row in text, f"README.md quotes {row}, which ref layer does not output"
    assert len(rows) >= 3, f"expected at least 3 rows quoted in the README excerpt, found {len(rows)}"
    # The gates README.md quotes (shortest decimals that read back as the fp32 values) are the output's.
    gates = re.search(r'"gates": \[([0-9.]+), ([0-9.]+)\]', excerpt)
    assert gates, "README.md's excerpt lost the gates of token 8"
    for gate in gates.groups():
        assert gate in text, f"README.md quotes the gate {gate}, which ref layer does not output"
