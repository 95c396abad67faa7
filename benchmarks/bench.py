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
- function-peers: one model beside 0, 100 and 1000 others on its cluster, then beside 10,000
  over 1,000 clusters (issue 25), read from its cluster's ledger; and its first reconcile.
- placement: a fleet filled by clusterSelector, 1,000 models over 200 clusters (issue 14).
- placement-spread: 1,000 models x 3 placements (one per region) over 200 clusters (issue 26).
- hub-config: the first Hub config a process reads (transformers imported, its config class
  built: function/model/hf_config.py), then one more, in a fresh interpreter.
- render-lists: `dot-inference render` of a claim whose list is at its maxItems (every CEL rule
  runs), just over it, and a thousand times over it, for each list of LLMInference (issue 39:
  the API server's structural limits before CEL, CEL within its cost limits).
- plan: `dot-inference plan MODEL` as a user runs it (a dense 70B and DeepSeek-V3 over two
  nodes, every GPU type), best of the render runs.
- suite: the pytest suite, once.
The last lines print the speed targets (issues 11, 14, 26 and 39), each with what was measured and
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
# Figures of the function, not of the network: the Hub is never asked (an example's adapters
# would be, function/model/hub.py); the function-grpc server inherits this.
os.environ["HF_HUB_OFFLINE"] = "1"

from dot_inference.crossplane import documents, render  # noqa: E402
from function.model import vllm_memory  # noqa: E402


def _examples(kind: str) -> list[tuple[str, dict, list[dict]]]:
    """(file name, XR, what exists on the control plane) per example: its cluster state
    (examples/state/<file name>: the cluster, the models already on it and their Usages),
    from which Crossplane selects what the function requires (_settled)."""
    out = []
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        state = ROOT / "examples" / "state" / path.name
        docs = [d for d in yaml.safe_load_all(state.read_text()) if d] if state.exists() else []
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == kind:
                out.append((path.name, doc, docs))
    return out


def _settled(
    xr: dict, step_input: dict | None, world: list[dict], observed: dict[str, dict] | None = None
) -> fnv1.RunFunctionRequest:
    """The request of the last call Crossplane makes to our function for `xr`: called with
    what each requirement selects from `world` until the requirements settle
    (internal/xfn/required_resources.go, as dot_inference.crossplane.render plays it). Built
    before any timing: selecting is Crossplane's work, not the function's."""
    from function.fn import FunctionRunner

    runner = FunctionRunner()
    req = _request(xr, step_input, observed=observed)
    asked = None
    for _ in range(render.MAX_REQUIREMENTS_ITERATIONS + 1):
        rsp = asyncio.run(runner.RunFunction(req))
        if rsp.requirements == asked or any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results):
            return req
        asked = rsp.requirements
        req.ClearField("required_resources")
        for name, selector in asked.resources.items():
            req.required_resources[name].CopyFrom(render.fetch_required(selector, world))
    raise RuntimeError("requirements did not settle")


def _request(
    xr: dict,
    step_input: dict | None,
    required: dict[str, list[dict]] | None = None,
    observed: dict[str, dict] | None = None,
):
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=fnresource.dict_to_struct(xr)))
    )
    for name, obj in (observed or {}).items():
        req.observed.resources[name].resource.CopyFrom(fnresource.dict_to_struct(obj))
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
    for name, xr, world in _examples("LLMInference"):
        comp = render.select_composition(pkg, xr)
        req = _settled(xr, _step_input(comp, render.fn_dot_inference()), world)
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
        for name, xr, world in _examples("LLMInference"):
            comp = render.select_composition(pkg, xr)
            req = _settled(xr, _step_input(comp, render.fn_dot_inference()), world)
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


# Each list of an LLMInference claim, and one valid item of it.
_LISTS: dict[str, Callable[[int], Any]] = {
    "aliases": lambda i: f"name-{i}",
    "adapters": lambda i: {"name": f"lora-{i}", "source": f"acme/lora-{i}"},
    "engine.extraArgs": lambda i: "--max-num-seqs=8",
    "engine.env": lambda i: {"name": f"VAR_{i}", "value": "x"},
}


