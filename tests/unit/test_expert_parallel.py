"""Expert parallelism in the plan: the split the function chooses for a mixture of experts
(function/model/expert_parallel.py's rule), the weights one GPU holds under it checked against
vLLM 0.17.1's own layout of the model, parameter tensor by parameter tensor, and the KV
cache of data parallel ranks. The engines' command lines are in
test_expert_parallel_engines.py."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from function.limits import GPU_TYPES, GpuShape
from function.model import expert_parallel, sizing
from function.model.catalog import GIB
from function.model.catalog_lookup import lookup

H200 = GpuShape(GPU_TYPES["h200"].memory_gib, 8, "h200", False)
H100 = GpuShape(GPU_TYPES["h100"].memory_gib, 8, "h100", False)
L4 = GpuShape(GPU_TYPES["l4"].memory_gib, 4, "l4", False)

# --------------------------------------------------------------------------- vLLM's layout
#
# The weights one rank of vLLM 0.17.1 holds, written out from its model classes, with the
# shapes from each model's config.json. Linear layers: ColumnParallel/RowParallel split the
# output/input dimension by TP, ReplicatedLinear is whole on every rank; embeddings and the LM
# head are vocab-parallel (split by TP); FusedMoE holds w13 [E_local, 2 x I, H] and
# w2 [E_local, H, I] with E_local = ceil(E / EP) on the first ranks (fused_moe/layer.py
# determine_expert_map), or, without EP, every expert with I / TP. FP8 block-quantized
# checkpoints (DeepSeek-V3, Kimi-K2: weight_block_size [128, 128]) add a float32 scale per
# 128 x 128 block of every quantized linear and expert (Fp8LinearMethod / Fp8MoEMethod
# `weight_scale_inv`); embeddings, the LM head, norms and the router gate stay 16-bit.


@dataclass(frozen=True)
class Shape:
    vocab: int
    hidden: int
    layers: int
    dense_layers: int  # leading dense layers (first_k_dense_replace)
    experts: int
    moe_width: int
    dense_width: int  # intermediate_size of the dense layers (and of the shared expert x n)
    shared_experts: int
    fp8_blocks: bool


class Rank:
    """Bytes of one rank, tensor by tensor."""

    def __init__(self, fp8_blocks: bool) -> None:
        self.bytes = 0.0
        self.fp8 = fp8_blocks

    def bf16(self, *dims: int) -> None:
        self.bytes += 2 * math.prod(dims)

    def linear(self, out: int, inp: int, experts: int = 1) -> None:
        """A quantized linear (or `experts` of them): 1 byte per weight with FP8 blocks and a
        float32 scale per 128 x 128 block, else 16-bit."""
        if self.fp8:
            self.bytes += experts * (out * inp + 4 * math.ceil(out / 128) * math.ceil(inp / 128))
        else:
            self.bytes += experts * 2 * out * inp


def mla_moe_rank(
    s: Shape,
    heads: int,
    q_lora: int,
    kv_lora: int,
    rope: int,
    nope: int,
    v_head: int,
    tp: int,
    ep: int,
) -> float:
    """DeepseekV2/V3ForCausalLM (model_executor/models/deepseek_v2.py): MLA attention
    (q_a_proj and kv_a_proj_with_mqa replicated, q_b_proj and kv_b_proj column-parallel,
    o_proj row-parallel), dense MLP layers, then MoE layers of a replicated router gate,
    the shared experts (a tensor-parallel MLP) and FusedMoE experts. GiB."""
    r = Rank(s.fp8_blocks)
    r.bf16(s.vocab // tp, s.hidden)  # embed_tokens
    r.bf16(s.vocab // tp, s.hidden)  # lm_head
    r.bf16(s.hidden)  # final norm
    h = heads // tp
    for layer in range(s.layers):
        r.bf16(2, s.hidden)  # input / post-attention norms
        r.linear(q_lora, s.hidden)  # q_a_proj (replicated)
        r.bf16(q_lora)  # q_a_layernorm
        r.linear(h * (nope + rope), q_lora)  # q_b_proj
        r.linear(kv_lora + rope, s.hidden)  # kv_a_proj_with_mqa (replicated)
        r.bf16(kv_lora)  # kv_a_layernorm
        r.linear(h * (nope + v_head), kv_lora)  # kv_b_proj
        r.linear(s.hidden, h * v_head)  # o_proj
        if layer < s.dense_layers:
            r.linear(2 * s.dense_width // tp, s.hidden)  # gate_up_proj
            r.linear(s.hidden, s.dense_width // tp)  # down_proj
            continue
        r.bf16(s.experts, s.hidden)  # gate (router, not quantized)
        r.bytes += 4 * s.experts  # e_score_correction_bias, float32
        shared = s.shared_experts * s.moe_width // tp
        r.linear(2 * shared, s.hidden)
        r.linear(s.hidden, shared)
        _experts(r, s, tp, ep)
    return r.bytes / GIB


def gqa_moe_rank(
    s: Shape, heads: int, kv_heads: int, head_dim: int, tp: int, ep: int, qk_norm: bool
) -> float:
    """Qwen3MoeForCausalLM (qwen3_moe.py) and MixtralForCausalLM (mixtral.py): QKVParallelLinear
    (KV heads replicated when TP exceeds them: max(1, kv_heads / TP) per rank), o_proj
    row-parallel, a replicated router gate, FusedMoE experts, 16-bit. GiB."""
    r = Rank(s.fp8_blocks)
    r.bf16(s.vocab // tp, s.hidden)  # embed_tokens
    r.bf16(s.vocab // tp, s.hidden)  # lm_head (not tied)
    r.bf16(s.hidden)
    h, kv = heads // tp, max(1, kv_heads // tp)
    for _ in range(s.layers):
        r.bf16(2, s.hidden)
        r.linear((h + 2 * kv) * head_dim, s.hidden)  # qkv_proj
        r.linear(s.hidden, h * head_dim)  # o_proj
        if qk_norm:
            r.bf16(2, head_dim)  # q_norm, k_norm
        r.bf16(s.experts, s.hidden)  # gate
        _experts(r, s, tp, ep)
    return r.bytes / GIB


def _experts(r: Rank, s: Shape, tp: int, ep: int) -> None:
    if ep > 1:
        local, width = math.ceil(s.experts / ep), s.moe_width
    else:
        local, width = s.experts, s.moe_width // tp
    r.linear(2 * width, s.hidden, local)  # w13
    r.linear(s.hidden, width, local)  # w2


# config.json of each model (Hugging Face): the shapes above.
DEEPSEEK_V3 = Shape(129280, 7168, 61, 3, 256, 2048, 18432, 1, True)
KIMI_K2 = Shape(163840, 7168, 61, 1, 384, 2048, 18432, 1, True)
QWEN3_235B = Shape(151936, 4096, 94, 0, 128, 1536, 0, 0, False)
MIXTRAL_8X22B = Shape(32768, 6144, 56, 0, 8, 16384, 0, 0, False)

# (name, model, claim's gpu, nodes, GPU, vLLM's bytes on one rank (GiB), expected split
# (tp, pp, dp, ep), tolerance and why)
PER_RANK = [
    (
        "DeepSeek-V3 on 2 x 8 H200, DP16 EP16",
        "deepseek-ai/DeepSeek-V3",
        16,
        2,
        H200,
        mla_moe_rank(DEEPSEEK_V3, 128, 1536, 512, 64, 128, 128, tp=1, ep=16),
        (1, 1, 16, 16),
        # the catalog's loaded size is the checkpoint less the MTP module, block scales in
        0.02,
    ),
    (
        "DeepSeek-V3 on 8 H200, DP8 EP8",
        "deepseek-ai/DeepSeek-V3",
        8,
        1,
        H200,
        mla_moe_rank(DEEPSEEK_V3, 128, 1536, 512, 64, 128, 128, tp=1, ep=8),
        (1, 1, 8, 8),
        0.02,
    ),
    (
        "Kimi-K2 on 2 x 8 H200, DP16 EP16",
        "moonshotai/Kimi-K2-Instruct",
        16,
        2,
        H200,
        mla_moe_rank(KIMI_K2, 64, 1536, 512, 64, 128, 128, tp=1, ep=16),
        (1, 1, 16, 16),
        0.02,
    ),
    (
        "Qwen3-235B-A22B on 8 H200, TP8 EP8",
        "Qwen/Qwen3-235B-A22B",
        8,
        1,
        H200,
        gqa_moe_rank(QWEN3_235B, 64, 4, 128, tp=8, ep=8, qk_norm=True),
        (8, 1, 1, 8),
        # 4 KV heads on 8 ranks: vLLM replicates one per rank, which the whole-model
        # weights / TP do not count (0.5 %)
        0.02,
    ),
    (
        "Mixtral-8x22B on 8 H100, TP8 EP8 (one expert per rank)",
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        8,
        1,
        H100,
        gqa_moe_rank(MIXTRAL_8X22B, 48, 8, 128, tp=8, ep=8, qk_norm=False),
        (8, 1, 1, 8),
        # the catalog's 141.0B parameters against the config's 140.6B
        0.02,
    ),
]


@pytest.mark.parametrize(
    ("model", "gpus", "nodes", "gpu", "vllm_gib", "split", "tolerance"),
    [c[1:] for c in PER_RANK],
    ids=[c[0] for c in PER_RANK],
)
def test_one_rank_holds_what_vllm_loads_on_it(
    model: str,
    gpus: int,
    nodes: int,
    gpu: GpuShape,
    vllm_gib: float,
    split: tuple[int, int, int, int],
    tolerance: float,
) -> None:
    plan = sizing.plan(lookup(model), gpus, gpu, None, nodes, expert=True)
    got = (
        plan.tensor_parallel_size,
        plan.pipeline_parallel_size,
        plan.data_parallel_size,
        plan.expert_parallel_size,
    )
    assert got == split
    assert plan.weights_per_gpu_gib == pytest.approx(vllm_gib, rel=tolerance)
    # and far from what splitting the whole model over the GPUs would say
    if plan.data_parallel_size > 1:
        assert plan.weights_per_gpu_gib > 1.1 * plan.weights_gib / plan.gpus


def test_without_expert_parallelism_every_expert_is_split_by_tensor_parallelism() -> None:
    """vLLM's FusedMoE without EP: each expert's width over the TP ranks; the same bytes as
    the whole model over the GPUs (Qwen3-235B-A22B, 8 x H200)."""
    plan = sizing.plan(lookup("Qwen/Qwen3-235B-A22B"), 8, H200, None, 1, expert=False)
    assert (plan.tensor_parallel_size, plan.expert_parallel_size) == (8, 1)
    vllm = gqa_moe_rank(QWEN3_235B, 64, 4, 128, tp=8, ep=1, qk_norm=True)
    assert plan.weights_per_gpu_gib == pytest.approx(vllm, rel=0.02)


@pytest.mark.parametrize(
    ("experts", "ep", "local"),
    [(256, 16, 16), (384, 16, 24), (8, 8, 1), (8, 16, 1), (160, 12, 14), (128, 3, 43)],
)
def test_the_rank_with_the_most_experts(experts: int, ep: int, local: int) -> None:
    """determine_expert_map: E // EP each, one more on the first E % EP ranks."""
    assert expert_parallel.local_experts(experts, ep) == local


