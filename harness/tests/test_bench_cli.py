"""`epsuite bench` end to end under mpirun: the documented commands with -c write a table and a schema-valid
results document whose cases all passed; every bad input exits exactly 2 with one message naming the flag and
leaves no results file behind (ctest bench_cli_<case>)."""

import os
import re
import sys

import pytest

from support import expect_usage_error

# A table row of 64 tokens whose last column (#wrong) is 0.
ROW_64_TOKENS_0_WRONG = re.compile(r"\n +64 +[0-9]+( +[0-9.]+)+ +[01] +0\n")


def bench(mpirun, epsuite, np, args, json_path, extra=()):
    """`epsuite bench ARGS --json JSON_PATH` on np ranks, which must pass; returns its result."""
    result = mpirun(np, epsuite, "bench", *args, "--json", json_path, extra=extra)
    assert result.returncode == 0, f"bench exited {result.returncode}"
    return result


def expect_lines(text, *lines):
    for line in lines:
        assert line in text, f"table header line '{line}' missing"


def expect_all_passed(doc):
    assert doc["results"], "the document holds no cases"
    for i, case in enumerate(doc["results"]):
        assert case["check"]["passed"] is True, f"result {i} did not pass its check"


def test_smoke(mpirun, epsuite, results_schema, tmp_path):
    # With -n 3 -w 1, -c and two tags added:
    # readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport mpi --preset smoke --json out.json
    json_path = tmp_path / "out.json"
    result = bench(mpirun, epsuite, 4, ["dispatch", "--transport", "mpi", "--preset", "smoke", "-n", "3", "-w", "1",
                               "-c", "--tag", "gpu=none", "--tag", "nic=loopback"], json_path)
    doc = results_schema.check(json_path)
    expect_lines(result.stdout, "# epsuite bench dispatch", "#  transport        mpi:", "timer            MPI_Wtime",
                 "# tokens", "(GB/s)")
    # The smoke sweep 64:256:x2 gives rows for 64, 128 and 256 tokens, each with its ceiling (p50, GB/s, ratio;
    # docs/results.md 9.4) and 0 wrong elements.
    for tokens in (64, 128, 256):
        assert re.search(rf"\n +{tokens} +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.e+-]+ "
                         r"+[0-9]+ +0\n", result.stdout), f"no row with 0 wrong elements for {tokens} tokens"
    # --tag values land in platform.tags of the results, where plots group platforms by them.
    assert doc["platform"]["tags"]["nic"] == "loopback" and doc["platform"]["tags"]["gpu"] == "none"
    assert len(doc["results"]) == 3
    for i, case in enumerate(doc["results"]):
        assert case["check"]["passed"] is True and len(case["times_us"]) == 3 and case["op"] == "dispatch", \
            f"result {i}: {case['check']}, {len(case['times_us'])} times, op {case['op']}"


FABRICS = {"shm": "shm", "chaos-shm": "shm", "libfabric-shm": "libfabric:shm", "libfabric-tcp": "libfabric:tcp"}


@pytest.mark.parametrize("case", sorted(FABRICS))
def test_fabric(mpirun, epsuite, build, results_schema, tmp_path, case):
    """`bench fabric -c` over one fabric: a row per size with 0 wrong bytes and three passed cases (put-bw,
    put-latency, copy) per size; chaos-shm is shm wrapped by --chaos (reported "chaos(shm)")."""
    fabric = FABRICS[case]
    if fabric.startswith("libfabric") and "libfabric" not in build.fabric_backends:
        pytest.skip("libfabric is not built")
    chaos = ["--chaos", "seed=7"] if case == "chaos-shm" else []
    json_path = tmp_path / "out.json"
    # 8 B .. 512 KiB: small puts, and large ones that chaos splits (its default split is 4096 B).
    result = bench(mpirun, epsuite, 2, ["fabric", "--fabric", fabric, *chaos, "--sizes", "8:524288:x8", "--window",
                               "16", "-n", "5", "-w", "2", "-c"], json_path)
    doc = results_schema.check(json_path)
    name = f"chaos({fabric})" if chaos else fabric
    expect_lines(result.stdout, "# epsuite bench fabric", f"#  fabric           {name}: ", "timer            MPI_Wtime",
                 "#  window           16", "#     size", "put/copy")
    # 8:524288:x8 gives 8, 64, 512, 4096, 32768 and 262144 bytes; each row has 0 wrong bytes.
    sizes = [8, 64, 512, 4096, 32768, 262144]
    for size in sizes:
        assert re.search(rf"\n +{size} +{size * 16}( +[0-9.]+)+ +[0-9]+ +0\n", result.stdout), \
            f"no row with 0 wrong bytes for {size} B"
    cases = doc["results"]
    assert len(cases) == 18, f"expected 18 results (3 per size), got {len(cases)}"
    expected = [(size, mode) for size in sizes for mode in ("put-bw", "put-latency", "copy")]
    for i, (case_doc, (size, mode)) in enumerate(zip(cases, expected)):
        got = (case_doc["op"], case_doc["transport"], case_doc["mode"], case_doc["sizes"]["bytes"],
               case_doc["check"]["passed"], len(case_doc["times_us"]))
        assert got == ("fabric", name, mode, size, True, 5), f"result {i}: {got}"


