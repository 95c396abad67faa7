"""The placement stage for a clusterSelector: every matching cluster as a candidate (what would
refuse the model there, the GPUs it holds, what the model needs on its GPUs), and the one
function/cluster/placement.py chooses."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from function.claim.fleet import SPREAD_BY_REGION
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster import peers, placement
from function.cluster.resolve import check_tenancy
from function.cluster.target import (
    CLUSTER_API_VERSION,
    CLUSTER_KIND,
    ClusterNotReady,
    Target,
    from_cluster,
)
from function.kube import dig
from function.limits import MAX_GPUS, GpuShape
from function.model import catalog, sizing, vllm_memory
from function.model.facts import as_run, model_facts
from function.outcome import Condition, Inputs, Outcome, condition_true, created_at, keep_observed
from function.plan.budget import budget_holders
from function.plan.disaggregation import pd_roles
from function.plan.fit import engine_settings
from function.policy.engine import check_kv_endpoints
from function.policy.names import check_host, check_served_names
from function.policy.weights import check_source

PLACEMENT_REQUIREMENT = "inference-clusters"
# Where an existing or local cluster, which asks for no region, says which it is in.
REGION_LABEL = "inference.devopstoolkit.ai/region"


@dataclass(frozen=True)
class Gathered:
    """What placement weighs: every matching cluster as a candidate, the model's size on a
    GPU shape, its smallest count of replicas, and the clusters as Crossplane found them."""

    candidates: list[placement.Candidate]
    size: Sizer
    low: int
    found: list[dict[str, Any]]


def gather(
    spec: LLMSpec,
    inputs: Inputs,
    out: Outcome,
    spread_by: str | None = None,
    mine: Callable[[dict[str, Any]], bool] | None = None,
    reachable: Callable[[LLMSpec, Target], str | None] | None = None,
    created_on: Callable[[str], str] | None = None,
) -> Gathered | None:
    """The InferenceClusters clusterSelector matches (a required resource) and the models on
    each (function/cluster/peers.py) as candidates; None until Crossplane has listed them.
    `spread_by` gives each its spread value (function/cluster/spread.py); models `mine` (a
    fleet's own placements) hold nothing against it; `reachable` says why a cluster that
    could run the model still cannot take it; `created_on(cluster)` is when the model there
    was created, which ranks it among the models there (default: the claim's own time)."""
    assert spec.cluster_selector is not None
    out.requirements[PLACEMENT_REQUIREMENT] = {
        "apiVersion": CLUSTER_API_VERSION,
        "kind": CLUSTER_KIND,
        "matchLabels": dict(spec.cluster_selector),
        "namespace": spec.namespace,
    }
    out.requirements[peers.REQUIREMENT] = {
        "apiVersion": peers.API_VERSION,
        "kind": peers.KIND,
        "namespace": spec.namespace,
    }
    if PLACEMENT_REQUIREMENT not in inputs.required:
        out.conditions.append(
            Condition("Placement", "Unknown", "Resolving", "listing the matching clusters")
        )
        return None
    found = [c for c in inputs.required[PLACEMENT_REQUIREMENT] if isinstance(c, dict)]
    everyone = inputs.required.get(peers.REQUIREMENT) or []
    if mine is not None:
        everyone = [xr for xr in everyone if not (isinstance(xr, dict) and mine(xr))]
    facts, _ = model_facts(spec, inputs, Outcome())  # the plan's own call reports on the facts
    engine = engine_settings(spec)
    candidates = []
    grouped = peers.by_cluster(everyone, spec.name)
    for cluster in sorted(found, key=lambda c: str(dig(c, "metadata", "name"))):
        name = str(dig(cluster, "metadata", "name"))
        value = spread_value(cluster, spread_by) if spread_by else None
        as_ref = dataclasses.replace(spec, cluster_ref=name)
        problem, target = candidate(as_ref, cluster)
        if target is None:
            candidates.append(placement.Candidate(name, problem=problem, spread_value=value))
            continue
        others = grouped.get(name, [])
        created = created_on(name) if created_on is not None else created_at(inputs)
        try:
            # What would refuse the model there: where it may deploy, names taken behind
            # that cluster's router.
            check_tenancy(as_ref, target)
            check_kv_endpoints(as_ref, target)
            check_source(as_ref, target)
            check_served_names(as_ref, target, others, created, inputs.xr, Outcome())
            check_host(as_ref, target, others, created)
        except SpecError as e:
            problem = e.problem if e.problem is not None else e.message
        if problem is None and reachable is not None:
            problem = reachable(as_ref, target)
        held = sum(h.gpus for h in budget_holders(as_ref, target, others, created))
        g = target.gpu
        candidates.append(
            placement.Candidate(
                name,
                problem=problem,
                gpu_type=g.type,
                memory_gib=g.memory_gib,
                per_node=g.per_node,
                pool=g.per_node * target.max_nodes if target.max_nodes else None,
                held=held,
                span=target.span,
                spread_value=value,
            )
        )
    if spec.disaggregation is not None:
        low = 1  # the sizer counts every prefill and decode pod at once
    else:
        low = spec.autoscaling.min_replicas if spec.autoscaling else (spec.replicas or 1)
    return Gathered(candidates, sizer(spec, facts, engine), low, found)


def spread_value(cluster: dict[str, Any], spread_by: str) -> str | None:
    """A cluster's value of the key placements spread by: for `region`, its provider and
    region (`aws/us-east-1`; the region the cluster publishes, else asks for, else its label
    inference.devopstoolkit.ai/region), else the value of that label on it; None when it has
    none."""
    labels = dig(cluster, "metadata", "labels") or {}
    if spread_by != SPREAD_BY_REGION:
        value = labels.get(spread_by) if isinstance(labels, dict) else None
        return value if isinstance(value, str) and value else None
    params = dig(cluster, "spec", "parameters") or {}
    provider = params.get("provider") if isinstance(params, dict) else None
    region = dig(cluster, "status", "region") or (
        params.get("region") if isinstance(params, dict) else None
    )
    if not isinstance(region, str) or not region:
        region = labels.get(REGION_LABEL) if isinstance(labels, dict) else None
    if not isinstance(region, str) or not region:
        return None
    return f"{provider}/{region}" if isinstance(provider, str) and provider else region


def place_by_selector(
    spec: LLMSpec, inputs: Inputs, out: Outcome
) -> tuple[LLMSpec, dict[str, Any]] | None:
    """For a clusterSelector: the cluster placement chooses among those it matches
    (function/cluster/placement.py); the claim as if it named that cluster, or None when none
    can run it yet (status.placement says why, for every cluster)."""
    gathered = gather(spec, inputs, out)
    if gathered is None:
        return None
    candidates, size, low, found = (
        gathered.candidates,
        gathered.size,
        gathered.low,
        gathered.found,
    )
    params = dig(inputs.xr, "spec", "parameters") or {}
    fingerprint = placement.claim_hash(params)
    before = dig(inputs.xr, "status", "placement") or {}
    current = before.get("cluster") if isinstance(before.get("cluster"), str) else None
    decision = placement.place(candidates, size, low, current)
    out.placement = {
        **({"cluster": decision.cluster} if decision.cluster else {}),
        "reason": decision.reason,
        "rule": placement.RULE,
        "claimHash": fingerprint,
        "candidates": [
            v.as_status() for v in placement.explain(decision, candidates, size, size.why_not)
        ],
    }
    selector = selector_text(spec)
    if decision.cluster is None:
        out.conditions.append(
            Condition(
                "Placement",
                "False",
                "NoCluster",
                f"{spec.cluster_field} ({selector}): {decision.reason}; status.placement says "
                "why for each cluster",
            )
        )
        out.status = {"placement": out.placement}
        keep_observed(inputs, out)
        return None
    out.conditions.append(
        Condition("Placement", "True", "Placed", f"{selector}: {decision.reason}")
    )
    cluster = next(c for c in found if dig(c, "metadata", "name") == decision.cluster)
    return dataclasses.replace(spec, cluster_ref=decision.cluster), cluster


def selector_text(spec: LLMSpec) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((spec.cluster_selector or {}).items()))


def candidate(spec: LLMSpec, cluster: dict[str, Any]) -> tuple[str | None, Target | None]:
    """Whether a matching cluster can take models at all: (why not, its Target)."""
    if dig(cluster, "metadata", "deletionTimestamp"):
        return "being deleted", None
    try:
        target = from_cluster(spec, cluster)
    except ClusterNotReady as e:
        return f"not ready: {e}", None
    except SpecError as e:
        # What the cluster lacks is the point here (from_cluster says it of the cluster).
        return (e.problem if e.problem is not None else e.message), None
    if not condition_true(cluster):
        return "not Ready", target
    return None, target


class Sizer:
    """GPUs per replica of the claim's model on a GPU shape, as the function will plan it
    there. One plan per GPU type on the largest node (8 GPUs) serves every node size: the
    function takes the smallest count that fits, so a node of p GPUs takes it exactly when
    that count is at most p. Only a model no node holds is planned over several nodes, and
    why one does not fit is planned when asked."""

    def __init__(
        self, spec: LLMSpec, facts: catalog.ModelFacts | None, engine: vllm_memory.EngineSettings
    ) -> None:
        self.spec, self.facts, self.engine = spec, as_run(spec, facts), engine
        self.widest: dict[tuple[str | None, float], int | None] = {}
        self.exact: dict[tuple[str | None, float, int, int], tuple[int | None, str]] = {}

    def __call__(
        self, gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1
    ) -> int | None:
        if self.spec.llmd:
            span = 1  # llm-d serves a replica from one pod
        if self.spec.disaggregation is not None:
            return self._exact(gpu_type, memory_gib, per_node, 1)[0]
        key = (gpu_type, memory_gib)
        if key not in self.widest:
            shape = GpuShape(memory_gib, max(per_node, MAX_GPUS), gpu_type, False)
            self.widest[key] = size_on(self.spec, self.facts, self.engine, shape)[0]
        gpus = self.widest[key]
        if gpus is not None and gpus <= per_node:
            return gpus
        if span < 2 and (self.spec.gpu is None or self.spec.gpu <= per_node):
            return None
        return self._exact(gpu_type, memory_gib, per_node, span)[0]

    def why_not(self, gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1) -> str:
        if self.spec.llmd:
            span = 1
        return self._exact(gpu_type, memory_gib, per_node, span)[1]

    def _exact(
        self, gpu_type: str | None, memory_gib: float, per_node: int, span: int
    ) -> tuple[int | None, str]:
        key = (gpu_type, memory_gib, per_node, span)
        if key not in self.exact:
            shape = GpuShape(memory_gib, per_node, gpu_type, False)
            self.exact[key] = size_on(self.spec, self.facts, self.engine, shape, span)
        return self.exact[key]


def sizer(
    spec: LLMSpec, facts: catalog.ModelFacts | None, engine: vllm_memory.EngineSettings
) -> Sizer:
    return Sizer(spec, facts, engine)


def size_on(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    engine: vllm_memory.EngineSettings,
    shape: GpuShape,
    span: int = 1,
) -> tuple[int | None, str]:
    if spec.engine.simulate:
        return 0, ""  # no GPU
    what = f"{shape.per_node} x {shape.type or 'GPU'} ({shape.memory_gib:g} GiB) per node"
    if spec.disaggregation is not None:
        # Every prefill and decode pod, as one "replica" placement counts once.
        try:
            roles = pd_roles(spec, facts, Target(None, "", gpu=shape), engine)
        except SpecError as e:
            return None, f"{what}: {e.message}"
        return sum((r.replicas or 1) * r.plan.gpus for r in roles), ""
    if facts is None:
        if spec.gpu is not None and spec.gpu <= shape.per_node:
            return spec.gpu, ""
        return None, f"its size is not known and {P}.gpu does not fit {what}"
    try:
        plan = sizing.plan(
            facts, spec.gpu, shape, engine, span, expert=spec.expert_parallel, one_pod=spec.llmd
        )
    except sizing.SizingError as e:
        return None, f"{what}: {e.render(one_pod=spec.llmd)}"
    if not plan.fits:
        return None, f"{what}: {plan.shortfall or 'the model does not fit'}"
    return plan.gpus, ""
