"""A model's facts from what the Hugging Face Hub serves: config.json, the repository's file
list with sizes and its safetensors metadata. Pure: `function/model/hub.py` fetches, this reads.

What vLLM (the engine image's version) reads, read the same way. config.json goes through
its transformers config class first (function/model/hf_config.py: class defaults, attribute
maps, text sub-config), by hand when transformers lacks the model type; an architecture vLLM
does not serve is an UnsupportedArchitecture (function/model/vllm_support.py).

- Shape: `text_config` (or `language_config`, `llm_config`) when the architecture nests its
  language model; layers, heads, KV heads (`num_key_value_heads`, `n_head_kv`,
  `num_kv_heads`, `multi_query_group_num`, else the heads), `head_dim` (else hidden / heads),
  MLA when the model type is a DeepSeek-V2/V3 one with `kv_lora_rank`
  (model_arch_config_convertor.py `get_total_num_kv_heads`, `get_head_size`,
  `is_deepseek_mla`).
- Layer kinds: `layer_types`, `layers_block_type` or `hybrid_override_pattern` when given,
  else the architecture's pattern (catalog.yaml architectures), else one window for all
  layers when `sliding_window` is set and `use_sliding_window` is not false.
- Context: the smallest of the length keys vLLM reads, scaled by a RoPE factor (not for
  llama3 / longrope, yarn from `original_max_position_embeddings`, not for Gemma 3), LongRoPE
  models at their original length; pooling models with absolute positions also by the
  tokenizer's `model_max_length`, and by sentence-transformers' `max_seq_length`
  (vllm/config/model.py `_get_and_verify_max_len`).
- Weights: the weight files vLLM downloads (the first of *.safetensors, *.bin, *.pt, not
  `original/`; `consolidated*.safetensors` for Mistral-format repositories), their sizes from
  the file list, else parameters x bytes from the safetensors metadata. A float32 model (no
  quantization) is served in 16 bits: its F32 parameters take 2 bytes on the GPU
  (config/model.py `_resolve_auto_dtype`).
- Family (engine flags): by architecture, never by id alone (catalog_lookup.family_for).

Every problem is a ConfigError naming what is missing; nothing here raises anything else.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from function.model import catalog_lookup, hf_config, vllm_support
from function.model.catalog import GB, GIB, ModelFacts
from function.model.catalog_loader import ArchRule, CatalogError

# Bytes per element of each safetensors dtype (the Hub's metadata names them so).
SAFETENSORS_BYTES: dict[str, float] = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "F8_E8M0": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F4": 0.5,
}
WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt")  # model_fetch.WEIGHTS, vLLM's order
MISTRAL_WEIGHTS = "consolidated*.safetensors"
TEXT_CONFIG_KEYS = ("text_config", "language_config", "llm_config")
LENGTH_KEYS = (  # transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
MLA_MODEL_TYPES = {  # model_arch_config_convertor.py is_deepseek_mla
    "deepseek_v2",
    "deepseek_v3",
    "deepseek_v32",
    "deepseek_mtp",
    "kimi_k2",
    "kimi_linear",
    "glm_moe_dsa",
    "glm4_moe_lite",
    "longcat_flash",
    "pangu_ultra_moe",
    "bailing_hybrid",
}
FALCON_MODEL_TYPES = ("falcon", "RefinedWeb", "RefinedWebModel")  # the convertor's model types
EXPERT_COUNT_KEYS = ("num_experts", "moe_num_experts", "n_routed_experts", "num_local_experts")
ROBERTA_TYPES = ("roberta", "xlm-roberta", "camembert")
TORCH_DTYPES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
}
# Hub pipeline tags that name a pooling task (the model card's `pipeline_tag`).
PIPELINE_TASKS = {
    "feature-extraction": "embed",
    "sentence-similarity": "embed",
    "text-ranking": "score",
    "text-classification": "score",
}


class ConfigError(ValueError):
    """What the Hub served cannot describe a model the function can size."""


class UnsupportedArchitecture(ConfigError):
    """vLLM does not serve the model's architecture: refused, not estimated."""


