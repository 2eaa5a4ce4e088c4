"""python3 -m epsuite.check --backend MODULE:CLASS: the conformance cases and a bench sweep of an EP library's
Python API (docs/plugins.md 15.5), under mpirun or torchrun.

The adapter: a class that wraps the library (see epsuite/adapters/torch_alltoall.py):

    class MyAdapter:
        name = "my-ep"                     # optional; the results' transport is "python:my-ep"
        array_type = "numpy"               # or "torch": the arguments arrive as torch tensors (bf16 as bfloat16)
        capabilities = {                   # what it declares (docs/dispatch.md "Declared contracts", 5.9)
            "layouts": ["ht-rank-major", "ll"],     # of ht-rank-major, ht-expert-major, ll
            "trees": ["ht-rank", "ll-weighted"],    # of ht-rank, ht-two-level, ll-weighted
            "dtypes": ["bf16", "fp8"],
            "open_order": [],                       # declared layouts whose receive order is open
            "cached_dispatch": False,
        }
        def __init__(self, config): ...    # collective; config below
        def dispatch(self, layout, x, x_scales, topk_idx, topk_weights):
            return outputs, handle         # outputs: dict of the layout's arrays and the 5.1 layout arrays
        def dispatch_cached(self, handle, x, x_scales): return outputs   # when cached_dispatch
        def combine(self, handle, tree, x, bias0, bias1): return out     # or (out, combined_weights)
        def wire_bytes(self): return sent, received                      # optional (docs/dispatch.md 5.6)
        def close(self): ...                                             # optional

config: rank, size, num_experts, top_k, hidden, max_tokens_per_rank, dtype ("bf16"/"fp8"), expert_alignment,
ranks_per_node, timeout_seconds, group (a torch.distributed gloo group of every rank, for the adapter's own
collectives), device ("cpu").

Conformance: every declared (layout, tree) x dtype x workload of the C++ transport suite, on the same seeded
problems: dispatch (layout of 5.1 and the layout's outputs, in the fixed or the open order as declared), combine
on the suite's expert function, cached dispatch when declared. A case fails, naming the rank and the reason, when
the adapter raises, returns an array of the wrong dtype or shape (the message names the array and the shape it
must have) or a wrong value; the runner never crashes on what an adapter returns. All ranks agree after every
step; a rank left waiting in an adapter's collective by a peer that failed before it is released by --timeout
(the adapter's group's deadline; the runner's own collectives wait twice as long) and the case fails on both.

Bench (--bench): dispatch and combine of the declared ht-rank-major (ht-rank) and ll (ll-weighted) contracts over
the preset's token sweep, -w warm-up and -n timed iterations, a barrier before each, the time of an iteration the
maximum over ranks; -c checks the last iteration. --out writes the results document of `epsuite bench`
(docs/results.md 9.1), which `epsuite compare` and `epsuite plot` read.

Rendezvous: torchrun's MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE when set; under mpirun on one node a file
in Open MPI's session directory (several nodes: set MASTER_ADDR and MASTER_PORT). Exit codes (docs/errors.md 10):
0 every case passed, 1 a case failed, 2 a usage error (flags, backend, declarations), 3 an environment problem.
"""
import argparse
import datetime
import importlib
import json
import os
import socket
import sys
import time
import traceback

import numpy as np

from epsuite import _epsuite
from epsuite.arrays import as_numpy, as_numpy_dict

LAYOUTS = ("ht-rank-major", "ht-expert-major", "ll")
TREES = {"ht-rank-major": ("ht-rank", "ht-two-level"), "ht-expert-major": ("ll-weighted",),
         "ll": ("ll-weighted",)}
DTYPES = ("bf16", "fp8")
# The C++ transport suite's workloads and seeds (conformance/transport/transport_conformance_test.cpp).
WORKLOADS = ("uniform", "zipf:1.2", "hot:0,0.5", "all-to-one", "spread", "masked:0.6", "zero-token-ranks")
SEED = 0x7A450517
CACHED_PAYLOAD_SEED = SEED + 777


class UsageError(Exception):
    """Bad flags, backend or declarations: exit 2."""


class EnvironmentFailure(Exception):
    """The rendezvous or a collective of the runner failed: exit 3."""


# ---- launch and collectives --------------------------------------------------------------------------------------

