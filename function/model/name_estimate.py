"""Model facts estimated from a model id alone, for an id the catalog does not list
(``function/model/catalog_lookup.py`` asks the catalog first).

``estimate_from_name`` reads what it can from the id:

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

import re

from function.model.catalog import ModelFacts, Task, checkpoint_gib, weights_gib
from function.model.catalog_loader import Band, Family, Rules, default_catalog, growth_bytes
from function.model.kv_cache import LayerGroup

MIN_PARAMS_B = 0.01
MAX_PARAMS_B = 2000.0
MAX_ID_LENGTH = 256


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


def _match_family(model_id: str) -> Family | None:
    best: tuple[int, Family] | None = None
    for family in default_catalog().families:
        for prefix in family.match:
            if model_id.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), family)
    return best[1] if best else None


def _precision_hint(name: str) -> str | None:
    for pattern, precision in _PRECISION_HINTS:
        if pattern.search(name):
            return precision
    return None


def _encoder_band(name: str, size_b: float | None) -> Band:
    bands = default_catalog().encoder
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
    catalog = default_catalog()
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
        kv_bytes_per_token=0 if encoder else growth_bytes(groups, 2),
        min_vram_gib=None,
        sources=sources,
        estimated=True,
        kv_layers=groups,
        vocab_size=family.vocab_size if family else 0,
        origin="estimated",
        context_known=family is not None or embed,
        provenance=(("parameters", how), ("shape", f"like {band.like}")),
    )


def _encoder_family(family: Family) -> bool:
    """Whether every architecture of `family` is a bidirectional encoder (BERT-style)."""
    c = default_catalog()
    rules = Rules(c.classes, c.suffixes)
    return bool(family.architectures) and all(
        rules.rule(a).encoder_only for a in family.architectures
    )
