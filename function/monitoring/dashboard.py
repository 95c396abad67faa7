"""Each model's own Grafana dashboard: the plan against what its engines report.

The dashboard is data (function/monitoring/dashboard.json, a template with `__NAME__`
placeholders); the builders below only compute the values and fill it. It lands in a
ConfigMap in the model's target namespace, labelled with the cluster's dashboard label
(status.monitoring.dashboardLabel), which Grafana's dashboard sidecar loads from every
namespace (docs/inferencecluster.md, Monitoring)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from function import kube
from function.backends import resources
from function.backends.base import Build, Engine
from function.backends.common import no_takeover, place
from function.claim.serving import Autoscaling
from function.cluster.target import Monitoring
from function.model import sizing
from function.monitoring import queries
from function.monitoring.names import selector
from function.outcome import Outcome
from function.plan import scaling

TEMPLATE = Path(__file__).with_name("dashboard.json")
DASHBOARD = "dashboard"  # the composition resource's name (and the Object's suffix)
PLACEHOLDER = re.compile(r"__[A-Z](?:[A-Z_]*[A-Z])?__")
LATENCY_PLACEHOLDER = {"timeToFirstToken": "TTFT", "interTokenLatency": "ITL"}


def template() -> dict[str, Any]:
    data = json.loads(TEMPLATE.read_text())
    data.pop("__comment", None)
    return data


def engine_label(spec_name: str, simulated_on_production_stack: bool) -> str:
    """The engine pods' app.kubernetes.io/name, which the cluster's PodMonitor copies into
    the `model` label: the claim's name, or `<name>-sim` for the simulator that stands in for
    a VLLMRuntime (function/backends/simulator.py)."""
    return kube.dns_label(f"{spec_name}-sim" if simulated_on_production_stack else spec_name)


def kv_tokens(plan: sizing.Plan) -> int | None:
    """Tokens one replica's KV cache holds, as planned: its KV cache per GPU over the bytes
    one token takes per GPU (None when the plan has no such facts)."""
    if plan.kv_bytes_per_token <= 0 or plan.kv_cache_gib <= 0 or plan.gpus < 1:
        return None
    return int(plan.kv_cache_gib / plan.gpus * 2**30 // plan.kv_bytes_per_token)


def plan_values(
    plan: sizing.Plan,
    max_model_len: int | str | None,
    count: scaling.Replicas,
    autoscaling: Autoscaling | None,
) -> dict[str, str | None]:
    """The plan's constants the dashboard draws beside what the engines report (None: the
    plan has no such number, so its line is left out)."""
    tokens = kv_tokens(plan)
    context = max_model_len if isinstance(max_model_len, int) and max_model_len > 0 else None
    share = f"{min(1.0, context / tokens):.4g}" if tokens and context else None
    metric = autoscaling.metric if autoscaling else None
    latency = autoscaling.latency if autoscaling else None
    values: dict[str, str | None] = {
        "MAX_MODEL_LEN": str(context) if context else "unknown",
        "KV_TOKENS": str(tokens) if tokens else "unknown",
        "CONTEXT_SHARE": share,
        "GPUS": str(plan.gpus),
        "MIN_REPLICAS": str(count.low),
        "MAX_REPLICAS": str(count.high),
        "ASKED_MAX_REPLICAS": str(count.asked_high) if count.capped else None,
        "BUDGET": (
            f"The GPU budget capped the maximum from {count.asked_high} to {count.high}."
            if count.capped
            else ""
        ),
        "QUEUE_TARGET_VALUE": str(autoscaling.target) if metric == "waitingRequests" else None,
        "QUEUE_TARGET": (
            f"{autoscaling.target} waiting per replica"
            if autoscaling and metric == "waitingRequests"
            else "not the autoscaling signal"
        ),
        "KV_TARGET_VALUE": f"{autoscaling.target / 100:g}"
        if autoscaling and metric == "kvCacheUsage"
        else None,
    }
    for name, short in LATENCY_PLACEHOLDER.items():
        ours = latency is not None and latency.metric == name
        values[f"{short}_TARGET_VALUE"] = f"{latency.seconds:g}" if ours and latency else None
        values[f"{short}_TARGET"] = (
            f"Autoscaling keeps p{latency.percentile} under {latency.seconds:g} s."
            if ours and latency
            else ""
        )
    return values


def fill(node: Any, values: dict[str, str | None]) -> Any:
    """`node` with every placeholder replaced; a query (a panel target) whose placeholder has
    no value is dropped; one the template names but `values` does not is an error."""
    if isinstance(node, str):
        return PLACEHOLDER.sub(lambda m: values[m.group(0)[2:-2]] or "", node)
    if isinstance(node, list):
        return [fill(v, values) for v in node if not _unset(v, values)]
    if isinstance(node, dict):
        return {k: fill(v, values) for k, v in node.items()}
    return node


def _unset(node: Any, values: dict[str, str | None]) -> bool:
    """Whether `node` is a query whose expression names a placeholder without a value."""
    expr = node.get("expr") if isinstance(node, dict) else None
    return isinstance(expr, str) and any(
        values[m.group(0)[2:-2]] is None for m in PLACEHOLDER.finditer(expr)
    )


def dashboard(
    *, claim: str, namespace: str, model: str, engine: str, values: dict[str, str | None]
) -> dict[str, Any]:
    """The Grafana dashboard of `claim`: its engine pods (`engine`, their `model` label) in
    `namespace`, with the plan's `values`."""
    return fill(
        template(),
        values
        | {
            "UID": uid(namespace, claim),
            "TITLE": f"LLMInference {namespace}/{claim}",
            "DESCRIPTION": f"{model}: the plan against what its engines report",
            "SELECTOR": selector(namespace, engine),
            "WINDOW": queries.WINDOW,
        },
    )


