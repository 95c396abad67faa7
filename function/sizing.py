# ruff: noqa: E501 - the rules table in the docstring is markdown, whose rows cannot wrap.
"""Pure sizing heuristics: model facts + requested GPUs + GPU shape -> a vLLM deployment Plan.

Nothing here does I/O. ``plan`` either returns a ``Plan`` or raises ``SizingError`` (with the
field to blame, the value and a sentence that says what would work), for any input.

Derivation rules
----------------

| Plan field | Rule | Source / reasoning |
|---|---|---|
| GPU memory offered | `gpus x memory per GPU x 0.9` | vLLM `--gpu-memory-utilization` default 0.9 (upstream-facts §6) |
| weights | checkpoint size on disk when the catalog knows it (Kimi-K2.5 595 GB, DeepSeek-V3/R1 688.6 GB, gpt-oss 13.8 / 65.3 GB), else parameters x bytes per parameter (bf16/fp16 2, fp8/int8 1, int4/mxfp4 0.5625 = 4.5 bits with group scales); a float32 checkpoint (4 bytes on disk, the model cache's size) is served in 16 bits, 2 bytes | HF repos; Kimi-K2.5 and gpt-oss-120b come out at ~4.5 bits/parameter; vLLM `_resolve_auto_dtype` downcasts float32 under `--dtype auto` |
| runtime overhead | 2 GiB per GPU on 1 GPU, 3 GiB per GPU with tensor parallelism | CUDA context + PyTorch, activation peak of the default batch, CUDA graphs; NCCL / custom all-reduce buffers with TP. An engineering estimate, deliberately round |
| KV cache bytes/token | GQA: `2 x layers x kv_heads x head_dim x 2`; MLA: `(kv_lora_rank + qk_rope_head_dim) x layers x 2`; x `ceil(gpus / kv_heads)` when the GPUs outnumber the KV heads (vLLM replicates KV heads then; MLA has one latent, replicated on every GPU) | HF config.json; vLLM `QKVParallelLinear` head replication, MLA `num_kv_heads = 1` |
| useful KV cache | one sequence of `min(context_length, 32768)` tokens (embedding models: none, encoders keep no KV cache) | 32K holds a long chat or agent turn; below it a model is technically up but not useful |
| required_gib | `weights + gpus x overhead + useful KV`, and at least the recipe's `min_vram` (Kimi-K2.5: 714 GB = 665 GiB) | vLLM Kimi-K2.5 recipe (upstream-facts §6) |
| gpus omitted | the smallest of 1, 2, 4, 8 (not above GPUs per node) that tensor parallelism can split the model over and whose memory offered >= required_gib; embedding models land on 1. None fits: SizingError on `spec.parameters.gpu` naming the GiB needed, what the node offers and the GPU size that would do | |
| valid GPU counts | the count divides the attention heads, and the KV heads divide the count or the count divides the KV heads | vLLM: `num_attention_heads % tensor_parallel_size == 0`; `QKVParallelLinear` KV split/replication |
| explicit gpus | must be a whole number >= 1, <= GPUs per node (one pod on one node; multi-node serving is out of scope) and a valid count, else SizingError on `spec.parameters.gpu`. If it is valid but too small: `fits=False` and `shortfall` (the GiB needed and offered, and what would fit); the function refuses it when the cluster's GPU is known and the model's facts are catalogued, and warns otherwise | PRD: the user's `gpu` is honoured where it can work |
| tensor_parallel_size | = gpus | PRD |
| gpu_memory_utilization / dtype | 0.9 / `auto` | PRD |
| kv_cache_gib | `offered - weights - gpus x overhead`, at least 0 | |
| max_model_len | the tokens that KV cache holds, rounded down to a multiple of 1024, capped at the model's context_length (used as is when reached); 0 when less than 1024 tokens fit. Embedding models: their context_length (0 if the weights do not fit) | vLLM refuses a max_model_len whose KV cache does not fit, or one above the model's context |
| env | `VLLM_WORKER_MULTIPROC_METHOD=spawn` when gpus > 1 | upstream-facts §6 (fork breaks CUDA in TP workers) |
| cpu | `2 x gpus + 2`, at most 16 (1 -> 4, 2 -> 6, 4 -> 10, 8 -> 16); small embedding model (< 1B) on 1 GPU: 2 | PRD table: 1 GPU 4 CPU, 8 GPUs 16 CPU, bge-base 2 CPU |
| memory | 8Gi per GPU (1 -> 8Gi, 2 -> 16Gi, 4 -> 32Gi, 8 -> 64Gi); small embedding model on 1 GPU: 4Gi. No larger floor for loading: vLLM streams safetensors shard by shard (mmap), and no sourced rule says more | PRD table |
| shm_size | 1 GPU: 2Gi; tensor parallel: half the pod memory, at most 20Gi (2 -> 8Gi, 4 -> 16Gi, 8 -> 20Gi) | vLLM Kubernetes guide 2Gi; production-stack and llm-d 20Gi; a memory-backed /dev/shm counts against the pod's memory limit, so it stays below it |
| node fit | on a cluster that publishes its GPU node's allocatable (InferenceCluster status.gpu.allocatable), cpu and memory are lowered to it less the model-cache Job's requests (cpu to 100m, memory to 256Mi steps), shm to half the memory; `host_capped` says so | a request above a node's allocatable never schedules (1-GPU instances have 4 vCPUs, fewer allocatable) |
| runner, prefix caching, chunked prefill | embedding models: `pooling`, both off; generative: none, both on | upstream-facts §6 (`--runner pooling`); pooling/encoder models support neither |
| warnings | does not fit; context cut below the model's; facts estimated from the id | |
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from function.catalog import GIB, ModelFacts
from function.errors import FieldError
from function.limits import GPU_TYPES, TENSOR_PARALLEL_CANDIDATES, GpuShape

GPU_FIELD = "spec.parameters.gpu"
MODEL_FIELD = "spec.parameters.model"
GPU_MEMORY_FIELD = "gpu.memory_gib"
GPU_PER_NODE_FIELD = "gpu.per_node"

GPU_MEMORY_UTILIZATION = 0.9
DTYPE = "auto"
OVERHEAD_GIB_SINGLE_GPU = 2.0
OVERHEAD_GIB_TENSOR_PARALLEL = 3.0
USEFUL_CONTEXT_TOKENS = 32768
MAX_MODEL_LEN_MULTIPLE = 1024
SMALL_EMBEDDING_PARAMS_B = 1.0
MAX_GPU_MEMORY_GIB = 4096.0
MAX_GPUS_PER_NODE = 64

# GPU sizes named in hints when nothing fits, smallest first (function/limits.yaml).
KNOWN_GPU_SIZES: tuple[tuple[float, str], ...] = tuple(
    sorted((g.memory_gib, g.name) for g in GPU_TYPES.values())
)


@dataclass(frozen=True)
class Plan:
    gpus: int
    tensor_parallel_size: int
    gpu: GpuShape
    gpu_memory_utilization: float
    dtype: str
    weights_gib: float
    kv_cache_gib: float
    max_model_len: int
    required_gib: float
    available_gib: float
    fits: bool
    cpu: str
    memory: str
    shm_size: str
    env: tuple[tuple[str, str], ...]
    runner: str | None
    enable_prefix_caching: bool
    enable_chunked_prefill: bool
    warnings: tuple[str, ...]
    # Why the model does not fit these GPUs, with what would (None when it fits).
    shortfall: str | None = None
    # How cpu and memory were lowered to fit the GPU node (None: as the rules say).
    host_capped: str | None = None


class SizingError(FieldError):
    """A request that cannot be sized: names the field, the value and what would work."""


# --------------------------------------------------------------------------- checks


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite_positive(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _check_gpu(gpu: GpuShape) -> None:
    memory = getattr(gpu, "memory_gib", None)
    if not _finite_positive(memory) or memory > MAX_GPU_MEMORY_GIB:
        raise SizingError(
            GPU_MEMORY_FIELD,
            memory,
            f"GPU memory must be a number of GiB between 1 and {MAX_GPU_MEMORY_GIB:g} "
            f"per GPU, got {memory!r}",
        )
    per_node = getattr(gpu, "per_node", None)
    if not _is_count(per_node) or not 1 <= per_node <= MAX_GPUS_PER_NODE:
        raise SizingError(
            GPU_PER_NODE_FIELD,
            per_node,
            f"GPUs per node must be a whole number from 1 to {MAX_GPUS_PER_NODE}, got {per_node!r}",
        )


def _check_facts(facts: ModelFacts) -> None:
    name = getattr(facts, "id", None)
    counts = ("layers", "attention_heads", "kv_heads", "context_length")
    bad = [c for c in counts if not _is_count(getattr(facts, c, None)) or getattr(facts, c) < 1]
    bad += [
        c
        for c in ("weights_gib", "total_params_b")
        if not _finite_positive(getattr(facts, c, None))
    ]
    kv = getattr(facts, "kv_bytes_per_token", None)
    if not _is_count(kv) or kv < 0:
        bad.append("kv_bytes_per_token")
    min_vram = getattr(facts, "min_vram_gib", None)
    if min_vram is not None and not _finite_positive(min_vram):
        bad.append("min_vram_gib")
    if getattr(facts, "task", None) not in ("generate", "embed"):
        bad.append("task")
    if bad:
        raise SizingError(
            MODEL_FIELD,
            name,
            f"the facts known for model {name!r} cannot be sized (invalid {', '.join(bad)})",
        )


def _split_problem(facts: ModelFacts, gpus: int) -> str | None:
    """Why tensor parallelism cannot split this model over ``gpus`` GPUs, or None."""
    if facts.attention_heads % gpus:
        return f"does not divide the {facts.attention_heads} attention heads of {facts.id}"
    kv = facts.kv_heads
    if (kv % gpus) if gpus <= kv else (gpus % kv):
        return (
            f"and the {kv} key-value heads of {facts.id} do not split evenly "
            "(the GPU count must divide the KV heads or be a multiple of them)"
        )
    return None


def valid_gpu_counts(facts: ModelFacts, max_gpus: int) -> list[int]:
    """GPU counts from 1, 2, 4, 8 (<= max_gpus) that tensor parallelism can split facts over."""
    if not _is_count(max_gpus):
        return []
    if not all(_is_count(getattr(facts, a, None)) for a in ("attention_heads", "kv_heads")):
        return []
    if facts.attention_heads < 1 or facts.kv_heads < 1:
        return []
    return [
        n for n in TENSOR_PARALLEL_CANDIDATES if n <= max_gpus and _split_problem(facts, n) is None
    ]


# --------------------------------------------------------------------------- memory model


def _overhead_per_gpu(gpus: int) -> float:
    return OVERHEAD_GIB_SINGLE_GPU if gpus == 1 else OVERHEAD_GIB_TENSOR_PARALLEL


def _kv_bytes_all_gpus(facts: ModelFacts, gpus: int) -> int:
    """KV bytes per token summed over all GPUs (heads are replicated past the KV head count)."""
    return facts.kv_bytes_per_token * max(1, math.ceil(gpus / facts.kv_heads))


def _useful_tokens(facts: ModelFacts) -> int:
    return 0 if facts.task == "embed" else min(facts.context_length, USEFUL_CONTEXT_TOKENS)


def _required_gib(facts: ModelFacts, gpus: int) -> float:
    kv = _useful_tokens(facts) * _kv_bytes_all_gpus(facts, gpus) / GIB
    need = facts.weights_gib + gpus * _overhead_per_gpu(gpus) + kv
    return max(need, facts.min_vram_gib or 0.0)


def _available_gib(gpu: GpuShape, gpus: int) -> float:
    return gpus * gpu.memory_gib * GPU_MEMORY_UTILIZATION


def _offer(gpu: GpuShape, gpus: int) -> str:
    verb = "offers" if gpus == 1 else "offer"
    return (
        f"{gpus} x {gpu.memory_gib:g} GiB {_gpus_word(gpus)} at {GPU_MEMORY_UTILIZATION:g} "
        f"utilisation {verb} {_available_gib(gpu, gpus):.0f} GiB"
    )


def _gpus_word(gpus: int) -> str:
    return "GPU" if gpus == 1 else "GPUs"


def _bigger_gpu_hint(facts: ModelFacts, gpus: int) -> str:
    per_gpu = _required_gib(facts, gpus) / (gpus * GPU_MEMORY_UTILIZATION)
    known = next((label for size, label in KNOWN_GPU_SIZES if size >= per_gpu), None)
    example = (
        f" (e.g. {known})"
        if known
        else " (larger than an H200: the model needs multi-node serving, which is not supported)"
    )
    return (
        f"{gpus} {_gpus_word(gpus)} with at least {math.ceil(per_gpu)} GiB each would do{example}"
    )


def choose_gpus(facts: ModelFacts, gpu: GpuShape) -> int:
    """The smallest valid GPU count whose memory holds the model; SizingError when none does."""
    _check_gpu(gpu)
    _check_facts(facts)
    counts = valid_gpu_counts(facts, gpu.per_node)
    if not counts:
        raise SizingError(
            GPU_FIELD,
            None,
            f"no GPU count up to the {gpu.per_node} GPUs of a node can split the "
            f"{facts.attention_heads} attention heads of {facts.id} evenly",
        )
    for n in counts:
        if _required_gib(facts, n) <= _available_gib(gpu, n):
            return n
    most = counts[-1]
    raise SizingError(
        GPU_FIELD,
        None,
        f"{facts.id} needs about {_required_gib(facts, most):.0f} GiB of GPU memory, more than "
        f"a node offers: {_offer(gpu, most)}; {_bigger_gpu_hint(facts, most)}",
    )


# --------------------------------------------------------------------------- plan


def _checked_gpus(facts: ModelFacts, gpus: object, gpu: GpuShape) -> int:
    valid = valid_gpu_counts(facts, gpu.per_node)
    use = ", ".join(str(n) for n in valid) or "none"
    if not _is_count(gpus):
        raise SizingError(
            GPU_FIELD, gpus, f"{GPU_FIELD} must be a whole number of GPUs, got {gpus!r}"
        )
    if gpus < 1:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{GPU_FIELD}: {gpus} is not a GPU count; use one of {use} for {facts.id}",
        )
    if gpus > gpu.per_node:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{GPU_FIELD}: {gpus} is more than the {gpu.per_node} GPUs a node has; a model runs in "
            f"one pod on one node, so use at most {gpu.per_node} (one of {use} for {facts.id})",
        )
    problem = _split_problem(facts, gpus)
    if problem:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{GPU_FIELD}: {gpus} {problem}; use one of {use} "
            "(tensor parallelism splits heads evenly across GPUs)",
        )
    return gpus


def _host_resources(facts: ModelFacts | None, gpus: int) -> tuple[str, str, str]:
    if (
        facts is not None
        and facts.task == "embed"
        and facts.total_params_b < SMALL_EMBEDDING_PARAMS_B
        and gpus == 1
    ):
        return "2", "4Gi", "2Gi"
    memory = 8 * gpus
    shm = 2 if gpus == 1 else min(20, memory // 2)
    return str(min(16, 2 * gpus + 2)), f"{memory}Gi", f"{shm}Gi"


def _millicores(cpu: str) -> int:
    return int(cpu[:-1]) if cpu.endswith("m") else int(float(cpu) * 1000)


def _mib(memory: str) -> int:
    return int(memory[:-2]) * 1024 if memory.endswith("Gi") else int(memory[:-2])


def cpu_quantity(millicores: int) -> str:
    """Millicores in the form the API server writes (4000m is 4)."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def memory_quantity(mib: int) -> str:
    """MiB in the form the API server writes (8192Mi is 8Gi)."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def fit_to_node(plan: Plan, cpu_millicores: int, memory_mib: int, where: str) -> Plan:
    """Lower the plan's cpu and memory to what one pod may request on the GPU node (and
    shm to half the memory). `where` names the node for the message."""
    cpu, memory = _millicores(plan.cpu), _mib(plan.memory)
    room_cpu = max(100, cpu_millicores // 100 * 100)
    room_memory = max(256, memory_mib // 256 * 256)
    if cpu <= room_cpu and memory <= room_memory:
        return plan
    new_cpu, new_memory = min(cpu, room_cpu), min(memory, room_memory)
    shm = min(_mib(plan.shm_size), new_memory // 2 // 256 * 256)
    lowered = [
        f"{name} {old} -> {new}"
        for name, old, new in (
            ("cpu", plan.cpu, cpu_quantity(new_cpu)),
            ("memory", plan.memory, memory_quantity(new_memory)),
        )
        if old != new
    ]
    return replace(
        plan,
        cpu=cpu_quantity(new_cpu),
        memory=memory_quantity(new_memory),
        shm_size=memory_quantity(shm),
        host_capped=f"{', '.join(lowered)} to fit {where}",
    )


def _max_model_len(facts: ModelFacts, gpus: int, kv_cache_gib: float) -> int:
    if facts.task == "embed":
        return facts.context_length if kv_cache_gib > 0 else 0
    per_token = _kv_bytes_all_gpus(facts, gpus)
    if per_token == 0:
        return facts.context_length
    tokens = int(kv_cache_gib * GIB // per_token)
    if tokens >= facts.context_length:
        return facts.context_length
    return tokens // MAX_MODEL_LEN_MULTIPLE * MAX_MODEL_LEN_MULTIPLE


def plan(facts: ModelFacts, gpus: int | None, gpu: GpuShape) -> Plan:
    """Size a vLLM deployment of ``facts`` on ``gpus`` (None: choose) GPUs of shape ``gpu``."""
    _check_gpu(gpu)
    _check_facts(facts)
    n = choose_gpus(facts, gpu) if gpus is None else _checked_gpus(facts, gpus, gpu)

    available = _available_gib(gpu, n)
    required = _required_gib(facts, n)
    kv_cache = max(0.0, available - facts.weights_gib - n * _overhead_per_gpu(n))
    max_model_len = _max_model_len(facts, n, kv_cache)
    fits = required <= available and max_model_len > 0
    embed = facts.task == "embed"

    warnings: list[str] = []
    shortfall = None
    if not fits:
        message = f"{facts.id} needs about {required:.0f} GiB of GPU memory; {_offer(gpu, n)}"
        larger = [
            c
            for c in valid_gpu_counts(facts, gpu.per_node)
            if c > n and _required_gib(facts, c) <= _available_gib(gpu, c)
        ]
        hint = f"gpu: {larger[0]} would fit" if larger else _bigger_gpu_hint(facts, n)
        shortfall = f"{message}; {hint}"
        warnings.append(shortfall)
    elif not embed and max_model_len < facts.context_length:
        warnings.append(
            f"max_model_len is {max_model_len} tokens, below the {facts.context_length} tokens "
            f"{facts.id} supports: the KV cache left on {n} x {gpu.memory_gib:g} GiB "
            "holds no more"
        )
    if facts.estimated:
        warnings.append(
            f"{facts.id} is not in the catalog: its size ({facts.total_params_b:g}B "
            f"parameters, {facts.precision}) and shape are estimated from its name"
        )

    cpu, memory, shm = _host_resources(facts, n)
    return Plan(
        gpus=n,
        tensor_parallel_size=n,
        gpu=gpu,
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION,
        dtype=DTYPE,
        weights_gib=round(facts.weights_gib, 1),
        kv_cache_gib=round(kv_cache, 1),
        max_model_len=max_model_len,
        required_gib=round(required, 1),
        available_gib=round(available, 1),
        fits=fits,
        cpu=cpu,
        memory=memory,
        shm_size=shm,
        env=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),) if n > 1 else (),
        runner="pooling" if embed else None,
        enable_prefix_caching=not embed,
        enable_chunked_prefill=not embed,
        warnings=tuple(warnings),
        shortfall=shortfall,
    )


def plan_without_facts(gpus: int, gpu: GpuShape) -> Plan:
    """A plan for a model nobody can size (not in the catalog, no size in its name) on the
    GPUs the user asked for: host resources and engine settings follow the same rules, GPU
    memory is not checked (``fits`` stays True, ``required_gib`` 0) and vLLM picks the
    context length."""
    _check_gpu(gpu)
    if not _is_count(gpus) or gpus < 1 or gpus > gpu.per_node:
        raise SizingError(
            GPU_FIELD,
            gpus,
            f"{GPU_FIELD}: {gpus!r} is not a GPU count for this cluster; use a whole number from 1 to "
            f"{gpu.per_node}",
        )
    cpu, memory, shm = _host_resources(None, gpus)
    return Plan(
        gpus=gpus,
        tensor_parallel_size=gpus,
        gpu=gpu,
        gpu_memory_utilization=GPU_MEMORY_UTILIZATION,
        dtype=DTYPE,
        weights_gib=0.0,
        kv_cache_gib=0.0,
        max_model_len=0,
        required_gib=0.0,
        available_gib=round(_available_gib(gpu, gpus), 1),
        fits=True,
        cpu=cpu,
        memory=memory,
        shm_size=shm,
        env=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),) if gpus > 1 else (),
        runner=None,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
        warnings=(),
    )
