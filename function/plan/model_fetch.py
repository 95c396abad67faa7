"""Download a model into the Hugging Face cache ($HF_HOME), picking files the way vLLM does.

This file is the program of the model-cache Job: the function passes its text to the engine
image's Python (`/opt/venv/bin/python -c <this file> <model id>`), whose huggingface_hub
honours HF_HOME (the cache volume), HF_TOKEN (gated models) and HF_ENDPOINT (a mirror).

vLLM's default loader (`vllm/model_executor/model_loader/weight_utils.py`,
`download_weights_from_hf`) downloads the first of `*.safetensors`, `*.bin`, `*.pt` that the
repository has and ignores `original/**`; configs and tokenizer files come through
transformers. Fetching the same set means the engine finds everything in the cache, and a
repository that carries both safetensors and .bin copies is not downloaded twice.
"""

from __future__ import annotations

import fnmatch
import sys

WEIGHTS = ("*.safetensors", "*.bin", "*.pt")
SUPPORT = ("*.json", "*.txt", "*.model", "*.tiktoken", "*.jinja", "*.py", "tokenizer*")
IGNORE = ("original/*", "original/**/*")
# A Mistral-format repository (vLLM's `is_mistral_model_repo` plus params.json): the engine
# loads `consolidated*.safetensors` (--load-format mistral), so the Hugging Face-format copy
# of the same weights that such repositories often carry is not downloaded too.
MISTRAL_WEIGHTS = "consolidated*.safetensors"


def select(files: list[str]) -> list[str]:
    """allow_patterns for snapshot_download: the first weight format present (Mistral's own
    in a Mistral-format repository), plus configs and tokenizer files."""
    if "params.json" in files and any(fnmatch.fnmatch(f, MISTRAL_WEIGHTS) for f in files):
        return [MISTRAL_WEIGHTS, *SUPPORT]
    weights = next((p for p in WEIGHTS if any(fnmatch.fnmatch(f, p) for f in files)), None)
    return ([weights] if weights else []) + list(SUPPORT)


def main(argv: list[str]) -> int:
    from huggingface_hub import HfApi, snapshot_download

    repo = argv[0]
    revision = argv[1] if len(argv) > 1 else None
    files = HfApi().list_repo_files(repo, revision=revision)
    path = snapshot_download(
        repo,
        revision=revision,
        allow_patterns=select(files),
        ignore_patterns=list(IGNORE),
        max_workers=8,
    )
    print(f"{repo}: {len(files)} files in the repository, cached in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
