"""What an LLMInference composes, as plain data in and plain data out.

`compose(Inputs) -> Outcome` is a pipeline of named stages over typed values; `fn.py` only
translates between it and the gRPC messages, so every stage is testable and benchmarkable
without protobuf:

    inputs  -> LLMSpec   the claim, typed and checked             function/claim/spec.py
    target  -> Where     cluster, tenancy, placement, neighbours  function/cluster/
    policy               names, hosts, KV addresses, KEDA         function/policy/
    plan    -> Sized     model facts, sizing, topology            function/model/, plan/
    budget  -> Replicas  replicas within the cluster's GPUs       function/plan/budget.py
    objects -> Engine    one backend builds (registry order)      function/backends/
    status               serving, readiness, status.plan          function/status.py
    ledger               the model's entry in its cluster's list  function/cluster/ledger.py
    requeue              how soon to run again                    function/requeue.py

A claim spread over several clusters (spec.parameters.placement) takes the fleet's pipeline
instead (function/fleet/pipeline.py): it composes one LLMInference per placement, each of
which runs the stages above on its cluster, and the global route in front of them.

A stage that cannot go on yet (the cluster is being looked up, placement found none)
returns None and the Outcome says why; a problem with the claim is a SpecError, which
becomes `fatal` with nothing composed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from function import requeue
from function.backends import lmcache as kv_offload
from function.backends.base import Build, Engine
from function.backends.registry import backend_for
from function.claim.spec import LLMSpec, P, SpecError, parse
from function.cluster import ledger
from function.cluster.peers import Peer
from function.cluster.place import place_by_selector
from function.cluster.resolve import models_beside, resolve_target
from function.cluster.target import Target
from function.fleet.pipeline import compose_fleet
from function.model import catalog, node_fit, sizing
from function.monitoring.checks import check_latency_target
from function.monitoring.dashboard import compose_dashboard
from function.outcome import Inputs, Outcome, created_at
from function.plan import scaling
from function.plan.budget import check_keda, pd_budget, replica_budget
from function.plan.disaggregation import RolePlan, plan_disaggregated
from function.plan.fit import plan_model, plan_simulated
from function.policy.engine import check_kv_endpoints
from function.policy.names import behind_router, check_host, check_served_names, check_shared_host
from function.policy.weights import check_source
from function.status import (
    endpoint_url,
    memory_condition,
    plan_status,
    pods_requirement,
    readiness,
    replicas_status,
    serving_condition,
    weights_status,
)


@dataclass(frozen=True)
class Where:
    """Where the claim runs: its spec (naming the cluster placement chose), the target, the
    other models there (first come, first) and the claim's creation time, which ranks it."""

    spec: LLMSpec
    target: Target
    others: list[Peer]
    created: str


@dataclass(frozen=True)
class Sized:
    """The model's facts (None: unknown), its plan, where the facts came from, and llm-d's
    prefill and decode plans when disaggregated."""

    facts: catalog.ModelFacts | None
    plan: sizing.Plan
    source: str
    roles: list[RolePlan]


def compose(inputs: Inputs) -> Outcome:
    """Decide everything an LLMInference needs. Never raises for bad input: problems become
    `fatal`, warnings or conditions."""
    out = Outcome()
    decide(inputs, out)
    ledger.publish(inputs, out)
    out.ttl_seconds = requeue.ttl_seconds(inputs.xr, out)
    return out


def decide(inputs: Inputs, out: Outcome) -> None:
    """Every stage but the ledger's, in order; returns early when one cannot go on."""
    try:
        spec = parse(inputs.xr)
        if spec.fleet is not None:
            compose_fleet(spec, inputs, out)  # one LLMInference per placement, and the route
            return
        where = locate(spec, inputs, out)
        if where is None:
            out.xr_ready = False
            return
        check_claim(where, inputs, out)
        sized = plan(where, inputs, out)
        image = engine_image(where.spec, inputs, out)
        if image is None:
            return
        count = budget(where, sized, out)
        kv_offload.check(where.spec, sized.facts, sized.plan)
        backend = backend_for(where.spec, sized.plan)
        job = Build(
            where.spec, where.target, sized.facts, sized.plan, image, count, inputs, sized.roles
        )
        engine = backend.build(job, out)
        compose_dashboard(job, engine, out)
    except SpecError as e:
        out.fatal = e.message
        out.resources.clear()
        return
    status(where, sized, engine, backend.name, count, inputs, out)


def locate(spec: LLMSpec, inputs: Inputs, out: Outcome) -> Where | None:
    """The target stage: placement (a clusterSelector), the cluster and where the claim's
    namespace may deploy there, and the models already on it."""
    chosen = None
    if spec.cluster_selector is not None:
        placed = place_by_selector(spec, inputs, out)
        if placed is None:
            return None
        spec, chosen = placed
    target = resolve_target(spec, inputs, out, chosen)
    if target is None:
        return None
    return Where(spec, target, models_beside(spec, target, inputs, out), created_at(inputs))