@dataclass(frozen=True)
class HubModel:
    """What the Hub said about one revision of a model, as plain data."""

    id: str
    sha: str = ""
    gated: bool = False
    pipeline_tag: str | None = None
    # safetensors metadata: dtype -> parameters
    parameters: Mapping[str, int] = field(default_factory=dict)
    # repository files: name -> size in bytes (None when the Hub gave no size)
    files: Mapping[str, int | None] = field(default_factory=dict)
    config: Mapping[str, Any] | None = None
    params_json: Mapping[str, Any] | None = None  # Mistral-format params.json
    tokenizer_config: Mapping[str, Any] | None = None
    sentence_config: Mapping[str, Any] | None = None  # sentence_bert_config.json


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _text(config: Mapping[str, Any]) -> Mapping[str, Any]:
    for key in TEXT_CONFIG_KEYS:
        if isinstance(config.get(key), Mapping):
            return config[key]  # type: ignore[no-any-return]
    return config


def mistral_format(model: HubModel) -> bool:
    """A Mistral-format repository: consolidated weights and params.json (vLLM's
    `is_mistral_model_repo` and its params.json check)."""
    names = list(model.files)
    return "params.json" in names and any(fnmatch.fnmatch(n, MISTRAL_WEIGHTS) for n in names)


def weight_files(model: HubModel) -> list[str]:
    """The files vLLM loads weights from (function/plan/model_fetch.py picks the same)."""
    names = [n for n in model.files if not n.startswith("original/")]
    if mistral_format(model):
        return [n for n in names if fnmatch.fnmatch(n, MISTRAL_WEIGHTS)]
    for pattern in WEIGHT_PATTERNS:
        found = [n for n in names if fnmatch.fnmatch(n, pattern) and "/" not in n]
        if found:
            return found
    return []


def _from_params_json(params: Mapping[str, Any]) -> dict[str, Any]:
    """params.json (Mistral format) in config.json's words (vLLM's mistral config parser)."""
    out: dict[str, Any] = {"architectures": ["MistralForCausalLM"], "model_type": "mistral"}
    names = {
        "dim": "hidden_size",
        "n_layers": "num_hidden_layers",
        "n_heads": "num_attention_heads",
        "n_kv_heads": "num_key_value_heads",
        "head_dim": "head_dim",
        "hidden_dim": "intermediate_size",
        "vocab_size": "vocab_size",
        "max_position_embeddings": "max_position_embeddings",
        "max_seq_len": "max_seq_len",
        "sliding_window": "sliding_window",
    }
    for key, name in names.items():
        if params.get(key) is not None:
            out[name] = params[key]
    if isinstance(params.get("vision_encoder"), Mapping):
        out["architectures"] = ["PixtralForConditionalGeneration"]
        out["vision_config"] = dict(params["vision_encoder"])
    return out


def context_length(model: HubModel, text: Mapping[str, Any], pooling: bool) -> tuple[int, str]:
    """The context vLLM derives, and which key gave it."""
    found = [(v, k) for k in LENGTH_KEYS if (v := _int(text.get(k))) is not None]
    if not found:
        raise ConfigError(
            f"config.json of {model.id} names no context length ({', '.join(LENGTH_KEYS[:3])} ...)"
        )
    length, key = min(found)
    if _int(text.get("model_max_length")):
        length, key = text["model_max_length"], "model_max_length"
    model_type = str(text.get("model_type") or "")
    pad = text.get("pad_token_id")
    if model_type in ROBERTA_TYPES and isinstance(pad, int) and 0 <= pad < length:
        # RoBERTa-style embeddings number positions from padding_idx + 1
        # (transformers create_position_ids_from_input_ids): 514 positions hold 512 tokens.
        length, key = length - pad - 1, f"{key} - padding_idx - 1"
    rope = text.get("rope_scaling") or text.get("rope_parameters")
    if isinstance(rope, Mapping) and "gemma3" not in model_type:
        kind = rope.get("rope_type") or rope.get("type")
        if kind == "longrope" and _int(text.get("original_max_position_embeddings")):
            return text["original_max_position_embeddings"], "original_max_position_embeddings"
        if kind not in ("su", "longrope", "llama3", None):
            factor = rope.get("factor", 1.0)
            if kind == "yarn" and _int(rope.get("original_max_position_embeddings")):
                length = rope["original_max_position_embeddings"]
            if isinstance(factor, int | float) and factor > 0:
                length, key = int(length * factor), f"{key} x rope factor {factor:g}"
    if pooling and text.get("position_embedding_type", "absolute") == "absolute":
        limit = _int((model.tokenizer_config or {}).get("model_max_length"))
        if limit and limit < length:
            length, key = limit, "tokenizer_config.json model_max_length"
    limit = _int((model.sentence_config or {}).get("max_seq_length"))
    if limit:
        length, key = limit, "sentence_bert_config.json max_seq_length"
    return int(length), key


