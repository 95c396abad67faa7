"""vLLM's memory model, per GPU: what the engine image's vLLM reserves for weights, the
activation peak and non-torch memory, what is left for the KV cache, and the context one
request may take in it (function/model/kv_cache.py lays the KV cache out). Pure functions.

The engine settings it is sized with are ``EngineSettings`` (here: the function's defaults
or the claim's engine.extraArgs); function/model/sizing.py asks it through
``required_gib``, ``fits``, ``gpu_memory`` and ``max_model_len``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from function.limits import GpuShape
from function.model import expert_parallel, kv_cache, lora_memory, moe_memory
from function.model.catalog import GIB, KV_DTYPE_BYTES, ModelFacts
from function.model.kv_cache import Allocator
from function.model.lora_memory import LoraShape

GPU_MEMORY_UTILIZATION = 0.9
# vLLM's batch defaults for its OpenAI server (vllm/engine/arg_utils.py `get_batch_defaults`):
# GPUs of 70 GiB or more that are not A100s batch 8192 tokens and 1024 sequences, others
# 2048 and 256.
LARGE_GPU_GIB = 70.0
BATCH_DEFAULTS = {True: (8192, 1024), False: (2048, 256)}


@dataclass(frozen=True)
class EngineSettings:
    """The vLLM settings the memory model depends on: the function's defaults, or what the
    claim's engine.extraArgs set (status.plan.engine says which)."""

    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    kv_cache_dtype: str = "auto"
    max_num_batched_tokens: int | None = None  # None: vLLM's default for the GPU
    max_num_seqs: int | None = None
    overridden: tuple[str, ...] = ()  # the flags the claim set
    # LoRA slots and rank (spec.parameters.adapters; None: no --enable-lora), whose buffers
    # vLLM allocates with the weights (function/model/lora_memory.py).
    lora: LoraShape | None = None

    def batch(self, gpu: GpuShape, pooling: bool, max_model_len: int) -> tuple[int, int]:
        """(max_num_batched_tokens, max_num_seqs) as vLLM 0.17.1 resolves them for its
        OpenAI server (`_set_default_max_num_seqs_and_batched_tokens_args`)."""
        large = gpu.memory_gib >= LARGE_GPU_GIB and "a100" not in (gpu.type or "")
        tokens, seqs = BATCH_DEFAULTS[large]
        seqs = self.max_num_seqs or seqs
        if self.max_num_batched_tokens:
            return self.max_num_batched_tokens, seqs
        if pooling:  # no chunked prefill: a whole sequence is one batch
            tokens = max(max_model_len, tokens)
        return min(seqs * max(1, max_model_len), tokens), seqs


USEFUL_CONTEXT_TOKENS = 32768
MAX_MODEL_LEN_MULTIPLE = 1024

# What vLLM holds besides weights and KV cache, from its own start-up profile (the engine
# image's vLLM reserves `gpu_memory_utilization x total - weights - activation peak -
# non-torch memory` for the KV cache: vllm/v1/worker/gpu_worker.py
# `determine_available_memory`). Figures from vLLM 0.19.0's raw start-up logs on H100 in
# llm-d's planner repository (commit d3121e0, 31 runs; the sampler path, Triton top-k/top-p,
# is the one vLLM 0.17.1 takes for 8 or more requests):
# - the activation peak is the dummy sampler run over max_num_seqs x vocabulary logits:
#   15.2-15.8 bytes per logit for dense models (Llama-3.1-8B 1.89 GiB, Qwen2.5-7B 2.21,
#   gemma-2 3.62-3.66, gemma-3 3.89-3.99, phi-2 0.79 at 1024 x vocab), up to 16.2 where the
#   forward pass adds a little; 16.5 covers every run;
SAMPLER_BYTES_PER_LOGIT = 16.5
# - mixture-of-experts layers add the fused-MoE workspaces of vLLM 0.17.1's experts kernel
#   (function/model/moe_memory.py, from its workspace_shapes; activation estimate vs measured,
#   GiB: Mixtral-8x7B TP2 1.22 vs 1.21, Qwen3-30B-A3B 2.92 vs 2.68, Llama-4-Scout TP4 3.41
#   vs 3.19, gpt-oss-20b TP2 3.30 vs 2.87: none under);
# - a pooling model runs no sampler: its peak is one forward pass over max_num_batched_tokens
#   (gate/up and activation of the MLP, 3 x intermediate / TP, plus 4 x hidden), 16-bit;
# - non-torch memory (CUDA context growth, NCCL and custom all-reduce buffers) is 0.24-0.27
#   GiB on one GPU and 2.07-2.21 GiB per GPU with tensor parallelism.
NON_TORCH_GIB_SINGLE_GPU = 0.3
NON_TORCH_GIB_TENSOR_PARALLEL = 2.25
# CUDA graphs (0.6-1.8 GiB in the same logs) are captured after the KV cache is allocated,
# in the memory gpu_memory_utilization leaves free, so they take nothing from the plan.
#
# The context is chosen below what the KV cache holds by this share of the KV memory (at
# least KV_SAFETY_MIN_GIB): the activation figures above spread by 0.1-0.3 GiB between
# vLLM versions and models, CUDA's total memory varies by up to 0.2 GiB with the driver
# (function/limits.yaml takes the lowest cited), and weights load up to about 1 % above the
# checkpoint. vLLM refuses to start when one request of max_model_len does not fit.
KV_SAFETY_FRACTION = 0.10
KV_SAFETY_MIN_GIB = 0.25
# The sampler's vocabulary when a model's is not known: Llama 3's, the middle of the catalog's
# (32064 for Phi-3 up to 262208 for Gemma 3).
DEFAULT_VOCAB = 128256


