"""The GPU memory vLLM 0.17.1 preallocates for LoRA adapters, per GPU.

With --enable-lora, vLLM wraps every LoRA-capable layer of the language model when it loads
the model, whatever modules the adapters target: `LoRAModelManager._create_lora_modules`
(vllm/lora/model_manager.py) matches each module against `get_supported_lora_modules`
(vllm/lora/utils.py: every LinearBase, plus the model's `embedding_modules`), not against
the adapters' target_modules. Each wrapped layer allocates, at load time (so vLLM's memory
profile counts it as model memory and the KV cache gets that much less), `max_loras` slots of
`max_lora_rank` in the LoRA dtype (the model's, `lora_dtype: auto`, vllm/config/lora.py):

- linear layers (vllm/lora/layers/base_linear.py `create_lora_weights`, per slice of a merged
  layer): A `max_loras x rank x input_size` and B `max_loras x output_size x rank`, where a
  column-parallel layer (qkv_proj: 3 slices, gate_up_proj: 2) keeps its full input and
  1/TP of each output, and a row-parallel one (o_proj, down_proj) 1/TP of its input and its
  full output (vllm/lora/layers/row_parallel_linear.py);
- the LM head (vllm/lora/layers/logits_processor.py) A `rank x hidden`, B `vocab x rank`; the
  input embedding (vllm/lora/layers/vocal_parallel_embedding.py) A `vocab x rank`, B
  `hidden x rank`: counted always, an upper bound for models that declare no
  embedding_modules.

Per layer and slot that is `rank x (7 x hidden + (2 x q + 2 x kv + 3 x intermediate) / TP)`
elements, q = heads x head_dim, kv = kv_heads x head_dim (at least one head per GPU). The
dummy adapters of vLLM's profile run (vllm/v1/worker/lora_model_runner_mixin.py
`maybe_setup_dummy_loras`) are copied into these same buffers and add nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.model.catalog import GIB, ModelFacts

LORA_DTYPE_BYTES = 2  # the model's 16-bit dtype (lora_dtype auto)


@dataclass(frozen=True)
class LoraShape:
    """--max-loras and --max-lora-rank: the slots vLLM preallocates."""

    max_loras: int
    max_rank: int


def elements_per_slot_rank(facts: ModelFacts, tp: int, layer_share: float = 1.0) -> float:
    """Buffer elements one slot of rank 1 takes on one GPU of `tp` (its pipeline stage's
    `layer_share` of the layers; the embeddings counted whole)."""
    hidden = facts.hidden_size or facts.attention_heads * facts.head_dim
    q = facts.attention_heads * facts.head_dim
    kv = max(facts.kv_heads * facts.head_dim / tp, facts.head_dim)
    inter = facts.intermediate_size or _intermediate_from_params(facts, hidden, q)
    per_layer = 7 * hidden + (2 * q + 3 * inter) / tp + 2 * kv
    embeddings = 2 * (hidden + facts.vocab_size)
    return facts.layers * layer_share * per_layer + embeddings


def _intermediate_from_params(facts: ModelFacts, hidden: int, q: int) -> float:
    """The MLP width of a dense model whose config the catalog did not record: what its
    parameters leave per layer after attention (q, k, v, o), over gate, up and down
    (3 x hidden each), counting the embeddings once (tied), so the width comes out high
    rather than low. 4 x hidden when the parameters are not known."""
    if not facts.total_params_b or not facts.layers or not hidden:
        return 4 * hidden
    per_layer = (facts.total_params_b * 1e9 - facts.vocab_size * hidden) / facts.layers
    attention = hidden * (2 * q + 2 * facts.kv_heads * facts.head_dim)
    return max(per_layer - attention, 0.0) / (3 * hidden) or 4 * hidden


def buffer_gib(
    facts: ModelFacts, tp: int, shape: LoraShape | None, layer_share: float = 1.0
) -> float:
    """GiB of LoRA buffers on one GPU (0 without adapters)."""
    if shape is None:
        return 0.0
    elements = elements_per_slot_rank(facts, tp, layer_share) * shape.max_rank * shape.max_loras
    return elements * LORA_DTYPE_BYTES / GIB