class Group:
    """The ranks of this run: a torch.distributed gloo process group, set up from the launcher's environment."""

    def __init__(self, timeout):
        try:
            import torch.distributed as dist
        except ImportError as e:
            raise EnvironmentFailure(f"torch is needed for the runner's collectives: {e}") from e
        self.dist = dist
        env = os.environ
        rank = env.get("RANK") or env.get("OMPI_COMM_WORLD_RANK") or env.get("PMI_RANK") or "0"
        size = env.get("WORLD_SIZE") or env.get("OMPI_COMM_WORLD_SIZE") or env.get("PMI_SIZE") or "1"
        self.rank, self.size = int(rank), int(size)
        # The runner's own collectives outwait the adapter's: a rank whose peer failed before a collective of
        # the adapter's is released from it by the adapter group's deadline and still meets the others in the
        # runner's next agreement.
        runner_timeout = datetime.timedelta(seconds=2 * timeout + 30)
        timeout_delta = datetime.timedelta(seconds=timeout)
        if env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
            init = "env://"
        elif self.size == 1:
            init = f"tcp://127.0.0.1:{_free_port()}"
        elif env.get("OMPI_MCA_orte_jobfam_session_dir"):
            if env.get("OMPI_COMM_WORLD_LOCAL_SIZE", str(self.size)) != str(self.size):
                raise UsageError("ranks on several nodes: set MASTER_ADDR and MASTER_PORT for the rendezvous")
            init = "file://" + os.path.join(env["OMPI_MCA_orte_jobfam_session_dir"], "epsuite-check-rendezvous")
        else:
            raise UsageError("no launcher found: run under torchrun, or mpirun, or set MASTER_ADDR, MASTER_PORT, "
                             "RANK and WORLD_SIZE")
        try:
            dist.init_process_group("gloo", init_method=init, rank=self.rank, world_size=self.size,
                                    timeout=runner_timeout)
            self.adapter_group = dist.new_group(backend="gloo", timeout=timeout_delta)
        except Exception as e:  # noqa: BLE001 - any rendezvous failure is an environment problem
            raise EnvironmentFailure(f"rank {self.rank}: the gloo rendezvous ({init}) failed: {e}") from e

    def gather(self, value):
        """Every rank's `value`, in rank order."""
        out = [None] * self.size
        try:
            self.dist.all_gather_object(out, value)
        except Exception as e:  # noqa: BLE001
            raise EnvironmentFailure(f"rank {self.rank}: the runner's allgather failed: {e}") from e
        return out

    def barrier(self):
        try:
            self.dist.barrier()
        except Exception as e:  # noqa: BLE001
            raise EnvironmentFailure(f"rank {self.rank}: the runner's barrier failed: {e}") from e

    def say(self, text):
        if self.rank == 0:
            print(text, flush=True)

    def close(self):
        self.dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the adapter -------------------------------------------------------------------------------------------------

def load_backend(text):
    module_name, _, class_name = text.partition(":")
    if not module_name or not class_name:
        raise UsageError(f"--backend: expected MODULE:CLASS, got '{text}'")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - an import error of the adapter's module is a usage error
        raise UsageError(f"--backend: cannot import module '{module_name}': {e}") from e
    backend = getattr(module, class_name, None)
    if backend is None:
        raise UsageError(f"--backend: module '{module_name}' has no '{class_name}'")
    return backend


def declared(backend):
    """The adapter's declarations, checked (UsageError naming the field)."""
    caps = getattr(backend, "capabilities", None)
    if not isinstance(caps, dict):
        raise UsageError("capabilities: the adapter class must have a dict attribute 'capabilities'")
    unknown = set(caps) - {"layouts", "trees", "dtypes", "open_order", "cached_dispatch"}
    if unknown:
        raise UsageError(f"capabilities: unknown keys {sorted(unknown)}")

    def subset(key, allowed, default=None):
        values = caps.get(key, default)
        if values is None or not isinstance(values, (list, tuple)) or not set(values) <= set(allowed):
            raise UsageError(f"capabilities.{key}: must be a list of {', '.join(allowed)}, got {values!r}")
        return list(values)

    out = {"layouts": subset("layouts", LAYOUTS), "trees": subset("trees", sorted({t for v in TREES.values()
                                                                                    for t in v})),
           "dtypes": subset("dtypes", DTYPES), "open_order": subset("open_order", LAYOUTS, [])}
    if not set(out["open_order"]) <= set(out["layouts"]):
        raise UsageError("capabilities.open_order: names a layout capabilities.layouts does not")
    out["cached_dispatch"] = bool(caps.get("cached_dispatch", False))
    array_type = getattr(backend, "array_type", "numpy")
    if array_type not in ("numpy", "torch"):
        raise UsageError(f"array_type: must be numpy or torch, got {array_type!r}")
    out["array_type"] = array_type
    return out


