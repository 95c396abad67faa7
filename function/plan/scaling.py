"""Replicas: how KEDA scales an engine on vLLM's own signals, and what the GPU pool allows.

**Signals.** vLLM exports, per engine pod, `vllm:num_requests_waiting` (requests queued
because the batch or the KV cache is full) and `vllm:kv_cache_usage_perc` (0-1), labelled
`model_name` = the first served name (vLLM 0.17.1 vllm/v1/metrics/loggers.py; the inference
simulator exports the same names, llm-d-inference-sim v0.10.2 pkg/llm-d-inference-sim/
metrics.go). KEDA's `metrics-api` scaler reads them straight from every ready pod behind the
engine's Service (`aggregateFromKubeServiceEndpoints`, format `prometheus`; kedacore/keda
v2.20.2 pkg/scalers/metrics_api_scaler.go), so no Prometheus is needed. The scaler needs at
least one ready pod, which suits us: scaling to zero is not offered (the production-stack
router answers at once, 404 or 503, for a model with no ready replica: vllm-stack-0.1.12
src/vllm_router/services/request_service/request.py).

- waitingRequests: the sum over pods, as an HPA `AverageValue` target: replicas =
  ceil(waiting / target). A queue means every replica's batch is full, so the target is
  small (default 3 per replica).
- kvCacheUsage: the mean over pods, as a `Value` target: replicas = ceil(replicas x
  usage / target).

The production-stack operator's own `autoscalingConfig` scales on Prometheus queries of
running requests and token rates (operator/internal/controller/vllmruntime_controller.go
`reconcileScaledObject`), none of which is a queue or the KV cache, and needs a Prometheus
that labels series by job; we render our own ScaledObject on the VLLMRuntime's scale
subresource instead.

**Budget.** Every replica of a model needs its GPUs on one node. GPUs per replica (1, 2, 4,
8) and GPUs per node (1, 2, 4, 8) are powers of two with the replica's no larger than the
node's, so replicas whose GPUs add up to at most the pool's (maxNodes x perNode) always pack
onto its nodes (sizes that divide each other pack perfectly, largest first): counting GPUs
is exact. Models hold `maxReplicas x gpus` (or `replicas x gpus`), the most they may run.
First come, first served: a model counts the models created before it (then by name), so
two models never refuse each other and a late one cannot evict an early one.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.claim.serving import Autoscaling, Latency
from function.claim.spec import P, SpecError
from function.monitoring import queries

POLLING_INTERVAL_S = 15
# One replica removed per minute after the delay: a queue-based signal drops to zero once
# there are enough replicas, and removing them all at once would bring the queue back.
SCALE_DOWN_POLICY = {"type": "Pods", "value": 1, "periodSeconds": 60}


@dataclass(frozen=True)
class Metric:
    """How one autoscaling metric becomes a KEDA metrics-api trigger."""

    gauge: str  # vLLM's metric
    aggregation: str  # over the ready pods: sum | average
    metric_type: str  # HPA target type
    scale: float  # target as given -> the gauge's unit


METRICS: dict[str, Metric] = {
    "waitingRequests": Metric("vllm:num_requests_waiting", "sum", "AverageValue", 1.0),
    # The gauge is a fraction (1 = 100 %); the claim says percent.
    "kvCacheUsage": Metric("vllm:kv_cache_usage_perc", "average", "Value", 0.01),
}


def trigger(
    autoscaling: Autoscaling, *, service: str, namespace: str, port: int, model: str
) -> dict:
    """The KEDA trigger for `autoscaling`: the gauge of `model` on every ready pod behind
    `service` (the URL's port is the pods' port: the scaler matches it in the Service's
    EndpointSlices and calls each pod on it)."""
    m = METRICS[autoscaling.metric]
    return {
        "type": "metrics-api",
        "metricType": m.metric_type,
        "metadata": {
            "url": f"http://{service}.{namespace}.svc.cluster.local:{port}/metrics",
            "format": "prometheus",
            # Model ids and aliases hold no quotes or backslashes (spec checks them).
            "valueLocation": f'{m.gauge}{{model_name="{model}"}}',
            "aggregateFromKubeServiceEndpoints": "true",
            "aggregationType": m.aggregation,
            "targetValue": f"{autoscaling.target * m.scale:g}",
        },
    }


# The aggregation of each metric's gauge over the pods in PromQL (as metrics-api's above).
PROMQL_AGGREGATION = {"sum": "sum", "average": "avg"}


def prometheus_triggers(
    autoscaling: Autoscaling, *, server: str, namespace: str, model: str
) -> list[dict]:
    """The KEDA `prometheus` triggers for `autoscaling` on a cluster with Prometheus at
    `server`: the claim's queue or KV-cache metric over the engine pods labelled `model` in
    `namespace`, and its latency target when it has one (the HPA runs the larger count).
    Nothing from the claim goes into a query but its numbers: metric names are the
    function's, `namespace` and `model` are checked DNS labels (function/monitoring/names.py)."""
    m = METRICS[autoscaling.metric]
    query = queries.gauge(m.gauge, namespace, model, PROMQL_AGGREGATION[m.aggregation])
    out = [_prometheus(server, query, m.metric_type, autoscaling.target * m.scale)]
    if autoscaling.latency is not None:
        out.append(latency_trigger(autoscaling.latency, server, namespace, model))
    return out