def _max_items(path: str) -> int:
    """maxItems of spec.parameters.<path> in the generated LLMInference XRD."""
    xrd = yaml.safe_load((ROOT / "package" / "llminference" / "definition.yaml").read_text())
    node = xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    node = node["properties"]["parameters"]
    for part in path.split("."):
        node = node["properties"][part]
    return int(node["maxItems"])


def bench_render_lists(runs: int) -> None:
    """A claim with each list at its maxItems (where every rule runs), one over it (the API
    server's structural limit refuses it before CEL), and a thousand times over it: the
    render's wall time, as a user runs it (best of `runs`)."""
    import tempfile

    cli = str(Path(sys.executable).with_name("dot-inference"))
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for path, item in _LISTS.items():
            most = _max_items(path)
            row = []
            for n in (most, most + 1, most * 1000):
                params: dict[str, Any] = {"model": "Qwen/Qwen2.5-1.5B-Instruct"}
                head, _, leaf = path.rpartition(".")
                (params.setdefault(head, {}) if head else params)[leaf] = [
                    item(i) for i in range(n)
                ]
                claim = {
                    "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
                    "kind": "LLMInference",
                    "metadata": {"name": "lists", "namespace": "a-team"},
                    "spec": {"parameters": params},
                }
                file = Path(tmp) / f"{path}-{n}.yaml"
                file.write_text(yaml.safe_dump(claim))
                best = float("inf")
                for _ in range(runs):
                    start = time.perf_counter()
                    subprocess.run([cli, "render", str(file)], cwd=ROOT, capture_output=True)
                    best = min(best, time.perf_counter() - start)
                row.append(f"{n:>6} items {best:5.2f} s")
                if n == most + 1:
                    worst = max(worst, best)
            print(f"{'render-lists':<20} {path:<34} " + "   ".join(row))
    TARGETS.append(("render of a claim with a list just over its maxItems", worst, 1.5, " s"))


HUB_CONFIG = """
import time
from function.model import model_config
from function.model.model_config import HubModel
config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 32,
          "num_attention_heads": 32, "hidden_size": 4096, "max_position_embeddings": 4096}
model = HubModel(id="acme/X-7B", config=config, parameters={"BF16": 7 * 10**9})
start = time.perf_counter(); model_config.facts(model); first = time.perf_counter() - start
start = time.perf_counter(); model_config.facts(model); again = time.perf_counter() - start
print(first, again)
"""


def bench_hub_config(runs: int) -> None:
    """What the first config read through transformers costs a process (its import), best of
    `runs` fresh interpreters, and a second read; a figure, not a target."""
    best = (float("inf"), float("inf"))
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, "-c", HUB_CONFIG], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout.split()
        best = min(best, (float(out[0]), float(out[1])))
    print(
        f"{'hub-config':<20} {'transformers import + first config':<34} {best[0] * 1e3:8.1f} ms"
        f"   next config {best[1] * 1e3:6.2f} ms"
    )


def bench_plan(runs: int) -> None:
    """`dot-inference plan` over every GPU type, as a user runs it (a fresh process each),
    best of `runs`."""
    cli = str(Path(sys.executable).with_name("dot-inference"))
    for model, extra in (
        ("meta-llama/Llama-3.3-70B-Instruct", ["--context", "8192"]),
        ("deepseek-ai/DeepSeek-V3", ["--nodes", "2"]),
    ):
        took = _wall([cli, "plan", model, *extra], runs)
        print(f"{'plan':<20} {model[:34]:<34} {took:6.2f} s   ({len(extra) // 2} option)")


def bench_suite(_: int) -> None:
    """The whole pytest suite, once (what `./task test` spends after lint)."""
    took = _wall([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], 1)
    print(f"{'suite':<20} {'pytest':<34} {took:6.1f} s")
    TARGETS.append(("test suite (pytest)", took, 30.0, " s"))


def _ledger_usage(xr: dict) -> dict | None:
    """The Usage of its cluster a model composed, as Crossplane holds it after the reconcile
    that published `xr`'s status: the function's own builder and entry writer, with the
    metadata Crossplane gives composed resources (as tests/conftest.py ledger_usage)."""
    from function import kube
    from function.backends import resources
    from function.backends.common import composed_by_cluster
    from function.cluster import ledger, peers
    from function.keys import CLUSTER_USAGE

    cluster = peers.cluster_of(xr)
    name = xr["metadata"]["name"]
    if cluster is None or composed_by_cluster(xr, cluster):
        return None
    usage = resources.cluster_usage(
        name=kube.dns_label(f"{name}-uses-{cluster}"), cluster=cluster, model_claim=name
    )
    ledger.stamp(usage, xr, xr.get("status"))
    render.set_composed_metadata(usage, xr, CLUSTER_USAGE)
    return usage