def contracts(caps):
    """The declared (layout, tree) pairs, in the C++ suite's order."""
    return [(layout, tree) for layout in LAYOUTS if layout in caps["layouts"]
            for tree in TREES[layout] if tree in caps["trees"]]


def to_adapter(array, caps, bf16=False):
    """A NumPy argument as the adapter takes it (torch: bf16 bits as a bfloat16 tensor)."""
    if array is None or caps["array_type"] == "numpy":
        return array
    import torch

    if bf16:
        return torch.from_numpy(np.ascontiguousarray(array).view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(array))


class Adapters:
    """One adapter per shape, made collectively on first use."""

    def __init__(self, backend, group, timeout):
        self.backend, self.group, self.timeout = backend, group, timeout
        self.made = {}

    def get(self, shape):
        key = json.dumps(shape, sort_keys=True)
        if key not in self.made:
            config = {"rank": self.group.rank, "size": self.group.size, "num_experts": shape["experts"],
                      "top_k": shape["top_k"], "hidden": shape["hidden"], "max_tokens_per_rank": shape["max_tokens"],
                      "dtype": shape["dtype"], "expert_alignment": shape["alignment"],
                      "ranks_per_node": shape["ranks_per_node"], "timeout_seconds": self.timeout,
                      "group": self.group.adapter_group, "device": "cpu"}
            self.made[key] = self.backend(config)
        return self.made[key]

    def close(self):
        for adapter in self.made.values():
            if hasattr(adapter, "close"):
                adapter.close()


def describe(error):
    """One line for a case failure: the exception and where in the adapter it came from."""
    if isinstance(error, ValueError):
        return str(error)
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
    return f"{type(error).__name__}: {error}{where}"


# ---- one case ----------------------------------------------------------------------------------------------------

class Case:
    """One conformance case on this rank: steps run in lockstep over ranks (agree)."""

    def __init__(self, group, caps, layout, tree, problem, workload):
        self.group, self.caps, self.layout, self.tree, self.problem = group, caps, layout, tree, problem
        self.workload = workload
        self.failures = []

    def agree(self):
        """Whether every rank is still fine (a collective: every rank calls it at the same step)."""
        return all(self.group.gather(not self.failures))

    def step(self, what, fn):
        try:
            return fn()
        except Exception as e:  # noqa: BLE001 - the adapter's or the check's failure fails the case, never the runner
            self.failures.append(f"{what}: {describe(e)}")
            return None

    def expect(self, what, report):
        if report is not None and not report["passed"]:
            self.failures.append(f"{what}: {report['first']} ({report['mismatches']} mismatches)")

    def inputs(self, problem):
        bf16_rows = problem.shape["dtype"] == "bf16" or problem.shape["quantize"] is not None
        scales = None if problem.shape["dtype"] == "bf16" else to_adapter(problem.x_scales, self.caps)
        return to_adapter(problem.x, self.caps, bf16=bf16_rows), scales

    def run(self, adapter):
        p, layout = self.problem, self.layout
        x, scales = self.inputs(p)
        result = self.step("dispatch", lambda: adapter.dispatch(layout, x, scales, to_adapter(p.topk_idx, self.caps),
                                                                to_adapter(p.topk_weights, self.caps)))
        outputs = handle = None
        if result is not None:
            outputs, handle = self.step("dispatch returned", lambda: unpack_dispatch(result))
        if outputs is not None:
            fixed = layout not in self.caps["open_order"]
            self.expect("layout (docs/dispatch.md 5.1)", self.step("layout", lambda: p.check_layout(outputs)))
            checked = self.step("dispatch", lambda: p.check_dispatch(layout, outputs, fixed))
            self.expect(f"{layout} dispatch ({'fixed' if fixed else 'open'} order)", checked and checked[0])
        if not self.agree():
            return
        y = to_adapter(self.step("expert outputs", lambda: p.expert_outputs(layout, outputs)), self.caps, bf16=True)
        with_bias = self.tree != "ll-weighted"
        bias0 = to_adapter(p.bias0, self.caps, bf16=True) if with_bias else None
        bias1 = to_adapter(p.bias1, self.caps, bf16=True) if with_bias else None
        combined = self.step("combine", lambda: unpack_combine(adapter.combine(handle, self.tree, y, bias0, bias1)))
        if combined is not None:
            out, weights = combined
            self.expect(f"{self.tree} combine (docs/dispatch.md 5.5)",
                        self.step("combine", lambda: p.check_combine(self.tree, with_bias, out, weights)))
        if not self.agree() or not self.caps["cached_dispatch"]:
            return
        renewed = _epsuite.Problem(p.shape, self.workload, self.group.rank, SEED, 0, CACHED_PAYLOAD_SEED)
        x, scales = self.inputs(renewed)
        cached = self.step("dispatch_cached", lambda: as_numpy_dict(adapter.dispatch_cached(handle, x, scales),
                                                                   "dispatch_cached outputs"))
        if cached is not None:
            fixed = layout not in self.caps["open_order"]
            checked = self.step("dispatch_cached", lambda: renewed.check_dispatch(layout, cached, fixed))
            self.expect("cached dispatch with new payloads", checked and checked[0])
        self.agree()