def _layer_types(text: Mapping[str, Any], layers: int) -> list[str] | None:
    kinds = text.get("layer_types") or text.get("layers_block_type")
    if isinstance(kinds, list) and len(kinds) == layers:
        names = {"attention": "full_attention", "hybrid": "full_attention", "mamba": "mamba"}
        return [names.get(k, k) if isinstance(k, str) else "full_attention" for k in kinds]
    pattern = text.get("hybrid_override_pattern")  # nemotron_h: M mamba, * attention, - MLP
    if isinstance(pattern, str) and len(pattern) == layers:
        return [{"M": "mamba", "*": "full_attention"}.get(c, "mlp") for c in pattern]
    return None


def _mamba_state_bytes(text: Mapping[str, Any], dtype_bytes: int) -> int:
    """Conv and SSM state of one request in one mamba2 / linear-attention layer, whole model
    (MambaStateShapeCalculator.mamba2_state_shape; an approximation for other kinds)."""
    heads = _int(text.get("mamba_n_heads")) or _int(text.get("mamba_num_heads"))
    head_dim = _int(text.get("mamba_d_head")) or _int(text.get("mamba_head_dim"))
    state = _int(text.get("mamba_d_state")) or _int(text.get("ssm_state_size"))
    groups = _int(text.get("mamba_n_groups")) or _int(text.get("n_groups")) or 1
    conv = _int(text.get("mamba_d_conv")) or _int(text.get("conv_kernel")) or 4
    if heads and head_dim and state:
        inner = heads * head_dim
        return (conv - 1) * (
            inner + 2 * groups * state
        ) * dtype_bytes + heads * head_dim * state * 4
    v_heads = _int(text.get("linear_num_value_heads"))
    k_heads = _int(text.get("linear_num_key_heads"))
    k_dim, v_dim = _int(text.get("linear_key_head_dim")), _int(text.get("linear_value_head_dim"))
    if v_heads and k_heads and k_dim and v_dim:  # gated delta net (Qwen3-Next)
        conv = _int(text.get("linear_conv_kernel_dim")) or 4
        width = 2 * k_heads * k_dim + v_heads * v_dim
        return (conv - 1) * width * dtype_bytes + v_heads * k_dim * v_dim * 4
    return 0


