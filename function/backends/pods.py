"""Pieces of the vLLM pods the function runs itself (multi-node groups, llm-d models): the
`vllm serve` command line, environment from Secrets, probes, the GPU pod."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from function.backends.cache_objects import CACHE_ENV
from function.backends.resources import ENGINE_PORT, GPU_TOLERATION, engine_affinity
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
