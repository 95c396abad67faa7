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
| tensor_parallel_size | = gpus; a mixture of experts over nodes or with parallelism.expert: the split of function/model/expert_parallel.py (DP + EP) | PRD; vLLM's expert-parallel guide |
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

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from function.limits import GpuShape
from function.model import kv_cache, vllm_memory
from function.model.catalog import ModelFacts
from function.model.sizing_checks import (  # noqa: F401 - the names sizing's callers use
    EXPERT_FIELD,
    GPU_FIELD,
    GPU_MEMORY_FIELD,
    GPU_PER_NODE_FIELD,
    MAX_GPU_MEMORY_GIB,
    MAX_GPUS_PER_NODE,
    MODEL_FIELD,
    SizingError,
    _check_facts,
    _check_gpu,
    _is_count,
)
from function.model.sizing_hints import bigger_gpu_hint, fill, offer, span_hint
from function.model.topology import (  # noqa: F401 - the names sizing's callers use
    _check_expert,
    _checked_split,
    choose_gpus,
    choose_split,
    choose_topology,
    valid_gpu_counts,
)
from function.model.vllm_memory import GPU_MEMORY_UTILIZATION, EngineSettings

if TYPE_CHECKING:
    from function.model.adapters import LoraPlan


DTYPE = "auto"
# A replica whose KV cache holds less than this context (or the model's own, when shorter) is
# not worth starting: a system prompt, a few tool definitions and one answer. Between this
# and USEFUL_CONTEXT_TOKENS a plan serves with a shorter context and says so.
MIN_SERVING_TOKENS = 4096
SMALL_EMBEDDING_PARAMS_B = 1.0


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
    # The memory model, per GPU (vLLM's own terms), and the engine settings it assumed.
    engine: EngineSettings | None = None
    weights_per_gpu_gib: float = 0.0  # the GPU holding the most (experts split by EP)
    activation_gib: float = 0.0
    non_torch_gib: float = 0.0
    kv_safety_gib: float = 0.0
    kv_bytes_per_token: int = 0  # per GPU, as the context grows
    context_auto: bool = False  # vLLM fits max_model_len itself (--max-model-len auto)
    # Nodes of one replica: tensor parallel inside a node (tensor_parallel_size GPUs), one
    # pipeline stage per node (vLLM's multi-node guide: TP = GPUs per node, PP = nodes), or,
    # for a mixture of experts, data parallel ranks spread over the nodes.
    nodes: int = 1
    pipeline_parallel_size: int = 1
    # Mixture of experts (function/model/expert_parallel.py): data parallel attention ranks
    # of tensor_parallel_size GPUs each, and whether the experts are split over all
    # tensor x data parallel ranks (vLLM's --enable-expert-parallel).
    data_parallel_size: int = 1
    expert_parallel: bool = False
    # LoRA buffers per GPU (spec.parameters.adapters; function/model/lora_memory.py)
    lora_gib: float = 0.0
    lora: LoraPlan | None = None  # the adapters as vLLM serves them (function/model/adapters.py)

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one pod of the replica (one node's share)."""
        return self.gpus // max(1, self.nodes)

    @property
    def data_parallel_local(self) -> int:
        """Data parallel ranks on each node (vLLM's --data-parallel-size-local)."""
        return max(1, self.data_parallel_size // max(1, self.nodes))

    @property
    def expert_parallel_size(self) -> int:
        """Ranks the experts are split over: every tensor x data parallel rank with expert
        parallelism (vLLM: EP size = TP x DP), else none (1)."""
        return self.tensor_parallel_size * self.data_parallel_size if self.expert_parallel else 1


# --------------------------------------------------------------------------- plan


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


def cpu_quantity(millicores: int) -> str:
    """Millicores in the form the API server writes (4000m is 4)."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def memory_quantity(mib: int) -> str:
    """MiB in the form the API server writes (8192Mi is 8Gi)."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def plan(
    facts: ModelFacts,
    gpus: int | None,
    gpu: GpuShape,
    engine: EngineSettings | None = None,
    max_nodes: int = 1,
    expert: bool | None = None,
    one_pod: bool = False,
) -> Plan:
    """Size a vLLM deployment of ``facts`` on ``gpus`` (None: choose) GPUs of shape ``gpu``,
    with the engine settings the claim gives (None: the function's defaults); a replica may
    span up to ``max_nodes`` nodes (1: one node). ``expert``: the claim's
    spec.parameters.parallelism.expert (None: the function chooses); ``one_pod``: the
    backend serves a replica from one pod (llm-d), which the words of a shortfall follow."""
    engine = engine or EngineSettings()
    _check_gpu(gpu)
    _check_facts(facts)
    _check_expert(facts, expert, gpus if _is_count(gpus) else None)
    if gpus is None:
        split = choose_split(facts, gpu, engine, max_nodes, expert)
    else:
        split = _checked_split(facts, gpus, gpu, engine, max_nodes, expert)
    n, nodes, pp, dp, ep = split.tensor, split.nodes, split.pipeline, split.data, split.expert

    need, _ = vllm_memory.required_gib(facts, n, gpu, engine, None, pp, dp, ep)
    memory = vllm_memory.gpu_memory(facts, n, gpu, engine, facts.context_length, pp, dp, ep)
    max_model_len = vllm_memory.max_model_len(facts, memory) if memory.kv_usable > 0 else 0
    pooling = vllm_memory.pooling(facts)
    least = facts.context_length if pooling else min(facts.context_length, MIN_SERVING_TOKENS)
    least_need, _ = vllm_memory.required_gib(facts, n, gpu, engine, least, pp, dp, ep)
    fits = least_need <= memory.requested and max_model_len >= least

    warnings: list[str] = []
    shortfall = None
    total = split.gpus
    if not fits:
        message = (
            f"{facts.id} needs about {need * total:.0f} GiB of GPU memory; "
            f"{offer(gpu, total, engine)}"
        )
        larger = [
            c
            for c in valid_gpu_counts(facts, gpu.per_node)
            if c > n and vllm_memory.fits(facts, c, gpu, engine)
        ]
        if larger:
            hint = f"gpu: {larger[0]} would fit"
        else:
            hint = bigger_gpu_hint(facts, n, engine)
            hint += span_hint(facts, hint, max_nodes if nodes == 1 else 2)
        shortfall = fill(f"{message}; {hint}", one_pod)
        warnings.append(shortfall)
    elif facts.context_known and max_model_len < facts.context_length:
        warnings.append(
            f"max_model_len is {max_model_len} tokens, below the {facts.context_length} tokens "
            f"{facts.id} supports: the KV cache left on {total} x {gpu.memory_gib:g} GiB "
            "holds no more"
        )
    if facts.estimated:
        warnings.append(
            f"{facts.id} is not in the catalog and the Hugging Face Hub could not be asked: its "
            f"size ({facts.total_params_b:g}B parameters, {facts.precision}) and shape are "
            "estimated from its name"
        )

    per_pod = total // nodes
    cpu, host_memory, shm = _host_resources(facts, per_pod)  # per pod: one node's GPUs
    kv_all = max(0.0, memory.kv_budget) * total
    return Plan(
        gpus=total,
        tensor_parallel_size=n,
        nodes=nodes,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        expert_parallel=ep,
        gpu=gpu,
        gpu_memory_utilization=engine.gpu_memory_utilization,
        dtype=DTYPE,
        weights_gib=round(facts.weights_gib, 1),
        kv_cache_gib=round(kv_all, 1),
        max_model_len=max_model_len if facts.context_known else 0,
        required_gib=round(need * total, 1),
        available_gib=round(memory.requested * total, 1),
        fits=fits,
        cpu=cpu,
        memory=host_memory,
        shm_size=shm,
        env=(("VLLM_WORKER_MULTIPROC_METHOD", "spawn"),) if per_pod > 1 else (),
        runner="pooling" if pooling else None,
        enable_prefix_caching=not pooling,
        enable_chunked_prefill=not pooling,
        warnings=tuple(warnings),
        shortfall=shortfall,
        engine=replace(engine, max_num_batched_tokens=memory.batched, max_num_seqs=memory.seqs),
        weights_per_gpu_gib=round(memory.weights, 2),
        activation_gib=round(memory.activation, 2),
        non_torch_gib=memory.non_torch,
        kv_safety_gib=round(memory.safety, 2),
        kv_bytes_per_token=round(
            kv_cache.bytes_per_token(facts.kv_layers, memory.allocator) * memory.stage_share
        ),
        context_auto=not facts.context_known,
        lora_gib=round(memory.lora, 3),
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
            f"{gpus!r} is not a GPU count for this cluster; use a whole number from 1 to "
            f"{gpu.per_node}",
            names_field=True,
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
        available_gib=round(gpu.memory_gib * GPU_MEMORY_UTILIZATION * gpus, 1),
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