def _precision(config: Mapping[str, Any], text: Mapping[str, Any]) -> tuple[str, str, bool]:
    """(precision label, KV cache dtype the checkpoint asks for, quantized)."""
    quant = config.get("quantization_config") or text.get("quantization_config")
    quant = quant or config.get("compression_config")
    dtype = str(config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or "")
    if not isinstance(quant, Mapping):
        return TORCH_DTYPES.get(dtype, "bf16"), "auto", False
    method = str(quant.get("quant_method") or "").lower().replace("_", "-")
    kv = "auto"
    scheme = quant.get("kv_cache_scheme")
    if isinstance(scheme, Mapping) and scheme.get("num_bits") == 8:
        kv = "fp8"
    if str(dict(quant.get("quantization") or {}).get("kv_cache_quant_algo", "")).upper() == "FP8":
        kv = "fp8"
    bits = quant.get("bits") or quant.get("weight_bits")
    if method in ("fp8", "fbgemm-fp8", "modelopt", "ptpc-fp8"):
        return "fp8", kv, True
    if method == "mxfp4":
        return "mxfp4", kv, True
    if method in ("awq", "gptq", "awq-marlin", "gptq-marlin", "bitsandbytes", "hqq"):
        return ("int8" if bits == 8 or quant.get("load_in_8bit") else "int4"), kv, True
    if method == "compressed-tensors":
        groups = quant.get("config_groups") or {}
        weights = (
            [g.get("weights") for g in groups.values() if isinstance(g, Mapping)]
            if isinstance(groups, Mapping)
            else []
        )
        nbits = {w.get("num_bits") for w in weights if isinstance(w, Mapping)}
        kinds = {w.get("type") for w in weights if isinstance(w, Mapping)}
        if 4 in nbits:
            return "int4", kv, True
        return ("fp8" if "float" in kinds else "int8"), kv, True
    return TORCH_DTYPES.get(dtype, "bf16"), kv, True


def _weights(model: HubModel, precision: str, quantized: bool) -> tuple[float, float, str]:
    """(checkpoint GiB on disk, GiB on the GPU, how it was read)."""
    files = weight_files(model)
    sizes = [model.files[f] for f in files]
    float32 = precision == "fp32" and not quantized
    f32_bytes = 4 * model.parameters.get("F32", 0) if float32 else 0
    if files and all(isinstance(s, int) for s in sizes):
        stored = float(sum(sizes))  # type: ignore[arg-type]
        how = f"{len(files)} weight file(s), {int(stored):,} bytes"
    elif model.parameters:
        stored = sum(n * SAFETENSORS_BYTES.get(d, 2) for d, n in model.parameters.items())
        how = "safetensors metadata: " + ", ".join(
            f"{d} {n:,}" for d, n in sorted(model.parameters.items())
        )
    else:
        raise ConfigError(f"the Hub lists no weight files with sizes for {model.id}")
    served = stored - f32_bytes / 2 if float32 else stored
    if float32:
        how += "; float32 served in 16 bits"
    return stored / GIB, served / GIB, how


def _pick_task(model: HubModel, family: str | None, rule: ArchRule, arch: str) -> tuple[str, str]:
    fam_task = catalog_lookup.family_task(family) if family else None
    if fam_task:
        return fam_task, f"family {family}"
    tag_task = PIPELINE_TASKS.get(model.pipeline_tag or "")
    if rule.task == "generate" and tag_task and "modules.json" in model.files:
        return tag_task, f"pipeline_tag {model.pipeline_tag} (sentence-transformers modules.json)"
    return rule.task, f"architecture {arch}"


def facts(model: HubModel, *, transformers: bool = True) -> ModelFacts:
    """The model's facts, its family chosen by architecture; ConfigError when the Hub's
    answer cannot be sized (UnsupportedArchitecture when vLLM does not serve it).
    `transformers=False` reads config.json by hand only (the other path, for tests)."""
    try:
        return _facts(model, transformers)
    except ConfigError:
        raise
    except CatalogError as e:
        raise ConfigError(f"config.json of {model.id} cannot be sized: {e}") from e
    except Exception as e:  # the Hub is input: never crash on it
        raise ConfigError(
            f"config.json of {model.id} cannot be read ({type(e).__name__}: {e})"
        ) from e


def _read(
    config: Mapping[str, Any], model: HubModel, transformers: bool
) -> tuple[Mapping[str, Any], Mapping[str, Any], str]:
    """(config, text config, how read): through transformers' config class when it knows the
    model type (function/model/hf_config.py), else by hand."""
    if transformers:
        try:
            read = hf_config.read(config)
        except hf_config.HFConfigError as e:
            raise ConfigError(f"config.json of {model.id} cannot be read: {e}") from e
        if read is not None:
            return read[0], read[1], "transformers config class"
    return config, _text(config), "by hand"


