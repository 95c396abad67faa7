"""Table-driven tests of the catalog (function/model/catalog.py, catalog_loader.py,
catalog_lookup.py, name_estimate.py) and the data in function/model/catalog.yaml."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from conftest import parse_yaml

from function.model.catalog import BYTES_PER_PARAM, ModelFacts, kv_bytes_per_token
from function.model.catalog_loader import CATALOG_PATH, CatalogError, load_catalog
from function.model.catalog_lookup import catalog_ids, lookup, near_id, resolve
from function.model.name_estimate import estimate_from_name

CATALOG_DATA = parse_yaml(CATALOG_PATH.read_text())
# Each catalog entry as written, with its family's keys (what the entry inherits).
RAW_ENTRIES = {
    m["id"]: {**{k: v for k, v in fam.items() if k != "models"}, **m}
    for fam in CATALOG_DATA["families"].values()
    for m in fam.get("models") or []
}

# --------------------------------------------------------------------------- coverage

REQUIRED_IDS = [
    "Qwen/Qwen2.5-0.5B-Instruct",
    "Qwen/Qwen2.5-1.5B-Instruct",
    "Qwen/Qwen2.5-3B-Instruct",
    "Qwen/Qwen2.5-7B-Instruct",
    "Qwen/Qwen2.5-14B-Instruct",
    "Qwen/Qwen2.5-32B-Instruct",
    "Qwen/Qwen2.5-72B-Instruct",
    "Qwen/Qwen3-0.6B",
    "Qwen/Qwen3-4B",
    "Qwen/Qwen3-8B",
    "Qwen/Qwen3-14B",
    "Qwen/Qwen3-32B",
    "Qwen/Qwen3-30B-A3B",
    "Qwen/Qwen3-235B-A22B",
    "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama/Llama-3.1-70B-Instruct",
    "meta-llama/Llama-3.1-405B-Instruct",
    "meta-llama/Llama-3.3-70B-Instruct",
    "mistralai/Mistral-7B-Instruct-v0.3",
    "mistralai/Mixtral-8x7B-Instruct-v0.1",
    "mistralai/Mixtral-8x22B-Instruct-v0.1",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1",
    "openai/gpt-oss-20b",
    "openai/gpt-oss-120b",
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2.5",
    "google/gemma-2-2b-it",
    "google/gemma-2-9b-it",
    "google/gemma-2-27b-it",
    "google/gemma-3-1b-it",
    "google/gemma-3-4b-it",
    "google/gemma-3-12b-it",
    "google/gemma-3-27b-it",
    "microsoft/Phi-3-mini-4k-instruct",
    "microsoft/Phi-3-medium-4k-instruct",
    "microsoft/phi-4",
    "BAAI/bge-base-en-v1.5",
    "BAAI/bge-large-en-v1.5",
    "BAAI/bge-m3",
    "intfloat/e5-large-v2",
    "intfloat/multilingual-e5-large",
    "thenlper/gte-large",
    "nomic-ai/nomic-embed-text-v1.5",
]


@pytest.mark.parametrize("model_id", REQUIRED_IDS, ids=REQUIRED_IDS)
def test_required_model_is_in_catalog(model_id: str) -> None:
    facts = lookup(model_id)
    assert facts is not None
    assert facts.id == model_id
    assert facts.estimated is False


@pytest.mark.parametrize("model_id", catalog_ids(), ids=catalog_ids())
def test_catalog_entry_is_consistent(model_id: str) -> None:
    facts = lookup(model_id)
    assert isinstance(facts, ModelFacts)
    assert facts.family != "unknown"
    assert facts.task in ("generate", "embed", "score")
    assert facts.attention_heads % facts.kv_heads == 0
    assert 0 < facts.active_params_b <= facts.total_params_b
    assert facts.layers > 0 and facts.head_dim > 0
    assert facts.precision in BYTES_PER_PARAM
    assert facts.context_length >= 512
    assert facts.weights_gib > 0 and math.isfinite(facts.weights_gib)
    # Every catalog model names its architecture (families by architecture), and every one
    # of its layers is in the KV layout.
    assert facts.architecture != "unknown"
    assert sum(g.count for g in facts.kv_layers) == facts.layers
    encoder = all(g.kind == "none" for g in facts.kv_layers)
    windowed = all(g.kind == "sliding" for g in facts.kv_layers)
    # KV grows with the context unless every layer is an encoder's (no cache) or windowed.
    assert (facts.kv_bytes_per_token > 0) is not (encoder or windowed)
    assert facts.vocab_size > 0
    assert facts.sources and all(isinstance(s, str) and s for s in facts.sources)
    assert isinstance(facts.extra_args, tuple)
    if facts.task != "generate":
        assert facts.tool_call_parser is None and facts.reasoning_parser is None
    # Case-insensitive, whitespace-tolerant lookup gives the same object.
    assert lookup(f"  {model_id.upper()} ") is facts
    assert resolve(model_id) is facts


def test_catalog_ids_are_unique_and_cached() -> None:
    ids = catalog_ids()
    assert len(ids) == len(set(ids)) >= len(REQUIRED_IDS)
    ids.append("mutating the copy must not change the catalog")
    assert "mutating the copy must not change the catalog" not in catalog_ids()


# --------------------------------------------------------------------------- reference facts

REFERENCE_FACTS = [
    (
        "moonshotai/Kimi-K2.5",
        dict(
            family="kimi-k2",
            task="generate",
            total_params_b=1040.0,
            active_params_b=32.0,
            layers=61,
            attention_heads=64,
            kv_heads=1,
            precision="int4",
            context_length=262144,
            gated=False,
            trust_remote_code=True,
            tool_call_parser="kimi_k2",
            reasoning_parser="kimi_k2",
            extra_args=("--mm-encoder-tp-mode", "data"),
            kv_bytes_per_token=70272,  # (512 + 64) * 61 * 2
        ),
        dict(weights_gib=554.1, min_vram_gib=665.0),
    ),
    (
        "Qwen/Qwen2.5-1.5B-Instruct",
        dict(
            family="qwen2.5",
            task="generate",
            layers=28,
            attention_heads=12,
            kv_heads=2,
            head_dim=128,
            precision="bf16",
            context_length=32768,
            gated=False,
            trust_remote_code=False,
            tool_call_parser="hermes",
            reasoning_parser=None,
            extra_args=(),
            kv_bytes_per_token=28672,  # 2 * 28 * 2 * 128 * 2
            min_vram_gib=None,
        ),
        dict(weights_gib=2.87),
    ),
    (
        "BAAI/bge-base-en-v1.5",
        dict(
            family="bge",
            task="embed",
            layers=12,
            attention_heads=12,
            kv_heads=12,
            precision="fp32",
            context_length=512,
            gated=False,
            trust_remote_code=False,
            tool_call_parser=None,
        ),
        # 109.5M float32 parameters: 0.41 GiB on disk, 0.20 GiB on the GPU (vLLM serves a
        # float32 checkpoint in 16 bits with --dtype auto).
        dict(weights_gib=0.20, checkpoint_gib=0.41),
    ),
    (
        "deepseek-ai/DeepSeek-V3",
        dict(
            family="deepseek-v3",
            precision="fp8",
            attention_heads=128,
            kv_heads=1,
            context_length=163840,
            trust_remote_code=True,
            tool_call_parser="deepseek_v3",
            kv_bytes_per_token=70272,
            active_params_b=37.0,
            num_experts=256,
        ),
        # 688.59 GB on disk (641.3 GiB); vLLM loads the main model without the MTP module:
        # 626.8 GiB, of which the 58 MoE layers' 256 routed experts are 609.0 (FP8).
        dict(weights_gib=626.8, checkpoint_gib=641.3, expert_weights_gib=609.0),
    ),
    (
        "deepseek-ai/DeepSeek-R1",
        dict(family="deepseek-r1", reasoning_parser="deepseek_r1", tool_call_parser=None),
        dict(weights_gib=626.8),
    ),
    (
        "openai/gpt-oss-120b",
        dict(precision="mxfp4", tool_call_parser="openai", attention_heads=64, head_dim=64),
        # 65.29 GB of MXFP4 files (60.81 GiB), loaded 1.06 x larger (measured; catalog.yaml).
        dict(weights_gib=64.45, checkpoint_gib=60.81),
    ),
    (
        "meta-llama/Llama-3.1-405B-Instruct",
        dict(gated=True, tool_call_parser="llama3_json", precision="bf16", layers=126),
        dict(weights_gib=756.0),
    ),
    (
        "meta-llama/Meta-Llama-3.1-8B-Instruct",  # alias
        dict(id="meta-llama/Llama-3.1-8B-Instruct", context_length=131072, gated=True),
        dict(),
    ),
    (
        "Qwen/Qwen3-30B-A3B",
        dict(reasoning_parser="qwen3", tool_call_parser="hermes", total_params_b=30.5),
        dict(active_params_b=3.3),
    ),
    (
        "mistralai/Mixtral-8x22B-Instruct-v0.1",
        dict(tool_call_parser="mistral", context_length=65536, gated=True),
        dict(),
    ),
    ("nomic-ai/nomic-embed-text-v1.5", dict(trust_remote_code=True, task="embed"), dict()),
    ("google/gemma-3-1b-it", dict(gated=True, attention_heads=4, kv_heads=1), dict()),
]


@pytest.mark.parametrize(
    ("model_id", "exact", "approx"), REFERENCE_FACTS, ids=[c[0] for c in REFERENCE_FACTS]
)
def test_reference_facts(model_id: str, exact: dict, approx: dict) -> None:
    facts = lookup(model_id)
    assert facts is not None
    for key, expected in exact.items():
        assert getattr(facts, key) == expected, key
    for key, expected in approx.items():
        assert getattr(facts, key) == pytest.approx(expected, abs=0.05), key


FAMILY_FLAGS = [
    ("qwen2.5", "hermes", None, False),
    ("qwen3", "hermes", "qwen3", False),
    ("llama-3.1", "llama3_json", None, False),
    ("kimi-k2", "kimi_k2", None, True),
    ("gpt-oss", "openai", None, False),
]


@pytest.mark.parametrize(
    ("family", "tool", "reasoning", "trust"), FAMILY_FLAGS, ids=[f[0] for f in FAMILY_FLAGS]
)
def test_family_flags_are_shared(family: str, tool: str, reasoning: str | None, trust: bool):
    members = [lookup(i) for i in catalog_ids() if lookup(i).family == family]
    assert members
    # Kimi-K2.5/-Thinking override the reasoning parser at entry level; the others inherit.
    assert all(m.tool_call_parser == tool and m.trust_remote_code is trust for m in members)
    assert any(m.reasoning_parser == reasoning for m in members)


# --------------------------------------------------------------------------- estimates

ESTIMATES = [
    # id, expected subset of facts
    (
        "Qwen/Qwen2.5-Coder-7B-Instruct",
        dict(
            family="qwen2.5",
            task="generate",
            total_params_b=7.0,
            active_params_b=7.0,
            precision="bf16",
            context_length=32768,
            tool_call_parser="hermes",
            gated=False,
        ),
    ),
    (
        "Qwen/Qwen2.5-Coder-7B-Instruct-AWQ",
        dict(family="qwen2.5", total_params_b=7.0, precision="int4"),
    ),
    (
        "Qwen/Qwen2.5-Math-1.5B-Instruct",
        dict(family="qwen2.5-math", total_params_b=1.5, context_length=4096, tool_call_parser=None),
    ),
    ("acme/tiny-0.5b", dict(family="unknown", total_params_b=0.5, context_length=4096)),
    (
        "google/gemma-3-270m-it",
        dict(family="gemma-3", total_params_b=0.27, gated=True, context_length=32768),
    ),
    (
        "some-org/Llama-70b-chat",
        dict(family="unknown", total_params_b=70.0, layers=80, attention_heads=64),
    ),
    (
        "mistralai/Mixtral-8x7B-v0.1",
        dict(family="mixtral", total_params_b=56.0, active_params_b=14.0, gated=True),
    ),
    (
        "Qwen/Qwen3-Coder-30B-A3B-Instruct",
        dict(family="qwen3", total_params_b=30.0, active_params_b=3.0, reasoning_parser="qwen3"),
    ),
    (
        "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        dict(total_params_b=235.0, active_params_b=22.0, precision="fp8"),
    ),
    ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", dict(family="unknown", precision="fp8")),
    ("x/model-13B-GPTQ", dict(precision="int4", total_params_b=13.0)),
    ("x/model-7b-bf16", dict(precision="bf16")),
    ("x/model-20b-mxfp4", dict(precision="mxfp4")),
    (
        "meta-llama/Llama-3.2-3B-Instruct",
        dict(family="llama-3.1", context_length=131072, tool_call_parser="llama3_json", gated=True),
    ),
    ("meta-llama/Meta-Llama-3-8B", dict(family="llama-3", context_length=8192)),
    # Embeddings, with or without a size in the id.
    (
        "BAAI/bge-small-en-v1.5",
        dict(family="bge", task="embed", total_params_b=0.033, context_length=512, layers=12),
    ),
    (
        "acme/my-embedding-model",
        dict(
            family="unknown",
            task="embed",
            total_params_b=0.109,
            precision="fp32",
            context_length=512,
        ),
    ),
    ("mixedbread-ai/mxbai-embed-large-v1", dict(task="embed", total_params_b=0.335, layers=24)),
    ("sentence-transformers/all-MiniLM-L6-v2", dict(task="embed", total_params_b=0.033)),
    ("Alibaba-NLP/gte-base-en-v1.5", dict(task="embed", total_params_b=0.109)),
    # A decoder-sized e5 is not one of the family's 512-token BERT encoders: no family, the
    # decoder embedding default context, and a KV cache (issue 12: e5-mistral got 512).
    (
        "intfloat/e5-mistral-13b-instruct",
        dict(family="e5-mistral", task="embed", total_params_b=13.0, context_length=4096),
    ),
    (
        "intfloat/e5-llama-13b-instruct",
        dict(
            family="unknown",
            task="embed",
            total_params_b=13.0,
            precision="bf16",
            context_length=4096,
        ),
    ),
    (
        "Qwen/Qwen3-Embedding-4B",
        dict(family="qwen3-embedding", task="embed", context_length=32768, tool_call_parser=None),
    ),
    (
        "nomic-ai/nomic-embed-text-v1",
        dict(family="nomic-embed", trust_remote_code=True, context_length=2048),
    ),
    ("Snowflake/snowflake-arctic-embed-m-v1.5", dict(task="embed")),
    ("acme/encoder-embed-300M", dict(task="embed", total_params_b=0.3, layers=24)),
]


@pytest.mark.parametrize(("model_id", "expected"), ESTIMATES, ids=[e[0] for e in ESTIMATES])
def test_estimate_from_name(model_id: str, expected: dict) -> None:
    assert lookup(model_id) is None
    facts = estimate_from_name(model_id)
    assert facts is not None
    assert facts.estimated is True
    assert facts.id == model_id
    assert facts.attention_heads % facts.kv_heads == 0
    assert 0 < facts.active_params_b <= facts.total_params_b
    assert facts.weights_gib > 0
    assert facts.sources[0].startswith("estimated from the id")
    for key, value in expected.items():
        assert getattr(facts, key) == value, key
    assert resolve(model_id) == facts


NOT_ESTIMABLE = [
    "acme/mystery-model",
    "mistralai/Mistral-Nemo-Instruct-2407",
    "moonshotai/Kimi-K2-Base",  # family known, but no size in the id
    "",
    "   ",
    "/",
    "x/99999999B",
    "x/9999999B",
    "x/0B",
    "x/1M",  # 0.001B: below the sane range
    "x/2001B",
    "x/7B-A70B",  # active above total
    "x/1e9B",
    "x/NaNB",
    "x/infB",
    "x/" + "7" * 5000 + "B",
    "a" * 300 + "-7B",  # longer than any Hugging Face id
    "\x00\x01\x02",
    "💥/🤖",
    "模型/模型-七B",
    "x/\u0667B",  # Arabic-Indic digit seven
    "../../etc/passwd",
]


@pytest.mark.parametrize("model_id", NOT_ESTIMABLE, ids=[repr(m)[:40] for m in NOT_ESTIMABLE])
def test_estimate_returns_none(model_id: str) -> None:
    assert estimate_from_name(model_id) is None
    assert resolve(model_id) is None


@pytest.mark.parametrize("value", [None, 7, 7.0, b"Qwen/Qwen2.5-7B", ["x-7B"], object()])
def test_non_strings_are_not_models(value: object) -> None:
    assert lookup(value) is None  # type: ignore[arg-type]
    assert estimate_from_name(value) is None  # type: ignore[arg-type]
    assert resolve(value) is None  # type: ignore[arg-type]


SIZE_BOUNDS = [("x/model-2000B", 2000.0), ("x/model-0.01B", 0.01), ("x/unicode-ünï-7B", 7.0)]


@pytest.mark.parametrize(("model_id", "size"), SIZE_BOUNDS, ids=[s[0] for s in SIZE_BOUNDS])
def test_estimate_size_bounds(model_id: str, size: float) -> None:
    facts = estimate_from_name(model_id)
    assert facts is not None and facts.total_params_b == size


# --------------------------------------------------------------------------- formulas

KV_FORMULA = [
    ("gqa-qwen2.5-7b", (28, 4, 128, None, None), 2 * 28 * 4 * 128 * 2),
    ("mha-bge-base", (12, 12, 64, None, None), 36864),
    ("mla-deepseek-v3", (61, 1, 192, 512, 64), (512 + 64) * 61 * 2),
]


@pytest.mark.parametrize(
    ("args", "expected"), [k[1:] for k in KV_FORMULA], ids=[k[0] for k in KV_FORMULA]
)
def test_kv_bytes_per_token(args: tuple, expected: int) -> None:
    assert kv_bytes_per_token(*args) == expected


# --------------------------------------------------------------------------- loader validation

GOOD_ENTRY = """
      - id: acme/Good-1B
        total_params_b: 1.0
        layers: 2
        attention_heads: 4
        kv_heads: 2
        head_dim: 64
        sources: [here]
