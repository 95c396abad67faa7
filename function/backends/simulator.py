"""engine.simulate: llm-d's inference simulator in place of vLLM."""

from __future__ import annotations

from function.backends import resources
from function.backends.base import Backend, Build, Engine
from function.backends.common import (
    DEPLOYMENT_SCALE_TARGET,
    cluster_usage,
    ingress,
    keda_usage,
    no_takeover,
    own_namespace,
    place,
    scaler,
)
from function.cluster.target import (
    Target,
)
from function.keys import SIMULATOR, SIMULATOR_SERVICE
from function.model import sizing
from function.outcome import Condition, Outcome
from function.plan import scaling
from function.policy import simulator_cli as simulator
from function.policy.engine import planned_max_model_len
from function.spec import (
    LLMSpec,
    P,
)


def build_simulated(job: Build, out: Outcome) -> Engine:
    """Compose llm-d's inference simulator in place of vLLM (function/policy/simulator_cli.py): a
    Deployment and a Service with the engine's labels, no GPU, no model download."""
    spec, target, plan, image, count, inputs = (
        job.spec,
        job.target,
        job.plan,
        job.image,
        job.count,
        job.inputs,
    )
    # Not the claim's own name: the operator's Deployment and Service of a VLLMRuntime carry
    # that one, and a model switched to the simulator must not meet them.
    name = resources.dns_label(f"{spec.name}-sim")
    own_namespace(spec, target, out)
    ignored = [
        f
        for f, given in (
            (f"{P}.storage", spec.storage.class_name or spec.storage.size_gib),
            (f"{P}.hfTokenSecretRef", spec.hf_token_secret),
        )
        if given
    ]
    if ignored:
        out.warnings.append(
            f"{', '.join(ignored)}: not used with {P}.engine.simulate (nothing is downloaded)"
        )
    max_len = planned_max_model_len(spec, plan, out)
    command = place_simulator(spec, target, name, plan, image, count, max_len, out)
    place(
        spec,
        target,
        SIMULATOR_SERVICE,
        resources.engine_service(name=name, namespace=target.namespace, model=spec.model),
        out,
        suffix="service",
    )
    if count.autoscaled:
        scaler(spec, target, name, count, DEPLOYMENT_SCALE_TARGET | {"name": name}, out)
    ingress(spec, target, name, out)
    cluster_usage(spec, target, inputs, out)
    keda_usage(spec, target, count, inputs, out)
    no_takeover(spec, target, inputs, out)
    out.conditions.append(
        Condition(
            "ModelCache",
            "True",
            "Simulated",
            f"{P}.engine.simulate: llm-d's inference simulator answers for {spec.model}; "
            "nothing is downloaded",
        )
    )
    return Engine(
        kind="Deployment",
        name=name,
        key=SIMULATOR,
        command=["llm-d-inference-sim", *command],
        image=image,
        max_model_len=max_len,
        current=True,
        simulated=True,
    )


def place_simulator(
    spec: LLMSpec,
    target: Target,
    name: str,
    plan: sizing.Plan,
    image: str,
    count: scaling.Replicas,
    max_len: int | None,
    out: Outcome,
    pod_labels: dict[str, str] | None = None,
) -> list[str]:
    """The simulator's Deployment (function/policy/simulator_cli.py); its arguments."""
    command = simulator.command(
        model=spec.model,
        served_names=spec.served_names,
        max_model_len=max_len,
        max_num_seqs=None
        if spec.engine.max_num_seqs
        else (plan.engine.max_num_seqs if plan.engine else None),
        kv_cache=spec.autoscaling is not None and spec.autoscaling.metric == "kvCacheUsage",
        extra_args=spec.engine.extra_args,
    )
    place(
        spec,
        target,
        SIMULATOR,
        resources.simulator_deployment(
            name=name,
            namespace=target.namespace,
            model=spec.model,
            image=image,
            args=command,
            env=spec.engine.env,
            replicas=None if count.autoscaled else count.low,
            requests=simulator.REQUESTS,
            limits=simulator.LIMITS,
            pod_labels=pod_labels,
        ),
        out,
        suffix="simulator",
        readiness_cel=resources.SIMULATOR_READY_CEL,
        watch=True,
    )
    return command


BACKEND = Backend(
    name="productionStack",
    serves=lambda spec, plan: spec.engine.simulate,
    build=build_simulated,
)
