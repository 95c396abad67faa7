"""Configs read through transformers' config classes (function/model/hf_config.py), as vLLM
0.17.1 reads them, against the hand path; and architectures vLLM 0.17.1 does not serve
refused (function/model/vllm_support.py)."""

from __future__ import annotations

import dataclasses
import re

import hub_server
import pytest
from conftest import ROOT

from function.model import catalog_lookup, hf_config, model_config, vllm_support
from function.model.model_config import HubModel

RECORDED = hub_server.recorded_models()
hub_model = hub_server.hub_model

# Recorded configs whose hand reading is known wrong: (model, the reason). Everything else
# gives the same facts both ways.
HAND_PATH_WRONG = {
    "llava-hf/llava-1.5-7b-hf": "text_config lists only what differs from LlamaConfig: by "
    "hand it names no layers (ConfigError, the name estimate)",
}


def _comparable(facts: object) -> dict:
    out = dataclasses.asdict(facts)  # type: ignore[call-overload]
    out.pop("provenance")  # says which path read the config
    return out


@pytest.mark.parametrize("model", sorted(set(RECORDED) - set(HAND_PATH_WRONG)))
def test_both_paths_give_the_same_facts(model: str) -> None:
    doc = hub_model(RECORDED[model])
    by_hand = model_config.facts(doc, transformers=False)
    through = model_config.facts(doc)
    assert _comparable(through) == _comparable(by_hand)


def test_the_hand_path_is_wrong_only_where_listed() -> None:
    for model in HAND_PATH_WRONG:
        with pytest.raises(model_config.ConfigError, match="names no num_hidden_layers"):
            model_config.facts(hub_model(RECORDED[model]), transformers=False)


def test_llava_is_read_as_vllm_reads_it() -> None:
    facts = model_config.facts(hub_model(RECORDED["llava-hf/llava-1.5-7b-hf"]))
    assert facts.context_length == 4096  # text_config max_position_embeddings
    # Llama-2-7B's shape from LlamaConfig's defaults: 32 layers x 32 KV heads x 128 x K,V x 2 B
    assert (facts.layers, facts.kv_heads, facts.head_dim) == (32, 32, 128)
    assert facts.kv_bytes_per_token == 32 * 32 * 128 * 2 * 2 == 524288
    assert facts.multimodal == ("image",)
    assert "read transformers config class" in dict(facts.provenance)["config"]


def _config(model_type: str, **fields: object) -> dict:
    return {"model_type": model_type, **fields}


