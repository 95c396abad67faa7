"""How many requests of a context the plan's KV cache holds at once: what vLLM logs at
start-up as "Maximum concurrency for N tokens per request" (vLLM 0.17.1
v1/core/kv_cache_utils.py `get_max_concurrency_for_kv_cache_config`: the KV cache's blocks over
the blocks one request of N tokens takes, windowed layers at their window), per data parallel
rank, times the ranks of the replica (each keeps its own KV cache). Pure."""

from __future__ import annotations

from function.model import kv_cache, vllm_memory
from function.model.catalog import GIB, ModelFacts
from function.model.sizing import Plan


def max_concurrency(facts: ModelFacts, plan: Plan, tokens: int) -> float:
    """Requests of `tokens` tokens one replica holds in its KV cache at once (0.0 when none
    fits, or the plan has no KV cache)."""
    if tokens <= 0 or plan.gpus < 1 or plan.kv_cache_gib <= 0 or plan.engine is None:
        return 0.0
    batched = plan.engine.max_num_batched_tokens or tokens
    allocator = vllm_memory.allocator(facts, plan.tensor_parallel_size, plan.engine, batched)
    share = vllm_memory.stage_share(facts, plan.pipeline_parallel_size)
    per_request = kv_cache.request_bytes(facts.kv_layers, allocator, tokens) * share
    if per_request <= 0:
        return 0.0
    budget = plan.kv_cache_gib / plan.gpus * GIB  # one GPU's KV cache
    return round(budget / per_request * plan.data_parallel_size, 2)