def _steady(
    xr: dict, step_input: dict | None, world: list[dict]
) -> tuple[fnv1.RunFunctionRequest, fnv1.RunFunctionRequest, Any]:
    """The model's first reconcile (no entry of its own yet: decided on the whole namespace),
    and the one after it once Crossplane applied it (its Usage observed, its status
    published): the requests of each one's last call, and the first one's response."""
    import copy

    from function.fn import FunctionRunner
    from function.keys import CLUSTER_USAGE

    first = _settled(xr, step_input, world)
    rsp = asyncio.run(FunctionRunner().RunFunction(first))
    status = fnresource.struct_to_dict(rsp.desired.composite.resource).get("status", {})
    usage = fnresource.struct_to_dict(rsp.desired.resources[CLUSTER_USAGE].resource)
    render.set_composed_metadata(usage, xr, CLUSTER_USAGE)
    published = {**copy.deepcopy(xr), "status": status}
    steady = _settled(published, step_input, world, observed={CLUSTER_USAGE: usage})
    return first, steady, rsp


def _answers(rsp: Any) -> dict[str, Any]:
    """What a reconcile decides: status (replicas, plan, ...), conditions, results and every
    composed object."""
    return {
        "status": fnresource.struct_to_dict(rsp.desired.composite.resource).get("status"),
        "resources": {
            k: fnresource.struct_to_dict(v.resource) for k, v in rsp.desired.resources.items()
        },
        "conditions": [(c.type, c.status, c.reason, c.message) for c in rsp.conditions],
        "results": [(r.severity, r.message) for r in rsp.results],
    }


def bench_function_peers(calls: int) -> None:
    """One model on a cluster that already runs many (examples/llm-autoscaled.yaml). The
    function reads the other models on its cluster from the cluster's ledger (the Usage each
    composed, function/cluster/ledger.py): beside 0, 100 and 1,000 others on the same cluster, then
    beside 10,000 over 1,000 clusters (issue 25). Timed: the reconcile once the model's own
    entry is in the ledger (every one after its first); printed beside it, its first
    reconcile, which confirms on the whole namespace (as every reconcile did before the
    ledger). What Crossplane selects is built before the timing; the answers are checked
    equal to those read from the whole namespace."""
    import copy

    from function.fn import FunctionRunner

    pkg = documents.load_package(ROOT / "package")
    runner = FunctionRunner()
    loop = asyncio.new_event_loop()
    name, xr, state = next(e for e in _examples("LLMInference") if e[0] == "llm-autoscaled.yaml")
    comp = render.select_composition(pkg, xr)
    step_input = _step_input(comp, render.fn_dot_inference())
    cluster = next(d for d in state if d["kind"] == "InferenceCluster")
    for count in (0, 100, 1000):
        world = [cluster, xr]
        for i in range(count):
            peer = copy.deepcopy(xr)
            peer["metadata"] = {
                "name": f"peer-{i}",
                "namespace": "a-team",
                "creationTimestamp": "2026-01-01T00:00:00Z",
            }
            peer["spec"]["parameters"]["model"] = f"example/model-{i}"
            peer["spec"]["parameters"].pop("aliases", None)
            # Simulated: they hold no GPUs, so the budget is still worked out for all.
            peer["spec"]["parameters"]["engine"] = {"simulate": True}
            peer["status"] = {
                "plan": {"gpus": 1},
                "replicas": {"max": 4},
                "servedModelNames": [f"example/model-{i}"],
            }
            world += [peer, _ledger_usage(peer)]
        first, steady, _ = _steady(xr, step_input, world)
        m = _measure(lambda req=steady: loop.run_until_complete(runner.RunFunction(req)), calls)
        _print("function-peers", f"{name} beside {count} models", m)
        m = _measure(lambda req=first: loop.run_until_complete(runner.RunFunction(req)), calls)
        _print("function-peers", "  first reconcile (whole namespace)", m)
    _fleet(xr, step_input, cluster, calls, loop, runner)
    loop.close()