def latency_trigger(latency: Latency, server: str, namespace: str, model: str) -> dict:
    """A `Value` target on a percentile: replicas = ceil(replicas x percentile / seconds)."""
    query = queries.percentile(latency.metric, latency.percentile, namespace, model)
    return _prometheus(server, query, "Value", latency.seconds)


def _prometheus(server: str, query: str, metric_type: str, threshold: float) -> dict:
    # kedacore/keda v2.20.2 pkg/scalers/prometheus_scaler.go prometheusMetadata: serverAddress,
    # query and threshold are required; ignoreNullValues (default true) reads no series as 0.
    return {
        "type": "prometheus",
        "metricType": metric_type,
        "metadata": {
            "serverAddress": server,
            "query": query,
            "threshold": f"{threshold:g}",
        },
    }


@dataclass(frozen=True)
class Holder:
    """A model that holds GPUs of the pool: its claim and how many (`planned` False: it has
    published no plan yet, so its count is this function's estimate)."""

    name: str
    gpus: int
    planned: bool = True


@dataclass(frozen=True)
class Budget:
    """The GPU pool of a cluster and what the models before this one hold of it."""

    cluster: str
    max_nodes: int
    per_node: int
    holders: tuple[Holder, ...]

    @property
    def pool(self) -> int:
        return self.max_nodes * self.per_node

    @property
    def held(self) -> int:
        return sum(h.gpus for h in self.holders)

    @property
    def free(self) -> int:
        return max(0, self.pool - self.held)

    def describe(self) -> str:
        pool = (
            f"InferenceCluster {self.cluster}'s GPU pool has {self.pool} GPUs (gpu.maxNodes "
            f"{self.max_nodes} x gpu.perNode {self.per_node})"
        )
        if not self.holders:
            return f"{pool}, all free"
        held = ", ".join(
            f"{h.name} {h.gpus}" + ("" if h.planned else " estimated") for h in self.holders
        )
        return (
            f"{pool}; models created before this one or already running hold {self.held} "
            f"({held}), so {self.free} are free"
        )


@dataclass(frozen=True)
class Replicas:
    """What the model may run: fixed, or between low and high (after the budget)."""

    low: int
    high: int
    autoscaled: bool
    asked_high: int  # before the budget capped it

    @property
    def capped(self) -> bool:
        return self.high < self.asked_high


def replicas(
    fixed: int | None,
    autoscaling: Autoscaling | None,
    gpus: int,
    budget: Budget | None,
    cluster_field: str = f"{P}.clusterRef.name",
) -> Replicas:
    """The replicas the model may run on `budget` (None: the pool is not known, so nothing
    is checked). Refuses (SpecError) what cannot fit; caps an autoscaling maximum that does
    not fit to what does."""
    if autoscaling is None:
        count = fixed or 1
        if budget is not None and count * gpus > budget.free:
            raise _no_room(budget, gpus, count, f"{P}.replicas" if fixed else None, cluster_field)
        return Replicas(low=count, high=count, autoscaled=False, asked_high=count)
    low, high = autoscaling.min_replicas, autoscaling.max_replicas
    if budget is None:
        return Replicas(low=low, high=high, autoscaled=True, asked_high=high)
    if low * gpus > budget.free:
        raise _no_room(budget, gpus, low, f"{P}.autoscaling.minReplicas", cluster_field)
    allowed = min(high, budget.free // gpus)
    return Replicas(low=low, high=allowed, autoscaled=True, asked_high=high)


def _no_room(
    budget: Budget, gpus: int, count: int, field: str | None, cluster_field: str
) -> SpecError:
    """The refusal of `count` replicas of `gpus` GPUs: `field` is the count's field (None:
    the default single replica, so the cluster is what does not fit)."""
    fits = budget.free // gpus
    more = f"raise gpu.maxNodes on InferenceCluster {budget.cluster}"
    if fits and field:
        instead = f"use {field} {fits} or fewer, or {more}"
    else:
        short = count * gpus - budget.free
        instead = (
            f"free {short} GPU(s) (remove or shrink a model there), {more}, or choose "
            "another cluster"
        )
    what = f"{count} replica(s) x {gpus} GPU(s) = {count * gpus} GPUs"
    if field is None:
        field = cluster_field
        return SpecError(
            field,
            budget.cluster,
            f"{field}: one replica of {gpus} GPU(s) does not fit InferenceCluster "
            f"{budget.cluster}: {budget.describe()}; {instead}",
        )
    return SpecError(field, count, f"{field}: {what} do not fit: {budget.describe()}; {instead}")
