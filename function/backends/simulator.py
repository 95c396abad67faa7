"""engine.simulate: llm-d's inference simulator in place of vLLM."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from function import kube
from function.backends import resources
from function.backends.base import Backend, Build, Engine
from function.backends.common import (
    DEPLOYMENT_SCALE_TARGET,
    own_namespace,
    place,
    scaler,
    tail,
)
from function.backends.resources import ENGINE_PORT, MODEL_ANNOTATION, labels, object_metadata
from function.claim.spec import LLMSpec, P
from function.cluster.target import Target
from function.keys import SIMULATOR, SIMULATOR_SERVICE
from function.model import sizing
from function.outcome import Condition, Outcome
from function.plan import scaling
from function.policy import simulator_cli as simulator
from function.policy.engine import planned_max_model_len

# The production-stack operator runs /opt/venv/bin/vllm, which the simulator image lacks:
# a simulated model is a Deployment and a Service shaped like the operator's (the engine's
# labels for the router's discovery, a Service on port 80 to the pods' 8000, named after the
# model), so the router, an Ingress and KEDA treat it as they treat a VLLMRuntime.
SIMULATOR_READY_CEL = "has(object.status.availableReplicas) && object.status.availableReplicas >= 1"


def simulator_deployment(
    *,
    name: str,
    namespace: str,
    model: str,
    image: str,
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    replicas: int | None,
    requests: Mapping[str, str],
    limits: Mapping[str, str],
    node_selector: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """llm-d's inference simulator as the engine: CPU only, non-root, ready once it answers
    /health/ready (503 while a --startup-duration runs, like an engine loading weights).
    `pod_labels`: an llm-d model's (its InferencePool selects them), else the engine's."""
    pod_labels = dict(pod_labels or labels(name))
    probe_port = {"port": "http"}
    container: dict[str, Any] = {
        "name": "simulator",
        "image": image,
        "args": list(args),
        "ports": [{"name": "http", "containerPort": ENGINE_PORT, "protocol": "TCP"}],
        # The simulator names its pod in KV-cache events.
        "env": [
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {
                "name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            },
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            *({"name": k, "value": v} for k, v in env),
        ],
        "resources": {"requests": dict(requests), "limits": dict(limits)},
        "readinessProbe": {
            "httpGet": {"path": "/health/ready", **probe_port},
            "periodSeconds": 2,
            "failureThreshold": 3,
        },
        "livenessProbe": {
            "httpGet": {"path": "/health", **probe_port},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        "securityContext": {
            "runAsNonRoot": True,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    spec: dict[str, Any] = {
        **({"replicas": replicas} if replicas is not None else {}),
        "selector": {"matchLabels": dict(pod_labels)},
        "template": {
            "metadata": {"labels": dict(pod_labels), "annotations": {MODEL_ANNOTATION: model}},
            "spec": {
                "containers": [container],
                **({"nodeSelector": dict(node_selector)} if node_selector else {}),
            },
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_metadata(name, namespace, model),
        "spec": spec,
    }


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
    name = kube.dns_label(f"{spec.name}-sim")
    own_namespace(spec, target, out)
    ignored = [
        f
        for f, given in (
            (f"{P}.storage", spec.storage.class_name or spec.storage.size_gib),
            (f"{P}.hfTokenSecretRef", spec.hf_token_secret),
            (f"{P}.source", spec.source),
        )
        if given
    ]
    if ignored:
        out.warnings.append(
            f"{', '.join(ignored)}: not used with {P}.engine.simulate (nothing is downloaded)"
        )
    unread = [f"{P}.engine.env[{i}] ({var}, from a Secret)" for i, var, _ in spec.engine.secret_env]
    if spec.engine.image_pull_secrets:
        unread.insert(0, f"{P}.engine.imagePullSecrets")
    if unread:
        out.warnings.append(
            f"{', '.join(unread)}: not used with {P}.engine.simulate (its image is pinned and "
            "public, and it reads no credentials)"
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
    tail(spec, target, count, inputs, out, by_key=SIMULATOR_SERVICE, ingress_to=name)
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
        pods=labels(name),
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
        adapters=tuple((a.name, a.repo) for a in spec.adapters),
    )
    place(
        spec,
        target,
        SIMULATOR,
        simulator_deployment(
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
        readiness_cel=SIMULATOR_READY_CEL,
        watch=True,
    )
    return command


BACKEND = Backend(
    name="productionStack",
    serves=lambda spec, plan: spec.engine.simulate,
    build=build_simulated,
)