"""

ESTIMATION = """
estimation:
  dense:
    - {max_params_b: 2000, layers: 2, attention_heads: 4, kv_heads: 2, head_dim: 64,
       like: x, source: y}
  encoder:
    - {name: base, max_params_b: 1, params_b: 0.1, layers: 2, attention_heads: 4, kv_heads: 4,
       head_dim: 64, like: x, source: y}
  default_context_length: {generate: 4096, embed_encoder: 512, embed_decoder: 4096}
"""

FAMILY_HEAD = """
families:
  acme:
    match: ["acme/"]
    task: generate
    gated: false
    trust_remote_code: false
    tool_call_parser: null
    reasoning_parser: null
    extra_args: []
    precision: bf16
    context_length: 4096
    models:
"""

BROKEN_CATALOGS = [
    ("heads-not-divisible", GOOD_ENTRY.replace("kv_heads: 2", "kv_heads: 3"), "not divisible"),
    ("no-sources", GOOD_ENTRY.replace("        sources: [here]\n", ""), "no sources"),
    ("duplicate-id", GOOD_ENTRY + GOOD_ENTRY, "duplicate id"),
    ("bad-precision", GOOD_ENTRY + "        precision: fp3\n", "unknown precision"),
    ("active-above-total", GOOD_ENTRY + "        active_params_b: 2.0\n", "active_params_b"),
    ("zero-layers", GOOD_ENTRY.replace("layers: 2", "layers: 0"), "layers must be positive"),
    (
        "mla-without-rank",
        GOOD_ENTRY.replace("kv_heads: 2", "kv_heads: 1").replace(
            "attention_heads: 4", "attention_heads: 4"
        )
        + "        attention: mla\n",
        "kv_lora_rank",
    ),
    ("bad-task", GOOD_ENTRY + "        task: chat\n", "task must be one of"),
    ("bad-kv-dtype", GOOD_ENTRY + "        kv_cache_dtype: fp4\n", "kv_cache_dtype"),
    (
        "layer-types-miscount",
        GOOD_ENTRY + "        layer_types: [full_attention]\n",
        "layer_types must name 2 layers",
    ),
    (
        "sliding-without-window",
        GOOD_ENTRY + "        layer_types: [sliding_attention, full_attention]\n",
        "sliding_window must be a int",
    ),
]


@pytest.mark.parametrize(
    ("entry", "message"), [b[1:] for b in BROKEN_CATALOGS], ids=[b[0] for b in BROKEN_CATALOGS]
)
def test_broken_catalog_is_rejected(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(ESTIMATION + FAMILY_HEAD + entry, encoding="utf-8")
    with pytest.raises(CatalogError, match=message):
        load_catalog(path)


def test_minimal_catalog_loads(tmp_path: Path) -> None:
    path = tmp_path / "catalog.yaml"
    path.write_text(ESTIMATION + FAMILY_HEAD + GOOD_ENTRY, encoding="utf-8")
    catalog = load_catalog(path)
    assert catalog.ids == ("acme/Good-1B",)
    assert catalog.models["acme/good-1b"].kv_bytes_per_token == 2 * 2 * 2 * 64 * 2


# (given id, the catalog id it is a likely typo of, or None)
NEAR = [
    ("a letter dropped", "Qwen/Qwen2.5-1.5B-Instrut", "Qwen/Qwen2.5-1.5B-Instruct"),
    ("a letter added", "deepseek-ai/DeepSeek-V3x", "deepseek-ai/DeepSeek-V3"),
    ("a catalog id in other case is the id", "qwen/qwen2.5-1.5b-instruct", None),
    ("another version is another model", "meta-llama/Llama-3.2-1B-Instruct", None),
    ("another size is another model", "Qwen/Qwen2.5-3B-Instruct", None),
    ("a sibling, not a typo", "Qwen/Qwen2.5-Coder-7B-Instruct", None),
    ("nothing close", "acme/Coolmodel-14B-Instruct", None),
    ("not a string", 42, None),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in NEAR], ids=[c[0] for c in NEAR])
def test_near_id(given: object, expected: str | None) -> None:
    assert near_id(given) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("model_id", catalog_ids(), ids=catalog_ids())
def test_weights_on_the_gpu_are_the_served_width_of_the_checkpoint(model_id: str) -> None:
    """The model cache holds the checkpoint; the GPU holds what vLLM loads: the same bytes,
    except a float32 checkpoint, which `--dtype auto` serves in 16 bits."""
    facts = lookup(model_id)
    assert facts is not None
    entry = RAW_ENTRIES[model_id]
    if "loaded_gib" in entry:  # measured in vLLM's own log (the entry cites it)
        assert facts.weights_gib == pytest.approx(entry["loaded_gib"] * entry.get("load_factor", 1))
        return
    ratio = 0.5 if facts.precision == "fp32" else 1.0
    factor = entry.get("load_factor", 1.0)  # loaded above the checkpoint, measured and cited
    assert facts.weights_gib == pytest.approx(facts.checkpoint_gib * ratio * factor)


# Ids the catalog does not list, estimated from the name and the family their prefix names.
# (id, family, parameters, precision, context, trust_remote_code, reasoning parser)
ESTIMATED_FAMILIES = [
    (
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
        "deepseek-r1-distill",
        32.0,
        "bf16",
        32768,
        False,
        "deepseek_r1",
    ),
    (
        "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
        "deepseek-r1-distill",
        8.0,
        "bf16",
        32768,
        False,
        "deepseek_r1",
    ),
]


@pytest.mark.parametrize(
    ("model_id", "family", "params_b", "precision", "context", "trust", "reasoning"),
    ESTIMATED_FAMILIES,
    ids=[c[0] for c in ESTIMATED_FAMILIES],
)
def test_distilled_models_are_their_base_architecture_not_the_teacher(
    model_id: str,
    family: str,
    params_b: float,
    precision: str,
    context: int,
    trust: bool,
    reasoning: str,
) -> None:
    facts = resolve(model_id)
    assert facts is not None and facts.estimated
    assert (facts.family, facts.total_params_b, facts.active_params_b) == (
        family,
        params_b,
        params_b,
    )
    assert (facts.precision, facts.context_length) == (precision, context)
    assert (facts.trust_remote_code, facts.reasoning_parser) == (trust, reasoning)