def _fleet(
    xr: dict, step_input: dict | None, cluster: dict, calls: int, loop: Any, runner: Any
) -> None:
    """10,000 models in the namespace over 1,000 clusters, ten on each, the model under test
    on one of them: per cluster two of its own models (composed by it, one with a plan, one
    created with it that has none yet), four with a plan that hold GPUs, three simulated and
    one created after the model that already runs; each other one with its Usage (its ledger
    entry)."""
    import copy

    from function.cluster import ledger, peers

    world: list[dict] = []
    xrs: list[dict] = []
    clusters = 1000
    for c in range(clusters):
        cl = copy.deepcopy(cluster)
        cl["metadata"]["name"] = f"cluster-{c:04d}"
        cl["metadata"].setdefault("labels", {})[ledger.COMPOSITE_LABEL] = f"cluster-{c:04d}"
        world.append(cl)
    for i in range(10 * clusters):
        on, k = f"cluster-{i % clusters:04d}", i // clusters
        model = f"example/model-{i}" if k != 1 else "Qwen/Qwen2.5-0.5B-Instruct"
        peer: dict[str, Any] = {
            "apiVersion": xr["apiVersion"],
            "kind": xr["kind"],
            "metadata": {
                "name": f"m-{i:05d}",
                "namespace": "a-team",
                "creationTimestamp": "2026-12-01T00:00:00Z" if k == 9 else "2026-01-01T00:00:00Z",
                "labels": {ledger.COMPOSITE_LABEL: f"m-{i:05d}"},
            },
            "spec": {"parameters": {"model": model, "clusterRef": {"name": on}}},
        }
        if k in (0, 1):  # the cluster's own models
            peer["metadata"]["labels"][ledger.COMPOSITE_LABEL] = on
            peer["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": xr["apiVersion"],
                    "kind": "InferenceCluster",
                    "name": on,
                    "uid": f"uid-{on}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ]
        if k in (6, 7, 8):
            peer["spec"]["parameters"]["engine"] = {"simulate": True}
            peer["spec"]["parameters"]["autoscaling"] = {"minReplicas": 1, "maxReplicas": 3}
        if k != 1:
            peer["status"] = {
                "plan": {"gpus": 1},
                "replicas": {"max": 3 if k in (6, 7, 8) else 1},
                "servedModelNames": [model],
            }
        xrs.append(peer)
        world.append(peer)
        usage = _ledger_usage(peer)
        if usage is not None:
            world.append(usage)
    mine = copy.deepcopy(xr)
    mine["spec"]["parameters"]["clusterRef"] = {"name": "cluster-0007"}
    mine["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
    world.append(mine)
    first, steady, rsp = _steady(mine, step_input, world)
    # The answers: the peers the ledger gives are those the whole namespace gives, and the
    # steady reconcile decides what the first decided reading all 10,000 models.
    required = {
        n: [fnresource.struct_to_dict(i.resource) for i in r.items]
        for n, r in steady.required_resources.items()
    }
    assert peers.REQUIREMENT not in required, "steady, yet the whole namespace was read"
    assert ledger.on_cluster(required, "cluster-0007", "qwen-7b") == peers.on_cluster(
        xrs, "cluster-0007", "qwen-7b"
    ), "the ledger's peers differ from the namespace's"
    again = loop.run_until_complete(runner.RunFunction(steady))
    same = _answers(again) == _answers(rsp)
    assert same, "the steady reconcile decides otherwise than the whole namespace"
    budget = next(c.message for c in again.conditions if c.type == "GPUBudget")
    selected = sum(len(r.items) for r in steady.required_resources.values())
    m = _measure(lambda: loop.run_until_complete(runner.RunFunction(steady)), calls)
    _print("function-peers", "beside 10,000 models, 1,000 clusters", m)
    print(
        f"{'function-peers':<20} {'':<34} Crossplane returns {selected} objects "
        f"({len(required.get(ledger.LEDGER_REQUIREMENT, []))} ledger entries, "
        f"{len(required.get(ledger.CLUSTER_MODELS_REQUIREMENT, []))} of the cluster's own "
        f"models); answers equal to the whole namespace's: {same} (GPUBudget: {budget})"
    )
    TARGETS.append(
        ("model reconcile p50 beside 10,000 models over 1,000 clusters", m["p50_ms"], 3.0, " ms")
    )
    m = _measure(lambda: loop.run_until_complete(runner.RunFunction(first)), max(1, calls // 20))
    _print("function-peers", "  first reconcile (whole namespace)", m)


def _model_sizes() -> Any:
    """The i-th model of a filling fleet (the catalog's models in turn) as placement sizes
    it: the function's own Sizer, one per model."""
    from function.claim.spec import LLMSpec
    from function.cluster.place import sizer
    from function.model import catalog_lookup

    ids = catalog_lookup.catalog_ids()
    sizers: dict[str, Any] = {}

    def size_of(i: int) -> Any:
        model = ids[i % len(ids)]
        if model not in sizers:
            spec = LLMSpec(name=f"model-{i}", namespace="a-team", model=model)
            sizers[model] = sizer(spec, catalog_lookup.lookup(model), vllm_memory.EngineSettings())
        return sizers[model]

    return size_of


def _fleet(nodes: int, regions: int | None = None) -> list[Any]:
    """200 InferenceClusters as placement sees them: every GPU type and node size of
    limits.yaml, pools of `nodes` x 1-4 nodes, in `regions` regions (none: no spread value)."""
    from function.cluster import placement
    from function.limits import GPU_TYPES

    shapes = [(t, n) for t in GPU_TYPES for n in (1, 2, 4, 8)]
    return [
        placement.Candidate(
            f"cluster-{i:03d}",
            gpu_type=shapes[i % len(shapes)][0],
            memory_gib=GPU_TYPES[shapes[i % len(shapes)][0]].memory_gib,
            per_node=shapes[i % len(shapes)][1],
            pool=shapes[i % len(shapes)][1] * nodes * (1 + i % 4),
            spread_value=f"region-{i % regions:02d}" if regions else None,
        )
        for i in range(200)
    ]


def bench_placement(runs: int) -> None:
    """1,000 models placed one after another over 200 InferenceClusters (every GPU type and
    node size of limits.yaml, pools of 1-4 nodes), each taking GPUs from the cluster it
    lands on: function/cluster/placement.py with the function's own sizing of each model for each
    GPU (catalog models, in turn). Pure Python, in process; the best of `runs`."""
    from function.cluster import placement

    clusters = _fleet(nodes=1)
    by_name = {c.name: c for c in clusters}

    def fill() -> tuple[int, float]:
        start = time.perf_counter()
        size_of = _model_sizes()
        held = {c.name: 0 for c in clusters}
        placed = 0
        for i in range(1000):
            size = size_of(i)
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


def bench_spread(runs: int) -> None:
    """1,000 models, each placed on 3 clusters at once (placement: {clusters: 3}, at most one
    per region), one after another over the 200 InferenceClusters of `bench_placement` in 20
    regions, with pools of 4-16 nodes so that the fleet holds nearly all 3,000 placements
    (a full fleet would make the later models cheap), each placement taking GPUs from its
    cluster: function/cluster/spread.py with the function's own sizing. Pure Python, in
    process; the best of `runs`."""
    from function.cluster import spread

    clusters = _fleet(nodes=4, regions=20)
    by_name = {c.name: c for c in clusters}

    def fill() -> tuple[int, int, float]:
        start = time.perf_counter()
        size_of = _model_sizes()
        held = {c.name: 0 for c in clusters}
        placements = full = 0
        for i in range(1000):
            size = size_of(i)
            decision = spread.spread(clusters, size, 1, 3, held=held)
            for p in decision.placed:
                c = by_name[p.cluster]
                held[c.name] += size(c.gpu_type, c.memory_gib, c.per_node, c.span) or 0
            placements += len(decision.placed)
            full += decision.missing is None
        return placements, full, time.perf_counter() - start

    best = min((fill() for _ in range(max(1, runs))), key=lambda r: r[2])
    print(
        f"{'placement-spread':<20} {'1,000 models x 3 over 200 clusters':<34} "
        f"{best[2] * 1000:8.1f} ms   {best[0]} placements, {best[1]} models with all 3, the rest "
        "short (no cluster left in enough regions)"
    )
    claim_cost = _one_claim_placed(_fleet(nodes=1), fleet=True)
    print(
        f"{'placement-spread':<20} {'one claim x 3, 200 clusters, 1,000':<34} {claim_cost:8.1f} ms"
        "   compose of a fleet claim: the clusters and models as Crossplane passes them, 3 "
        "placements and the global route"
    )
    TARGETS.append(
        ("placement: 1,000 models x 3 placements over 200 clusters", best[2] * 1000, 300.0, " ms")
    )


def _one_claim_placed(clusters: list[Any], fleet: bool = False) -> float:
    """What one reconcile of a selector claim costs in the function (compose, no gRPC):
    the 200 clusters as InferenceClusters and 1,000 models on them, read and placed; with
    `fleet`, a claim of examples/llm-two-regions.yaml placed 3 times (one per region, the
    clusters in 20) with its global route on the control plane's cluster."""
    import copy

    from function.compose import compose
    from function.outcome import Inputs

    state = next(yaml.safe_load_all((ROOT / "examples" / "state" / "llm-placed.yaml").read_text()))
    found = []
    for i, c in enumerate(clusters):
        cluster = copy.deepcopy(state)
        cluster["metadata"]["name"] = c.name
        cluster["status"]["gpu"].update(
            type=c.gpu_type, memoryGiB=c.memory_gib, perNode=c.per_node, maxNodes=1 + i % 4
        )
        if fleet:
            cluster["spec"]["parameters"]["region"] = f"region-{i % 20:02d}"
            cluster["status"].pop("region", None)
        found.append(cluster)
    claim = yaml.safe_load((ROOT / "examples" / "llm-placed.yaml").read_text())
    models = []
    for i in range(1000):
        m = copy.deepcopy(claim)
        m["metadata"] = {"name": f"model-{i}", "namespace": "a-team"}
        m["status"] = {"placement": {"cluster": clusters[i % len(clusters)].name}}
        models.append(m)
    required: dict[str, list[Any]] = {}
    if fleet:
        claim = yaml.safe_load((ROOT / "examples" / "llm-two-regions.yaml").read_text())
        claim["spec"]["parameters"]["placement"]["clusters"] = 3
        gateway = next(
            d
            for d in yaml.safe_load_all(
                (ROOT / "examples" / "state" / "llm-two-regions.yaml").read_text()
            )
            if d and d["metadata"]["name"] == "control-plane"
        )
        required["global-endpoint-cluster"] = [gateway]
    inputs = Inputs(
        xr=claim,
        engine_image="docker.io/lmcache/vllm-openai:v0",
        required={"inference-clusters": found, "llminferences": models, **required},
    )
    start = time.perf_counter()
    out = compose(inputs)
    assert out.fatal is None, out.fatal
    if fleet:
        assert out.status["placement"]["placed"] == 3, out.status["placement"].get("missing")
        assert any(k.startswith("global-route") for k in out.resources)
    return (time.perf_counter() - start) * 1000


def _print_targets() -> None:
    if not TARGETS:
        return
    print("\nspeed targets (issues 11, 14, 26 and 39)")
    for what, measured, limit, unit in TARGETS:
        verdict = "met" if measured <= limit else "NOT MET"
        print(f"  {what:<52} {measured:8.2f}{unit:<9} target <= {limit:g}{unit:<9} {verdict}")


FN_KCL = "crossplane-contrib-function-kcl"

BENCHES = {
    "function-inprocess": bench_function_inprocess,
    "function-peers": bench_function_peers,
    "placement": bench_placement,
    "placement-spread": bench_spread,
    "function-grpc": bench_function_grpc,
    "kcl-step": bench_kcl_step,
    "kcl-memory": bench_kcl_memory,
    "render": bench_render,
    "render-lists": bench_render_lists,
    "hub-config": bench_hub_config,
    "plan": bench_plan,
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
        "placement-spread": 5,
        "kcl-step": args.kcl_calls,
        "kcl-memory": args.kcl_memory_calls,
        "render": args.render_runs,
        "render-lists": args.render_runs,
        "hub-config": args.render_runs,
        "plan": args.render_runs,
    }
    for name in args.only or list(BENCHES):
        BENCHES[name](counts.get(name, args.calls))
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"benchmark process peak resident memory: {maxrss / 1024:.1f} MiB")
    _print_targets()


if __name__ == "__main__":
    main()