def _supported(arch: str, config: Mapping[str, Any], model: HubModel) -> str:
    try:
        return vllm_support.support(
            arch, config.get("auto_map"), lambda: _in_transformers(arch)
        ).note
    except vllm_support.Unsupported as e:
        raise UnsupportedArchitecture(f"{model.id}: {e}") from e


def _model_type_of(config: Mapping[str, Any], text: Mapping[str, Any]) -> str:
    return str(text.get("model_type") or config.get("model_type") or "")


def _falcon_multi_query(text: Mapping[str, Any], model_type: str) -> bool:
    """Falcon's multi-query attention has one KV head unless the new decoder architecture
    is on (model_arch_config_convertor.py FalconModelArchConfigConvertor)."""
    return (
        model_type in FALCON_MODEL_TYPES
        and text.get("multi_query") is True
        and not text.get("new_decoder_architecture")
    )


def _in_transformers(arch: str) -> bool:
    try:
        return hasattr(hf_config.transformers_module(), arch)
    except Exception:  # transformers broken or absent: vLLM's backend would not find it either
        return False


def _facts(model: HubModel, transformers: bool = True) -> ModelFacts:
    mistral = mistral_format(model)
    config: Mapping[str, Any] | None = model.config
    if config is None and mistral and model.params_json is not None:
        config = _from_params_json(model.params_json)
    if not isinstance(config, Mapping):
        raise ConfigError(f"{model.id} has no config.json (nor a Mistral params.json)")
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else None
    if arch is None:
        raise ConfigError(f"config.json of {model.id} names no architectures")
    served_as = _supported(arch, config, model)
    rule = catalog_lookup.arch_rule(arch)
    config, text, read_how = _read(config, model, transformers)
    where = f"config.json of {model.id}"
    layers = _int(text.get("num_hidden_layers")) or _int(text.get("n_layer"))
    heads = _int(text.get("num_attention_heads")) or _int(text.get("n_head"))
    hidden = _int(text.get("hidden_size")) or _int(text.get("n_embd")) or 0
    if not layers or not heads:
        raise ConfigError(f"{where} names no num_hidden_layers / num_attention_heads")
    kv_heads = next(
        (
            v
            for k in ("n_head_kv", "num_kv_heads", "num_key_value_heads", "multi_query_group_num")
            if (v := _int(text.get(k)))
        ),
        heads,
    )
    if _falcon_multi_query(text, _model_type_of(config, text)):
        kv_heads = 1
    head_dim = _int(text.get("head_dim")) or (hidden // heads if hidden else 0)
    if not head_dim:
        raise ConfigError(f"{where} names neither head_dim nor hidden_size")
    precision, kv_dtype, quantized = _precision(config, text)
    model_type = str(text.get("model_type") or config.get("model_type") or "")
    family = catalog_lookup.family_for(model.id, arch)
    task, task_from = _pick_task(model, family, rule, arch)
    pooling = task != "generate"
    length, length_key = context_length(model, text, pooling)
    checkpoint, served, weights_how = _weights(model, precision, quantized)
    total = sum(model.parameters.values()) / 1e9 if model.parameters else served * GIB / 2e9
    entry: dict[str, Any] = {
        "id": model.id,
        "architecture": arch,
        "task": task,
        "total_params_b": max(total, 1e-6),
        "layers": layers,
        "attention_heads": heads,
        "kv_heads": kv_heads if heads % kv_heads == 0 else heads,
        "head_dim": head_dim,
        "precision": precision,
        "kv_cache_dtype": kv_dtype,
        "context_length": length,
        "checkpoint_gb": checkpoint * GIB / GB,
        "loaded_gib": served,
        "vocab_size": _int(text.get("vocab_size")),
        "hidden_size": hidden or None,
        "intermediate_size": _int(text.get("intermediate_size")) or _int(text.get("n_inner")),
        "gated": bool(model.gated),
        "mistral_format": mistral,
        "origin": "hub",
        "sources": [
            f"https://huggingface.co/{model.id}" + (f" @ {model.sha}" if model.sha else "")
        ],
    }
    experts = next((v for k in EXPERT_COUNT_KEYS if (v := _int(text.get(k)))), None)
    topk = _int(text.get("num_experts_per_tok")) or _int(text.get("experts_per_token"))
    if experts and experts > 1 and topk:
        width = _int(text.get("moe_intermediate_size")) or _int(text.get("intermediate_size"))
        entry |= {"experts_per_token": topk, "moe_intermediate_size": width}
        entry |= {"num_experts": experts, "moe_layers": moe_layers(text, layers)}
    if model_type in MLA_MODEL_TYPES and _int(text.get("kv_lora_rank")):
        entry |= {
            "attention": "mla",
            "kv_heads": 1,
            "kv_lora_rank": text["kv_lora_rank"],
            "qk_rope_head_dim": _int(text.get("qk_rope_head_dim")) or 0,
        }
    kinds = _layer_types(text, layers)
    if kinds is not None:
        entry["layer_types"] = kinds
        if "mamba" in kinds:
            entry["mamba_state_bytes"] = _mamba_state_bytes(text, 2)
    use_sliding = text.get("use_sliding_window")
    window = _int(text.get("sliding_window"))
    if window and use_sliding is not False:
        entry["sliding_window"] = window
    elif kinds is not None and "sliding_attention" in kinds:
        raise ConfigError(f"{where} has sliding layers but no sliding_window")
    if _int(text.get("attention_chunk_size")):
        entry["attention_chunk_size"] = text["attention_chunk_size"]
    if rule.pattern_key and _int(text.get(rule.pattern_key)):
        entry["pattern_length"] = text[rule.pattern_key]
    if kinds is None and rule.layer_pattern and entry.get("sliding_window") is None:
        if "chunked_attention" in rule.layer_pattern and entry.get("attention_chunk_size"):
            pass
        elif "sliding_attention" in rule.layer_pattern:
            raise ConfigError(f"{where}: {arch} alternates windowed layers but names no window")
    if config.get("vision_config") is not None and not rule.multimodal:
        entry["multimodal"] = ["image"]
    entry["provenance"] = [
        (
            "config",
            f"config.json of {model.id}"
            + (f"@{model.sha[:12]}" if model.sha else "")
            + f", read {read_how}",
        ),
        ("architecture", served_as),
        ("family", f"{family or 'none'} (architecture {arch})"),
        ("task", task_from),
        ("context", f"{length} from {length_key}"),
        ("weights", weights_how),
    ]
    if family is None:
        entry |= {"trust_remote_code": bool(config.get("auto_map")) and arch not in _known()}
    return catalog_lookup.build(family, entry)


def moe_layers(text: Mapping[str, Any], layers: int) -> int:
    """How many layers hold routed experts, as vLLM 0.17.1's model classes decide: DeepSeek-V2/V3,
    Kimi-K2 and GLM-4.5 from `first_k_dense_replace` every `moe_layer_freq`-th layer
    (deepseek_v2.py, glm4_moe.py), Qwen MoE every `decoder_sparse_step`-th layer not in
    `mlp_only_layers` (qwen3_moe.py), Llama 4 every `interleave_moe_layer_step`-th
    (llama4.py); else every layer (Mixtral, gpt-oss)."""
    first = text.get("first_k_dense_replace")
    if isinstance(first, int) and not isinstance(first, bool) and 0 <= first < layers:
        freq = _int(text.get("moe_layer_freq")) or 1
        return sum(1 for i in range(first, layers) if i % freq == 0)
    step = _int(text.get("decoder_sparse_step")) or _int(text.get("interleave_moe_layer_step"))
    dense = text.get("mlp_only_layers") or []
    dense = set(dense) if isinstance(dense, list) else set()
    step = step or 1
    count = sum(1 for i in range(layers) if i not in dense and (i + 1) % step == 0)
    return count or layers


def _known() -> frozenset[str]:
    """Architectures the catalog names (vLLM serves them without remote code)."""
    return catalog_lookup.known_architectures()
