"""Static extraction of the model architectures a vLLM release serves (no vllm import): the
generator of function/model/vllm_architectures.yaml, which function/model/vllm_support.py
refuses unsupported models with.
Developer tooling, not in the function's image.

usage: python -m dot_inference.vllm_architectures <vllm-src-root> \
           function/model/vllm_architectures.yaml

Reads, with `ast`:
  vllm/model_executor/models/registry.py  the `_*_MODELS` dicts that `_VLLM_MODELS` merges
      (keys: the `architectures` names vLLM resolves natively or through its Transformers
      backend classes), and `_PREVIOUSLY_SUPPORTED_MODELS` (name -> last vLLM version)
  vllm/transformers_utils/config.py       `_CONFIG_REGISTRY` (model types vLLM builds with its
      own config classes)
  vllm/config/model.py                    `_SUFFIX_TO_DEFAULTS` (the suffixes
      `ModelRegistry._normalize_arch` swaps to find a base architecture to convert)
"""

from __future__ import annotations

import ast
import pathlib
import sys
from typing import Any

import yaml

REGISTRY = "vllm/model_executor/models/registry.py"
MODEL_CONFIG = "vllm/config/model.py"
HF_CONFIG = "vllm/transformers_utils/config.py"


def _assign(tree: ast.Module, name: str) -> ast.expr:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert node.value is not None
            return node.value
    raise SystemExit(f"{name} not found")


def _keys(tree: ast.Module, name: str) -> list[str]:
    """The string keys of dict `name`, following `**_OTHER` splats."""
    node = _assign(tree, name)
    if not isinstance(node, ast.Dict):
        raise SystemExit(f"{name} is not a dict literal")
    out: list[str] = []
    for key in node.keys:
        if key is None:
            continue
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            out.append(key.value)
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None and isinstance(value, ast.Name):
            out.extend(_keys(tree, value.id))
    return out


def extract(root: pathlib.Path) -> dict[str, Any]:
    registry = ast.parse((root / REGISTRY).read_text())
    merged = _assign(registry, "_VLLM_MODELS")
    assert isinstance(merged, ast.Dict)
    kinds: dict[str, list[str]] = {}
    for key, value in zip(merged.keys, merged.values, strict=True):
        if key is None and isinstance(value, ast.Name):
            kinds[value.id.strip("_").lower().removesuffix("_models")] = sorted(
                set(_keys(registry, value.id))
            )
    previous = _assign(registry, "_PREVIOUSLY_SUPPORTED_MODELS")
    old = ast.literal_eval(previous)
    config = ast.parse((root / MODEL_CONFIG).read_text())
    suffixes = [s for s, _ in ast.literal_eval(_assign(config, "_SUFFIX_TO_DEFAULTS"))]
    hf = _assign(ast.parse((root / HF_CONFIG).read_text()), "_CONFIG_REGISTRY")
    own = sorted(k.arg for k in getattr(hf, "keywords", []) if k.arg)
    return {
        "architectures": kinds,
        "previously_supported": dict(old),
        "suffixes": suffixes,
        "vllm_config_model_types": own,
    }


def main() -> None:
    root = pathlib.Path(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    version = "unknown"
    for line in (root / "vllm/_version.py").read_text().splitlines():
        if line.startswith("__version__ =") and "'" in line:
            version = line.rsplit("=", 1)[1].strip().strip("'\"")
            break
    data = extract(root)
    header = (
        f"# The model architectures vLLM {version} serves, read statically (vllm not imported)\n"
        f"# by dot_inference/vllm_architectures.py from its source:\n"
        f"#   {REGISTRY}: `_VLLM_MODELS` and the dicts it merges, one list per dict\n"
        f"#     (text_generation, embedding, cross_encoder, multimodal, speculative_decoding,\n"
        f"#     transformers_supported, transformers_backend), `_PREVIOUSLY_SUPPORTED_MODELS`\n"
        f"#   {HF_CONFIG}: `_CONFIG_REGISTRY` keys (vllm_config_model_types: model types\n"
        f"#     vLLM reads with its own config classes, not transformers')\n"
        f"#   {MODEL_CONFIG}: `_SUFFIX_TO_DEFAULTS` (suffixes ModelRegistry._normalize_arch\n"
        f"#     swaps to find a base architecture to convert, e.g. *ForSequenceClassification)\n"
        f"# Regenerate: python -m dot_inference.vllm_architectures <vllm-src> {out}\n"
    )
    out.write_text(
        header + f"version: {version!r}\n" + yaml.safe_dump(data, sort_keys=True, width=100)
    )


if __name__ == "__main__":
    main()
