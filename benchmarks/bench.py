"""Benchmarks: latency per call (p50/p99), calls per second and memory, per example.

  ./task bench                    # everything
  ./task bench -- --calls 200     # fewer calls
  ./task bench -- --only function-inprocess

Figures are printed, not asserted: compare them run to run on the same machine.
- function-inprocess: FunctionRunner.RunFunction awaited directly (no gRPC).
- function-grpc: the function served by `python -m function.main --insecure` on loopback,
  called through a gRPC channel, as Crossplane calls it.
- noop-grpc: a function that does nothing, served the same way; function/noop prints ours
  as a multiple of it.
- kcl-step: the InferenceCluster function-kcl step (kcl-lib), per provider example, and as a
  multiple of a trivial KCL program (kcl-trivial) run the same way.
- kcl-memory: resident memory over many KCL steps (growth per call).
- render: `dot-inference render examples/` with and without --validate, as a user runs it.
- function-peers: one model beside 0, 100 and 1000 others on its cluster.
- placement: a fleet filled by clusterSelector, 1,000 models over 200 clusters (issue 14).
- suite: the pytest suite, once.
The last lines print the speed targets (issues 11 and 14), each with what was measured and
met / NOT MET.
Latency is timed with nothing else on; peak allocation is traced over separate calls.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import yaml
from crossplane.function import resource as fnresource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dot_inference.crossplane import documents, render  # noqa: E402


def _examples(kind: str) -> list[tuple[str, dict, dict[str, list[dict]]]]:
    """(file name, XR, required resources) per example; an example's cluster state
    (examples/state/<file name>) is what Crossplane would pass as the required cluster."""
    out = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        state = ROOT / "examples" / "state" / path.name
        docs = [d for d in yaml.safe_load_all(state.read_text()) if d] if state.exists() else []
        # The cluster, then the models already on it (what Crossplane passes for each).
        required = (
            {
                "inference-cluster": [d for d in docs if d["kind"] == "InferenceCluster"],
                "llminferences": [d for d in docs if d["kind"] == "LLMInference"],
            }
            if docs
            else {}
        )
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                out.append((path.name, doc, required))
    return out


def _request(xr: dict, step_input: dict | None, required: dict[str, list[dict]] | None = None):
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=fnresource.dict_to_struct(xr)))
    )
    if step_input is not None:
        req.input.CopyFrom(fnresource.dict_to_struct(step_input))
    for name, items in (required or {}).items():
        req.required_resources[name].CopyFrom(
            fnv1.Resources(
                items=[fnv1.Resource(resource=fnresource.dict_to_struct(i)) for i in items]
            )
        )
    return req


def _step_input(composition: dict, function_name: str) -> dict | None:
    for step in composition["spec"]["pipeline"]:
        if step["functionRef"]["name"] == function_name:
            return step.get("input")
    return None


def _measure(call: Callable[[], object], calls: int) -> dict[str, float]:
    """Time `calls` calls with nothing else on (tracemalloc slows Python 3-5x), then trace
    the allocations of a few more separately."""
    for _ in range(min(20, calls)):  # warm-up
        call()
    gc.collect()
    latencies = []
    start = time.perf_counter()
    for _ in range(calls):
        t = time.perf_counter()
        call()
        latencies.append(time.perf_counter() - t)
    total = time.perf_counter() - start
    tracemalloc.start()
    for _ in range(min(20, calls)):
        call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    latencies.sort()
    return {
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "calls_per_s": calls / total,
        "peak_alloc_kib": peak / 1024,
    }


def _print(section: str, name: str, m: dict[str, float]) -> None:
    print(
        f"{section:<20} {name:<34} p50 {m['p50_ms']:8.3f} ms   p99 {m['p99_ms']:8.3f} ms   "
        f"{m['calls_per_s']:9.1f} calls/s   peak alloc {m['peak_alloc_kib']:8.1f} KiB"
    )


def bench_function_inprocess(calls: int) -> None:
    from function.fn import FunctionRunner

    pkg = documents.load_package(ROOT / "package")
    runner = FunctionRunner()
    loop = asyncio.new_event_loop()
    for name, xr, required in _examples("LLMInference"):
        comp = render.select_composition(pkg, xr)
        req = _request(xr, _step_input(comp, render.fn_dot_inference()), required)
        m = _measure(lambda req=req: loop.run_until_complete(runner.RunFunction(req)), calls)
        _print("function-inprocess", name, m)
    loop.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _grpc_runs(command: list[str], calls: int, section: str) -> dict[str, dict[str, float]]:
    """Serve a function with `command` (its last argument the address) and call it with
    every LLMInference example; the figures per example."""
    port = _free_port()
    server = subprocess.Popen(
        [*command, f"127.0.0.1:{port}"],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    out = {}
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = grpcv1.FunctionRunnerServiceStub(channel)
        pkg = documents.load_package(ROOT / "package")
        for name, xr, required in _examples("LLMInference"):
            comp = render.select_composition(pkg, xr)
            req = _request(xr, _step_input(comp, render.fn_dot_inference()), required)
            out[name] = _measure(lambda req=req: stub.RunFunction(req, timeout=10), calls)
            _print(section, name, out[name])
        rss = _rss_kib(server.pid)
        if rss is not None:
            print(f"{section:<20} server resident memory after the run: {rss / 1024:.1f} MiB")
        channel.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    return out


# (what, measured, limit, unit): filled by the benches, printed last by _print_targets.
TARGETS: list[tuple[str, float, float, str]] = []


def _ratios(section: str, ours: dict[str, dict[str, float]], base: dict[str, dict[str, float]]):
    worst = {"p50": 0.0, "p99": 0.0}
    for name, m in ours.items():
        b = base[name]
        p50, p99 = m["p50_ms"] / b["p50_ms"], m["p99_ms"] / b["p99_ms"]
        worst = {"p50": max(worst["p50"], p50), "p99": max(worst["p99"], p99)}
        print(
            f"{section:<20} {name:<34} p50 {p50:5.2f}x   p99 {p99:5.2f}x   throughput "
            f"{m['calls_per_s'] / b['calls_per_s']:5.2f}x"
        )
    TARGETS.append(("function gRPC p50 / no-op function (worst example)", worst["p50"], 1.3, "x"))
    TARGETS.append(("function gRPC p99 / no-op function (worst example)", worst["p99"], 1.3, "x"))


def bench_function_grpc(calls: int) -> None:
    """Our function and a no-op SDK function, each served and called over gRPC on loopback;
    then ours as a multiple of the no-op (the target: p50 and p99 at most 1.3x)."""
    python = sys.executable
    ours = _grpc_runs(
        [python, "-m", "function.main", "--insecure", "--address"], calls, "function-grpc"
    )
    noop = _grpc_runs([python, str(ROOT / "benchmarks" / "noop_function.py")], calls, "noop-grpc")
    _ratios("function/noop", ours, noop)


def _rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


# The smallest KCL program function-kcl runs: the baseline of the KCL step.
_TRIVIAL_KCL = "items = []\n"


def bench_kcl_step(calls: int) -> None:
    """The InferenceCluster KCL step per example, a trivial KCL program through the same
    path, and the ratio (the target: at most 10x)."""
    from dot_inference import function_kcl as kcl_function

    pkg = documents.load_package(ROOT / "package")
    examples = _examples("InferenceCluster")
    _, xr0, _ = examples[0]
    trivial_input = {
        "apiVersion": "krm.kcl.dev/v1alpha1",
        "kind": "KCLInput",
        "spec": {"source": _TRIVIAL_KCL},
    }
    trivial_req = _request(xr0, trivial_input)
    base = _measure(lambda: kcl_function.run(trivial_req), calls)
    _print("kcl-trivial", "items = []", base)
    worst = 0.0
    req = trivial_req
    for name, xr, _ in examples:
        comp = render.select_composition(pkg, xr)
        req = _request(xr, _step_input(comp, "crossplane-contrib-function-kcl"))
        m = _measure(lambda req=req: kcl_function.run(req), calls)
        _print("kcl-step", name, m)
        worst = max(worst, m["p50_ms"] / base["p50_ms"])
        print(f"{'kcl-step/trivial':<20} {name:<34} p50 {m['p50_ms'] / base['p50_ms']:6.1f}x")
    TARGETS.append(("KCL step p50 / trivial KCL program (worst example)", worst, 10.0, "x"))


def _trimmed_rss_kib() -> tuple[int, int]:
    """Resident memory as it is, then after glibc's malloc_trim(0) hands back the free heap it
    keeps (a few MiB that come and go between calls); the same twice where there is no glibc."""
    import ctypes
    import ctypes.util

    gc.collect()
    raw = _rss_kib(os.getpid()) or 0
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return raw, raw
    return raw, _rss_kib(os.getpid()) or 0


def bench_kcl_memory(calls: int) -> None:
    """Resident memory of this process over `calls` KCL steps (kcl-lib is native code, so
    tracemalloc cannot see it): the growth per call after a warm-up of 50 calls, read after
    malloc_trim so that only memory in use counts (the untrimmed figures are printed too)."""
    from dot_inference import function_kcl as kcl_function

    pkg = documents.load_package(ROOT / "package")
    name, xr, _ = _examples("InferenceCluster")[0]
    req = _request(xr, _step_input(render.select_composition(pkg, xr), FN_KCL))
    for _ in range(50):
        kcl_function.run(req)
    raw_before, before = _trimmed_rss_kib()
    for _ in range(calls):
        kcl_function.run(req)
    raw_after, after = _trimmed_rss_kib()
    per_call = (after - before) / calls
    print(
        f"{'kcl-memory':<20} {name:<34} {calls} calls: resident {before / 1024:.1f} -> "
        f"{after / 1024:.1f} MiB, {per_call:+.1f} KiB per call (untrimmed "
        f"{raw_before / 1024:.1f} -> {raw_after / 1024:.1f} MiB)"
    )
    TARGETS.append((f"KCL step memory growth over {calls} calls", per_call, 1.0, " KiB/call"))


def _wall(command: list[str], runs: int) -> float:
    """Best wall time of `runs` runs of a command, in seconds."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def bench_render(runs: int) -> None:
    """`./task render` (render and validate examples/), as a user runs it, best of `runs`."""
    cli = str(Path(sys.executable).with_name("dot-inference"))
    plain = _wall([cli, "render", "examples/"], runs)
    validated = _wall([cli, "render", "examples/", "--validate"], runs)
    print(f"{'render':<20} {'examples/':<34} {plain:6.2f} s   with --validate {validated:6.2f} s")
    TARGETS.append(("dot-inference render examples/ --validate", validated, 1.5, " s"))


