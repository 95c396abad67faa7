"""`dot-inference plan MODEL`: the function's own sizing of a model on every GPU type of the
one GPU table (function/limits.yaml), without writing a claim.

Each row is what a claim renders: for each GPU type an InferenceCluster of that type (rendered
once through the package's own composition, its GPU published as a cluster publishes it) and
an LLMInference of MODEL on it, run through the same in-process function `dot-inference
render` runs; the row is read from the claim's `status.plan`, so the table cannot drift from
what a cluster would get. Offline unless `--hub` (the catalog, else the name estimate).
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from function.limits import GPU_TYPES

API = "inference.devopstoolkit.ai/v1alpha1"
NAMESPACE = "a-team"
CLUSTER = "plan"


@dataclass(frozen=True)
class Row:
    """One GPU type: what a claim of the model renders there (status.plan), or why not."""

    gpu: str
    gpu_memory_gib: float
    gpus: int | None = None
    topology: str = ""
    weights_gib_per_gpu: float | None = None
    activation_gib_per_gpu: float | None = None
    non_torch_gib_per_gpu: float | None = None
    kv_cache_gib_per_gpu: float | None = None
    max_model_len: int | str | None = None
    max_concurrency: float | None = None
    fits: bool = False
    utilisation: float | None = None  # status.plan.gpuMemoryUtilization
    source: str = ""
    refused: str | None = None  # the function's message when the claim is refused
    warning: str | None = None


def cluster_claim(per_node: int, nodes: int) -> dict[str, Any]:
    """An InferenceCluster whose GPU pool the planner varies: an existing cluster (nothing to
    create) with the vLLM Production Stack, and LeaderWorkerSet when replicas may span
    nodes."""
    apps: dict[str, Any] = {"nvidia": {"enabled": True}, "vllm": {"enabled": True}}
    if nodes > 1:
        apps["lws"] = {"enabled": True}
    return {
        "apiVersion": API,
        "kind": "InferenceCluster",
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
        "spec": {
            "parameters": {
                "provider": "existing",
                "kubeconfigSecretRef": {"name": "plan", "key": "kubeconfig"},
                "modelsKubeconfigSecretRef": {"name": "plan-models"},
                "gpu": {"enabled": True, "type": "h100", "perNode": per_node, "maxNodes": nodes},
                "apps": apps,
            }
        },
    }


def model_claim(model: str, context: int | None = None, gpu: int | None = None) -> dict:
    """The LLMInference a row is read from (and `--output yaml` prints)."""
    params: dict[str, Any] = {"model": model, "clusterRef": {"name": CLUSTER}}
    if gpu is not None:
        params["gpu"] = gpu
    if context is not None:
        params["engine"] = {"maxModelLen": context}
    name = model.split("/")[-1].lower().replace(".", "-").replace("_", "-")[:50].strip("-")
    return {
        "apiVersion": API,
        "kind": "LLMInference",
        "metadata": {"name": name or "model", "namespace": NAMESPACE},
        "spec": {"parameters": params},
    }


def _package() -> Any:
    from dot_inference.crossplane.documents import load_package

    return load_package(Path(__file__).resolve().parents[1] / "package")


def cluster_state(pkg: Any, per_node: int, nodes: int) -> dict[str, Any]:
    """The InferenceCluster as Crossplane supplies it to a model's function: rendered through
    the package, Ready (as dot_inference/generate.py makes the examples' state)."""
    from dot_inference.crossplane.render import render_in_package
    from dot_inference.generate import created

    claim = cluster_claim(per_node, nodes)
    result = render_in_package(pkg, claim)
    # Again once its resources exist: then it publishes its GPU pool and apps.
    result = render_in_package(pkg, claim, observed=[created(r) for r in result.composed])
    if result.fatal:
        raise RuntimeError(f"the planner's InferenceCluster does not render: {result.fatal}")
    status = dict(result.xr.get("status") or {})
    status["conditions"] = [{"type": "Ready", "status": "True", "reason": "Available"}]
    return {**claim, "status": status}


def on_gpu(state: dict[str, Any], gpu: str) -> dict[str, Any]:
    """The cluster with a pool of `gpu`: its type and memory as the cluster publishes them."""
    out = copy.deepcopy(state)
    out["status"].setdefault("gpu", {}).update(type=gpu, memoryGiB=GPU_TYPES[gpu].memory_gib)
    return out


def row_of(gpu: str, xr: dict[str, Any], fatal: str | None, warnings: list[str]) -> Row:
    """A row from a rendered claim's status.plan (or its refusal)."""
    memory = GPU_TYPES[gpu].memory_gib
    if fatal:
        return Row(gpu=gpu, gpu_memory_gib=memory, refused=fatal)
    plan = (xr.get("status") or {}).get("plan") or {}
    per = plan.get("perGPU") or {}
    return Row(
        gpu=gpu,
        gpu_memory_gib=memory,
        gpus=plan.get("gpus"),
        topology=plan.get("topology", ""),
        weights_gib_per_gpu=per.get("weightsGiB"),
        activation_gib_per_gpu=per.get("activationGiB"),
        non_torch_gib_per_gpu=per.get("nonTorchGiB"),
        kv_cache_gib_per_gpu=per.get("kvCacheGiB"),
        max_model_len=plan.get("maxModelLen"),
        max_concurrency=plan.get("maxConcurrency"),
        fits=bool(plan.get("fits")),
        utilisation=plan.get("gpuMemoryUtilization"),
        source=plan.get("modelSource", ""),
        warning=warnings[0] if warnings else None,
    )


def plan_rows(
    model: str,
    gpus: list[str] | None = None,
    *,
    context: int | None = None,
    per_node: int = 8,
    nodes: int = 1,
) -> list[Row]:
    """A row for each GPU type (all of the GPU table by default)."""
    from dot_inference.crossplane.render import render_in_package
    from dot_inference.function_kcl import user_message

    pkg = _package()
    state = cluster_state(pkg, per_node, nodes)
    rows = []
    for gpu in gpus or list(GPU_TYPES):
        result = render_in_package(pkg, model_claim(model, context), required=[on_gpu(state, gpu)])
        warnings = [
            str(r.get("message")) for r in result.results if r.get("severity") == "SEVERITY_WARNING"
        ]
        fatal = user_message(result.fatal) if result.fatal else None
        rows.append(row_of(gpu, result.xr, fatal, warnings))
    return rows


# --------------------------------------------------------------------------- output


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[Row], context: int | None, nodes: int = 1) -> str:
    """The rows as a text table, one line each, and the reasons under it (`nodes`: the nodes
    the planner's cluster let a replica span)."""
    at = f"seqs@{context}" if context else "seqs@ctx"
    head = ["GPU", "GiB", "GPUs", "weights/GPU", "KV/GPU", "context", at, "fits", "topology"]
    body = []
    notes = []
    for r in rows:
        if r.refused:
            body.append([r.gpu, _num(r.gpu_memory_gib), "-", "-", "-", "-", "-", "no", "-"])
            # Here the cluster is the planner's: --nodes lets its replicas span nodes.
            hint = " (here: --nodes 2 or more)" if "apps.lws" in r.refused and nodes < 2 else ""
            notes.append(f"{r.gpu}: {r.refused}{hint}")
            continue
        body.append(
            [
                r.gpu,
                _num(r.gpu_memory_gib),
                str(r.gpus),
                _num(r.weights_gib_per_gpu, 2),
                _num(r.kv_cache_gib_per_gpu, 2),
                str(r.max_model_len if r.max_model_len is not None else "-"),
                _num(r.max_concurrency, 1),
                "yes" if r.fits else "no",
                r.topology.split(": ", 1)[-1],
            ]
        )
        if not r.fits and r.warning:
            notes.append(f"{r.gpu}: {r.warning}")
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=False)).rstrip()
        for line in [head, *body]
    ]
    source = next((r.source for r in rows if r.source), "")
    utilisation = next((r.utilisation for r in rows if r.utilisation), None)
    if source and utilisation:
        lines.append(f"(facts: {source}; memory per GPU at vLLM's {utilisation:g} utilisation)")
    return "\n".join(lines + notes) + "\n"


