"""The memory model held to vLLM's own figures: the KV cache layout (function/model/kv_cache.py)
against the blocks and tokens vLLM reported for the same models, and the non-KV memory
(function/model/vllm_memory.py) against the activation peak and non-torch memory it profiled.

The runs are vLLM 0.19.0 on H100 (testdata/vllm/runs-0.19.0-h100.yaml, each with its log).
The engine image carries vLLM 0.17.1 (kcl/versions.k); the allocator arithmetic is the same
in both (vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py). One switch differs:
0.19.0 keeps the hybrid KV cache manager on for chunked local attention (Llama 4), 0.17.1
turns it off (vllm/config/vllm.py), so those runs are replayed with it on.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from conftest import parse_yaml

from function.limits import GpuShape
from function.model import catalog_lookup, kv_cache, vllm_memory
from function.model.catalog import GIB
from function.model.kv_cache import Allocator, LayerGroup

ROOT = Path(__file__).resolve().parents[2]
RUNS = parse_yaml((Path(__file__).parent / "testdata/vllm/runs-0.19.0-h100.yaml").read_text())
H100_019 = GpuShape(memory_gib=79.19, per_node=8, type="h100", assumed=False)

# DeepSeek-V2-Lite (MLA) is not in the catalog; its KV shape, from the file the data cites.
# vLLM 0.19.0 picked an MLA backend with 16-token blocks on these runs (tokens / blocks = 16).
OTHERS = {
    "deepseek-ai/DeepSeek-V2-Lite-Chat": (
        (LayerGroup("mla", 27, kv_heads=1, latent_dim=512 + 64),),
        16,
    ),
}


def _layout(model: str) -> tuple[tuple[LayerGroup, ...], int | None]:
    if model in OTHERS:
        return OTHERS[model]
    facts = catalog_lookup.lookup(model)
    assert facts is not None, f"{model} left the catalog: drop its runs or keep the model"
    return facts.kv_layers, None


@pytest.mark.parametrize(
    "run", RUNS, ids=[f"{r['model']}-tp{r['tp']}-kv{r['kv_cache_dtype']}" for r in RUNS]
)
def test_kv_cache_pool_is_vllms(run: dict) -> None:
    """vLLM cut its KV memory into blocks of our pool block's size, and reported the tokens
    our groups give: page size per layer kind, heads per GPU, MLA's latent, sliding windows
    and the hybrid manager's groups all agree with vLLM's arithmetic."""
    layers, block = _layout(run["model"])
    alloc = Allocator(
        tensor_parallel=run["tp"],
        dtype_bytes=1 if run["kv_cache_dtype"] == "fp8" else 2,
        max_num_batched_tokens=8192,
        hybrid=True,
        block_size=block,
    )
    pool_bytes, groups, tokens_per_block = kv_cache.pool(layers, alloc)
    kv_bytes = run["kv_cache_gib"] * GIB
    # vLLM rounds the memory it logs to 0.01 GiB and floors the blocks.
    assert abs(run["blocks"] * pool_bytes - kv_bytes) <= 0.005 * GIB + pool_bytes, (
        run["blocks"],
        kv_bytes / pool_bytes,
    )
    assert run["tokens"] == run["blocks"] // groups * tokens_per_block


CATALOG_RUNS = [r for r in RUNS if r["model"] not in OTHERS]


@pytest.mark.parametrize(
    "run",
    CATALOG_RUNS,
    ids=[f"{r['model']}-tp{r['tp']}-kv{r['kv_cache_dtype']}" for r in CATALOG_RUNS],
)
def test_non_kv_memory_covers_what_vllm_profiled(run: dict) -> None:
    """Weights, activation peak and non-torch memory per GPU are at least what vLLM
    measured, and not far above it (the estimate costs KV cache, not correctness)."""
    facts = catalog_lookup.lookup(run["model"])
    assert facts is not None
    engine = vllm_memory.EngineSettings(gpu_memory_utilization=run["gpu_memory_utilization"])
    memory = vllm_memory.gpu_memory(facts, run["tp"], H100_019, engine, run["max_model_len"])
    assert memory.batched == 8192 and memory.seqs == 1024  # vLLM's H100 defaults
    # Weights: the checkpoint (or the measured load) within 1 %.
    assert memory.weights == pytest.approx(run["weights_gib"], rel=0.012)
    # gpt-oss's MoE kernels keep no workspace beside the sampler's peak, so it is the one
    # model the estimate exceeds by more than 0.5 GiB (0.73).
    assert run["activation_gib"] <= memory.activation + 0.01 <= run["activation_gib"] + 0.8
    assert run["non_torch_gib"] <= memory.non_torch <= run["non_torch_gib"] + 0.25
    # So the KV budget is vLLM's, less at most what the estimates add.
    assert memory.kv_budget <= run["kv_cache_gib"] + 0.02
    assert memory.kv_budget >= run["kv_cache_gib"] - 1.0


def test_the_model_follows_the_pinned_vllm() -> None:
    """function/model/kv_cache.py names the vLLM release kcl/versions.k says the image carries."""
    versions = (ROOT / "kcl" / "versions.k").read_text()
    pinned = re.search(r'^vllm_version = "([^"]+)"', versions, re.M)
    assert pinned and pinned.group(1) == kv_cache.VLLM_VERSION


def test_llama4_runs_without_the_hybrid_manager_in_the_pinned_vllm() -> None:
    """vLLM 0.17.1 keeps full-length KV on Llama 4's chunked layers: a request of 100K
    tokens takes 48 layers' worth, not 12."""
    facts = catalog_lookup.lookup("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert facts is not None and facts.hybrid_kv is False
    alloc = Allocator(tensor_parallel=4, hybrid=facts.hybrid_kv)
    per_layer = 2 * 128 * 2 * 2  # 2 KV heads on a GPU of 4, K and V, 16-bit
    assert kv_cache.bytes_per_token(facts.kv_layers, alloc) == 48 * per_layer
    hybrid = dataclasses.replace(alloc, hybrid=True)
    assert kv_cache.bytes_per_token(facts.kv_layers, hybrid) == 12 * per_layer
