"""How close the function's sizing is to what vLLM does, over every recorded model (the Hub's
answers rebuilt in tests/contract/testdata/hub, 46 public model ids).

  ./task sizing-accuracy            # the table and the three targets
  python benchmarks/sizing_accuracy.py --csv

For each model the function's facts are what it uses in a cluster: the catalog's when the
catalog lists the id, else what it reads from the model's config.json and safetensors
metadata (served here by the recorded Hub). Three measures, each against a figure the
function does not compute itself:

- weights: the function's checkpoint size against the checkpoint's real size (the recorded
  weight files, else the safetensors metadata: parameters x bytes of each dtype). Target:
  within +-5 % for every id. The name-only estimate (what the function falls back to when
  the Hub cannot be asked) is printed beside it, for comparison, with no target.
- KV bytes per token: function/model/kv_cache.py against a second implementation written the way
  vLLM 0.17.1 writes it, layer by layer (a KVCacheSpec per layer name from the config's own
  layer types, grouped as `_get_kv_cache_groups_uniform_page_size` groups them, one request
  priced as `get_max_concurrency_for_kv_cache_config` prices it). Target: exact for every
  architecture the catalog claims (full, sliding-window and chunked attention, MLA); mamba
  and linear-attention state is shown as measured, no target.
- refused plans: for every model and GPU (L4, A100 40 GB, H100, H200; 8 to a node) the
  function plans for, vLLM's start-up is replayed with vLLM's own measured figures instead
  of the function's estimates (15.5 bytes per sampler logit, 0.25 / 2.1 GiB non-torch,
  the real checkpoint): it refuses when its check (`_max_memory_usage_bytes_from_groups`)
  exceeds the KV memory, and a request of max_model_len cannot run when one request's
  blocks do not fit. Target: zero of either.
"""

from __future__ import annotations

import argparse
import csv
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import hub_server  # noqa: E402

from function.limits import GPU_TYPES, GpuShape  # noqa: E402
from function.model import (  # noqa: E402
    catalog,
    catalog_lookup,
    kv_cache,
    model_config,
    moe_memory,
    name_estimate,
    sizing,
)
from function.model.catalog import GIB  # noqa: E402
from function.model.model_config import SAFETENSORS_BYTES  # noqa: E402

GPUS = ("l4", "a100-40gb", "h100", "h200")
WEIGHTS_TARGET = 0.05
# vLLM's own figures (tests/contract/testdata/vllm: vLLM 0.19.0's start-up logs on H100).
VLLM_SAMPLER_BYTES_PER_LOGIT = 15.5
VLLM_NON_TORCH_GIB = {True: 0.25, False: 2.1}  # one GPU / tensor parallel


# --------------------------------------------------------------------------- vLLM, layer by layer


@dataclass(frozen=True)
class Spec:
    """One layer's KVCacheSpec (vllm/v1/kv_cache_interface.py)."""

    kind: str  # full | sliding | chunked | mla | mamba
    page: int  # bytes of one block
    block: int
    window: int = 0

    def max_memory(self, max_model_len: int, batched: int) -> int:
        cdiv = lambda a, b: -(-a // b)  # noqa: E731
        if self.kind in ("full", "mla"):
            return cdiv(max_model_len, self.block) * self.page
        if self.kind == "sliding":
            return (cdiv(min(self.window - 1 + batched, max_model_len), self.block) + 1) * self.page
        if self.kind == "chunked":
            return cdiv(min(self.window + batched, max_model_len), self.block) * self.page
        return self.page


def _text(config: dict) -> dict:
    return next(
        (config[k] for k in ("text_config", "language_config") if isinstance(config.get(k), dict)),
        config,
    )


def as_vllm_reads(config: dict) -> dict:
    """A sparse text config (llava's lists only what differs from LlamaConfig) filled in with
    its transformers class's defaults, as vLLM 0.17.1 reads it; any other config as it is."""
    text = _text(config)
    if text is config or "num_attention_heads" in text:
        return config
    from transformers import AutoConfig

    model_type = config["model_type"]
    rest = {k: v for k, v in config.items() if k != "model_type"}
    return AutoConfig.for_model(model_type, **rest).to_dict()


def layer_types(config: dict) -> list[str]:
    """Each layer's attention as transformers 4.57.6 (vLLM 0.17.1's) fills it in."""
    text = _text(config)
    n = text["num_hidden_layers"]
    model_type = text.get("model_type", "")
    if isinstance(text.get("layer_types"), list):
        return [{"attention": "full_attention"}.get(t, t) for t in text["layer_types"]]
    if isinstance(text.get("hybrid_override_pattern"), str):
        return [
            {"M": "mamba", "*": "full_attention"}.get(c, "mlp")
            for c in text["hybrid_override_pattern"]
        ]
    if model_type in ("gemma2", "gpt_oss"):  # Gemma2Config, GptOssConfig
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
    if model_type in ("gemma3", "gemma3_text"):  # Gemma3TextConfig
        p = text.get("sliding_window_pattern", 6)
        return ["sliding_attention" if (i + 1) % p else "full_attention" for i in range(n)]
    if model_type in ("llama4", "llama4_text"):  # Llama4TextConfig no_rope_layers
        rope = text.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(n)]
        return ["chunked_attention" if r else "full_attention" for r in rope]
    if model_type == "qwen3_next":
        k = text.get("full_attention_interval", 4)
        return ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    if text.get("sliding_window") and text.get("use_sliding_window") is not False:
        return ["sliding_attention"] * n  # not interleaved: CacheConfig.sliding_window
    return ["full_attention"] * n