def bench_suite(_: int) -> None:
    """The whole pytest suite, once (what `./task test` spends after lint)."""
    took = _wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], 1)
    print(f"{'suite':<20} {'pytest':<34} {took:6.1f} s")
    TARGETS.append(("test suite (pytest)", took, 30.0, " s"))


def bench_function_peers(calls: int) -> None:
    """One model on a cluster that already runs many (examples/llm-autoscaled.yaml): the
    function reads every LLMInference of the namespace for the GPU budget and the names."""
    import copy

    from function.fn import FunctionRunner

    pkg = documents.load_package(ROOT / "package")
    runner = FunctionRunner()
    loop = asyncio.new_event_loop()
    name, xr, required = next(e for e in _examples("LLMInference") if e[0] == "llm-autoscaled.yaml")
    comp = render.select_composition(pkg, xr)
    step_input = _step_input(comp, render.fn_dot_inference())
    for count in (0, 100, 1000):
        peers = []
        for i in range(count):
            peer = copy.deepcopy(xr)
            peer["metadata"] = {"name": f"peer-{i}", "namespace": "a-team"}
            peer["spec"]["parameters"]["model"] = f"example/model-{i}"
            # Simulated: they hold no GPUs, so the budget is still worked out for all.
            peer["spec"]["parameters"]["engine"] = {"simulate": True}
            peers.append(peer)
        req = _request(xr, step_input, {**required, "llminferences": peers})
        m = _measure(lambda req=req: loop.run_until_complete(runner.RunFunction(req)), calls)
        _print("function-peers", f"{name} beside {count} models", m)
    loop.close()


