"""The replica stage: how many replicas the claim may run within its cluster's GPUs, the models
already there counted first come, first served."""

from __future__ import annotations

import functools

from function.claim.serving import Disaggregation, Role
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster import peers
from function.cluster.target import Target
from function.limits import GpuShape
from function.model import catalog_lookup, sizing, vllm_memory
from function.outcome import Condition, Outcome
from function.plan import scaling
from function.plan.disaggregation import RolePlan, pd_roles


def check_keda(spec: LLMSpec, target: Target) -> None:
    if spec.autoscaling is None or target.cluster is None or target.keda:
        return
    raise SpecError(
        f"{P}.autoscaling",
        None,
        f"{P}.autoscaling needs KEDA on the cluster, and InferenceCluster {target.cluster} does "
        f"not run it: set spec.parameters.apps.keda.enabled: true on InferenceCluster "
        f"{target.cluster}, or fix the count with {P}.replicas",
    )


def replica_budget(
    spec: LLMSpec,
    target: Target,
    plan: sizing.Plan,
    others: list[peers.Peer],
    created: str,
    out: Outcome,
) -> scaling.Replicas:
    """The replicas the model may run, within the GPU pool the models before it leave."""
    budget = None
    if not spec.engine.simulate and target.cluster and target.max_nodes and not target.gpu.assumed:
        budget = scaling.Budget(
            cluster=target.cluster,
            max_nodes=target.max_nodes,
            per_node=target.gpu.per_node,
            holders=budget_holders(spec, target, others, created),
        )
    count = scaling.replicas(
        spec.replicas, spec.autoscaling, plan.gpus, budget, cluster_field=spec.cluster_field
    )
    held = f"up to {count.high} replica(s) x {plan.gpus} GPU(s) = {count.high * plan.gpus} GPUs"
    if spec.engine.simulate:
        out.conditions.append(
            Condition(
                "GPUBudget", "True", "Simulated", "simulated replicas run on CPUs and hold no GPU"
            )
        )
    elif budget is None:
        where = (
            f"InferenceCluster {target.cluster} has not published gpu.maxNodes"
            if target.cluster
            else "no InferenceCluster is referenced, so its GPU pool is not known"
        )
        out.conditions.append(Condition("GPUBudget", "Unknown", "NotChecked", f"{held}; {where}"))
    elif count.capped:
        field = f"{P}.autoscaling.maxReplicas"
        message = (
            f"{field} {count.asked_high} capped to {count.high}: {count.asked_high} x "
            f"{plan.gpus} GPU(s) would need {count.asked_high * plan.gpus} GPUs and "
            f"{budget.describe()}"
        )
        out.conditions.append(Condition("GPUBudget", "False", "Capped", message))
        out.warnings.append(message)
    else:
        out.conditions.append(
            Condition("GPUBudget", "True", "Fits", f"holds {held}; {budget.describe()}")
        )
    return count


def budget_holders(
    spec: LLMSpec, target: Target, others: list[peers.Peer], created: str
) -> tuple[scaling.Holder, ...]:
    """What the other models hold of the pool: those created before this one, at their most,
    and those already running with the most their function allowed them (so an edit of an
    older claim never takes GPUs a running model holds)."""
    out = []
    for p in others:
        if p.simulate:
            continue
        if p.before(created, spec.name):
            gpus = p.gpus if p.gpus_planned else peer_gpus(p, target)
            out.append(scaling.Holder(p.name, gpus * p.max_replicas, planned=p.gpus_planned))
        elif p.published_gpus:
            out.append(scaling.Holder(p.name, p.published_gpus))
    return tuple(h for h in out if h.gpus)


def peer_gpus(peer: peers.Peer, target: Target) -> int:
    """GPUs per replica of a model that has published no plan yet (created in the same
    moment, e.g. two entries of a cluster's models): planned here as its own function
    will plan it from the catalog or its name; none when that plan fails (its function
    refuses it, so it runs nothing), one when nothing here knows the model (the Hub may).
    A disaggregated model: every prefill and decode pod, the sides it leaves open chosen as
    its function will choose them."""
    if peer.disaggregated:
        return planned_pd_gpus(peer.model, peer.pd_sides, target.gpu)
    return planned_gpus(peer.model, target.gpu, target.span)


@functools.lru_cache(maxsize=1024)
def planned_pd_gpus(model: str, sides: tuple[tuple[int, int | None], ...], gpu: GpuShape) -> int:
    asked = sum(replicas * (gpus or 1) for replicas, gpus in sides)
    facts = catalog_lookup.resolve(model)
    if facts is None or len(sides) != 2:
        return asked
    (p_replicas, p_gpu), (d_replicas, d_gpu) = sides
    spec = LLMSpec(
        name="",
        namespace="",
        model=model,
        backend="llmd",
        disaggregation=Disaggregation(Role(p_replicas, p_gpu), Role(d_replicas, d_gpu)),
    )
    try:
        roles = pd_roles(spec, facts, Target(None, "", gpu=gpu), vllm_memory.EngineSettings())
    except SpecError:
        return 0  # its function refuses it: it runs nothing
    return sum((r.replicas or 1) * r.plan.gpus for r in roles)


@functools.lru_cache(maxsize=4096)
def planned_gpus(model: str, gpu: GpuShape, span: int) -> int:
    facts = catalog_lookup.resolve(model)
    if facts is None:
        return 1
    try:
        return sizing.plan(facts, None, gpu, vllm_memory.EngineSettings(), span).gpus
    except sizing.SizingError:
        return 0


def pd_budget(
    spec: LLMSpec,
    target: Target,
    roles: list[RolePlan],
    others: list[peers.Peer],
    created: str,
    out: Outcome,
) -> scaling.Replicas:
    """The GPUs every prefill and decode pod holds, checked against what the models before
    this one leave of the cluster's pool; the replica counts are the decode pods'."""
    total = sum((r.replicas or 1) * r.plan.gpus for r in roles)
    what = " + ".join(f"{r.replicas} {r.role} x {r.plan.gpus}" for r in roles)
    held = f"{what} = {total} GPUs"
    decode = next(r for r in roles if r.role == "decode")
    count = scaling.Replicas(
        low=decode.replicas or 1,
        high=decode.replicas or 1,
        autoscaled=False,
        asked_high=decode.replicas or 1,
    )
    if not (target.cluster and target.max_nodes and not target.gpu.assumed):
        out.conditions.append(
            Condition("GPUBudget", "Unknown", "NotChecked", f"{held}; the pool is not known")
        )
        return count
    budget = scaling.Budget(
        cluster=target.cluster,
        max_nodes=target.max_nodes,
        per_node=target.gpu.per_node,
        holders=budget_holders(spec, target, others, created),
    )
    if total > budget.free:
        raise SpecError(
            f"{P}.disaggregation",
            total,
            f"{P}.disaggregation: {held} do not fit: {budget.describe()}; use fewer pods or "
            f"GPUs, or raise gpu.maxNodes on InferenceCluster {budget.cluster}",
        )
    out.conditions.append(
        Condition("GPUBudget", "True", "Fits", f"holds {held}; {budget.describe()}")
    )
    return count