def claims_yaml(model: str, rows: list[Row], context: int | None) -> str:
    """A claim ready to apply for each row that fits (the GPU count the function chose, the
    cluster to name left to the user)."""
    docs = []
    for r in rows:
        if not r.fits or r.gpus is None:
            continue
        claim = model_claim(model, context, r.gpus)
        claim["metadata"]["name"] = f"{claim['metadata']['name'][:40]}-{r.gpu}"
        claim["spec"]["parameters"]["clusterRef"] = {"name": f"my-{r.gpu}-cluster"}
        docs.append(claim)
    return yaml.safe_dump_all(docs, sort_keys=False)


def as_json(rows: list[Row]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2) + "\n"


def chart(rows: list[Row], path: Path, model: str) -> None:
    """A stacked bar per GPU type of one GPU's memory: weights, activation peak, non-torch
    memory, KV cache, and what the utilisation leaves free. matplotlib is an optional extra
    (`pip install 'dot-inference[chart]'`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ChartUnavailable(
            "--chart needs matplotlib, an optional extra: pip install 'dot-inference[chart]'"
        ) from e
    shown = [r for r in rows if not r.refused and r.weights_gib_per_gpu is not None]
    labels = [f"{r.gpu}\n{r.gpus} GPU(s)" for r in shown]
    parts = {
        "weights": [r.weights_gib_per_gpu or 0.0 for r in shown],
        "activation peak": [r.activation_gib_per_gpu or 0.0 for r in shown],
        "non-torch": [r.non_torch_gib_per_gpu or 0.0 for r in shown],
        "KV cache": [max(0.0, r.kv_cache_gib_per_gpu or 0.0) for r in shown],
    }
    used = [sum(v[i] for v in parts.values()) for i in range(len(shown))]
    parts["free (outside utilisation)"] = [
        max(0.0, r.gpu_memory_gib - u) for r, u in zip(shown, used, strict=False)
    ]
    colors = ["#4c72b0", "#dd8452", "#937860", "#55a868", "#d0d0d0"]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(shown) + 2), 5))
    bottom = [0.0] * len(shown)
    for (name, values), color in zip(parts.items(), colors, strict=False):
        ax.bar(labels, values, bottom=bottom, label=name, color=color)
        bottom = [b + v for b, v in zip(bottom, values, strict=False)]
    for i, r in enumerate(shown):
        if not r.fits:
            ax.text(i, bottom[i], "does not fit", ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("GiB per GPU")
    ax.set_title(f"{model}: one GPU as vLLM divides it")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed."""


# The command the README shows the output of: a model and the context it is sized for.
README_PLAN = ("meta-llama/Llama-3.3-70B-Instruct", 8192)
README_COMMAND = f"dot-inference plan {README_PLAN[0]} --context {README_PLAN[1]}"


def update_readme(path: Path) -> bool:
    """Rewrite the output under `$ README_COMMAND` in the README; True when it changed."""
    text = path.read_text()
    marker = f"$ {README_COMMAND}\n"
    start = text.index(marker) + len(marker)
    end = text.index("```", start)
    model, context = README_PLAN
    new = text[:start] + table(plan_rows(model, context=context), context) + text[end:]
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    import sys

    from function.model import hub as hub_client

    hub_client.reset_client(hub_client.HubClient(offline=True))
    print("rewrote" if update_readme(Path(sys.argv[1])) else "unchanged", sys.argv[1])