# --------------------------------------------------------------------------- the rule

# (name, model, claim's gpu, nodes a replica may span, parallelism.expert, GPU) ->
# (tp, pp, dp, ep, nodes)
RULE = [
    (
        "dense model, two nodes: TP + PP",
        "meta-llama/Llama-3.1-405B-Instruct",
        None,
        4,
        None,
        H100,
        (8, 2, 1, 1, 2),
    ),
    (
        "MLA MoE on one node: TP as its recipe",
        "deepseek-ai/DeepSeek-V3",
        None,
        1,
        None,
        H200,
        (8, 1, 1, 1, 1),
    ),
    (
        "MLA MoE on one node, asked: DP attention + EP",
        "deepseek-ai/DeepSeek-V3",
        None,
        1,
        True,
        H200,
        (1, 1, 8, 8, 1),
    ),
    (
        "MLA MoE over nodes: DP + EP",
        "moonshotai/Kimi-K2-Instruct",
        None,
        2,
        None,
        H200,
        (1, 1, 16, 16, 2),
    ),
    (
        "MLA MoE over nodes, refused EP: TP + PP",
        "moonshotai/Kimi-K2-Instruct",
        None,
        2,
        False,
        H200,
        (8, 2, 1, 1, 2),
    ),
    ("GQA MoE on one node, asked: TP + EP", "Qwen/Qwen3-30B-A3B", 4, 1, True, L4, (4, 1, 1, 4, 1)),
    ("GQA MoE on one node: TP", "Qwen/Qwen3-30B-A3B", 4, 1, None, L4, (4, 1, 1, 1, 1)),
    (
        "GQA MoE over nodes: TP per node, DP across, EP",
        "Qwen/Qwen3-235B-A22B",
        16,
        2,
        None,
        H100,
        (8, 1, 2, 16, 2),
    ),
    (
        "MoE that one GPU holds, asked: the smallest split",
        "Qwen/Qwen3-30B-A3B",
        None,
        1,
        True,
        H200,
        (2, 1, 1, 2, 1),
    ),
    (
        "MoE on one GPU, not asked: no split",
        "Qwen/Qwen3-30B-A3B",
        None,
        1,
        None,
        H200,
        (1, 1, 1, 1, 1),
    ),
]


