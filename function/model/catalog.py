"""ModelFacts: what the function knows about a model, whichever source gave it (the catalog,
the Hugging Face Hub, or the id alone), the units its numbers are in, and the formulas that
turn parameters into bytes.

The catalog itself is read by ``function/model/catalog_loader.py`` and asked through
``function/model/catalog_lookup.py``; ``function/model/name_estimate.py`` estimates the facts
of a model the catalog does not know from its id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from function.model.kv_cache import LayerGroup

GIB = 1024**3
GB = 1000**3

# Bytes one parameter takes in the checkpoint. 4-bit formats carry group scales and keep
# embeddings/attention in 16-bit: Kimi-K2.5 (595 GB / 1.04T) and gpt-oss-120b (65.3 GB / 117B)
# both come out near 4.5 bits per parameter.
BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5625,
    "mxfp4": 0.5625,
}

# On the GPU a parameter takes what the checkpoint stores, except float32: with the
# function's `--dtype auto` vLLM serves a float32 checkpoint in 16 bits (vllm/config/model.py
# `_resolve_auto_dtype`: "Downcast for float32 models" to float16 for pooling models, else the
# platform's first dtype, bfloat16 from compute capability 8.0 or float16).
SERVED_BYTES_PER_PARAM: dict[str, float] = {**BYTES_PER_PARAM, "fp32": 2.0}

Task = Literal["generate", "embed", "score"]
TASKS = ("generate", "embed", "score")
# Where a model's facts come from: the curated catalog, the Hub (config.json and safetensors
# metadata), or the id alone.
Origin = Literal["catalog", "hub", "estimated"]
# KV cache bytes per element, by --kv-cache-dtype (vllm/utils/torch_utils.py
# STR_DTYPE_TO_TORCH_DTYPE): auto keeps the model's 16-bit dtype.
KV_DTYPE_BYTES: dict[str, int] = {
    "auto": 2,
    "bfloat16": 2,
    "float16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}


@dataclass(frozen=True)
class ModelFacts:
    id: str
    family: str
    task: Task
    total_params_b: float
    active_params_b: float
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    precision: str
    context_length: int
    gated: bool
    trust_remote_code: bool
    tool_call_parser: str | None
    reasoning_parser: str | None
    extra_args: tuple[str, ...]
    weights_gib: float  # on the GPU, as vLLM serves them
    kv_bytes_per_token: int
    min_vram_gib: float | None
    sources: tuple[str, ...]
    estimated: bool
    checkpoint_gib: float = 0.0  # on disk: what the model cache must hold
    architecture: str = "unknown"
    # The KV cache layout vLLM allocates (function/model/kv_cache.py), whole model.
    kv_layers: tuple[LayerGroup, ...] = ()
    hybrid_kv: bool = True
    kv_cache_dtype: str = "auto"  # the checkpoint's own KV quantization, else auto
    vocab_size: int = 0
    hidden_size: int = 0
    intermediate_size: int = 0
    multimodal: tuple[str, ...] = ()
    mistral_format: bool = False
    origin: Origin = "catalog"
    # False when nobody knows the model's context (an id the catalog, its families and the Hub
    # cannot describe): vLLM then fits max_model_len itself (--max-model-len auto).
    context_known: bool = True
    # Mixture of experts: experts each token uses and one expert's width (activation memory).
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    num_experts: int = 0  # routed experts (0: a dense model)
    # The routed experts' weights as vLLM loads them, whole model: what expert parallelism
    # splits over its ranks (function/model/expert_parallel.py); the rest is replicated.
    expert_weights_gib: float = 0.0
    # fact -> where it came from (status.plan.facts)
    provenance: tuple[tuple[str, str], ...] = ()


# --------------------------------------------------------------------------- formulas


def kv_bytes_per_token(
    layers: int,
    kv_heads: int,
    head_dim: int,
    kv_lora_rank: int | None = None,
    qk_rope_head_dim: int | None = None,
) -> int:
    """KV cache bytes per token at 16-bit KV, all layers (one copy).

    GQA/MHA: K and V, ``2 * layers * kv_heads * head_dim * 2`` bytes.
    MLA (DeepSeek-V3, Kimi K2): one compressed latent plus the rope key,
    ``(kv_lora_rank + qk_rope_head_dim) * layers * 2`` bytes.
    """
    if kv_lora_rank is not None and qk_rope_head_dim is not None:
        return (kv_lora_rank + qk_rope_head_dim) * layers * 2
    return 2 * layers * kv_heads * head_dim * 2


def checkpoint_gib(
    total_params_b: float, precision: str, checkpoint_gb: float | None = None
) -> float:
    """What the weights take on disk (the model cache): the checkpoint's size when known,
    else parameters x the bytes the checkpoint stores each in."""
    if checkpoint_gb is not None:
        return checkpoint_gb * GB / GIB
    return total_params_b * 1e9 * BYTES_PER_PARAM[precision] / GIB


def weights_gib(total_params_b: float, precision: str, checkpoint_gb: float | None = None) -> float:
    """GPU memory of the weights as vLLM loads them: the checkpoint's size, scaled from the
    stored to the served width (only float32 differs)."""
    stored = checkpoint_gib(total_params_b, precision, checkpoint_gb)
    return stored * SERVED_BYTES_PER_PARAM[precision] / BYTES_PER_PARAM[precision]