def test_direct_dispatch(mpirun, epsuite, results_schema, tmp_path):
    # With -n 3 -w 1 and a --json file (--preset smoke is the default):
    # readme-command: mpirun -np 4 --map-by :OVERSUBSCRIBE build/epsuite bench dispatch --transport direct --fabric shm -c
    json_path = tmp_path / "out.json"
    result = bench(mpirun, epsuite, 4, ["dispatch", "--transport", "direct", "--fabric", "shm", "--preset", "smoke",
                               "-n", "3", "-w", "1", "-c"], json_path)
    doc = results_schema.check(json_path)
    expect_lines(result.stdout, "#  transport        direct:")
    expect_all_passed(doc)


def test_quantize_dispatch(mpirun, epsuite, results_schema, tmp_path):
    """--quantize round-scale on mpi and direct passes, says so in the header and names quantize in every case's
    identity (docs/dispatch.md 5.8)."""
    json_path = tmp_path / "out.json"
    result = bench(mpirun, epsuite, 2, ["dispatch", "--transport", "mpi,direct", "--fabric", "shm", "--preset", "smoke",
                               "--dtype", "fp8", "--quantize", "round-scale", "--tokens", "64,128", "-n", "3", "-w",
                               "1", "-c"], json_path)
    doc = results_schema.check(json_path)
    expect_lines(result.stdout, "#  quantize         bf16 rows quantized by the dispatch, round-scale scales")
    assert len(doc["results"]) == 4, "expected 4 results (2 transports x 2 token counts)"
    for i, case in enumerate(doc["results"]):
        got = (case["check"]["passed"], case["dtype"], case["identity"]["quantize"])
        assert got == (True, "fp8", "round-scale"), f"result {i}: {got}"


def test_eplb(mpirun, epsuite, results_schema, tmp_path):
    """`bench eplb -c` on the smoke preset with the drift workload (deepseek and static, 8 steps in windows of 2):
    0 wrong values, and every case (one per load window) names its policy and carries balancedness {predicted,
    realized} in (0, 1]."""
    json_path = tmp_path / "out.json"
    result = bench(mpirun, epsuite, 4, ["eplb", "--transport", "mpi", "--preset", "smoke", "--workload", "drift",
                               "--policy", "deepseek,static", "--steps", "8", "--lb-interval", "2", "-c"], json_path)
    doc = results_schema.check(json_path)
    expect_lines(result.stdout, "# epsuite bench eplb", "#  eplb             policy deepseek,",
                 "#  eplb             policy static,", "beta   beta")
    # Two series (deepseek, static) of 4 windows each, every window checked with 0 wrong values.
    cases = doc["results"]
    assert len(cases) == 8, f"expected 8 results (2 policies x 4 windows), got {len(cases)}"
    policies = []
    for i, case in enumerate(cases):
        got = (case["op"], case["check"]["passed"], case["check"]["mismatches"], len(case["times_us"]))
        assert got == ("eplb", True, 0, 2) and case["policy"] == case["identity"]["policy"], \
            f"result {i}: {got}, policy {case['policy']} (identity {case['identity']['policy']})"
        if case["policy"] not in policies:
            policies.append(case["policy"])
        for which in ("predicted", "realized"):
            beta = case["balancedness"][which]
            assert isinstance(beta, (int, float)) and not isinstance(beta, bool) and 0 < beta <= 1, \
                f"result {i}: balancedness.{which} is {beta!r}, expected a number in (0, 1]"
        for key in ("moved_experts", "moved_bytes"):
            for where in ("same_rank", "same_node", "cross_node"):
                assert where in case[key], f"result {i}: {key}.{where} missing"
        assert "planner_us" in case and "stall_us" in case, f"result {i}: planner_us or stall_us missing"
    assert policies == ["deepseek", "static"]


