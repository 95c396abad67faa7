"""Replicas as pure decisions: the GPU budget of a cluster's pool, and the KEDA trigger each
autoscaling metric becomes (function/plan/scaling.py)."""

from __future__ import annotations

import pytest

from function.claim.serving import Autoscaling
from function.claim.spec import SpecError
from function.plan import scaling


def autoscaling(low: int = 1, high: int = 4, metric: str = "waitingRequests", target: int = 3):
    return Autoscaling(
        min_replicas=low, max_replicas=high, metric=metric, target=target, scale_down_delay_s=300
    )


def budget(*held: int, nodes: int = 2, per_node: int = 4) -> scaling.Budget:
    return scaling.Budget(
        cluster="ic",
        max_nodes=nodes,
        per_node=per_node,
        holders=tuple(scaling.Holder(f"m{i}", g) for i, g in enumerate(held)),
    )


# (case, fixed replicas, autoscaling, GPUs per replica, budget, (low, high) or refusal start)
BUDGET_CASES = [
    ("one replica, empty pool", None, None, 1, budget(), (1, 1)),
    ("fixed replicas fill the pool", 4, None, 2, budget(), (4, 4)),
    (
        "fixed replicas above the pool",
        3,
        None,
        4,
        budget(),
        "spec.parameters.replicas: 3 replica(s) x 4 GPU(s) = 12 GPUs do not fit: "
        "InferenceCluster ic's GPU pool has 8 GPUs (gpu.maxNodes 2 x gpu.perNode 4), all "
        "free; use spec.parameters.replicas 2 or fewer",
    ),
    (
        "fixed replicas beside earlier models",
        2,
        None,
        2,
        budget(4, 2),
        "spec.parameters.replicas: 2 replica(s) x 2 GPU(s) = 4 GPUs do not fit: "
        "InferenceCluster ic's GPU pool has 8 GPUs (gpu.maxNodes 2 x gpu.perNode 4); models "
        "created before this one or already running hold 6 (m0 4, m1 2), so 2 are free; use "
        "spec.parameters.replicas 1 or fewer, or raise gpu.maxNodes on InferenceCluster ic",
    ),
    (
        "the default replica when the pool is full: the cluster is what does not fit",
        None,
        None,
        1,
        budget(8),
        "spec.parameters.clusterRef.name: one replica of 1 GPU(s) does not fit "
        "InferenceCluster ic: InferenceCluster ic's GPU pool has 8 GPUs (gpu.maxNodes 2 x "
        "gpu.perNode 4); models created before this one or already running hold 8 (m0 8), so "
        "0 are free; free 1 GPU(s) (remove or shrink a model there), raise gpu.maxNodes on "
        "InferenceCluster ic, or choose another cluster",
    ),
    (
        "a fixed count when no replica fits",
        2,
        None,
        4,
        budget(6),
        "spec.parameters.replicas: 2 replica(s) x 4 GPU(s) = 8 GPUs do not fit: "
        "InferenceCluster ic's GPU pool has 8 GPUs (gpu.maxNodes 2 x gpu.perNode 4); models "
        "created before this one or already running hold 6 (m0 6), so 2 are free; free 6 "
        "GPU(s) (remove or shrink a model there), raise gpu.maxNodes",
    ),
    ("autoscaling within the pool", None, autoscaling(1, 4), 2, budget(), (1, 4)),
    ("autoscaling capped to what is free", None, autoscaling(1, 8), 2, budget(2), (1, 3)),
    (
        "autoscaling minimum does not fit",
        None,
        autoscaling(2, 4),
        4,
        budget(4),
        "spec.parameters.autoscaling.minReplicas: 2 replica(s) x 4 GPU(s) = 8 GPUs do not "
        "fit: InferenceCluster ic's GPU pool has 8 GPUs (gpu.maxNodes 2 x gpu.perNode 4); "
        "models created before this one or already running hold 4 (m0 4), so 4 are free; use "
        "spec.parameters.autoscaling.minReplicas 1 or fewer",
    ),
    ("no pool known: nothing checked", 40, None, 8, None, (40, 40)),
    ("no pool known, autoscaling", None, autoscaling(2, 64), 8, None, (2, 64)),
]


