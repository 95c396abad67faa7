"""function/model/model_config.py over every recorded model (tests/contract/testdata/hub): facts
from the config.json the Hub serves, the family chosen by architecture, the weights from the
files and the safetensors metadata, the context as vLLM derives it."""

from __future__ import annotations

import hub_server
import pytest

from function.model import catalog_lookup, model_config
from function.model.catalog import GIB
from function.model.model_config import SAFETENSORS_BYTES, HubModel

RECORDED = hub_server.recorded_models()
hub_model = hub_server.hub_model


@pytest.mark.parametrize("model", sorted(RECORDED))
def test_every_recorded_model_has_facts_from_its_config(model: str) -> None:
    doc = RECORDED[model]
    facts = model_config.facts(hub_model(doc))
    config = doc["files"]["config.json"]
    text = config.get("text_config") or config
    assert facts.origin == "hub" and facts.architecture == config["architectures"][0]
    # llava's text_config leaves the layers to LlamaConfig's default (test_hf_config.py)
    assert facts.layers == text.get("num_hidden_layers", 32)
    assert sum(g.count for g in facts.kv_layers) == facts.layers
    weights = [s["size"] for s in doc["siblings"] if s["rfilename"].endswith(".safetensors")]
    params = (doc.get("safetensors") or {}).get("parameters") or {}
    real = sum(weights) if weights else sum(n * SAFETENSORS_BYTES[d] for d, n in params.items())
    assert facts.checkpoint_gib == pytest.approx(real / GIB)
    provenance = dict(facts.provenance)
    assert provenance["config"].startswith(f"config.json of {model}@")
    assert facts.context_length > 0 and f"{facts.context_length} from" in provenance["context"]
    # The same model in the catalog (when it is) agrees with its config on the KV layout.
    listed = catalog_lookup.lookup(model)
    if listed is not None:
        assert facts.kv_bytes_per_token == listed.kv_bytes_per_token
        assert facts.task == listed.task


# (model, family by architecture, task, context, what else)
FAMILIES = [
    # The R1 distills are Llama / Qwen2 models: R1's reasoning parser, not DeepSeek-V3's MLA.
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek-r1-distill", "generate", 131072),
    # An id under qwen/qwen3- whose architecture the qwen3 family does not list: no family.
    ("Qwen/Qwen3-Next-80B-A3B-Instruct", None, "generate", 262144),
    ("mistralai/Mistral-Nemo-Instruct-2407", "mistral", "generate", 131072),
    ("ibm-granite/granite-4.0-h-small", None, "generate", 131072),
    ("google/gemma-3-4b-it", "gemma-3", "generate", 131072),
    ("BAAI/bge-m3", "bge", "embed", 8192),  # XLM-R: 8194 positions less the padding offset
    ("BAAI/bge-reranker-v2-m3", "bge-reranker", "score", 8192),
    ("Qwen/Qwen3-Reranker-0.6B", "qwen3-reranker", "score", 40960),
    ("Qwen/Qwen3-Embedding-0.6B", "qwen3-embedding", "embed", 32768),
    ("meta-llama/Llama-3.2-1B-Instruct", "llama-3.1", "generate", 131072),
]


@pytest.mark.parametrize(
    ("model", "family", "task", "context"), FAMILIES, ids=[f[0] for f in FAMILIES]
)
def test_family_by_architecture(model: str, family: str | None, task: str, context: int) -> None:
    facts = model_config.facts(hub_model(RECORDED[model]))
    assert (facts.family, facts.task, facts.context_length) == (family or "unknown", task, context)


def test_layer_kinds_from_the_config() -> None:
    kinds = {
        m: sorted((g.kind, g.count) for g in model_config.facts(hub_model(RECORDED[m])).kv_layers)
        for m in (
            "mistralai/Mistral-7B-v0.1",
            "google/gemma-3-27b-it",
            "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "nvidia/NVIDIA-Nemotron-Nano-9B-v2",
        )
    }
    assert kinds == {
        "mistralai/Mistral-7B-v0.1": [("sliding", 32)],  # one 4096 window, every layer
        "google/gemma-3-27b-it": [("full", 10), ("sliding", 52)],
        "Qwen/Qwen3-Next-80B-A3B-Instruct": [("full", 12), ("mamba", 36)],
        "nvidia/NVIDIA-Nemotron-Nano-9B-v2": [("full", 4), ("mamba", 27), ("none", 25)],
    }


BROKEN = [
    ("no config", {}, "has no config.json"),
    ("no architectures", {"num_hidden_layers": 2}, "names no architectures"),
    ("no layers", {"architectures": ["LlamaForCausalLM"]}, "names no num_hidden_layers"),
    (
        "no context",
        {
            "architectures": ["LlamaForCausalLM"],
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "hidden_size": 64,
        },
        "names no context length",
    ),
    (
        "nonsense values",
        {"architectures": "x", "num_hidden_layers": "many"},
        "names no architectures",
    ),
]


@pytest.mark.parametrize(("config", "says"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_config_that_cannot_be_sized_says_why(config: dict, says: str) -> None:
    model = HubModel(id="acme/X-1B", config=config or None, parameters={"BF16": 10**9})
    with pytest.raises(model_config.ConfigError, match=says):
        model_config.facts(model)


def test_mistral_format_repositories_are_recognised_and_load_their_own_weights() -> None:
    files = {
        "params.json": 300,
        "consolidated.safetensors": 47_000_000_000,
        "model-00001-of-00002.safetensors": 24_000_000_000,
        "model-00002-of-00002.safetensors": 23_000_000_000,
        "tekken.json": 15_000_000,
    }
    params = {
        "dim": 5120,
        "n_layers": 40,
        "n_heads": 32,
        "n_kv_heads": 8,
        "head_dim": 128,
        "vocab_size": 131072,
        "max_position_embeddings": 131072,
    }
    model = HubModel(id="acme/Small-24B", files=files, params_json=params)
    facts = model_config.facts(model)
    assert facts.mistral_format is True
    assert model_config.weight_files(model) == ["consolidated.safetensors"]
    assert facts.checkpoint_gib == pytest.approx(47e9 / GIB)