def pooling(facts: ModelFacts) -> bool:
    return facts.task != "generate"


def allocator(facts: ModelFacts, gpus: int, engine: EngineSettings, batched: int) -> Allocator:
    kv_dtype = engine.kv_cache_dtype if engine.kv_cache_dtype != "auto" else facts.kv_cache_dtype
    return Allocator(
        tensor_parallel=gpus,
        dtype_bytes=KV_DTYPE_BYTES.get(kv_dtype, 2),
        max_num_batched_tokens=batched,
        hybrid=facts.hybrid_kv,
    )


def _useful_tokens(facts: ModelFacts) -> int:
    """The context a plan must hold to be useful: a long chat or agent turn; a pooling model
    embeds whole inputs, so all of its context."""
    if pooling(facts):
        return facts.context_length
    return min(facts.context_length, USEFUL_CONTEXT_TOKENS)


@dataclass(frozen=True)
class _Memory:
    """One GPU's memory as vLLM divides it, for `gpus` GPUs of a replica."""

    gpus: int  # tensor parallel size
    requested: float  # gpu_memory_utilization x total
    weights: float
    activation: float
    non_torch: float
    allocator: Allocator
    batched: int
    seqs: int
    # Pipeline stages (nodes), and the share of the layers the largest stage holds: vLLM
    # splits L layers into stages of ceil(L / pp) or fewer (vllm/distributed/utils.py
    # get_pp_indices), so that stage holds that share of the weights and of every token's
    # KV cache.
    pipeline: int = 1
    stage_share: float = 1.0
    lora: float = 0.0  # LoRA buffers (function/model/lora_memory.py)

    @property
    def kv_budget(self) -> float:
        """What vLLM gives the KV cache on this GPU."""
        return self.requested - self.weights - self.lora - self.activation - self.non_torch

    @property
    def safety(self) -> float:
        return max(KV_SAFETY_FRACTION * max(self.kv_budget, 0.0), KV_SAFETY_MIN_GIB)

    @property
    def kv_usable(self) -> float:
        """The KV cache the plan sizes the context for: the budget less the safety margin."""
        return self.kv_budget - self.safety


def _activation_gib(
    facts: ModelFacts,
    gpus: int,
    batched: int,
    seqs: int,
    split: expert_parallel.Split | None = None,
    gpu_type: str | None = None,
) -> float:
    """vLLM's profiled activation peak (see SAMPLER_BYTES_PER_LOGIT), plus the fused-MoE
    workspaces of vLLM 0.17.1's experts kernel (function/model/moe_memory.py), whose
    shapes depend on the expert parallel split and, for MXFP4, on the GPU."""
    hidden = facts.hidden_size
    if pooling(facts):
        width = 3 * (facts.intermediate_size or 4 * hidden) // gpus + 4 * hidden
        return batched * width * 2 / GIB
    vocab = facts.vocab_size or DEFAULT_VOCAB
    peak = SAMPLER_BYTES_PER_LOGIT * seqs * vocab / GIB
    ep = split.expert_size if split is not None and split.expert else 1
    data = split.data if split is not None else 1
    return peak + moe_memory.workspace_gib(facts, gpus, batched, ep, data, gpu_type)


