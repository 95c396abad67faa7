"""Model facts: the catalog in ``catalog.yaml`` and estimates read from a model id.

``lookup`` finds a Hugging Face id in the catalog (case-insensitive, aliases included).
``estimate_from_name`` reads what it can from an id that is not in the catalog:

- Size: ``1.5B``, ``70b``, ``270M``; MoE ``8x7B`` (total = 8 x 7 = 56B, active = 2 x 7 = 14B:
  the shared attention and embeddings are counted once per expert, so the total over-estimates
  a real Mixtral-8x7B's 46.7B by about 20 %, which errs on the side of more memory; top-2
  routing as in Mixtral); ``30B-A3B`` (total 30B, active 3B). Sizes outside 0.01B..2000B, or
  an active size above the total, make the id unreadable.
- Precision: ``FP8``; ``AWQ``/``GPTQ``/``int4``/``4bit``/``w4a16`` -> int4; ``int8``/``w8a8`` ->
  int8; ``MXFP4``; ``bf16``/``fp16``/``fp32``. Otherwise the family's precision, else bf16.
- Task: ``bge``, ``e5``, ``gte``, ``mxbai``, ``minilm``, anything with ``embed`` in the name, or
  the ``sentence-transformers`` org -> embed; or the task of the recognised family.
- Shape (layers, heads, KV heads, head dim): from the ``estimation`` table of ``catalog.yaml``,
  a documented model of comparable size (MoE models by their active size). Encoder embedding
  models below 1B use BERT-style rows (small / base / large).
- Family: the catalog family whose ``match`` prefix is the longest prefix of the id (e.g. an
  unknown ``Qwen/Qwen2.5-Coder-7B-Instruct`` gets qwen2.5's hermes tool parser). The context
  length is the smallest context of that family (vLLM rejects a max_model_len above the
  model's own), or a low default for unknown families. This is the fallback for when the
  Hub cannot be asked: ``function/model/model_config.py`` reads a model's real config.json and
  picks its family by architecture (``family_for``), never by the id alone.

An id with no readable size that is not an embedding model gives ``None``. Nothing here raises
for any input: the catalog file itself is validated when it is first loaded.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from function import datafile
from function.model.kv_cache import LayerGroup

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")

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

MIN_PARAMS_B = 0.01
MAX_PARAMS_B = 2000.0
MAX_ID_LENGTH = 256

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
LAYER_KINDS = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "mamba": "mamba",
    "linear_attention": "mamba",
    "mlp": "none",  # a layer with no attention (NemotronH's `-`)
}


class CatalogError(ValueError):
    """catalog.yaml is malformed (a developer error, caught by the tests)."""


@dataclass(frozen=True)
class ArchRule:
    """How vLLM serves an architecture, and the layer layout transformers fills in."""

    task: Task = "generate"
    encoder_only: bool = False
    multimodal: tuple[str, ...] = ()
    layer_pattern: tuple[str, ...] = ()
    pattern_key: str | None = None
    pattern_default: int = 0
    hybrid_kv: bool = True
    text_config: str | None = None


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
    # fact -> where it came from (status.plan.facts)
    provenance: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class _Family:
    name: str
    match: tuple[str, ...]
    architectures: tuple[str, ...]
    task: Task
    gated: bool
    trust_remote_code: bool
    tool_call_parser: str | None
    reasoning_parser: str | None
    extra_args: tuple[str, ...]
    precision: str
    min_context_length: int
    sources: tuple[str, ...]
    vocab_size: int = 0


@dataclass(frozen=True)
class _Band:
    max_params_b: float
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    like: str
    source: str
    name: str = ""
    params_b: float = 0.0


@dataclass(frozen=True)
class _Catalog:
    models: dict[str, ModelFacts]  # lower-cased id or alias -> facts
    ids: tuple[str, ...]
    families: tuple[_Family, ...]
    dense: tuple[_Band, ...]
    encoder: tuple[_Band, ...]
    default_context: dict[str, int]
    classes: dict[str, ArchRule]
    suffixes: tuple[tuple[str, Task], ...]
    family_data: dict[str, dict[str, Any]]


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


# --------------------------------------------------------------------------- loading

_FAMILY_KEYS = (
    "architecture",
    "task",
    "gated",
    "trust_remote_code",
    "tool_call_parser",
    "reasoning_parser",
    "extra_args",
    "precision",
    "context_length",
    "vocab_size",
    "mistral_format",
    "load_factor",
)


def _req(entry: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = entry.get(key)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) is not (kind is bool):
        raise CatalogError(f"{where}: {key} must be a {kind.__name__}, got {value!r}")
    if kind in (int, float) and not (value > 0 and math.isfinite(value)):
        raise CatalogError(f"{where}: {key} must be positive, got {value!r}")
    return value


def _opt(entry: dict[str, Any], key: str, kind: type, where: str) -> Any:
    return None if entry.get(key) is None else _req(entry, key, kind, where)


def _opt_str(entry: dict[str, Any], key: str, where: str) -> str | None:
    value = entry.get(key)
    if value is not None and not (isinstance(value, str) and value):
        raise CatalogError(f"{where}: {key} must be a non-empty string or null, got {value!r}")
    return value


def _str_tuple(value: Any, key: str, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise CatalogError(f"{where}: {key} must be a list of strings, got {value!r}")
    return tuple(value)


def layer_kinds(entry: dict[str, Any], rule: ArchRule, where: str) -> list[str]:
    """The kind of every layer (full_attention, sliding_attention, ...): config.json's
    layer_types, else the architecture's pattern, else one window for every layer when the
    model has one (Mistral-7B-v0.1, Phi-3), else full attention."""
    layers = _req(entry, "layers", int, where)
    given = entry.get("layer_types")
    if given is not None:
        kinds = list(_str_tuple(given, "layer_types", where))
        if len(kinds) != layers or any(k not in LAYER_KINDS for k in kinds):
            raise CatalogError(
                f"{where}: layer_types must name {layers} layers of {sorted(LAYER_KINDS)}"
            )
        return kinds
    needs = {"sliding_attention": "sliding_window", "chunked_attention": "attention_chunk_size"}
    if rule.layer_pattern and all(entry.get(needs.get(k, "layers")) for k in rule.layer_pattern):
        length = entry.get("pattern_length") or rule.pattern_default or len(rule.layer_pattern)
        if not isinstance(length, int) or isinstance(length, bool) or length < 1:
            raise CatalogError(f"{where}: pattern_length must be a whole number, got {length!r}")
        first, last = rule.layer_pattern[0], rule.layer_pattern[-1]
        return [last if (i + 1) % length == 0 else first for i in range(layers)]
    if entry.get("sliding_window"):
        return ["sliding_attention"] * layers
    return ["full_attention"] * layers


def layer_groups(entry: dict[str, Any], rule: ArchRule, where: str) -> tuple[LayerGroup, ...]:
    """The KV cache layout of a catalog-shaped entry (function/model/kv_cache.py)."""
    layers = _req(entry, "layers", int, where)
    if rule.encoder_only:
        return (LayerGroup("none", layers),)
    if entry.get("attention", "gqa") == "mla":
        latent = _req(entry, "kv_lora_rank", int, where) + _req(
            entry, "qk_rope_head_dim", int, where
        )
        return (LayerGroup("mla", layers, kv_heads=1, latent_dim=latent),)
    kv_heads = _req(entry, "kv_heads", int, where)
    head_dim = _req(entry, "head_dim", int, where)
    counts: dict[str, int] = {}
    for kind in layer_kinds(entry, rule, where):
        counts[kind] = counts.get(kind, 0) + 1
    groups = []
    for name, count in counts.items():
        kind = LAYER_KINDS[name]
        window = 0
        if kind == "sliding":
            window = _req(entry, "sliding_window", int, where)
        elif kind == "chunked":
            window = _req(entry, "attention_chunk_size", int, where)
        state = int(entry.get("mamba_state_bytes") or 0) if kind == "mamba" else 0
        groups.append(LayerGroup(kind, count, kv_heads, head_dim, window=window, state_bytes=state))  # type: ignore[arg-type]
    return tuple(groups)


def _build_model(
    family: str, fam: dict[str, Any], entry: dict[str, Any], rules: _Rules
) -> ModelFacts:
    merged = {k: fam.get(k) for k in _FAMILY_KEYS}
    merged.update(entry)
    where = f"catalog.yaml {family}/{entry.get('id')!r}"
    model_id = _req(merged, "id", str, where)
    architecture = merged.get("architecture") or "unknown"
    if not isinstance(architecture, str):
        raise CatalogError(f"{where}: architecture must be a string, got {architecture!r}")
    rule = rules.rule(architecture)
    task = merged.get("task") or rule.task
    if task not in TASKS:
        raise CatalogError(f"{where}: task must be one of {', '.join(TASKS)}, got {task!r}")
    precision = merged.get("precision")
    if precision not in BYTES_PER_PARAM:
        raise CatalogError(f"{where}: unknown precision {precision!r}")
    total = _req(merged, "total_params_b", float, where)
    active = float(merged.get("active_params_b", total))
    if not 0 < active <= total:
        raise CatalogError(f"{where}: active_params_b must be in (0, total_params_b]")
    layers = _req(merged, "layers", int, where)
    heads = _req(merged, "attention_heads", int, where)
    kv_heads = _req(merged, "kv_heads", int, where)
    head_dim = _req(merged, "head_dim", int, where)
    if heads % kv_heads:
        raise CatalogError(f"{where}: attention_heads {heads} not divisible by kv_heads {kv_heads}")
    attention = merged.get("attention", "gqa")
    if attention == "mla" and kv_heads != 1:
        raise CatalogError(f"{where}: MLA models carry kv_heads 1 (one shared latent)")
    if attention not in ("gqa", "mla"):
        raise CatalogError(f"{where}: attention must be gqa or mla, got {attention!r}")
    groups = layer_groups(merged, rule, where)
    kv_dtype = merged.get("kv_cache_dtype", "auto")
    if kv_dtype not in KV_DTYPE_BYTES:
        raise CatalogError(f"{where}: kv_cache_dtype must be one of {sorted(KV_DTYPE_BYTES)}")
    checkpoint_gb = _opt(merged, "checkpoint_gb", float, where)
    loaded_gib = _opt(merged, "loaded_gib", float, where)
    min_vram_gb = _opt(merged, "min_vram_gb", float, where)
    sources = _str_tuple(entry.get("sources"), "sources", where) + _str_tuple(
        fam.get("sources"), "sources", where
    )
    if not sources:
        raise CatalogError(f"{where}: no sources")
    gated = merged.get("gated")
    trust = merged.get("trust_remote_code")
    if not isinstance(gated, bool) or not isinstance(trust, bool):
        raise CatalogError(f"{where}: gated and trust_remote_code must be booleans")
    multimodal = _str_tuple(merged.get("multimodal"), "multimodal", where) or rule.multimodal
    served = loaded_gib if loaded_gib is not None else weights_gib(total, precision, checkpoint_gb)
    # Weights some formats load above their checkpoint (gpt-oss's MXFP4 repacked for the
    # GPU's kernels): the factor measured in vLLM's logs, cited in the entry.
    served *= float(_opt(merged, "load_factor", float, where) or 1.0)
    return ModelFacts(
        id=model_id,
        family=family,
        task=task,
        total_params_b=total,
        active_params_b=active,
        layers=layers,
        attention_heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        precision=precision,
        context_length=_req(merged, "context_length", int, where),
        gated=gated,
        trust_remote_code=trust,
        tool_call_parser=_opt_str(merged, "tool_call_parser", where),
        reasoning_parser=_opt_str(merged, "reasoning_parser", where),
        extra_args=_str_tuple(merged.get("extra_args"), "extra_args", where),
        weights_gib=served,
        checkpoint_gib=checkpoint_gib(total, precision, checkpoint_gb),
        kv_bytes_per_token=_growth_bytes(groups, KV_DTYPE_BYTES[kv_dtype]),
        min_vram_gib=None if min_vram_gb is None else min_vram_gb * GB / GIB,
        sources=sources,
        estimated=bool(merged.get("estimated", False)),
        architecture=architecture,
        kv_layers=groups,
        hybrid_kv=rule.hybrid_kv,
        kv_cache_dtype=kv_dtype,
        vocab_size=int(_opt(merged, "vocab_size", int, where) or 0),
        hidden_size=int(_opt(merged, "hidden_size", int, where) or 0),
        intermediate_size=int(_opt(merged, "intermediate_size", int, where) or 0),
        multimodal=multimodal,
        mistral_format=bool(merged.get("mistral_format", False)),
        origin=merged.get("origin", "catalog"),
        experts_per_token=int(_opt(merged, "experts_per_token", int, where) or 0),
        moe_intermediate_size=int(_opt(merged, "moe_intermediate_size", int, where) or 0),
        provenance=tuple(merged.get("provenance") or ()),
    )


def _growth_bytes(groups: tuple[LayerGroup, ...], dtype_bytes: int) -> int:
    """KV bytes per token of the whole model on one GPU, as it grows with the context
    (windowed layers stop growing): kv_cache.bytes_per_token at tensor parallel size 1."""
    from function.model.kv_cache import Allocator, bytes_per_token

    return bytes_per_token(groups, Allocator(tensor_parallel=1, dtype_bytes=dtype_bytes))


def _band(row: dict[str, Any], where: str) -> _Band:
    return _Band(
        max_params_b=_req(row, "max_params_b", float, where),
        layers=_req(row, "layers", int, where),
        attention_heads=_req(row, "attention_heads", int, where),
        kv_heads=_req(row, "kv_heads", int, where),
        head_dim=_req(row, "head_dim", int, where),
        like=_req(row, "like", str, where),
        source=_req(row, "source", str, where),
        name=row.get("name", ""),
        params_b=float(row.get("params_b", 0.0)),
    )


@dataclass(frozen=True)
class _Rules:
    classes: dict[str, ArchRule]
    suffixes: tuple[tuple[str, Task], ...]

    def rule(self, architecture: str) -> ArchRule:
        """The architecture's own rule, else vLLM's suffix default (generate when none)."""
        if architecture in self.classes:
            return self.classes[architecture]
        task = next((t for suffix, t in self.suffixes if architecture.endswith(suffix)), None)
        return ArchRule(task=task or "generate")


def _rules(data: dict[str, Any]) -> _Rules:
    section = data.get("architectures") or {}
    if not isinstance(section, dict):
        raise CatalogError("catalog.yaml: architectures must be a mapping")
    suffixes = []
    for row in section.get("suffixes") or []:
        if not isinstance(row, dict) or row.get("task") not in TASKS:
            raise CatalogError(f"catalog.yaml architectures.suffixes: bad row {row!r}")
        suffixes.append((_req(row, "suffix", str, "architectures.suffixes"), row["task"]))
    classes = {}
    for name, row in (section.get("classes") or {}).items():
        where = f"catalog.yaml architectures.classes.{name}"
        if not isinstance(row, dict):
            raise CatalogError(f"{where}: must be a mapping")
        task = row.get("task", "generate")
        if task not in TASKS:
            raise CatalogError(f"{where}: task must be one of {', '.join(TASKS)}")
        pattern = _str_tuple(row.get("layer_pattern"), "layer_pattern", where)
        if any(k not in LAYER_KINDS for k in pattern):
            raise CatalogError(f"{where}: layer_pattern kinds must be of {sorted(LAYER_KINDS)}")
        classes[name] = ArchRule(
            task=task,
            encoder_only=bool(row.get("encoder_only", False)),
            multimodal=_str_tuple(row.get("multimodal"), "multimodal", where),
            layer_pattern=pattern,
            pattern_key=row.get("pattern_key"),
            pattern_default=int(row.get("pattern_default") or 0),
            hybrid_kv=bool(row.get("hybrid_kv", True)),
            text_config=row.get("text_config"),
        )
    return _Rules(classes=classes, suffixes=tuple(suffixes))


def load_catalog(path: Path = CATALOG_PATH) -> _Catalog:
    """Parse and validate a catalog file (``_catalog()`` caches the default one)."""
    data = datafile.load(path)
    if not isinstance(data, dict) or not isinstance(data.get("families"), dict):
        raise CatalogError(f"{path}: expected a mapping with 'families'")
    rules = _rules(data)
    models: dict[str, ModelFacts] = {}
    ids: list[str] = []
    families: list[_Family] = []
    for name, fam in data["families"].items():
        if not isinstance(fam, dict):
            raise CatalogError(f"catalog.yaml {name}: family must be a mapping")
        built = [_build_model(name, fam, entry, rules) for entry in fam.get("models") or []]
        contexts = [m.context_length for m in built]
        if fam.get("context_length") is not None:
            contexts.append(_req(fam, "context_length", int, f"catalog.yaml {name}"))
        if not contexts:
            raise CatalogError(f"catalog.yaml {name}: no context_length")
        architectures = _str_tuple(fam.get("architectures"), "architectures", name)
        if fam.get("architecture"):
            architectures = (fam["architecture"], *architectures)
        families.append(
            _Family(
                name=name,
                match=tuple(m.lower() for m in _str_tuple(fam.get("match"), "match", name)),
                architectures=architectures
                + tuple(m.architecture for m in built if m.architecture not in architectures),
                task=fam.get("task", "generate"),
                gated=bool(fam.get("gated", False)),
                trust_remote_code=bool(fam.get("trust_remote_code", False)),
                tool_call_parser=_opt_str(fam, "tool_call_parser", name),
                reasoning_parser=_opt_str(fam, "reasoning_parser", name),
                extra_args=_str_tuple(fam.get("extra_args"), "extra_args", name),
                precision=fam.get("precision", "bf16"),
                min_context_length=min(contexts),
                sources=_str_tuple(fam.get("sources"), "sources", name),
                vocab_size=int(fam.get("vocab_size") or 0),
            )
        )
        for facts, entry in zip(built, fam.get("models") or [], strict=True):
            keys = [facts.id, *_str_tuple(entry.get("aliases"), "aliases", facts.id)]
            for key in keys:
                if key.lower() in models:
                    raise CatalogError(f"catalog.yaml: duplicate id {key!r}")
                models[key.lower()] = facts
            ids.append(facts.id)
    est = data.get("estimation") or {}
    dense = tuple(_band(r, "estimation.dense") for r in est.get("dense") or [])
    encoder = tuple(_band(r, "estimation.encoder") for r in est.get("encoder") or [])
    if not dense or not encoder:
        raise CatalogError("catalog.yaml: estimation.dense and estimation.encoder are required")
    defaults = est.get("default_context_length") or {}
    for key in ("generate", "embed_encoder", "embed_decoder"):
        _req(defaults, key, int, "estimation.default_context_length")
    return _Catalog(
        models=models,
        ids=tuple(ids),
        families=tuple(families),
        dense=dense,
        encoder=encoder,
        default_context=dict(defaults),
        classes=rules.classes,
        suffixes=rules.suffixes,
        family_data={
            name: {k: v for k, v in fam.items() if k != "models"}
            for name, fam in data["families"].items()
        },
    )


@functools.cache
def _catalog() -> _Catalog:
    return load_catalog()


# --------------------------------------------------------------------------- public API


def catalog_ids() -> list[str]:
    """Canonical ids of every catalog entry, in file order."""
    return list(_catalog().ids)


def lookup(model_id: str) -> ModelFacts | None:
    """The catalog entry for a Hugging Face id (case-insensitive; aliases count), or None."""
    if not isinstance(model_id, str):
        return None
    return _catalog().models.get(model_id.strip().lower())


# An id at most this many single-character edits from a catalog id, with the same numbers in
# it, is most likely a typo of it (`Qwen2.5-1.5B-Instrut`). Numbers are versions and sizes:
# `Llama-3.2-1B-Instruct` is 2 edits from `Llama-3.1-8B-Instruct` and another model.
NEAR_EDITS = 2
_NUMBERS = re.compile(r"[0-9]+")


def near_id(model_id: str) -> str | None:
    """The catalog id `model_id` is at most NEAR_EDITS edits from (case-insensitive), when it
    is not one itself: the closest, the first in the catalog on a tie."""
    if not isinstance(model_id, str) or lookup(model_id) is not None:
        return None
    return _near_id(model_id.strip().lower())


@functools.lru_cache(maxsize=1024)
def _near_id(given: str) -> str | None:
    best: tuple[int, str] | None = None
    for canonical in _catalog().ids:
        candidate = canonical.lower()
        if abs(len(candidate) - len(given)) > NEAR_EDITS:
            continue
        if _NUMBERS.findall(candidate) != _NUMBERS.findall(given):
            continue
        d = _edits(given, candidate, NEAR_EDITS)
        if d <= NEAR_EDITS and (best is None or d < best[0]):
            best = (d, canonical)
    return best[1] if best else None


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of a and b, or limit + 1 once it must exceed limit."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def arch_rule(architecture: str) -> ArchRule:
    """How vLLM serves `architecture` (catalog.yaml architectures)."""
    c = _catalog()
    return _Rules(c.classes, c.suffixes).rule(architecture)


def family_for(model_id: str, architecture: str) -> str | None:
    """The catalog family a model of `architecture` belongs to: among the families that list
    the architecture, the one whose `match` prefix is the longest prefix of the id, else one
    that matches any id of the architecture (no `match`). An id prefix alone never decides:
    `deepseek-ai/DeepSeek-R1-Distill-Qwen-7B` is a Qwen2ForCausalLM, not a DeepSeek-V3."""
    low = model_id.strip().lower()
    best: tuple[int, str] | None = None
    for family in _catalog().families:
        if architecture not in family.architectures:
            continue
        if not family.match:
            best = best or (0, family.name)
        for prefix in family.match:
            if low.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), family.name)
    return best[1] if best else None


def family_task(family: str) -> Task | None:
    """The task a family states for all its models, if it states one."""
    task = _catalog().family_data.get(family, {}).get("task")
    return task if task in TASKS else None


@functools.cache
def known_architectures() -> frozenset[str]:
    """Every architecture the catalog names, in a family or among its rules."""
    c = _catalog()
    return frozenset(c.classes) | frozenset(a for f in c.families for a in f.architectures)


def build(family: str | None, entry: dict[str, Any]) -> ModelFacts:
    """Facts of a model described by a catalog-shaped entry (the Hub reader's output), with
    the defaults of `family` (None: none). CatalogError when the entry cannot be sized."""
    c = _catalog()
    fam = dict(c.family_data.get(family, {})) if family else {}
    fam.pop("sources", None)
    return _build_model(family or "unknown", fam, entry, _Rules(c.classes, c.suffixes))


def resolve(model_id: str) -> ModelFacts | None:
    """``lookup``, else ``estimate_from_name``."""
    return lookup(model_id) or estimate_from_name(model_id)


_NUM = r"[0-9]{1,6}(?:\.[0-9]{1,3})?"
_EDGE_L = r"(?<![a-z0-9.])"
_EDGE_R = r"(?![a-z0-9])"
_ACTIVE_RE = re.compile(rf"{_EDGE_L}({_NUM})b-a({_NUM})b{_EDGE_R}")
# Llama 4's `17B-16E`: 17B active, 16 experts (the total is not in the name).
_EXPERTS_RE = re.compile(rf"{_EDGE_L}({_NUM})b-([0-9]{{1,4}})e{_EDGE_R}")
_MOE_RE = re.compile(rf"{_EDGE_L}([0-9]{{1,4}})x({_NUM})([bm]){_EDGE_R}")
_SIZE_RE = re.compile(rf"{_EDGE_L}({_NUM})([bm]){_EDGE_R}")

_EMBED_WORD_RE = re.compile(r"(?<![a-z0-9])(?:bge|e5|gte|mxbai|minilm)(?![a-z])|embed")
_EMBED_ORGS = ("sentence-transformers/",)

_PRECISION_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"mxfp4"), "mxfp4"),
    (
        re.compile(r"(?<![a-z0-9])(?:awq|gptq|int4|4bit|4-bit|w4a16|nf4|bnb-4bit)(?![a-z0-9])"),
        "int4",
    ),
    (re.compile(r"(?<![a-z0-9])(?:int8|8bit|8-bit|w8a8|w8a16)(?![a-z0-9])"), "int8"),
    (re.compile(r"(?<![a-z0-9])fp8(?![a-z0-9])"), "fp8"),
    (re.compile(r"(?<![a-z0-9])bf16(?![a-z0-9])"), "bf16"),
    (re.compile(r"(?<![a-z0-9])fp16(?![a-z0-9])"), "fp16"),
    (re.compile(r"(?<![a-z0-9])fp32(?![a-z0-9])"), "fp32"),
)


def _billions(number: str, unit: str) -> float:
    value = float(number)
    return value / 1000.0 if unit == "m" else value


def _read_sizes(name: str) -> tuple[float, float, str] | None:
    """(total B, active B, how) from a lower-case model name, or None."""
    match = _ACTIVE_RE.search(name)
    if match:
        total, active = float(match.group(1)), float(match.group(2))
        how = f"{match.group(0)}: {total:g}B total, {active:g}B active"
    else:
        match = _EXPERTS_RE.search(name)
        if match:
            active, experts = float(match.group(1)), int(match.group(2))
            total = active * experts
            how = (
                f"{match.group(0)}: {active:g}B active, {experts} experts; total read as "
                f"{experts} x {active:g}B = {total:g}B (upper bound: attention, embeddings and "
                "shared experts are counted once per expert)"
            )
            if not (MIN_PARAMS_B <= total <= MAX_PARAMS_B):
                return None
            return total, active, how
        match = _MOE_RE.search(name)
        if match:
            experts = int(match.group(1))
            size = _billions(match.group(2), match.group(3))
            total, active = experts * size, min(experts, 2) * size
            how = (
                f"{match.group(0)}: {experts} experts x {size:g}B = {total:g}B total "
                f"(upper bound: attention and embeddings are shared), top-2 active {active:g}B"
            )
        else:
            sizes = [_billions(m.group(1), m.group(2)) for m in _SIZE_RE.finditer(name)]
            if not sizes:
                return None
            total = active = max(sizes)
            how = f"{total:g}B parameters read from the name"
    if not (MIN_PARAMS_B <= total <= MAX_PARAMS_B) or not (0 < active <= total):
        return None
    return total, active, how


def _match_family(model_id: str) -> _Family | None:
    best: tuple[int, _Family] | None = None
    for family in _catalog().families:
        for prefix in family.match:
            if model_id.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), family)
    return best[1] if best else None


def _precision_hint(name: str) -> str | None:
    for pattern, precision in _PRECISION_HINTS:
        if pattern.search(name):
            return precision
    return None


def _encoder_band(name: str, size_b: float | None) -> _Band:
    bands = _catalog().encoder
    if size_b is not None:
        return next((b for b in bands if size_b <= b.max_params_b), bands[-1])
    words = set(re.split(r"[^a-z0-9]+", name))
    for band_name, hints in (
        ("small", {"small", "xs", "mini", "tiny", "minilm"}),
        ("large", {"large", "xl"}),
    ):
        if words & hints:
            return next(b for b in bands if b.name == band_name)
    return next((b for b in bands if b.name == "base"), bands[0])


def estimate_from_name(model_id: str) -> ModelFacts | None:
    """Facts estimated from the id alone (``estimated=True``), or None when even that fails."""
    try:
        return _estimate(model_id)
    except Exception:  # an estimate must never take the function down
        return None


def _estimate(model_id: str) -> ModelFacts | None:
    if not isinstance(model_id, str):
        return None
    given = model_id.strip()
    if not given or len(given) > MAX_ID_LENGTH:
        return None
    low = given.lower()
    name = low.rsplit("/", 1)[-1]
    catalog = _catalog()
    family = _match_family(low)
    embed = (
        bool(_EMBED_WORD_RE.search(name))
        or low.startswith(_EMBED_ORGS)
        or (family is not None and family.task == "embed")
    )
    sizes = _read_sizes(name)
    if sizes is None and not embed:
        return None
    hint = _precision_hint(name)

    if embed and (sizes is None or sizes[0] < 1.0):
        band = _encoder_band(name, sizes[0] if sizes else None)
        total = active = sizes[0] if sizes else band.params_b
        how = sizes[2] if sizes else f"{band.name} encoder embedding model assumed from the name"
        precision = hint or (family.precision if family else "fp32")
        default_context = catalog.default_context["embed_encoder"]
    else:
        assert sizes is not None
        total, active, how = sizes
        band = next((b for b in catalog.dense if active <= b.max_params_b), catalog.dense[-1])
        if family is not None and family.task != "generate" and _encoder_family(family):
            # e5-mistral-7b is a Mistral decoder, not an e5 (BERT) encoder with 512 tokens.
            family = None
        # A decoder-sized model takes its family's precision only when the family is of
        # decoders too: BERT-style embedding families ship fp32, their 7B cousins do not.
        precision = hint or (family.precision if family and family.task == "generate" else "bf16")
        default_context = catalog.default_context["embed_decoder" if embed else "generate"]

    task: Task = "embed" if embed else "generate"
    generative_family = family is not None and family.task == "generate" and not embed
    sources = (
        f"estimated from the id {given!r}: {how}",
        f"attention shape of {band.like}: {band.source}",
        *(family.sources if family else ()),
    )
    encoder = embed and band in catalog.encoder
    groups = (
        (LayerGroup("none", band.layers),)
        if encoder
        else (LayerGroup("full", band.layers, band.kv_heads, band.head_dim),)
    )
    return ModelFacts(
        id=given,
        family=family.name if family else "unknown",
        task=task,
        total_params_b=total,
        active_params_b=active,
        layers=band.layers,
        attention_heads=band.attention_heads,
        kv_heads=band.kv_heads,
        head_dim=band.head_dim,
        precision=precision,
        context_length=family.min_context_length if family else default_context,
        gated=family.gated if family else False,
        trust_remote_code=family.trust_remote_code if family else False,
        tool_call_parser=family.tool_call_parser if generative_family else None,
        reasoning_parser=family.reasoning_parser if generative_family else None,
        extra_args=family.extra_args if family else (),
        weights_gib=weights_gib(total, precision),
        checkpoint_gib=checkpoint_gib(total, precision),
        kv_bytes_per_token=0 if encoder else _growth_bytes(groups, 2),
        min_vram_gib=None,
        sources=sources,
        estimated=True,
        kv_layers=groups,
        vocab_size=family.vocab_size if family else 0,
        origin="estimated",
        context_known=family is not None or embed,
        provenance=(("parameters", how), ("shape", f"like {band.like}")),
    )


def _encoder_family(family: _Family) -> bool:
    """Whether every architecture of `family` is a bidirectional encoder (BERT-style)."""
    c = _catalog()
    rules = _Rules(c.classes, c.suffixes)
    return bool(family.architectures) and all(
        rules.rule(a).encoder_only for a in family.architectures
    )
