"""LMCache KV offloading for a VLLMRuntime (spec.parameters.kvCache): which claims may
offload, the runtime's `lmCacheConfig`, the engine pod's memory with the buffer, and the
plan's `kvCache` tiers.

How the production-stack operator reads `lmCacheConfig` (operator/internal/controller/
vllmruntime_controller.go at 217fadb, `deploymentForVLLMRuntime`):
- `enabled`: env LMCACHE_LOG_LEVEL=DEBUG, LMCACHE_USE_EXPERIMENTAL=True,
  VLLM_RPC_TIMEOUT=1000000, and, with `vllmConfig.v1`, the last arguments
  `--kv-transfer-config {"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}`;
- `cpuOffloadingBufferSize` non-empty: LMCACHE_LOCAL_CPU=True and LMCACHE_MAX_LOCAL_CPU_SIZE
  verbatim, which LMCache 0.4.2 reads with float() as GiB (lmcache/v1/config.py,
  `max_local_cpu_size`; cache_engine.py multiplies by 1024**3): a plain number, never "4Gi";
- `diskOffloadingBufferSize` non-empty (the CRD defaults it to "8Gi"): LMCACHE_LOCAL_DISK=True,
  which LMCache takes as a relative directory named "True" on the container's own layer: always
  written as "" (disk offloading is not offered: the operator mounts no volume for it).

The operator appends `vllmConfig.env` after its own variables, and the later of two variables
of one name wins: LMCACHE_LOG_LEVEL=INFO there undoes the DEBUG it forces (a log line per
chunk stored or retrieved).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.claim.fields import P, SpecError
from function.claim.kvcache import F
from function.claim.spec import LLMSpec
from function.cluster.target import Target
from function.model import catalog, sizing
from function.plan.offload import Offload, OffloadError, memory_mib, size_offload, tokens
from function.policy import engine_args

# The arguments the operator appends when lmCacheConfig.enabled and vllmConfig.v1
# (vllmruntime_controller.go at 217fadb).
KV_TRANSFER_FLAG = engine_args.KV_TRANSFER_FLAG
KV_TRANSFER_CONFIG = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
# LMCache's log level (lmcache/logging.py reads LMCACHE_LOG_LEVEL), over the operator's DEBUG.
LOG_LEVEL_ENV = (("LMCACHE_LOG_LEVEL", "INFO"),)


@dataclass(frozen=True)
class LMCache:
    """What the VLLMRuntime and status.plan.kvCache carry for an offloading engine."""

    config: dict[str, Any]  # VLLMRuntime spec.lmCacheConfig
    env: tuple[tuple[str, str], ...]  # more of vllmConfig.env
    memory: str  # the engine pod's memory request and limit, buffer included
    status: dict[str, Any]


def refusal(spec: LLMSpec, facts: catalog.ModelFacts | None, plan: sizing.Plan) -> str | None:
    """Why this claim cannot offload its KV cache (None: it can)."""
    if spec.llmd:
        return (
            f"{F}.enabled: LMCache offloading is wired through the production-stack operator's "
            f"VLLMRuntime, and {P}.backend is llmd, whose engines the llm-d chart builds "
            f"without it: use {P}.backend: productionStack, or remove {F}"
        )
    if spec.engine.simulate:
        return (
            f"{F}.enabled: the inference simulator ({P}.engine.simulate) holds no KV cache "
            f"to offload: remove {F} to simulate, or run vLLM"
        )
    if plan.nodes > 1:
        return (
            f"{F}.enabled: a replica over {plan.nodes} nodes runs as a LeaderWorkerSet, not "
            f"a VLLMRuntime, and only the VLLMRuntime wires LMCache: remove {F}, or serve the "
            "model on one node"
        )
    if facts is not None and facts.task != "generate":
        return (
            f"{F}.enabled: {facts.id} is a {facts.task} (pooling) model: it keeps no KV cache "
            "between requests, so there is nothing to offload; remove kvCache"
        )
    if facts is not None and any(g.kind == "mamba" for g in facts.kv_layers):
        return (
            f"{F}.enabled: {facts.id} ({facts.architecture}) has state-space (Mamba) layers; "
            "LMCache 0.4.2 stores one KV shape for every layer (lmcache/integration/vllm/"
            "utils.py, kv_shape) and cannot hold their state: remove kvCache"
        )
    if spec.adapters:
        # LMCache 0.4.2's CacheEngineKey has lora fields its vLLM integration never sets
        # (lmcache/v1/cache_engine.py passes lora_id=None, lora_name=None; nothing under
        # lmcache/integration/vllm reads a request's LoRA), so a chunk's key is the model and
        # the tokens only; vLLM's own prefix cache keys blocks by adapter as well.
        return (
            f"{F}.enabled: {P}.adapters serves {spec.adapters[0].name}, and LMCache 0.4.2 keys "
            "a cached chunk by model and tokens, not by adapter: a request to an adapter could "
            "reuse KV the base model or another adapter computed. Remove kvCache, or serve "
            "the adapters from a claim without it"
        )
    if engine_args.sets(spec.engine.extra_args, KV_TRANSFER_FLAG):
        return (
            f"{F}.enabled: {P}.engine.extraArgs sets {KV_TRANSFER_FLAG}, which the operator "
            "sets to LMCache's connector when kvCache is on (vLLM reads the last): remove one"
        )
    return None


def check(spec: LLMSpec, facts: catalog.ModelFacts | None, plan: sizing.Plan) -> None:
    """SpecError when the claim asks for kvCache and cannot have it (every backend)."""
    if spec.kv_cache.enabled:
        why = refusal(spec, facts, plan)
        if why is not None:
            raise SpecError(f"{F}.enabled", True, why)


def lmcache(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    target: Target,
) -> LMCache | None:
    """The runtime's lmCacheConfig (None when kvCache is off); SpecError naming the field when
    the claim cannot offload or the node cannot hold the buffer."""
    if not spec.kv_cache.enabled:
        return None
    check(spec, facts, plan)
    field = f"{F}.cpuSize"
    try:
        offload = size_offload(
            explicit_gib=spec.kv_cache.cpu_gib,
            node_mib=target.pod_memory_mib,
            per_node=plan.gpu.per_node,
            gpus=plan.gpus,
            pod_memory_mib=memory_mib(plan.memory),
        )
    except OffloadError as e:
        raise SpecError(field, spec.kv_cache.cpu_gib, f"{field}: {e.message}") from None
    config = {
        "enabled": True,
        # LMCache reads the size with float() as GiB (module docstring).
        "cpuOffloadingBufferSize": str(offload.cpu_gib_per_gpu),
        # Stated empty: the CRD's default "8Gi" would turn on a broken disk tier.
        "diskOffloadingBufferSize": "",
    }
    status = {}
    if spec.kv_cache.shared:
        if target.cache_server is None:
            where = (
                f"InferenceCluster {spec.namespace}/{target.cluster}"
                if target.cluster
                else "the target cluster"
            )
            raise SpecError(
                f"{F}.shared",
                True,
                f"{F}.shared: {where} runs no shared KV cache (status.vllm.cacheServer): set "
                f"spec.parameters.apps.vllm.cacheServer.enabled: true on it, or remove {F}.shared",
            )
        url, serde = target.cache_server
        config |= {"remoteUrl": url, "remoteSerde": serde}
        status = {"remote": {"url": url, "serde": serde}}
    memory = sizing.memory_quantity(offload.pod_memory_mib)
    return LMCache(config, LOG_LEVEL_ENV, memory, tiers(plan, offload, memory) | status)


def tiers(plan: sizing.Plan, offload: Offload, memory: str) -> dict[str, Any]:
    """status.plan.kvCache: the GPU tier as planned (offloading does not change it) and the
    CPU tier beside it, in GiB and tokens (per replica)."""
    per_token = plan.kv_bytes_per_token
    gpu_per_gpu = plan.kv_cache_gib / plan.gpus if plan.gpus else 0.0
    gpu = {"gib": round(plan.kv_cache_gib, 1)}
    cpu: dict[str, Any] = {
        "gib": offload.cpu_gib,
        "gibPerGPU": offload.cpu_gib_per_gpu,
        "sizedFrom": "node memory" if offload.sized else "cpuSize",
    }
    if per_token > 0:
        gpu["tokens"] = tokens(gpu_per_gpu, per_token)
        cpu["tokens"] = tokens(offload.cpu_gib_per_gpu, per_token)
    return {
        "enabled": True,
        "connector": "LMCacheConnectorV1",
        "gpu": gpu,
        "cpu": cpu,
        "podMemory": memory,
    }