def stage_share(facts: ModelFacts, pipeline: int) -> float:
    """The share of the model's layers its largest pipeline stage holds."""
    if pipeline <= 1 or not facts.layers:
        return 1.0
    return math.ceil(facts.layers / pipeline) / facts.layers


def gpu_memory(
    facts: ModelFacts,
    gpus: int,
    gpu: GpuShape,
    engine: EngineSettings,
    max_model_len: int,
    pipeline: int = 1,
    data: int = 1,
    expert: bool = False,
) -> _Memory:
    """One GPU of a replica of `gpus` tensor parallel GPUs x `pipeline` stages x `data`
    parallel ranks, the experts split over the TP x DP ranks when `expert`
    (function/model/expert_parallel.py). Each data parallel rank batches and keeps its KV
    cache on its own (its engine core's scheduler), so the batch is per rank."""
    batched, seqs = engine.batch(gpu, pooling(facts), max_model_len)
    split = expert_parallel.Split(tensor=gpus, pipeline=pipeline, data=data, expert=expert)
    return _Memory(
        gpus=gpus,
        pipeline=pipeline,
        stage_share=stage_share(facts, pipeline),
        requested=gpu.memory_gib * engine.gpu_memory_utilization,
        weights=expert_parallel.weights_per_gpu(facts, split, stage_share(facts, pipeline)),
        lora=lora_memory.buffer_gib(facts, gpus, engine.lora, stage_share(facts, pipeline)),
        activation=_activation_gib(facts, gpus, batched, seqs, split, gpu.type),
        # Collective buffers come with more than one rank, tensor or data parallel.
        non_torch=NON_TORCH_GIB_SINGLE_GPU if gpus * data == 1 else NON_TORCH_GIB_TENSOR_PARALLEL,
        allocator=allocator(facts, gpus, engine, batched),
        batched=batched,
        seqs=seqs,
    )


def _kv_gib(facts: ModelFacts, memory: _Memory, tokens: int) -> float:
    """KV memory one request of `tokens` takes on one GPU (its pipeline stage's layers)."""
    return (
        kv_cache.request_bytes(facts.kv_layers, memory.allocator, tokens) / GIB * memory.stage_share
    )


def required_gib(
    facts: ModelFacts,
    gpus: int,
    gpu: GpuShape,
    engine: EngineSettings,
    tokens: int | None = None,
    pipeline: int = 1,
    data: int = 1,
    expert: bool = False,
) -> tuple[float, _Memory]:
    """GPU memory per GPU the model needs to serve one request of `tokens` (None: a useful
    one), safety included, on `gpus` tensor-parallel GPUs x `pipeline` stages x `data`
    parallel ranks (a request runs on one data parallel rank)."""
    tokens = tokens or _useful_tokens(facts)
    memory = gpu_memory(facts, gpus, gpu, engine, tokens, pipeline, data, expert)
    kv = _kv_gib(facts, memory, tokens)
    need = memory.weights + memory.lora + memory.activation + memory.non_torch + kv
    need += max(KV_SAFETY_MIN_GIB, kv * KV_SAFETY_FRACTION / (1 - KV_SAFETY_FRACTION))
    if facts.min_vram_gib:
        need = max(need, facts.min_vram_gib / (gpus * pipeline * data))
    return need, memory


def fits(
    facts: ModelFacts,
    gpus: int,
    gpu: GpuShape,
    engine: EngineSettings,
    pipeline: int = 1,
    data: int = 1,
    expert: bool = False,
) -> bool:
    need, memory = required_gib(
        facts, gpus, gpu, engine, pipeline=pipeline, data=data, expert=expert
    )
    return need <= memory.requested


def max_model_len(facts: ModelFacts, memory: _Memory) -> int:
    """The largest context one request of which fits the usable KV cache (the model's own
    when it does; else a multiple of 1024, which every block size divides); 0 when not even
    1024 tokens fit."""
    return kv_cache.max_len(
        facts.kv_layers,
        memory.allocator,
        # A stage holds 1/pipeline of every token: the whole model's tokens fit `pipeline`
        # times this GPU's budget.
        memory.kv_usable * GIB / memory.stage_share,
        facts.context_length,
        MAX_MODEL_LEN_MULTIPLE,
    )