def test_shared_gpu(mpirun, epsuite, build, results_schema, tmp_path):
    """Two ranks on one GPU (the host test plugin of impls/device/gpu/tests standing in for `cuda`, one "GPU" at
    one PCI address): the header says that they share it; 64 tokens, 0 wrong; platform.ranks[].device names the
    cuda device."""
    json_path = tmp_path / "out.json"
    result = mpirun(2, epsuite, "bench", "dispatch", "--transport", "direct", "--fabric", "shm", "--device", "cuda",
                    "--preset", "smoke", "--tokens", "64", "-n", "2", "-w", "1", "-c", "--json", json_path,
                    env={"EPS_DEVICE_PLUGIN_DIR": build.device_test_plugin_dir})
    assert result.returncode == 0, f"bench exited {result.returncode}"
    doc = results_schema.check(json_path)
    expect_lines(result.stdout, "buffers mirrored from the host around each call",
                 "#  warning          2 ranks share one GPU: it time-slices between their processes")
    assert ROW_64_TOKENS_0_WRONG.search(result.stdout), "no row of 64 tokens with 0 wrong"
    # The platform names the GPU each rank computes on, not the CPU.
    for rank in (0, 1):
        device = doc["platform"]["ranks"][rank]["device"]
        assert re.match(r"cuda: epsuite host test plugin \(", device), f"platform.ranks[{rank}].device is {device!r}"


def test_proxy_affinity(mpirun, epsuite, results_schema, tmp_path):
    """Each rank bound to one core: the proxy's 4 threads would share it, and the header must say so."""
    json_path = tmp_path / "out.json"
    result = bench(mpirun, epsuite, 2, ["dispatch", "--transport", "proxy", "--fabric", "shm", "--preset", "smoke",
                               "--tokens", "64", "-n", "2", "-w", "1", "-c"], json_path, extra=["--bind-to", "core"])
    results_schema.check(json_path)
    expect_lines(result.stdout, "but it and its 4 proxy threads want 5: they take turns")
    assert ROW_64_TOKENS_0_WRONG.search(result.stdout), "no row of 64 tokens with 0 wrong"


# case -> (ranks, mpirun's extra options, the node's CPUs (EPS_TEST_NODE_CPUS), arguments of `epsuite bench dispatch`,
# the oversubscription line, the transport whose cases are marked)
OVERSUBSCRIPTION = {
    "oversubscribed": (4, [], "2", ["--transport", "mpi"],
                       "4 ranks on 2 CPUs: timings measure the scheduler, not the transport", "mpi"),
    "oversubscribed-proxy": (2, [], "4", ["--transport", "mpi,proxy", "--fabric", "shm", "--proxy-threads", "4"],
                             "2 ranks and their 8 proxy threads on 4 CPUs: proxy timings measure the scheduler, not "
                             "the transport", "proxy"),
    "not-oversubscribed": (1, ["--bind-to", "core"], None, ["--transport", "mpi"], "", ""),
}


@pytest.mark.parametrize("case", list(OVERSUBSCRIPTION))
def test_oversubscription(run, mpirun, epsuite, results_schema, tmp_path, case):
    """docs/results.md 9.5. oversubscribed: 4 ranks on a node of 2 CPUs: one line says so, the document's
    `oversubscribed` and every case carry it, epsuite_report.py repeats it and marks the rows, epsuite plot labels
    the series. oversubscribed-proxy: 2 ranks on 4 CPUs fit, with the proxy's 8 threads they do not: the line
    names them, only the proxy's cases are marked. not-oversubscribed: one rank (bound to a core) on the real
    CPUs: no line, `oversubscribed` null and every case false."""
    np, extra, cpus, transports, line, marked = OVERSUBSCRIPTION[case]
    json_path = tmp_path / "out.json"
    result = mpirun(np, epsuite, "bench", "dispatch", *transports, "--preset", "smoke", "--tokens", "64", "-n", "2",
                    "-w", "1", "-c", "--json", json_path, extra=extra,
                    env={"EPS_TEST_NODE_CPUS": cpus} if cpus else None)
    assert result.returncode == 0, f"bench exited {result.returncode}"
    doc = results_schema.check(json_path)
    printed = re.findall(r"# oversubscribed: [^\n]*", result.stdout)
    if not line:
        assert not printed, f"not oversubscribed, but the bench printed {printed}"
        assert doc["oversubscribed"] is None, f"oversubscribed is {doc['oversubscribed']!r}, expected null"
    else:
        assert printed == [f"# oversubscribed: {line}"], f"expected exactly one line '# oversubscribed: {line}'"
        assert doc["oversubscribed"]["note"] == line, f"oversubscribed.note is {doc['oversubscribed']['note']!r}"
    for i, case_doc in enumerate(doc["results"]):
        assert case_doc["oversubscribed"] is (case_doc["transport"] == marked), \
            f"case {i} ({case_doc['transport']}): oversubscribed is {case_doc['oversubscribed']}"
    if not line:
        return
    # report.md says it under its title and marks the rows; epsuite plot labels the series.
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "bench-dispatch-ht.json").write_bytes(json_path.read_bytes())
    report_script = os.path.join(os.path.dirname(epsuite), "plot", "epsuite_report.py")
    assert run([sys.executable, report_script, folder], timeout=120).returncode == 0, "epsuite_report.py failed"
    report = (folder / "report.md").read_text(encoding="utf-8")
    assert f"**Oversubscribed:** {line}." in report, f"report.md does not say '{line}'"
    assert re.search(rf"\| {marked} \|[^\n]*\| [0-9.]+\* \|", report), f"report.md does not mark the {marked} rows"
    assert run([epsuite, "plot", json_path, "--out", tmp_path / "plots"], timeout=120).returncode == 0, "plot failed"
    index = (tmp_path / "plots" / "plots.json").read_text(encoding="utf-8")
    assert re.search(rf'"label": "{marked}( \([^"]*\))? \[oversubscribed\]"', index), \
        f"epsuite plot did not label the {marked} series [oversubscribed]"
    if case == "oversubscribed-proxy":
        assert not re.search(r'"label": "mpi[^"]*\[oversubscribed\]"', index), \
            "epsuite plot labelled the mpi series [oversubscribed]; only the proxy's threads were too many"