@pytest.mark.parametrize(
    ("fixed", "scale", "gpus", "pool", "expected"),
    [c[1:] for c in BUDGET_CASES],
    ids=[c[0] for c in BUDGET_CASES],
)
def test_budget(fixed, scale, gpus, pool, expected) -> None:
    if isinstance(expected, str):
        with pytest.raises(SpecError) as e:
            scaling.replicas(fixed, scale, gpus, pool)
        assert e.value.message.startswith(expected), e.value.message
        assert e.value.field.startswith("spec.parameters.")
        return
    got = scaling.replicas(fixed, scale, gpus, pool)
    assert (got.low, got.high) == expected
    assert got.autoscaled is (scale is not None)
    assert got.capped is (scale is not None and got.high < scale.max_replicas)
    if pool is not None:
        assert got.high * gpus <= pool.free, "never more than the free GPUs"


def test_counting_gpus_is_exact_for_power_of_two_shapes() -> None:
    """The budget counts GPUs, not nodes: replicas of 1, 2, 4 or 8 GPUs on nodes of 1, 2, 4
    or 8 always pack when their sum fits (first fit, largest first), so a plan the budget
    accepts never strands a replica for want of a whole node."""
    for per_node in (1, 2, 4, 8):
        sizes = [s for s in (1, 2, 4, 8) if s <= per_node]
        for nodes in (1, 2, 3):
            for mix in _mixes(sizes, nodes * per_node):
                free = [per_node] * nodes
                for size in sorted(mix, reverse=True):
                    slots = [i for i, f in enumerate(free) if f >= size]
                    assert slots, f"{mix} on {nodes} x {per_node}: no node for {size}"
                    free[slots[0]] -= size


def _mixes(sizes: list[int], capacity: int, start: int = 0) -> list[list[int]]:
    """Every multiset of `sizes` whose sum is at most `capacity`."""
    out: list[list[int]] = [[]]
    for i in range(start, len(sizes)):
        if sizes[i] <= capacity:
            out += [[sizes[i], *rest] for rest in _mixes(sizes, capacity - sizes[i], i)]
    return out


# (metric, target, metricType, aggregation, targetValue, gauge)
TRIGGERS = [
    ("waitingRequests", 3, "AverageValue", "sum", "3", "vllm:num_requests_waiting"),
    ("waitingRequests", 10, "AverageValue", "sum", "10", "vllm:num_requests_waiting"),
    ("kvCacheUsage", 80, "Value", "average", "0.8", "vllm:kv_cache_usage_perc"),
    ("kvCacheUsage", 65, "Value", "average", "0.65", "vllm:kv_cache_usage_perc"),
]


@pytest.mark.parametrize(("metric", "target", "kind", "aggregation", "value", "gauge"), TRIGGERS)
def test_trigger(metric, target, kind, aggregation, value, gauge) -> None:
    t = scaling.trigger(
        autoscaling(metric=metric, target=target),
        service="qwen",
        namespace="team",
        port=8000,
        model="Qwen/Qwen2.5-7B-Instruct",
    )
    assert t["type"] == "metrics-api" and t["metricType"] == kind
    meta = t["metadata"]
    assert meta == {
        "url": "http://qwen.team.svc.cluster.local:8000/metrics",
        "format": "prometheus",
        "valueLocation": f'{gauge}{{model_name="Qwen/Qwen2.5-7B-Instruct"}}',
        "aggregateFromKubeServiceEndpoints": "true",
        "aggregationType": aggregation,
        "targetValue": value,
    }
    # Every metadata value is a string (the CRD's triggers[].metadata is a string map).
    assert all(isinstance(v, str) for v in meta.values())
