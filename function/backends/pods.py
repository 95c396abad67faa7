"""The vLLM pods the function runs itself (multi-node groups, llm-d models): one builder,
`vllm_pod`, over what they share (`VllmPod`), and its pieces: the `vllm serve` command line,
environment from Secrets, probes, the GPU pod."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from function.backends.cache_objects import CACHE_ENV, CACHE_MOUNT
from function.backends.resources import ENGINE_PORT, GPU_TOLERATION, engine_affinity
from function.backends.weights import Fill, fill_container
from function.policy.engine import ENGINE_SECRET_ENV

# Set by LWS in every container: the leader's stable DNS name, the group's size and the pod's
# index in it (kubernetes-sigs/lws v0.10.0 pkg/utils/pod/pod_utils.go).
LWS_LEADER_ADDRESS = "$(LWS_LEADER_ADDRESS)"


LWS_WORKER_INDEX = "$(LWS_WORKER_INDEX)"


VLLM_BINARY = "/opt/venv/bin/vllm"


def vllm_serve_args(
    *,
    model: str,
    tensor_parallel: int,
    nodes: int,
    pipeline: int,
    max_model_len: int | None,
    dtype: str,
    gpu_memory_utilization: float,
    enable_prefix_caching: bool,
    enable_chunked_prefill: bool,
    tool_call_parser: str | None,
    extra_args: Sequence[str],
    port: int = ENGINE_PORT,
) -> list[str]:
    """`vllm serve <model> ...` for a pod the function runs itself (a multi-node replica's,
    an llm-d model's), in the order the operator writes a VLLMRuntime's (engine_command),
    then, over several nodes, the nodes; `$(LWS_*)` are filled by the kubelet from the
    variables LWS sets."""
    args = [model, "--host", "0.0.0.0", "--port", str(port)]
    if tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", tool_call_parser]
    args.append(
        "--enable-chunked-prefill" if enable_chunked_prefill else "--no-enable-chunked-prefill"
    )
    args.append(
        "--enable-prefix-caching" if enable_prefix_caching else "--no-enable-prefix-caching"
    )
    if max_model_len:
        args += ["--max-model-len", str(max_model_len)]
    args += ["--dtype", dtype, "--tensor-parallel-size", str(tensor_parallel)]
    if pipeline > 1:
        args += ["--pipeline-parallel-size", str(pipeline)]
    args += ["--gpu-memory-utilization", f"{gpu_memory_utilization:g}"]
    if nodes > 1:
        args += ["--nnodes", str(nodes), "--node-rank", LWS_WORKER_INDEX]
        args += ["--master-addr", LWS_LEADER_ADDRESS]
    return args + list(extra_args)


def secret_env_vars(secret_env: Sequence[tuple[str, tuple[str, str]]]) -> list[dict[str, Any]]:
    """Variables read from Secrets: (variable, (Secret, key)); values never in the manifest."""
    return [
        {"name": var, "valueFrom": {"secretKeyRef": {"name": ref[0], "key": ref[1]}}}
        for var, ref in secret_env
    ]


def engine_env_vars(
    env: Sequence[tuple[str, str]], secrets: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """vLLM's variables: the cache's, the plan's and the claim's, and the Secrets it reads
    (the Hugging Face token only reaches the download: the weights are cached)."""
    return [
        *({"name": k, "value": v} for k, v in CACHE_ENV),
        *({"name": k, "value": v} for k, v in env),
        *(dict(s) for s in secrets if s["name"] != ENGINE_SECRET_ENV),
    ]


# Probes of a vLLM container whose weights are cached before it starts: its startup probe
# allows `startup_budget_s` for loading them, at the operator's period (20 s).
STARTUP_PROBE_PERIOD_S = 20


def engine_probes(port: int, startup_budget_s: int) -> dict[str, Any]:
    health = {"httpGet": {"path": "/health", "port": port}}
    return {
        "startupProbe": {
            **health,
            "periodSeconds": STARTUP_PROBE_PERIOD_S,
            "failureThreshold": max(3, -(-startup_budget_s // STARTUP_PROBE_PERIOD_S)),
        },
        "readinessProbe": {**health, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**health, "periodSeconds": 20, "failureThreshold": 3},
    }


def gpu_pod(
    *,
    init: Sequence[Mapping[str, Any]],
    containers: Sequence[Mapping[str, Any]],
    shm_size: str,
    node_selector: Mapping[str, str] | None,
    tolerations: Sequence[Mapping[str, Any]] | None,
    runtime_class: str | None,
    pull_secrets: Sequence[str] = (),
    volumes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A pod spec on the GPU pool: its affinity, tolerations and RuntimeClass, /dev/shm in
    memory, no Service links, the registry credentials of a private engine image, and
    `volumes` (what its init container fills the cache from)."""
    pod: dict[str, Any] = {
        # A Service named like a vLLM setting (`vllm` makes VLLM_PORT) would break vLLM.
        "enableServiceLinks": False,
        "initContainers": [dict(c) for c in init],
        "containers": [dict(c) for c in containers],
        "volumes": [
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": shm_size}},
            *(dict(v) for v in volumes),
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": engine_affinity(node_selector)
                }
            }
        },
        "tolerations": [dict(t) for t in (tolerations or [GPU_TOLERATION])],
    }
    if runtime_class:
        pod["runtimeClassName"] = runtime_class
    if pull_secrets:
        pod["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
    return pod


@dataclass(frozen=True)
class VllmPod:
    """What every vLLM pod the function writes itself has, whichever backend (a multi-node
    replica's, llm-d's): the engine's image, command line and variables, its share of a GPU
    node, its model cache and how it fills, where it may run and how long it may take to
    start. Each backend states only what differs (`vllm_pod`'s arguments)."""

    image: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    secret_env: tuple[tuple[str, tuple[str, str]], ...]
    gpus: int
    cpu: str
    memory: str
    shm_size: str
    # The pod's own cache (a claim template of this size and class), or all pods mount
    # `shared_claim` (ReadWriteMany, filled by a Job before they start).
    cache_size: str
    cache_class: str | None
    shared_claim: str | None
    fill: Fill
    fetch_requests: Mapping[str, str]
    fetch_memory_limit: str
    node_selector: Mapping[str, str] | None
    tolerations: Sequence[Mapping[str, Any]] | None
    runtime_class: str | None
    startup_budget_s: int
    pull_secrets: tuple[str, ...] = ()


def vllm_pod(
    pod: VllmPod,
    *,
    command: Sequence[str],
    args: Sequence[str] = (),
    port: int | None = ENGINE_PORT,
    extra_ports: Sequence[Mapping[str, Any]] = (),
    env_first: Sequence[Mapping[str, Any]] = (),
    env_defaults: Sequence[tuple[str, str]] = (),
    extra_resources: Mapping[str, str] | None = None,
    security_context: Mapping[str, Any] | None = None,
    sidecars: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The pod spec of one vLLM container, `command` + `args` (the pod's own arguments when
    empty), on `port` with its probes (None: headless, no server to probe), its init
    container filling the model cache (function/backends/weights.py) before it starts, then
    `sidecars` (native sidecars, init containers that keep running). Its variables: `env_first`,
    then `env_defaults` the claim did not set, then the cache's, the plan's, the claim's and
    the Secrets' (engine_env_vars). The shared cache claim is not mounted here:
    `cache_objects.with_shared_cache` adds it last."""
    engine_env = engine_env_vars(pod.env, secret_env_vars(pod.secret_env))
    for name, value in reversed(env_defaults):
        if not any(e["name"] == name for e in engine_env):
            engine_env.insert(0, {"name": name, "value": value})
    gpus = {"nvidia.com/gpu": str(pod.gpus), **(extra_resources or {})}
    vllm: dict[str, Any] = {
        "name": "vllm",
        "image": pod.image,
        "command": list(command),
        "args": list(args or pod.args),
        "env": [*map(dict, env_first), *engine_env],
        "resources": {
            "requests": {"cpu": pod.cpu, "memory": pod.memory, **gpus},
            "limits": {"memory": pod.memory, **gpus},
        },
        "volumeMounts": [
            {"name": "model-cache", "mountPath": CACHE_MOUNT},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    }
    if port is not None:
        vllm["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
        vllm["ports"] += [dict(p) for p in extra_ports]
        # The init container has downloaded the weights: loading them remains.
        vllm |= engine_probes(port, pod.startup_budget_s)
    if security_context:
        vllm["securityContext"] = dict(security_context)
    fetch = fill_container(
        pod.fill,
        name="model-fetch",
        requests=pod.fetch_requests,
        memory_limit=pod.fetch_memory_limit,
    )
    return gpu_pod(
        init=[fetch, *sidecars],
        containers=[vllm],
        shm_size=pod.shm_size,
        node_selector=pod.node_selector,
        tolerations=pod.tolerations,
        runtime_class=pod.runtime_class,
        pull_secrets=pod.pull_secrets,
        volumes=pod.fill.volumes,
    )