def check_claim(where: Where, inputs: Inputs, out: Outcome) -> None:
    """The policy stage: what the claim may not do where it runs."""
    spec, target = where.spec, where.target
    check_served_names(spec, target, where.others, where.created, inputs.xr, out)
    check_host(spec, target, where.others, where.created)
    check_shared_host(spec, target, inputs, out, where.created)
    check_kv_endpoints(spec, target)
    check_source(spec, target)
    check_keda(spec, target)
    check_latency_target(spec, target)
    if spec.llmd and target.llmd_gateway is None:
        raise SpecError(
            f"{P}.backend",
            "llmd",
            f"{P}.backend: llmd attaches the model to an InferenceCluster's Gateway: name "
            f"one with apps.llmd in {P}.clusterRef (or let {P}.clusterSelector choose)",
        )


def plan(where: Where, inputs: Inputs, out: Outcome) -> Sized:
    """The plan stage: the model's facts and its plan on the target's GPUs (each side's,
    disaggregated; one node's, on llm-d, which serves a replica from one pod)."""
    spec, target = where.spec, where.target
    roles: list[RolePlan] = []
    if spec.disaggregation is not None:
        facts, planned, source, roles = plan_disaggregated(spec, target, inputs, out)
    elif spec.engine.simulate:
        facts, planned, source = plan_simulated(spec, target, inputs, out)
    else:
        one = dataclasses.replace(target, lws=False) if spec.llmd else target
        facts, planned, source = plan_model(spec, one, inputs, out)
    if spec.engine.shm_mib is not None:
        planned, roles = shm(spec, planned, roles, out)
    out.warnings.extend(planned.warnings)
    if planned.host_capped:
        out.notes.append(f"engine requests lowered: {planned.host_capped}")
    if facts is None and not spec.engine.simulate:
        out.warnings.append(
            f"{spec.model} is not in the catalog, the Hub could not describe it and its "
            f"name carries no size: deployed on the {planned.gpus} GPU(s) asked for, GPU "
            "memory not checked"
        )
    return Sized(facts, planned, source, roles)


def shm(
    spec: LLMSpec, planned: sizing.Plan, roles: list[RolePlan], out: Outcome
) -> tuple[sizing.Plan, list[RolePlan]]:
    """engine.shm in place of the plan's /dev/shm (each side's, disaggregated), within what
    the pod's memory holds."""
    field = f"{P}.engine.shm"
    if spec.engine.simulate:
        out.warnings.append(f"{field}: not used with {P}.engine.simulate (no GPU to share)")
        return planned, roles
    assert spec.engine.shm_mib is not None
    try:
        return node_fit.with_shm(planned, spec.engine.shm_mib, field), [
            dataclasses.replace(r, plan=node_fit.with_shm(r.plan, spec.engine.shm_mib, field))
            for r in roles
        ]
    except node_fit.ShmError as e:
        raise SpecError(field, spec.engine.shm_mib, str(e)) from None


def engine_image(spec: LLMSpec, inputs: Inputs, out: Outcome) -> str | None:
    """The image the engine runs: the claim's, else the Composition's pin (the simulator's
    when simulated); None, with `fatal` set, when there is none."""
    image = (
        inputs.simulator_image if spec.engine.simulate else spec.engine.image or inputs.engine_image
    )
    if image:
        return image
    out.fatal = (
        "the Composition passes no simulator image (input simulator.image); regenerate package/"
        if spec.engine.simulate
        else "the Composition passes no engine image (input engine.image) and "
        f"{P}.engine.image is not set; regenerate package/ or set {P}.engine.image"
    )
    return None


def budget(where: Where, sized: Sized, out: Outcome) -> scaling.Replicas:
    """The budget stage: the replicas the claim may run beside the models already there."""
    spec, target = where.spec, where.target
    if sized.roles:
        return pd_budget(spec, target, sized.roles, where.others, where.created, out)
    return replica_budget(spec, target, sized.plan, where.others, where.created, out)


def status(
    where: Where,
    sized: Sized,
    engine: Engine,
    backend: str,
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
) -> None:
    """The status stage: conditions, readiness and the XR's status."""
    spec, target = where.spec, where.target
    memory_condition(sized.facts, sized.plan, out)
    pods_requirement(spec.name, target, out)
    serving = serving_condition(inputs, target, engine, out)
    readiness(inputs, target, engine.key, serving, out)
    url = endpoint_url(spec, target, engine.service or engine.name)
    out.status = plan_status(spec, sized.facts, sized.plan, sized.source, engine, url)
    out.status["plan"] |= {"backend": backend}
    if spec.source is not None and not spec.engine.simulate:
        out.status["plan"]["weights"] = weights_status(spec, sized.source, out)
    out.status["plan"] |= out.status_extra
    out.status["replicas"] = replicas_status(inputs, target, engine, count)
    if out.llmd is not None:
        out.status["llmd"] = out.llmd
    out.warnings = list(dict.fromkeys(out.warnings))
    out.notes = list(dict.fromkeys(out.notes))
    if out.placement is not None:
        out.status["placement"] = out.placement
    if behind_router(spec, target) and target.router_endpoint:
        out.status["clusterEndpoint"] = target.router_endpoint
