"""The fused-MoE workspaces vLLM 0.17.1 (the engine image's) allocates on top of the sampler's
peak in its start-up profile, per GPU. Pure functions over ModelFacts.

A fused-MoE layer's experts kernel asks for three buffers, shaped by its `workspace_shapes`
(vllm/model_executor/layers/fused_moe/modular_kernel.py): two workspaces and an output. The
modular kernel allocates them once and every MoE layer reuses them (the same buffers for the
whole forward pass), so they count once, not per layer. In bytes of the model dtype (16-bit),
for M tokens, top-k experts per token, hidden size K and one expert's width on this rank w
(the SwiGLU gate and up projections are N = 2w wide, the activation out w):

- Triton experts, the default for unquantized and FP8 MoE (fused_moe/fused_moe.py
  `TritonExperts.workspace_shapes`): (M, topk, max(w, K)) + (M, topk, max(2w, K)) + (M, K).
- MXFP4 on Hopper and Blackwell (gpt-oss): quantization/mxfp4.py `get_mxfp4_backend` takes
  the triton_kernels path on compute capability 9.0-10.x unless FlashInfer's SM90 BF16 path is
  switched on by env (VLLM_USE_FLASHINFER_MOE_MXFP4_BF16, off by default in envs.py);
  fused_moe/gpt_oss_triton_kernels_moe.py `OAITritonExperts.workspace_shapes` asks for no
  first workspace, (M x topk, w) and (M, K). Other GPUs take Marlin, modelled with the Triton
  shapes above (an estimate: fused_marlin_moe.py is not modelled separately).

M is the batch, at most VLLM_FUSED_MOE_CHUNK_SIZE tokens (envs.py, 16 x 1024; the experts run
chunk by chunk). The number of local experts does not enter any shape: expert parallelism
changes only w (each rank runs whole experts) and M (the tokens gathered from every data
parallel rank before the experts, config/parallel.py allgather_reducescatter).
"""

from __future__ import annotations

from function.limits import GPU_TYPES
from function.model.catalog import GIB, ModelFacts

# envs.py VLLM_FUSED_MOE_CHUNK_SIZE, 16 x 1024 (vLLM 0.17.1).
FUSED_MOE_CHUNK_TOKENS = 16 * 1024
DTYPE_BYTES = 2  # the activations' dtype: bfloat16 / float16
# gpt-oss checkpoints are MXFP4 (config.json quantization_config quant_method mxfp4).
MXFP4_ARCHITECTURES = frozenset({"GptOssForCausalLM"})
# Compute capabilities where mxfp4.py picks the triton_kernels backend: 9.0 up to, not
# including, 11.0 (`get_mxfp4_backend`); function/limits.yaml gives each GPU's.
TRITON_KERNELS_CAPABILITY = ((9, 0), (11, 0))


def is_moe(facts: ModelFacts) -> bool:
    return bool(facts.experts_per_token and facts.moe_intermediate_size)


def _tokens(batched_tokens: int, expert_parallel: int, data_parallel: int) -> int:
    """Tokens one rank's experts run at once."""
    if expert_parallel > 1:
        # The experts see every data parallel rank's batch, up to a chunk (but at least one
        # rank's own batch).
        return min(batched_tokens * data_parallel, max(batched_tokens, FUSED_MOE_CHUNK_TOKENS))
    return min(batched_tokens, FUSED_MOE_CHUNK_TOKENS)


def _width(facts: ModelFacts, tensor_parallel: int, expert_parallel: int) -> int:
    """One expert's intermediate width on a rank: whole experts with expert parallelism, else
    the tensor parallel shard."""
    if expert_parallel > 1:
        return facts.moe_intermediate_size
    return facts.moe_intermediate_size // max(1, tensor_parallel)


def triton_kernels_path(facts: ModelFacts, gpu_type: str | None) -> bool:
    """Whether vLLM 0.17.1 runs the model's experts with OpenAI's triton_kernels (MXFP4 on
    Hopper/Blackwell, see the module docstring)."""
    gpu = GPU_TYPES.get(gpu_type or "")
    low, high = TRITON_KERNELS_CAPABILITY
    return (
        facts.architecture in MXFP4_ARCHITECTURES
        and gpu is not None
        and low <= gpu.compute_capability < high
    )


def workspace_elements(
    facts: ModelFacts,
    tensor_parallel: int,
    batched_tokens: int,
    expert_parallel: int = 1,
    data_parallel: int = 1,
    gpu_type: str | None = None,
) -> int:
    """Elements of the fused-MoE workspaces and output on one GPU (0 for a dense model)."""
    if not is_moe(facts):
        return 0
    m = _tokens(batched_tokens, expert_parallel, data_parallel)
    topk, k = facts.experts_per_token, facts.hidden_size
    w = _width(facts, tensor_parallel, expert_parallel)
    if triton_kernels_path(facts, gpu_type):
        return m * topk * w + m * k
    return m * topk * (max(w, k) + max(2 * w, k)) + m * k


def workspace_gib(
    facts: ModelFacts,
    tensor_parallel: int,
    batched_tokens: int,
    expert_parallel: int = 1,
    data_parallel: int = 1,
    gpu_type: str | None = None,
) -> float:
    """GiB of fused-MoE workspaces on one GPU, counted once for all MoE layers."""
    elements = workspace_elements(
        facts, tensor_parallel, batched_tokens, expert_parallel, data_parallel, gpu_type
    )
    return elements * DTYPE_BYTES / GIB