def bench_placement(runs: int) -> None:
    """1,000 models placed one after another over 200 InferenceClusters (every GPU type and
    node size of limits.yaml, pools of 1-4 nodes), each taking GPUs from the cluster it
    lands on: function/placement.py with the function's own sizing of each model for each
    GPU (catalog models, in turn). Pure Python, in process; the best of `runs`."""
    from function import catalog, placement, sizing
    from function.compose import _sizer
    from function.limits import GPU_TYPES
    from function.spec import LLMSpec

    shapes = [(t, n) for t in GPU_TYPES for n in (1, 2, 4, 8)]
    clusters = [
        placement.Candidate(
            f"cluster-{i:03d}",
            gpu_type=shapes[i % len(shapes)][0],
            memory_gib=GPU_TYPES[shapes[i % len(shapes)][0]].memory_gib,
            per_node=shapes[i % len(shapes)][1],
            pool=shapes[i % len(shapes)][1] * (1 + i % 4),
        )
        for i in range(200)
    ]
    by_name = {c.name: c for c in clusters}
    ids = catalog.catalog_ids()

    def fill() -> tuple[int, float]:
        start = time.perf_counter()
        sizers: dict[str, Any] = {}
        held = {c.name: 0 for c in clusters}
        placed = 0
        for i in range(1000):
            model = ids[i % len(ids)]
            size = sizers.get(model)
            if size is None:
                spec = LLMSpec(name=f"model-{i}", namespace="a-team", model=model)
                size = sizers[model] = _sizer(spec, catalog.lookup(model), sizing.EngineSettings())
            decision = placement.place(clusters, size, 1, held=held)
            if decision.cluster is not None:
                c = by_name[decision.cluster]
                held[c.name] += size(c.gpu_type, c.memory_gib, c.per_node, c.span) or 0
                placed += 1
        return placed, time.perf_counter() - start

    best = min((fill() for _ in range(max(1, runs))), key=lambda r: r[1])
    claim_cost = _one_claim_placed(clusters)
    print(
        f"{'placement':<20} {'1,000 models over 200 clusters':<34} {best[1] * 1000:8.1f} ms   "
        f"{best[0]} placed, the rest refused (no cluster left)"
    )
    print(
        f"{'placement':<20} {'one claim, 200 clusters, 1,000 models':<34} {claim_cost:8.1f} ms   "
        "compose with clusterSelector: the clusters and the models as Crossplane passes them"
    )
    TARGETS.append(("placement: 1,000 models over 200 clusters", best[1] * 1000, 200.0, " ms"))