def unpack_dispatch(result):
    if not isinstance(result, tuple) or len(result) != 2:
        raise ValueError(f"dispatch: must return (outputs, handle), got {type(result).__name__}")
    return as_numpy_dict(result[0], "dispatch outputs"), result[1]


def unpack_combine(result):
    if isinstance(result, tuple):
        if len(result) != 2:
            raise ValueError("combine: must return out or (out, combined_weights)")
        out, weights = result
    else:
        out, weights = result, None
    return as_numpy(out, "out"), None if weights is None else as_numpy(weights, "combined_weights")


def conformance(group, caps, adapters, workloads, dtypes):
    """Runs every case; returns (passed, failed)."""
    passed = failed = 0
    for layout, tree in contracts(caps):
        for dtype in (d for d in dtypes if d in caps["dtypes"]):
            for workload in workloads:
                shape = _epsuite.default_shape(group.size, workload, dtype)
                name = f"{layout}/{tree}/{dtype}/{workload}"
                problem = _epsuite.Problem(shape, workload, group.rank, SEED, 0, SEED + 1000)
                case = Case(group, caps, layout, tree, problem, workload)
                adapter = case.step("adapter", lambda: adapters.get(shape))
                if case.agree():
                    case.run(adapter)
                failures = group.gather(case.failures)
                if any(failures):
                    failed += 1
                    for rank, messages in enumerate(failures):
                        for message in messages:
                            group.say(f"[  FAILED  ] {name}: rank {rank}: {message}")
                else:
                    passed += 1
                    group.say(f"[       OK ] {name}")
    return passed, failed


# ---- bench -------------------------------------------------------------------------------------------------------