@pytest.mark.parametrize(
    ("model", "gpus", "span", "expert", "gpu", "expected"),
    [c[1:] for c in RULE],
    ids=[c[0] for c in RULE],
)
def test_the_rule(model, gpus, span, expert, gpu, expected) -> None:
    plan = sizing.plan(lookup(model), gpus, gpu, None, span, expert=expert)
    got = (
        plan.tensor_parallel_size,
        plan.pipeline_parallel_size,
        plan.data_parallel_size,
        plan.expert_parallel_size,
        plan.nodes,
    )
    assert got == expected
    assert plan.fits
    assert plan.expert_parallel is (expected[3] > 1)
    assert plan.gpus == expected[0] * expected[1] * expected[2]


# (name, model, claim's gpu, GPU) -> the refusal's words
REFUSED = [
    ("a dense model", "Qwen/Qwen2.5-7B-Instruct", 2, H100, "is a dense model (no routed experts"),
    ("one GPU", "Qwen/Qwen3-30B-A3B", 1, H200, "one GPU (spec.parameters.gpu: 1) has nothing"),
]


@pytest.mark.parametrize(
    ("model", "gpus", "gpu", "says"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED]
)
def test_asking_for_expert_parallelism_where_there_is_nothing_to_split(
    model, gpus, gpu, says
) -> None:
    with pytest.raises(sizing.SizingError) as e:
        sizing.plan(lookup(model), gpus, gpu, None, 1, expert=True)
    assert e.value.field == "spec.parameters.parallelism.expert"
    assert says in e.value.message
    assert e.value.message.startswith("spec.parameters.parallelism.expert: ")


