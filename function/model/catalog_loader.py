"""The catalog: ``catalog.yaml`` read and validated once into families, their models'
facts, the estimation bands, and the architecture rules (how vLLM serves an architecture,
the layer layout transformers fills in, the KV cache layout of an entry)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from function import datafile
from function.model.catalog import (
    BYTES_PER_PARAM,
    GB,
    GIB,
    KV_DTYPE_BYTES,
    SERVED_BYTES_PER_PARAM,
    TASKS,
    ModelFacts,
    Task,
    checkpoint_gib,
    weights_gib,
)
from function.model.expert_parallel import routed_expert_gib
from function.model.kv_cache import LayerGroup

CATALOG_PATH = Path(__file__).with_name("catalog.yaml")

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
class Family:
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
class Band:
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
    families: tuple[Family, ...]
    dense: tuple[Band, ...]
    encoder: tuple[Band, ...]
    default_context: dict[str, int]
    classes: dict[str, ArchRule]
    suffixes: tuple[tuple[str, Task], ...]
    family_data: dict[str, dict[str, Any]]


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


def build_model(
    family: str, fam: dict[str, Any], entry: dict[str, Any], rules: Rules
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
    # The experts load as the checkpoint stores them, scaled like the rest (load_factor;
    # float32 served in 16 bits).
    load = float(_opt(merged, "load_factor", float, where) or 1.0)
    load *= SERVED_BYTES_PER_PARAM[precision] / BYTES_PER_PARAM[precision]
    experts = _experts(merged, layers, precision, load, where)
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
        kv_bytes_per_token=growth_bytes(groups, KV_DTYPE_BYTES[kv_dtype]),
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
        num_experts=experts[0],
        expert_weights_gib=min(experts[1], served),
        provenance=tuple(merged.get("provenance") or ()),
    )


def _experts(
    entry: dict[str, Any], layers: int, precision: str, load: float, where: str
) -> tuple[int, float]:
    """(routed experts, their GiB as loaded) of a mixture of experts: `num_experts` per MoE
    layer, `moe_layers` of the layers (default all), each expert `moe_intermediate_size` wide
    over `hidden_size`, stored at the checkpoint's precision (`expert_precision` when the
    experts alone are quantized, as Kimi-K2.5's INT4) and loaded with the entry's load factor.
    (0, 0.0) for a dense model."""
    experts = _opt(entry, "num_experts", int, where)
    if not experts or experts < 2:
        return 0, 0.0
    width = _req(entry, "moe_intermediate_size", int, where)
    hidden = _req(entry, "hidden_size", int, where)
    moe_layers = _opt(entry, "moe_layers", int, where) or layers
    if moe_layers > layers:
        raise CatalogError(f"{where}: moe_layers {moe_layers} is more than the {layers} layers")
    stored = entry.get("expert_precision") or precision
    if stored not in BYTES_PER_PARAM:
        raise CatalogError(f"{where}: unknown expert_precision {stored!r}")
    gib = routed_expert_gib(experts, moe_layers, hidden, width, BYTES_PER_PARAM[stored])
    return experts, gib * load


def growth_bytes(groups: tuple[LayerGroup, ...], dtype_bytes: int) -> int:
    """KV bytes per token of the whole model on one GPU, as it grows with the context
    (windowed layers stop growing): kv_cache.bytes_per_token at tensor parallel size 1."""
    from function.model.kv_cache import Allocator, bytes_per_token

    return bytes_per_token(groups, Allocator(tensor_parallel=1, dtype_bytes=dtype_bytes))


def _band(row: dict[str, Any], where: str) -> Band:
    return Band(
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
class Rules:
    classes: dict[str, ArchRule]
    suffixes: tuple[tuple[str, Task], ...]

    def rule(self, architecture: str) -> ArchRule:
        """The architecture's own rule, else vLLM's suffix default (generate when none)."""
        if architecture in self.classes:
            return self.classes[architecture]
        task = next((t for suffix, t in self.suffixes if architecture.endswith(suffix)), None)
        return ArchRule(task=task or "generate")


def _rules(data: dict[str, Any]) -> Rules:
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
    return Rules(classes=classes, suffixes=tuple(suffixes))


def load_catalog(path: Path = CATALOG_PATH) -> _Catalog:
    """Parse and validate a catalog file (``default_catalog()`` caches the default one)."""
    data = datafile.load(path)
    if not isinstance(data, dict) or not isinstance(data.get("families"), dict):
        raise CatalogError(f"{path}: expected a mapping with 'families'")
    rules = _rules(data)
    models: dict[str, ModelFacts] = {}
    ids: list[str] = []
    families: list[Family] = []
    for name, fam in data["families"].items():
        if not isinstance(fam, dict):
            raise CatalogError(f"catalog.yaml {name}: family must be a mapping")
        built = [build_model(name, fam, entry, rules) for entry in fam.get("models") or []]
        contexts = [m.context_length for m in built]
        if fam.get("context_length") is not None:
            contexts.append(_req(fam, "context_length", int, f"catalog.yaml {name}"))
        if not contexts:
            raise CatalogError(f"catalog.yaml {name}: no context_length")
        architectures = _str_tuple(fam.get("architectures"), "architectures", name)
        if fam.get("architecture"):
            architectures = (fam["architecture"], *architectures)
        families.append(
            Family(
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
def default_catalog() -> _Catalog:
    return load_catalog()
