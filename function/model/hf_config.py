"""config.json read as vLLM 0.17.1 reads it: built into the transformers config class of its
`model_type` (transformers_utils/config.py `get_config`), the language model's part taken
with `get_text_config()` (`get_hf_text_config`). So defaults a sparse sub-config leaves out
(llava's `text_config` lists only what differs from LlamaConfig), attribute maps (`n_layer`,
`n_head`, `n_positions` ...), rope scaling (`type` -> `rope_type`) and sliding-window fields
(`use_sliding_window: false` clears the window) come out as vLLM sees them.

transformers is imported here, lazily, on the first Hub config (render and the function start
without it). A model type transformers does not know (remote code, `auto_map`), or one vLLM
reads with its own config class (`vllm_config_model_types` in vllm_architectures.yaml), is read
by hand (`None` here): `PretrainedConfig(**d)` would add only generic defaults and no attribute
map, so the hand path reads the same numbers. Any exception from transformers is a ConfigError.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from function.model import vllm_support

# Config classes build per-layer lists (Qwen2Config's layer_types): a hostile layer count
# would take the function's memory and time. No served model comes near this.
MAX_LAYERS = 4096
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


class HFConfigError(ValueError):
    """transformers refused the config (model_config.py turns it into a ConfigError)."""


class ConfigView(Mapping[str, Any]):
    """A read-only Mapping over a transformers config object: `view.get("num_hidden_layers")`
    is `getattr(config, "num_hidden_layers")` (attribute maps applied); nested configs are
    views too."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._keys = list(obj.to_dict())

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str) or key.startswith("_"):
            raise KeyError(key)
        try:
            value = getattr(self._obj, key)
        except AttributeError:
            raise KeyError(key) from None
        if callable(value) and not _is_config(value):
            raise KeyError(key)
        return ConfigView(value) if _is_config(value) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        try:
            self[key]  # type: ignore[index]
        except KeyError:
            return False
        return True


def _is_config(value: Any) -> bool:
    return hasattr(value, "to_dict") and hasattr(value, "get_text_config")


def transformers_module() -> Any:
    # transformers logs "None of PyTorch ... found" at import: configs need no framework.
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    import transformers

    return transformers


def _check_layers(config: Mapping[str, Any]) -> None:
    parts = [config, *(v for v in config.values() if isinstance(v, Mapping))]
    for part in parts:
        for key in LAYER_KEYS:
            value = part.get(key)
            if isinstance(value, int) and value > MAX_LAYERS:
                raise HFConfigError(f"{key} {value} is more layers than any model has")


def read(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(whole config, text config) as views over transformers' objects; None when the model
    type is one transformers does not know or vLLM reads with its own class (read by hand)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type in vllm_support.vllm_config_model_types():
        return None
    _check_layers(config)
    try:
        transformers = transformers_module()
        if model_type not in transformers.CONFIG_MAPPING:
            return None
        kwargs = {k: v for k, v in config.items() if k != "model_type"}
        obj = transformers.AutoConfig.for_model(model_type, **kwargs)
        text = obj.get_text_config()
        if text is not obj and not hasattr(text, "num_attention_heads"):
            # vLLM's get_hf_text_config refuses such a text config the same way
            raise HFConfigError("its text config has no num_attention_heads")
        return ConfigView(obj), ConfigView(text)
    except HFConfigError:
        raise
    except Exception as e:  # transformers is handed Hub input: never crash on it
        raise HFConfigError(f"transformers {model_type} config: {type(e).__name__}: {e}") from e
