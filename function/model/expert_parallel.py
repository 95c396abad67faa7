"""Expert parallelism for a mixture of experts: which GPUs hold which weights, per rank, as
vLLM 0.17.1 lays them out, and when the function chooses it. Pure functions.

vLLM 0.17.1, the engine image's:
- With `--enable-expert-parallel` the experts are split over EP = TP x DP ranks
  (model_executor/layers/fused_moe/config.py `FusedMoEParallelConfig.make`: ep_size =
  dp_size x tp_size, and each expert's weights are then whole on one rank, not split by TP);
  rank r holds `E // EP` experts, one more on the first `E % EP` ranks
  (fused_moe/layer.py `determine_expert_map`, linear placement: the default
  `expert_placement_strategy`).
- Everything else (attention, embeddings and LM head, dense layers, shared experts, the
  router's gate) is split by TP and replicated on every DP rank: data parallel ranks are
  whole engine cores (v1/engine/core.py DPEngineCoreProc), each with its own scheduler and its
  own KV cache, behind one API server (the internal load balancer).
- Without expert parallelism a FusedMoE layer splits every expert's intermediate dimension
  over the TP ranks (ep_size 1): the experts' weights divide by TP like the rest.

When the function uses it (`spec.parameters.parallelism.expert` absent) follows vLLM's own
guidance. Its expert-parallel deployment guide (docs/serving/expert_parallel_deployment.md)
serves a mixture of experts larger than a node as data parallel + expert parallel ranks
across the nodes ("DP + EP"), not as pipeline stages, with data parallel attention (TP 1,
one rank per GPU) for MLA models (DeepSeek-V3, Kimi-K2). MLA keeps one latent KV per token
that tensor parallelism copies onto every GPU, so there data parallel attention multiplies the
KV cache by the GPUs; attention with KV heads keeps tensor parallelism inside each node. On
one node the models' own recipes serve them tensor parallel (DeepSeek-V3 and Kimi-K2.5
`-tp 8`, Qwen3 MoE `--tensor-parallel-size`), with DP + EP as the throughput alternative
(DeepSeek-V3 recipe `-dp 8 --enable-expert-parallel`): the claim asks for that with
`parallelism.expert: true`. Hence:

| claim | model | replica | split |
|---|---|---|---|
| absent | MoE | over nodes | EP; MLA: TP 1, DP = GPUs; KV heads: TP = GPUs per node, DP = nodes |
| absent | otherwise | | TP inside a node, PP across nodes (no EP) |
| `true` | MoE | > 1 GPU | EP; MLA: TP 1, DP = GPUs; KV heads: TP = GPUs of a node, DP = nodes |
| `true` | dense, or one GPU | | refused |
| `false` | any | | TP inside a node, PP across nodes |

Data parallel attention holds a full copy of the replicated part on every GPU; when that
does not fit, the ranks use tensor parallelism inside the node instead (TP = GPUs per node,
DP = nodes), still with EP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from function.model.catalog import GIB, ModelFacts


@dataclass(frozen=True)
class Split:
    """How one replica's GPUs split the model: tensor x pipeline x data parallel ranks over
    `nodes` nodes, and whether the experts are split over the TP x DP ranks."""

    tensor: int
    pipeline: int = 1
    data: int = 1
    expert: bool = False
    nodes: int = 1

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline * self.data

    @property
    def expert_size(self) -> int:
        return self.tensor * self.data if self.expert else 1


def moe(facts: ModelFacts) -> bool:
    """A mixture of experts whose routed experts the facts size."""
    return facts.num_experts > 1 and facts.expert_weights_gib > 0


def mla(facts: ModelFacts) -> bool:
    return any(g.kind == "mla" for g in facts.kv_layers)


def routed_expert_gib(
    num_experts: int, moe_layers: int, hidden: int, moe_intermediate: int, bytes_per_param: float
) -> float:
    """The routed experts' weights, whole model: per MoE layer E experts of gate, up and down
    projections (FusedMoE w13 [E, 2 x I, H] and w2 [E, H, I])."""
    params = moe_layers * num_experts * 3 * hidden * moe_intermediate
    return params * bytes_per_param / GIB


def local_experts(num_experts: int, expert_size: int) -> int:
    """Experts on the rank that holds the most (determine_expert_map: the first E % EP ranks
    hold one more)."""
    return math.ceil(num_experts / max(1, expert_size))


def weights_per_gpu(facts: ModelFacts, split: Split, stage_share: float = 1.0) -> float:
    """GiB of weights on the GPU that holds the most: the replicated part split by TP, and the
    experts split by EP (with EP) or by TP (without)."""
    total = facts.weights_gib * stage_share
    if not split.expert or not moe(facts):
        return total / split.tensor
    experts = min(facts.expert_weights_gib * stage_share, total)
    share = local_experts(facts.num_experts, split.expert_size) / facts.num_experts
    return (total - experts) / split.tensor + experts * share


def uses_expert_parallel(facts: ModelFacts, expert: bool | None, gpus: int, nodes: int) -> bool:
    """Whether a replica of `gpus` GPUs over `nodes` nodes splits the experts (the rule in
    the module's docstring); `expert` is the claim's parallelism.expert."""
    if expert is False or not moe(facts) or gpus < 2:
        return False
    return expert is True or nodes > 1


def split_for(
    facts: ModelFacts,
    gpus: int,
    nodes: int,
    per_node: int,
    expert: bool | None,
    dp_attention: bool = True,
) -> Split:
    """The split of `gpus` GPUs (whole nodes of `per_node` above one node) the rule gives;
    `dp_attention` False: tensor parallel inside each node (the fallback when the replicated
    part does not fit one GPU)."""
    if not uses_expert_parallel(facts, expert, gpus, nodes):
        return Split(tensor=gpus // nodes, pipeline=nodes, nodes=nodes)
    if mla(facts) and dp_attention:
        return Split(tensor=1, data=gpus, expert=True, nodes=nodes)
    return Split(tensor=gpus // nodes, data=nodes, expert=True, nodes=nodes)