def bench(group, caps, adapters, args, transport, writer):
    """The bench sweep (see the top); returns the number of checked cases that failed."""
    preset = _epsuite.preset(args.preset, group.size, 1)
    tokens = [int(t) for t in args.tokens.split(",")] if args.tokens else preset["tokens"]
    dtype = preset["dispatch_dtype"] if args.dtype == "preset" else args.dtype
    if dtype not in caps["dtypes"]:
        group.say(f"# bench: the adapter declares no {dtype} payloads (--dtype); nothing measured")
        return 0
    failed = 0
    for layout, tree in (("ht-rank-major", "ht-rank"), ("ll", "ll-weighted")):
        if (layout, tree) not in contracts(caps):
            continue
        for op in ("dispatch", "combine"):
            group.say(f"# bench {op} {layout}/{tree} {dtype}, preset {preset['name']}, {transport}\n"
                      f"# tokens        bytes        p50        p99       algo   slowest #wrong\n"
                      f"#                 (B)       (us)       (us)     (GB/s)      rank")
            for t in tokens:
                shape = {"ranks": group.size, "experts": preset["experts"], "top_k": preset["top_k"],
                         "hidden": preset["hidden"], "max_tokens": max(preset["max_tokens"], max(tokens)),
                         "alignment": 1, "ranks_per_node": preset["ranks_per_node"], "tokens_per_rank": t,
                         "dtype": dtype}
                case = measure(group, caps, adapters.get(dict(shape, tokens_per_rank=-1)), shape, op, layout, tree,
                               args)
                failed += 0 if case["check"] is None or case["check"]["passed"] else 1
                case.update(transport=transport, mode=f"{layout}/{tree}", dtype=dtype,
                            identity={"fabric": "none", "signal": "none", "chaos": "off", "device": "cpu",
                                      "staging": "none", "workload": "uniform", "seed": str(args.seed),
                                      "preset": preset["name"]},
                            sizes={"tokens": t, "ranks": group.size, "hidden": shape["hidden"],
                                   "experts": shape["experts"], "top_k": shape["top_k"],
                                   "max_tokens": shape["max_tokens"]})
                stats = sorted(case["times_us"])
                p50 = stats[(len(stats) + 1) // 2 - 1]
                p99 = stats[max(0, -(-99 * len(stats) // 100) - 1)]
                wrong = "N/A" if case["check"] is None else case["check"]["mismatches"]
                group.say(f"{t:8d} {int(case['algo_bytes']):12d} {p50:10.2f} {p99:10.2f} "
                          f"{case['algo_bytes'] / p50 / 1e3 if p50 > 0 else 0:10.2f} {case['slowest_rank']:9d} "
                          f"{wrong:>6}")
                if writer is not None:
                    writer.add_case(json.dumps(case))
    return failed


def measure(group, caps, adapter, shape, op, layout, tree, args):
    """One bench point: per-iteration times (max over ranks), bytes and the check of the last iteration."""
    problem = _epsuite.Problem(shape, "uniform", group.rank, args.seed, 0, args.seed + 1)
    x = to_adapter(problem.x, caps, bf16=shape["dtype"] == "bf16")
    scales = None if shape["dtype"] == "bf16" else to_adapter(problem.x_scales, caps)
    idx, weights = to_adapter(problem.topk_idx, caps), to_adapter(problem.topk_weights, caps)
    outputs, handle = unpack_dispatch(adapter.dispatch(layout, x, scales, idx, weights))  # untimed, warm
    y = to_adapter(problem.expert_outputs(layout, outputs), caps, bf16=True)
    mine = []
    for i in range(args.warmup + args.iters):
        group.barrier()
        start = time.perf_counter()
        if op == "dispatch":
            result = adapter.dispatch(layout, x, scales, idx, weights)
        else:
            result = adapter.combine(handle, tree, y, None, None)
        elapsed = (time.perf_counter() - start) * 1e6
        if i >= args.warmup:
            mine.append(elapsed)
    report = None
    if args.check:
        if op == "dispatch":
            report = problem.check_dispatch(layout, as_numpy_dict(result[0], "dispatch outputs"),
                                            layout not in caps["open_order"])[0]
        else:
            out, w = unpack_combine(result)
            report = problem.check_combine(tree, False, out, w)
    dispatch_bytes, combine_bytes = problem.algo_bytes(layout)
    per_rank = group.gather({"times": mine, "bytes": dispatch_bytes if op == "dispatch" else combine_bytes,
                             "report": report,
                             "wire": adapter.wire_bytes()[1] if hasattr(adapter, "wire_bytes") else 0})
    times = [max(r["times"][i] for r in per_rank) for i in range(args.iters)]
    medians = [sorted(r["times"])[(len(r["times"]) + 1) // 2 - 1] for r in per_rank]
    slowest = max(range(group.size), key=lambda r: medians[r])
    check = None
    if args.check:
        bad = [r["report"] for r in per_rank if not r["report"]["passed"]]
        check = {"passed": not bad, "mismatches": sum(r["report"]["mismatches"] for r in per_rank),
                 "first_mismatch": bad[0]["first"] if bad else None}
    return {"op": op, "times_us": times, "algo_bytes": per_rank[slowest]["bytes"],
            "physical_bytes": per_rank[slowest]["wire"], "slowest_rank": slowest, "check": check}


# ---- main --------------------------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are printed by rank 0 only (exit 2 on every rank)."""

    def error(self, message):
        if _is_root():
            self.print_usage(sys.stderr)
            print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)


def parse_args(argv):
    parser = _Parser(prog="python3 -m epsuite.check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", required=True, help="MODULE:CLASS of the adapter")
    parser.add_argument("--workload", dest="workloads", action="append", default=[],
                        help=f"a conformance workload (repeatable; default all: {', '.join(WORKLOADS)})")
    parser.add_argument("--dtypes", default="bf16,fp8", help="conformance dtypes (comma-separated)")
    parser.add_argument("--no-conformance", action="store_true", help="skip the conformance cases")
    parser.add_argument("--bench", action="store_true", help="run the bench sweep too")
    parser.add_argument("--preset", default="smoke", help="bench preset (docs/presets.md 11)")
    parser.add_argument("--tokens", default="", help="bench token sweep (comma-separated; default: the preset's)")
    parser.add_argument("--dtype", default="preset", help="bench dtype: preset, bf16 or fp8")
    parser.add_argument("-n", "--iters", type=int, default=9, help="timed iterations per bench point")
    parser.add_argument("-w", "--warmup", type=int, default=2, help="warm-up iterations per bench point")
    parser.add_argument("-c", "--check", action="store_true", help="check the last bench iteration")
    parser.add_argument("--seed", type=int, default=1, help="bench seed of routing and payloads")
    parser.add_argument("--out", default="", help="results document of the bench (docs/results.md 9.1)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds every collective may wait")
    parser.add_argument("--tag", action="append", default=[], help="platform tag key=value (repeatable)")
    args = parser.parse_args(argv)
    if args.iters < 1 or args.warmup < 0:
        parser.error("-n must be >= 1 and -w >= 0")
    if not args.timeout > 0:
        parser.error(f"--timeout: must be > 0, got {args.timeout}")
    args.workloads = args.workloads or list(WORKLOADS)
    for workload in args.workloads:
        if workload not in WORKLOADS:
            parser.error(f"--workloads: unknown workload '{workload}'; valid: {', '.join(WORKLOADS)}")
    for dtype in args.dtypes.split(","):
        if dtype not in DTYPES:
            parser.error(f"--dtypes: must be bf16 or fp8, got '{dtype}'")
    if args.dtype not in ("preset",) + DTYPES:
        parser.error(f"--dtype: must be preset, bf16 or fp8, got '{args.dtype}'")
    if args.preset not in _epsuite.preset_names():
        parser.error(f"--preset: unknown preset '{args.preset}'; valid: {', '.join(_epsuite.preset_names())}")
    for tag in args.tag:
        if "=" not in tag:
            parser.error(f"--tag: expected key=value, got '{tag}'")
    return args


def results_writer(group, args, transport):
    """Rank 0's results document (docs/results.md 9.1); None elsewhere or without --out."""
    import torch

    me = {"host": socket.gethostname(), "device": f"cpu: {_epsuite.cpu_model()}", "nic": "none"}
    ranks = group.gather(me)
    if group.rank != 0 or not args.out:
        return None
    libraries = {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__}
    platform = _epsuite.platform_json(ranks, "torch.distributed (gloo)", libraries,
                                      dict(t.split("=", 1) for t in args.tag))
    config = {k: str(v) for k, v in vars(args).items()}
    config["transport"] = transport
    return _epsuite.ResultsWriter(args.out, ["python3", "-m", "epsuite.check"] + sys.argv[1:], platform,
                                  json.dumps(config))


def run(argv):
    args = parse_args(argv)
    backend = load_backend(args.backend)
    caps = declared(backend)
    group = Group(args.timeout)
    transport = "python:" + getattr(backend, "name", backend.__name__)
    group.say(f"# epsuite {_epsuite.suite_version} (git {_epsuite.git_sha}) Python runner on {group.size} ranks: "
              f"{transport} ({args.backend})\n# declares: {', '.join(f'{l}/{t}' for l, t in contracts(caps))}; "
              f"dtypes {', '.join(caps['dtypes'])}; open order: {', '.join(caps['open_order']) or 'none'}; "
              f"cached dispatch: {'yes' if caps['cached_dispatch'] else 'no'}")
    adapters = Adapters(backend, group, args.timeout)
    failed = 0
    if not args.no_conformance:
        passed, failed = conformance(group, caps, adapters, args.workloads, args.dtypes.split(","))
        group.say(f"# conformance: {passed} passed, {failed} failed")
    if args.bench:
        failed += bench(group, caps, adapters, args, transport, results_writer(group, args, transport))
    adapters.close()
    group.barrier()
    group.close()
    return 1 if failed else 0


def main(argv=None):
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except UsageError as e:  # every rank sees it alike: rank 0 says it
        if _is_root():
            print(f"epsuite.check: error: {e}", file=sys.stderr)
        code = 2
    except EnvironmentFailure as e:
        print(f"epsuite.check: error: {e}", file=sys.stderr)
        code = 3
    if _is_root():
        print(f"epsuite.check: {'PASS' if code == 0 else 'FAIL'} (exit {code})", flush=True)
    return code


def _is_root():
    return (os.environ.get("RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0") == "0"


if __name__ == "__main__":
    sys.exit(main())