# case -> (ranks, arguments of `epsuite bench`, what the message must say)
BAD_INPUTS = {
    "unknown-preset": (2, ["dispatch", "--preset", "nope"], "--preset"),
    "iters-out-of-range": (2, ["dispatch", "--preset", "smoke", "-n", "0"], "--iters: must be in [1, 100000], got 0"),
    "tokens-above-tmax": (2, ["dispatch", "--preset", "smoke", "--tokens", "128", "--max-tokens", "64"],
                          "--tokens: 128 tokens per rank exceed T_max = 64"),
    "fp8-hidden": (2, ["dispatch", "--preset", "smoke", "--dtype", "fp8", "--hidden", "200"],
                   "--hidden: 200 is not a multiple of 128"),
    "preset-ranks": (5, ["dispatch", "--preset", "smoke"], "24 experts cannot be split evenly over 5 ranks"),
    "unknown-transport": (2, ["dispatch", "--preset", "smoke", "--transport", "bogus"],
                          "--transport: unknown transport 'bogus'"),
    "eplb-greedy-slots": (2, ["eplb", "--transport", "mpi", "--preset", "smoke", "--workload", "drift", "--policy",
                              "greedy", "--slots", "26"],
                          "--policy: greedy places no replicas: it needs --slots 24 (= E)"),
    "eplb-no-workload": (2, ["eplb", "--transport", "mpi", "--preset", "smoke"], "--workload: bench eplb needs one"),
    "quantize-bf16": (2, ["dispatch", "--preset", "smoke", "--dtype", "bf16", "--quantize", "amax"],
                      "--quantize: amax needs fp8 payloads (--dtype fp8), got bf16"),
    "unknown-fabric": (2, ["fabric", "--fabric", "bogus"], "--fabric: unknown fabric 'bogus'; registered: auto, shm"),
    "dispatch-unknown-fabric": (2, ["dispatch", "--preset", "smoke", "--transport", "mpi", "--fabric", "bogus"],
                                "--fabric: unknown fabric 'bogus'"),
    "malformed-chaos": (2, ["fabric", "--fabric", "shm", "--chaos", "window=3,seed=x"], "--chaos: "),
    "sizes-out-of-range": (2, ["fabric", "--fabric", "shm", "--sizes", "0:64:x2"],
                           "--sizes: must be in [1, 16777215], got 0"),
    "transport-flag-on-fabric": (2, ["fabric", "--fabric", "shm", "--preset", "smoke"],
                                 "--preset: is not a flag of 'bench fabric'"),
    "signal-unsafe": (2, ["dispatch", "--preset", "smoke", "--transport", "direct", "--fabric", "shm", "--chaos",
                          "seed=1", "--signal", "fabric-order"], "--signal: fabric-order needs an ordered fabric"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input(mpirun, epsuite, tmp_path, case):
    np, args, message = BAD_INPUTS[case]
    json_path = tmp_path / "out.json"
    result = mpirun(np, epsuite, "bench", *args, "--json", json_path)
    expect_usage_error(result, message, nothing_at=[json_path])