def test_data_parallel_ranks_each_keep_their_own_kv_cache() -> None:
    """MLA has one latent per token: tensor parallelism keeps a copy on every GPU, data
    parallel attention a different request's on each. DeepSeek-V3 on 8 H200: the replica
    holds more tokens in all with DP8 + EP8, while one request's context is what one rank's
    KV cache holds."""
    facts = lookup("deepseek-ai/DeepSeek-V3")
    tp = sizing.plan(facts, 8, H200, None, 1, expert=False)
    dp = sizing.plan(facts, 8, H200, None, 1, expert=True)
    per_token = tp.kv_bytes_per_token
    assert per_token == dp.kv_bytes_per_token == 70272, "the whole latent on every GPU"
    tokens_tp = tp.kv_cache_gib / tp.gpus * GIB / per_token  # one copy, on each GPU
    tokens_dp = dp.kv_cache_gib * GIB / per_token  # every rank its own
    assert tokens_dp > 3 * tokens_tp
    one_rank = dp.kv_cache_gib / dp.gpus * GIB / per_token
    assert dp.max_model_len <= one_rank


def test_status_shows_the_split() -> None:
    from function.status import topology

    plan = sizing.plan(lookup("deepseek-ai/DeepSeek-V3"), 16, H200, None, 2, expert=True)
    assert topology(plan) == (
        "2 nodes x 8 h200: data parallel 16 (8 per node) of tensor parallel 1, experts split "
        "over 16 ranks (expert parallel)"
    )
    dense = sizing.plan(lookup("meta-llama/Llama-3.1-405B-Instruct"), None, H100, None, 4)
    assert topology(dense) == (
        "2 nodes x 8 h100: tensor parallel 8 inside each node, pipeline parallel 2 across nodes"
    )


# (name, config.json keys, layers) -> layers with routed experts
MOE_LAYERS = [
    ("DeepSeek-V3: three dense layers first", {"first_k_dense_replace": 3}, 61, 58),
    ("Kimi-K2: one dense layer first", {"first_k_dense_replace": 1, "moe_layer_freq": 1}, 61, 60),
    ("GLM-4.5", {"first_k_dense_replace": 3}, 92, 89),
    ("every other layer after the first", {"first_k_dense_replace": 1, "moe_layer_freq": 2}, 9, 4),
    ("Qwen3 MoE: every layer", {"decoder_sparse_step": 1, "mlp_only_layers": []}, 94, 94),
    ("Qwen MoE with dense layers", {"decoder_sparse_step": 1, "mlp_only_layers": [0, 1]}, 48, 46),
    ("Qwen MoE, every second layer", {"decoder_sparse_step": 2}, 24, 12),
    ("Llama-4 Maverick: interleaved", {"interleave_moe_layer_step": 2}, 48, 24),
    ("Mixtral: every layer", {}, 56, 56),
]


@pytest.mark.parametrize(
    ("config", "layers", "expected"),
    [c[1:] for c in MOE_LAYERS],
    ids=[c[0] for c in MOE_LAYERS],
)
def test_which_layers_hold_experts(config: dict, layers: int, expected: int) -> None:
    from function.model.model_config import moe_layers

    assert moe_layers(config, layers) == expected