def vllm_specs(
    facts: catalog.ModelFacts, config: dict, tp: int, block: int = 16
) -> dict[str, Spec]:
    """{layer name: Spec} as vLLM's model runner reports them for one GPU, read from the
    model's config.json (not from the function's facts): heads, head size, MLA's latent,
    windows and each layer's kind."""
    if all(g.kind == "none" for g in facts.kv_layers):
        return {}  # an encoder-only (BERT-style) model: EncoderOnlyAttentionSpec, no cache
    text = _text(config)
    dtype = 1 if facts.kv_cache_dtype.startswith("fp8") else 2
    heads = text["num_attention_heads"]
    kv_heads = text.get("num_key_value_heads") or heads
    head = text.get("head_dim") or text["hidden_size"] // heads
    mla = text.get("kv_lora_rank") and text.get("model_type") in model_config.MLA_MODEL_TYPES
    state = next((g.state_bytes for g in facts.kv_layers if g.kind == "mamba"), 0)
    page = block * max(1, kv_heads // tp) * 2 * head * dtype
    specs = {}
    for i, kind in enumerate(layer_types(config)):
        name = f"model.layers.{i}.attn"
        if mla:
            latent = text["kv_lora_rank"] + text["qk_rope_head_dim"]
            specs[name] = Spec("mla", block * latent * dtype, block)
        elif kind == "full_attention":
            specs[name] = Spec("full", page, block)
        elif kind == "sliding_attention":
            specs[name] = Spec("sliding", page, block, text["sliding_window"])
        elif kind == "chunked_attention":
            specs[name] = Spec("chunked", page, block, text["attention_chunk_size"])
        elif kind in ("mamba", "linear_attention"):
            specs[name] = Spec("mamba", -(-state // tp), block)
    return specs


def vllm_groups(specs: dict[str, Spec], hybrid: bool) -> list[list[Spec]]:
    """kv_cache_utils.get_kv_cache_groups: one group when every layer is alike, else groups
    of `group_size` layers of one kind (`_get_kv_cache_groups_uniform_page_size`)."""
    values = list(specs.values())
    if not hybrid and len({s.kind for s in values}) > 1:  # unify_hybrid_kv_cache_specs
        values = [
            Spec("full", s.page, s.block) if s.kind in ("sliding", "chunked") else s for s in values
        ]
    if len({(s.kind if s.kind != "mla" else "full", s.window) for s in values}) <= 1:
        return [values]
    page = max(s.page for s in values)
    values = [
        s
        if s.page == page or s.kind == "mamba"
        else Spec(s.kind, page, s.block * page // s.page, s.window)
        for s in values
    ]
    values = [Spec(s.kind, page, s.block, s.window) for s in values]
    same: dict[tuple, list[Spec]] = {}
    for s in values:
        same.setdefault((s.kind, s.window, s.block), []).append(s)
    counts = [len(v) for v in same.values()]
    size = max(counts) if max(counts) < min(counts) * 1.25 else min(counts)
    out = []
    for layers in same.values():
        n = -(-len(layers) // size)
        out += [layers[i::n] + [layers[0]] * (size - len(layers[i::n])) for i in range(n)]
    return out


def one_request(groups: list[list[Spec]], mml: int, batched: int) -> int:
    """get_max_concurrency_for_kv_cache_config: the pool blocks one request needs x block."""
    if len(groups) == 1:
        return sum(s.max_memory(mml, batched) for s in groups[0])
    size = max(len(g) for g in groups)
    page = groups[0][0].page
    return size * page * sum(-(-g[0].max_memory(mml, batched) // page) for g in groups)


def startup_check(groups: list[list[Spec]], mml: int, batched: int) -> int:
    """_max_memory_usage_bytes_from_groups: what vLLM's start-up check asks for (for hybrid
    models only the first group's blocks)."""
    if len(groups) == 1:
        return sum(s.max_memory(mml, batched) for s in groups[0])
    size = max(len(g) for g in groups)
    page = groups[0][0].page
    return size * page * -(-groups[0][0].max_memory(mml, batched) // page)


# --------------------------------------------------------------------------- the models


@dataclass
class Row:
    id: str
    source: str
    architecture: str
    real_gib: float
    weights_gib: float
    name_gib: float | None
    kv_function: int
    kv_vllm: int
    kv_claimed: bool
    refused: list[str]
    short: list[str]
    plans: int

    @property
    def weights_error(self) -> float:
        return self.weights_gib / self.real_gib - 1

    @property
    def name_error(self) -> float | None:
        return None if self.name_gib is None else self.name_gib / self.real_gib - 1


def recorded() -> list[dict[str, Any]]:
    return list(hub_server.recorded_models().values())


def real_checkpoint_gib(doc: dict[str, Any]) -> float:
    weights = [s["size"] for s in doc["siblings"] if s["rfilename"].endswith(".safetensors")]
    if weights:
        return sum(weights) / GIB
    params = (doc.get("safetensors") or {}).get("parameters") or {}
    return sum(n * SAFETENSORS_BYTES[d] for d, n in params.items()) / GIB


def replay_vllm(
    facts: catalog.ModelFacts,
    config: dict | None,
    real_gib: float,
    plan: sizing.Plan,
    gpu: GpuShape,
) -> tuple[bool, bool]:
    """(vLLM refuses at start-up, a request of max_model_len cannot run) for the plan."""
    tp = plan.gpus
    served = real_gib * (0.5 if facts.precision == "fp32" else 1.0)
    load = facts.weights_gib / max(facts.checkpoint_gib, 1e-9) if facts.precision != "fp32" else 1.0
    batched, seqs = plan.engine.max_num_batched_tokens, plan.engine.max_num_seqs
    activation = (
        0.0
        if facts.task != "generate"
        else VLLM_SAMPLER_BYTES_PER_LOGIT * seqs * (facts.vocab_size or 128256) / GIB
        # vLLM 0.17.1's fused-MoE workspaces (fused_moe workspace_shapes), 0 for dense models
        + moe_memory.workspace_gib(facts, tp, batched, gpu_type=gpu.type)
    )
    kv = (
        gpu.memory_gib * plan.gpu_memory_utilization
        - served * max(load, 1.0) / tp
        - activation
        - VLLM_NON_TORCH_GIB[tp == 1]
    )
    specs = vllm_specs(facts, config, tp)
    if not specs:
        return kv <= 0, False
    groups = vllm_groups(specs, facts.hybrid_kv)
    mml = plan.max_model_len
    if kv <= 0:
        return True, True
    return startup_check(groups, mml, batched) > kv * GIB, one_request(
        groups, mml, batched
    ) > kv * GIB


def measure(doc: dict[str, Any]) -> Row:
    mid = doc["id"]
    cat = catalog_lookup.lookup(mid)
    facts = cat or model_config.facts(hub_server.hub_model(doc))
    config = as_vllm_reads(doc["files"]["config.json"])
    name = name_estimate.estimate_from_name(mid)
    real = real_checkpoint_gib(doc)
    specs1 = vllm_specs(facts, config, 1)
    groups1 = vllm_groups(specs1, facts.hybrid_kv) if specs1 else []
    long = 1 << 20
    per_token = (
        (one_request(groups1, 2 * long, 8192) - one_request(groups1, long, 8192)) // long
        if groups1
        else 0
    )
    alloc = kv_cache.Allocator(
        tensor_parallel=1, hybrid=facts.hybrid_kv, max_num_batched_tokens=8192
    )
    refused, short, plans = [], [], 0
    for gpu_type in GPUS:
        gpu = GpuShape(
            memory_gib=GPU_TYPES[gpu_type].memory_gib, per_node=8, type=gpu_type, assumed=False
        )
        try:
            plan = sizing.plan(facts, None, gpu)
        except sizing.SizingError:
            continue
        if not plan.fits or plan.max_model_len == 0:
            continue
        plans += 1
        at_start, one = replay_vllm(facts, config, real, plan, gpu)
        if at_start:
            refused.append(f"{plan.gpus} x {gpu_type} at {plan.max_model_len}")
        if one:
            short.append(f"{plan.gpus} x {gpu_type} at {plan.max_model_len}")
    return Row(
        id=mid,
        source="catalog" if cat else "hub",
        architecture=facts.architecture,
        real_gib=real,
        weights_gib=facts.checkpoint_gib,
        name_gib=name.checkpoint_gib if name else None,
        kv_function=kv_cache.bytes_per_token(facts.kv_layers, alloc),
        kv_vllm=per_token,
        kv_claimed=not any(g.kind == "mamba" for g in facts.kv_layers),
        refused=refused,
        short=short,
        plans=plans,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", action="store_true", help="print CSV instead of a table")
    args = parser.parse_args(argv)
    rows = [measure(doc) for doc in recorded()]
    if args.csv:
        w = csv.writer(sys.stdout)
        w.writerow(
            [
                "id",
                "source",
                "architecture",
                "real_gib",
                "weights_gib",
                "weights_error",
                "name_error",
                "kv_function",
                "kv_vllm",
                "plans",
                "refused",
                "short",
            ]
        )
        for r in rows:
            w.writerow(
                [
                    r.id,
                    r.source,
                    r.architecture,
                    f"{r.real_gib:.3f}",
                    f"{r.weights_gib:.3f}",
                    f"{r.weights_error:+.4f}",
                    "" if r.name_error is None else f"{r.name_error:+.4f}",
                    r.kv_function,
                    r.kv_vllm,
                    r.plans,
                    ";".join(r.refused),
                    ";".join(r.short),
                ]
            )
        return 0
    head = (
        "model",
        "src",
        "real GiB",
        "ours",
        "err",
        "by name",
        "KV B/tok",
        "vLLM",
        "plans",
        "refused",
    )
    print(f"{head[0]:48} {head[1]:7} " + " ".join(f"{h:>9}" for h in head[2:]))
    for r in rows:
        name = "-" if r.name_error is None else f"{r.name_error:+.0%}"
        kv = "" if r.kv_function == r.kv_vllm else (" (state)" if not r.kv_claimed else " DIFF")
        cells = (
            f"{r.real_gib:9.2f}",
            f"{r.weights_gib:9.2f}",
            f"{r.weights_error:+9.2%}",
            f"{name:>9}",
            f"{r.kv_function:9d}",
            f"{r.kv_vllm:9d}",
            f"{r.plans:9d}",
            f"{len(r.refused) + len(r.short):9d}",
        )
        print(f"{r.id[:48]:48} {r.source:7} " + " ".join(cells) + kv)
    worst = max(rows, key=lambda r: abs(r.weights_error))
    kv_wrong = [r.id for r in rows if r.kv_claimed and r.kv_function != r.kv_vllm]
    refused = [f"{r.id}: {p}" for r in rows for p in r.refused]
    short = [f"{r.id}: {p}" for r in rows for p in r.short]
    plans = sum(r.plans for r in rows)
    weights_ok = abs(worst.weights_error) <= WEIGHTS_TARGET

    def ok(cond: bool) -> str:
        return "met" if cond else "NOT MET"

    print()
    print(f"{len(rows)} models, {plans} plans on {', '.join(GPUS)}")
    print(
        "weights within +-5 % of the checkpoint for every id: "
        f"worst {worst.weights_error:+.2%} ({worst.id}) -> {ok(weights_ok)}"
    )
    print(
        "KV bytes per token equal to vLLM's for every claimed architecture: "
        f"{len(kv_wrong)} differ -> {ok(not kv_wrong)}" + (f" {kv_wrong}" if kv_wrong else "")
    )
    print(
        f"plans vLLM would refuse at start-up: {len(refused)} -> {ok(not refused)}"
        + (f" {refused}" if refused else "")
    )
    print(
        f"plans whose max_model_len request cannot run: {len(short)} -> {ok(not short)}"
        + (f" {short}" if short else "")
    )
    errors = sorted(abs(r.name_error) for r in rows if r.name_error is not None)
    if errors:
        print(
            "(for comparison, sizing from the name alone: median error "
            f"{errors[len(errors) // 2]:.0%}, worst {errors[-1]:.0%}, "
            f"{len(rows) - len(errors)} ids not sizable from the name)"
        )
    return (
        0
        if abs(worst.weights_error) <= WEIGHTS_TARGET and not kv_wrong and not refused and not short
        else 1
    )


if __name__ == "__main__":
    sys.exit(main())