# (case, config.json, the facts expected: field -> value, kv_layers as (kind, count, window))
READ_AS_VLLM = [
    (
        "attribute map: GPT-2's n_layer / n_head / n_embd / n_positions",
        _config(
            "gpt2",
            architectures=["GPT2LMHeadModel"],
            n_layer=12,
            n_head=12,
            n_embd=768,
            n_positions=1024,
        ),
        {"layers": 12, "attention_heads": 12, "kv_heads": 12, "head_dim": 64},
        1024,
    ),
    (
        "attribute map: Falcon's n_head_kv defaults from the class (multi_query)",
        _config(
            "falcon",
            architectures=["FalconForCausalLM"],
            num_hidden_layers=32,
            num_attention_heads=71,
            hidden_size=4544,
            multi_query=True,
            new_decoder_architecture=False,
            max_position_embeddings=2048,
        ),
        {"layers": 32, "attention_heads": 71, "head_dim": 64},
        2048,
    ),
    (
        "rope scaling: legacy `type: yarn` standardised to rope_type, factor x original",
        _config(
            "qwen2",
            architectures=["Qwen2ForCausalLM"],
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            hidden_size=512,
            max_position_embeddings=32768,
            rope_scaling={"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
        ),
        {"kv_heads": 2, "head_dim": 64},
        131072,
    ),
    (
        "sliding window: MistralConfig's default window applies when config.json omits it",
        _config(
            "mistral",
            architectures=["MistralForCausalLM"],
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=8,
            hidden_size=512,
            max_position_embeddings=32768,
        ),
        {"kv_layers": [("sliding", 4, 4096)]},
        32768,
    ),
    (
        "sliding window: use_sliding_window false clears Qwen2's window",
        _config(
            "qwen2",
            architectures=["Qwen2ForCausalLM"],
            num_hidden_layers=4,
            num_attention_heads=8,
            hidden_size=512,
            max_position_embeddings=32768,
            sliding_window=4096,
            use_sliding_window=False,
        ),
        {"kv_layers": [("full", 4, 0)]},
        32768,
    ),
]


@pytest.mark.parametrize(
    ("config", "expected", "context"),
    [c[1:] for c in READ_AS_VLLM],
    ids=[c[0] for c in READ_AS_VLLM],
)
def test_configs_are_read_as_vllm_reads_them(config: dict, expected: dict, context: int) -> None:
    facts = model_config.facts(HubModel(id="acme/X", config=config, parameters={"BF16": 10**9}))
    got = {k: getattr(facts, k) for k in expected if k != "kv_layers"}
    if "kv_layers" in expected:
        got["kv_layers"] = [(g.kind, g.count, g.window) for g in facts.kv_layers]
    assert got == expected
    assert facts.context_length == context


def test_falcon_kv_heads_follow_the_class() -> None:
    config = READ_AS_VLLM[1][1]
    facts = model_config.facts(HubModel(id="acme/X", config=config, parameters={"BF16": 10**9}))
    assert facts.kv_heads == 1  # FalconConfig: multi_query -> one KV head (num_kv_heads)


# (case, config.json transformers refuses, a part of the ConfigError)
GARBAGE = [
    (
        "text_config a string",
        _config("llava", architectures=["LlavaForConditionalGeneration"], text_config="x"),
        "llava config",
    ),
    (
        "vision_config a number",
        _config("llava", architectures=["LlavaForConditionalGeneration"], vision_config=5),
        "llava config",
    ),
    (
        "rope_scaling a list",
        _config("llama", architectures=["LlamaForCausalLM"], rope_scaling=[1, 2]),
        "llama config",
    ),
    (
        "layer_types of an unknown kind",
        _config(
            "qwen2", architectures=["Qwen2ForCausalLM"], num_hidden_layers=2, layer_types=["x", "y"]
        ),
        "layer_types",
    ),
    (
        "a hostile layer count (per-layer lists would take minutes)",
        _config("qwen2", architectures=["Qwen2ForCausalLM"], num_hidden_layers=10**7),
        "more layers than any model has",
    ),
    (
        "a hostile layer count in the text config",
        _config(
            "llava",
            architectures=["LlavaForConditionalGeneration"],
            text_config={"model_type": "qwen2", "n_layer": 10**9},
        ),
        "more layers than any model has",
    ),
    (
        "zero attention heads",
        _config("llama", architectures=["LlamaForCausalLM"], num_attention_heads=0),
        "ZeroDivisionError",
    ),
]


@pytest.mark.parametrize(("config", "says"), [g[1:] for g in GARBAGE], ids=[g[0] for g in GARBAGE])
def test_transformers_raising_is_a_config_error(config: dict, says: str) -> None:
    model = HubModel(id="acme/X", config=config, parameters={"BF16": 10**9})
    with pytest.raises(model_config.ConfigError, match=says) as raised:
        model_config.facts(model)
    assert "config.json of acme/X cannot be read" in str(raised.value)
    assert not isinstance(raised.value, model_config.UnsupportedArchitecture)


def test_model_types_transformers_lacks_are_read_by_hand() -> None:
    assert hf_config.read({"model_type": "acme_remote", "num_hidden_layers": 2}) is None
    # vLLM reads these with its own config classes (transformers_utils/config.py)
    assert "deepseek_v32" in vllm_support.vllm_config_model_types()
    assert hf_config.read({"model_type": "deepseek_v32"}) is None


def test_the_view_is_read_only_and_maps_attributes() -> None:
    read = hf_config.read({"model_type": "gpt2", "n_layer": 3})
    assert read is not None
    whole, text = read
    assert text["num_hidden_layers"] == text["n_layer"] == 3
    assert "to_dict" not in whole and "_private" not in whole and "nonsense" not in whole
    assert whole.get("nonsense") is None
    with pytest.raises(TypeError):
        whole["n_layer"] = 4  # type: ignore[index]


BASE = {
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "hidden_size": 64,
    "max_position_embeddings": 2048,
}
# (case, config.json, a part of the refusal)
UNSUPPORTED = [
    (
        "an architecture neither vLLM nor transformers knows",
        {**BASE, "architectures": ["AcmeForCausalLM"], "model_type": "acme"},
        "neither vLLM's model registry nor transformers defines it",
    ),
    (
        "a remote-code architecture",
        {
            **BASE,
            "architectures": ["AcmeChatForCausalLM"],
            "model_type": "acme_chat",
            "auto_map": {"AutoModelForCausalLM": "modeling_acme.AcmeChatForCausalLM"},
        },
        "the repository's own code defines it, auto_map",
    ),
    (
        "an architecture vLLM removed",
        {**BASE, "architectures": ["MllamaForConditionalGeneration"], "model_type": "mllama"},
        "its last release with it was 0.10.2",
    ),
]


@pytest.mark.parametrize(
    ("config", "says"), [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED]
)
def test_unsupported_architectures_are_refused(config: dict, says: str) -> None:
    model = HubModel(id="acme/X", config=config, parameters={"BF16": 10**9})
    with pytest.raises(model_config.UnsupportedArchitecture) as raised:
        model_config.facts(model)
    message = str(raised.value)
    arch = config["architectures"][0]
    assert f"vLLM 0.17.1 does not serve architecture {arch}" in message
    assert says in message and "serve a model whose architecture vLLM lists" in message


# (case, architecture, how vLLM 0.17.1 serves it)
SERVED = [
    ("registered", "LlamaForCausalLM", "native"),
    ("a Transformers-backend class", "TransformersForCausalLM", "native"),
    ("converted from a registered base", "LlamaForSequenceClassification", "converted"),
    ("a transformers class vLLM lacks", "HeliumForCausalLM", "transformers-backend"),
]


@pytest.mark.parametrize(("arch", "how"), [s[1:] for s in SERVED], ids=[s[0] for s in SERVED])
def test_what_vllm_serves(arch: str, how: str) -> None:
    known = hasattr(hf_config.transformers_module(), arch)
    assert vllm_support.support(arch, None, lambda: known).how == how


def test_every_catalog_architecture_is_one_vllm_serves() -> None:
    for arch in sorted(catalog_lookup.known_architectures()):
        vllm_support.support(arch, None, lambda: False)  # raises when not


def test_the_architecture_list_is_vllms() -> None:
    data = vllm_support._data()
    versions = (ROOT / "kcl" / "versions.k").read_text()
    pinned = re.search(r'^vllm_version = "([^"]+)"', versions, re.MULTILINE)
    assert pinned and data["version"] == pinned.group(1) == "0.17.1"
    assert "LlamaForCausalLM" in data["architectures"]["text_generation"]
    assert "LlavaForConditionalGeneration" in data["architectures"]["multimodal"]
    assert len(vllm_support.registered()) > 300


def test_transformers_is_pinned_within_what_the_engines_vllm_accepts() -> None:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d.split("==")[1] for d in deps if d.startswith("transformers==")]
    # vLLM 0.17.1 requires transformers >= 4.56.0, < 5 (its PyPI metadata)
    assert (4, 56) <= tuple(int(p) for p in pin.split(".")[:2]) < (5, 0)
    assert hf_config.transformers_module().__version__ == pin