def uid(namespace: str, claim: str) -> str:
    """A Grafana uid (at most 40 characters) unique per target namespace and claim."""
    return "dot-inference-" + hashlib.sha256(f"{namespace}/{claim}".encode()).hexdigest()[:16]


def dashboard_config_map(
    *, name: str, namespace: str, model: str, monitoring: Monitoring, board: dict[str, Any]
) -> dict[str, Any]:
    """The ConfigMap Grafana's sidecar loads `board` from (by the cluster's label)."""
    metadata = resources.object_metadata(name, namespace, model, component="dashboard")
    metadata["labels"] |= dict(monitoring.dashboard_label)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata,
        "data": {f"{name}.json": json.dumps(board, indent=2, sort_keys=True)},
    }


def compose_dashboard(job: Build, engine: Engine, out: Outcome) -> None:
    """On a cluster with monitoring, the model's dashboard (behind the same ownership check
    as every other object); status.plan shows it and how KEDA reads its metrics."""
    spec, target, monitoring = job.spec, job.target, job.target.monitoring
    if job.count.autoscaled:
        out.status_extra["autoscaling"] = autoscaling_status(
            spec.autoscaling, monitoring is not None
        )
    if monitoring is None:
        return
    name = kube.dns_label(f"{spec.name}-dashboard")
    board = dashboard(
        claim=spec.name,
        namespace=target.namespace,
        model=spec.model,
        engine=engine_label(spec.name, spec.engine.simulate and not spec.llmd),
        values=plan_values(job.plan, engine.max_model_len, job.count, spec.autoscaling),
    )
    own = Outcome()
    place(
        spec,
        target,
        DASHBOARD,
        dashboard_config_map(
            name=name,
            namespace=target.namespace,
            model=spec.model,
            monitoring=monitoring,
            board=board,
        ),
        own,
        suffix=DASHBOARD,
    )
    no_takeover(spec, target, job.inputs, own)
    out.resources |= own.resources
    out.requirements |= own.requirements
    out.status_extra["dashboard"] = {
        "configMap": name,
        "namespace": target.namespace,
        "uid": board["uid"],
        **({"grafana": monitoring.grafana} if monitoring.grafana else {}),
    }


def autoscaling_status(autoscaling: Autoscaling | None, prometheus: bool) -> dict[str, Any]:
    """status.plan.autoscaling: where KEDA reads the metric from, and the targets."""
    out: dict[str, Any] = {"metrics": "prometheus" if prometheus else "metrics-api"}
    if autoscaling is not None:
        out |= {"metric": autoscaling.metric, "target": autoscaling.target}
        if autoscaling.latency is not None:
            lat = autoscaling.latency
            out["latency"] = {
                "metric": lat.metric,
                "percentile": lat.percentile,
                "seconds": lat.seconds,
            }
    return out