def _one_claim_placed(clusters: list[Any]) -> float:
    """What one reconcile of a selector claim costs in the function (compose, no gRPC):
    the 200 clusters as InferenceClusters and 1,000 models on them, read and placed."""
    import copy

    from function.compose import Inputs, compose

    state = next(yaml.safe_load_all((ROOT / "examples" / "state" / "llm-placed.yaml").read_text()))
    found = []
    for i, c in enumerate(clusters):
        cluster = copy.deepcopy(state)
        cluster["metadata"]["name"] = c.name
        cluster["status"]["gpu"].update(
            type=c.gpu_type, memoryGiB=c.memory_gib, perNode=c.per_node, maxNodes=1 + i % 4
        )
        found.append(cluster)
    claim = yaml.safe_load((ROOT / "examples" / "llm-placed.yaml").read_text())
    models = []
    for i in range(1000):
        m = copy.deepcopy(claim)
        m["metadata"] = {"name": f"model-{i}", "namespace": "a-team"}
        m["status"] = {"placement": {"cluster": clusters[i % len(clusters)].name}}
        models.append(m)
    inputs = Inputs(
        xr=claim,
        engine_image="docker.io/lmcache/vllm-openai:v0",
        required={"inference-clusters": found, "llminferences": models},
    )
    start = time.perf_counter()
    out = compose(inputs)
    assert out.fatal is None, out.fatal
    return (time.perf_counter() - start) * 1000


def _print_targets() -> None:
    if not TARGETS:
        return
    print("\nspeed targets (issues 11 and 14)")
    for what, measured, limit, unit in TARGETS:
        verdict = "met" if measured <= limit else "NOT MET"
        print(f"  {what:<52} {measured:8.2f}{unit:<9} target <= {limit:g}{unit:<9} {verdict}")


FN_KCL = "crossplane-contrib-function-kcl"

BENCHES = {
    "function-inprocess": bench_function_inprocess,
    "function-peers": bench_function_peers,
    "placement": bench_placement,
    "function-grpc": bench_function_grpc,
    "kcl-step": bench_kcl_step,
    "kcl-memory": bench_kcl_memory,
    "render": bench_render,
    "suite": bench_suite,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls per example")
    parser.add_argument("--kcl-calls", type=int, default=50, help="calls per KCL example")
    parser.add_argument(
        "--kcl-memory-calls",
        type=int,
        default=2000,
        help="KCL steps the memory figure runs (the target is stated for 10000)",
    )
    parser.add_argument("--render-runs", type=int, default=3, help="render runs (best is kept)")
    parser.add_argument("--only", choices=sorted(BENCHES), action="append")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, pid {os.getpid()}")
    counts = {
        "function-peers": max(1, args.calls // 5),
        "placement": 5,
        "kcl-step": args.kcl_calls,
        "kcl-memory": args.kcl_memory_calls,
        "render": args.render_runs,
    }
    for name in args.only or list(BENCHES):
        BENCHES[name](counts.get(name, args.calls))
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"benchmark process peak resident memory: {maxrss / 1024:.1f} MiB")
    _print_targets()


if __name__ == "__main__":
    main()
