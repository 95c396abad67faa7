# ruff: noqa: E501 - the rules table in the docstring is markdown, whose rows cannot wrap.
"""vLLM's KV cache allocator, as arithmetic over plain data. Pure functions.

What one request of `max_model_len` tokens takes on one GPU, as the allocator of the engine
image's vLLM lays it out (the version is pinned beside the image in kcl/versions.k; every
rule below was read from vLLM's source at that version):

| layer kind | memory one request takes (per GPU) | vLLM source |
|---|---|---|
| full attention | `cdiv(max_model_len, block) x page`, page = `block x kv_heads x (head_k + head_v) x dtype` | `FullAttentionSpec` (vllm/v1/kv_cache_interface.py) |
| sliding window `w` | `(cdiv(min(w - 1 + max_num_batched_tokens, max_model_len), block) + 1) x page` | `SlidingWindowSpec.max_memory_usage_bytes` |
| MLA (DeepSeek-V3, Kimi-K2) | like full attention with one head of `kv_lora_rank + qk_rope_head_dim`, on every tensor-parallel rank | `MLAAttentionSpec`; `get_head_size` in model_arch_config_convertor.py |
| mamba / linear attention | one page of state (conv + SSM), padded to the attention page | `MambaSpec`, `HybridAttentionMambaModelConfig` (models/config.py) |
| encoder-only (BERT-style) | nothing | `EncoderOnlyAttentionSpec` |

KV heads on a GPU: `max(1, kv_heads // tensor_parallel_size)` (heads are replicated past the
KV head count; `ModelConfig.get_num_kv_heads`). KV dtype: the model's (16-bit) unless
`--kv-cache-dtype` or the checkpoint's quantization config says fp8.

Layers of different kinds (gpt-oss: alternating 128-token windows; Gemma 2: alternating 4096;
Gemma 3: five windowed layers to one full) share one pool of pages through the hybrid KV cache
manager: layers are grouped by kind into groups of `group_size` layers (the smallest count of
a kind, or the largest when that is less than 1.25 times the smallest), the last group of a
kind padded (`_get_kv_cache_groups_uniform_page_size`), and one request needs
`group_size x page x sum(blocks of each group)` (`get_max_concurrency_for_kv_cache_config`).
When the hybrid manager is off (chunked local attention, as Llama 4; a KV connector), windowed
layers are allocated as full ones unless every layer is windowed
(`unify_hybrid_kv_cache_specs`).

vLLM refuses to start when its own check (`_max_memory_usage_bytes_from_groups`, which for
hybrid models counts only the first group's blocks) exceeds the KV memory; the function sizes
for the stronger figure above, one whole request, so what it plans is never refused and can
serve a request of `max_model_len`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LayerKind = Literal["full", "sliding", "chunked", "mla", "mamba", "none"]

# vLLM's CUDA platform default block size (vllm/platforms/cuda.py `check_and_update_config`);
# MLA backends need 64 (FlashMLA) and mamba hybrids enlarge the attention block. The plans the
# function writes are multiples of MAX_MODEL_LEN_MULTIPLE, which every block size divides,
# so the rounding never changes what a full-attention layer takes.
BLOCK_SIZE = 16
# The vLLM release this module follows (kcl/versions.k vllm_version; a test keeps them equal).
VLLM_VERSION = "0.17.1"
MLA_BLOCK_SIZE = 64
# The hybrid manager groups a kind's layers by the smallest count unless the largest is below
# this multiple of it (kv_cache_utils.py `_get_kv_cache_groups_uniform_page_size`).
GROUP_SIZE_SLACK = 1.25


@dataclass(frozen=True)
class LayerGroup:
    """`count` layers of one kind with the same KV shape (whole model, before tensor
    parallelism)."""

    kind: LayerKind
    count: int
    kv_heads: int = 0
    head_dim: int = 0
    head_dim_v: int = 0  # 0: same as head_dim
    window: int = 0  # sliding / chunked: tokens
    latent_dim: int = 0  # mla: kv_lora_rank + qk_rope_head_dim
    state_bytes: int = 0  # mamba: conv + SSM state of one request in one layer, whole model

    def per_token_bytes(self, tp: int, dtype_bytes: int) -> int:
        """KV bytes one token takes in one layer on one GPU (0 for state or no cache)."""
        if self.kind == "mla":
            return self.latent_dim * dtype_bytes
        if self.kind in ("full", "sliding", "chunked"):
            heads = max(1, self.kv_heads // max(1, tp))
            return heads * (self.head_dim + (self.head_dim_v or self.head_dim)) * dtype_bytes
        return 0


@dataclass(frozen=True)
class Allocator:
    """The engine settings the allocator depends on."""

    tensor_parallel: int = 1
    dtype_bytes: int = 2
    max_num_batched_tokens: int = 2048
    hybrid: bool = True  # the hybrid KV cache manager (off with chunked attention)
    block_size: int | None = None  # None: vLLM's default for the attention kind


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class _Kind:
    """One KV cache group kind as vLLM lays it out: layers, page, block and the pages one
    request needs for a given max_model_len."""

    group: LayerGroup
    block: int
    page: int

    def blocks(self, max_model_len: int, batched: int) -> int:
        g = self.group
        if g.kind in ("full", "mla"):
            return _cdiv(max_model_len, self.block)
        if g.kind == "sliding":
            return _cdiv(min(g.window - 1 + batched, max_model_len), self.block) + 1
        if g.kind == "chunked":
            return _cdiv(min(g.window + batched, max_model_len), self.block)
        return 1  # mamba: one page of state


def _kinds(layers: tuple[LayerGroup, ...], alloc: Allocator) -> list[_Kind]:
    """The model's layers as vLLM's KV cache groups see them: merged by kind, window and
    shape, with the block and page each gets."""
    present = [g for g in layers if g.count > 0 and g.kind != "none"]
    if not alloc.hybrid and len({g.kind for g in present}) > 1:
        # unify_hybrid_kv_cache_specs: windowed and chunked layers become full attention.
        present = [
            LayerGroup("full", g.count, g.kv_heads, g.head_dim, g.head_dim_v)
            if g.kind in ("sliding", "chunked")
            else g
            for g in present
        ]
    merged: dict[tuple, LayerGroup] = {}
    for g in present:
        key = (g.kind, g.window, g.per_token_bytes(alloc.tensor_parallel, alloc.dtype_bytes))
        old = merged.get(key)
        merged[key] = (
            g if old is None else LayerGroup(**{**old.__dict__, "count": old.count + g.count})
        )
    groups = list(merged.values())
    per_token = {id(g): g.per_token_bytes(alloc.tensor_parallel, alloc.dtype_bytes) for g in groups}
    block = alloc.block_size or (
        MLA_BLOCK_SIZE if any(g.kind == "mla" for g in groups) else BLOCK_SIZE
    )
    states = [g.state_bytes for g in groups if g.kind == "mamba"]
    attention = [per_token[id(g)] for g in groups if g.kind != "mamba"]
    states = [-(-s // max(1, alloc.tensor_parallel)) for s in states]
    if states and attention:
        # HybridAttentionMambaModelConfig: the attention block grows in steps of 16 tokens
        # until one attention page holds a mamba state.
        block = max(block, BLOCK_SIZE * _cdiv(max(states), BLOCK_SIZE * max(attention)))
    kinds = [
        _Kind(
            g,
            block,
            -(-g.state_bytes // max(1, alloc.tensor_parallel))
            if g.kind == "mamba"
            else block * per_token[id(g)],
        )
        for g in groups
    ]
    if not _uniform_type(kinds):
        # unify_kv_cache_spec_page_size: a smaller attention page grows by a whole factor of
        # its block; a mamba state is padded to the page.
        largest = max(k.page for k in kinds)
        kinds = [
            _Kind(
                k.group,
                k.block if k.group.kind == "mamba" else k.block * (largest // k.page),
                largest,
            )
            for k in kinds
        ]
    return kinds


def _uniform_type(kinds: list[_Kind]) -> bool:
    """Whether every layer needs the same token slots (all full attention, or all one window):
    vLLM then keeps them in one group, each layer with its own page size
    (`UniformTypeKVCacheSpecs`)."""
    return (
        len({("full" if k.group.kind == "mla" else k.group.kind, k.group.window) for k in kinds})
        <= 1
    )


def group_size(layers: tuple[LayerGroup, ...], alloc: Allocator) -> int:
    """The layers per KV cache group vLLM forms (all of them for a single kind)."""
    kinds = _kinds(layers, alloc)
    counts = [k.group.count for k in kinds]
    if not counts:
        return 0
    if _uniform_type(kinds):
        return sum(counts)
    smallest, largest = min(counts), max(counts)
    return largest if largest < smallest * GROUP_SIZE_SLACK else smallest


def request_bytes(layers: tuple[LayerGroup, ...], alloc: Allocator, max_model_len: int) -> int:
    """Bytes one request of `max_model_len` tokens takes on one GPU."""
    kinds = _kinds(layers, alloc)
    if not kinds or max_model_len <= 0:
        return 0
    batched = alloc.max_num_batched_tokens
    if _uniform_type(kinds):
        return sum(k.group.count * k.page * k.blocks(max_model_len, batched) for k in kinds)
    size = group_size(layers, alloc)
    pages = sum(_cdiv(k.group.count, size) * k.blocks(max_model_len, batched) for k in kinds)
    return size * kinds[0].page * pages


def bytes_per_token(layers: tuple[LayerGroup, ...], alloc: Allocator) -> int:
    """KV bytes each further token of context takes on one GPU once windows are full: full
    attention and MLA layers, group padding included (windowed layers and state stop
    growing)."""
    kinds = _kinds(layers, alloc)
    size = group_size(layers, alloc)
    if _uniform_type(kinds):
        return sum(
            k.group.count * k.page // k.block for k in kinds if k.group.kind in ("full", "mla")
        )
    return sum(
        _cdiv(k.group.count, size) * size * k.page // k.block
        for k in kinds
        if k.group.kind in ("full", "mla")
    )


def pool(layers: tuple[LayerGroup, ...], alloc: Allocator) -> tuple[int, int, int]:
    """(bytes of one block of the shared pool, KV cache groups, tokens per block): vLLM cuts
    its KV memory into blocks of `group_size` pages and reports `blocks // groups x block`
    tokens as its "GPU KV cache size" (kv_cache_utils.py `get_kv_cache_config_from_groups`,
    `_report_kv_cache_config`)."""
    kinds = _kinds(layers, alloc)
    if not kinds:
        return 0, 0, 0
    block = min(k.block for k in kinds)
    if _uniform_type(kinds):
        return sum(k.group.count * k.page for k in kinds), 1, block
    size = group_size(layers, alloc)
    return size * kinds[0].page, sum(_cdiv(k.group.count, size) for k in kinds), block


def max_len(
    layers: tuple[LayerGroup, ...],
    alloc: Allocator,
    budget_bytes: float,
    limit: int,
    multiple: int,
) -> int:
    """The largest context whose one request fits `budget_bytes` on one GPU: `limit` (the
    model's own) when it fits, else the largest multiple of `multiple` below it that does;
    0 when not even `multiple` tokens fit."""
    if budget_bytes <= 0 or limit <= 0:
        return 0
    if request_bytes(layers, alloc, limit) <= budget_bytes:
        return limit
    low, high = 0, limit // multiple + 1  # low fits (0 tokens), high * multiple >= limit
    while high - low > 1:
        mid = (low + high) // 2
        if mid * multiple < limit and request_bytes(layers, alloc, mid * multiple) <= budget_bytes:
            low = mid
        else:
            high = mid
    return low * multiple
