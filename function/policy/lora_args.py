"""The command-line flags that serve a claim's LoRA adapters (spec.parameters.adapters): on
vLLM, and on the inference simulator that stands in for it. No adapters, no flag.

vLLM 0.17.1 (vllm/config/lora.py LoRAConfig; vllm/entrypoints/openai/cli_args.py
`--lora-modules`, LoRAParserAction): `--enable-lora`, `--max-loras` (adapters in one batch:
every adapter, so none waits for a slot), `--max-lora-rank` (one of MaxLoRARanks, at least
every adapter's r), `--max-cpu-loras` (adapters kept in host memory; at least max_loras) and
`--lora-modules name=path` for each adapter. The path is the adapter's Hub repository: vLLM
resolves a path that is not a local directory with huggingface_hub's snapshot_download
(vllm/lora/utils.py `get_adapter_absolute_path`), into HF_HOME, the model cache. Every adapter
is loaded at start-up (`OpenAIServingModels.init_static_loras`) and listed at /v1/models with
the base model as its parent, which is where the cluster's router learns its name
(production-stack vllm-stack-0.1.12 src/vllm_router/service_discovery.py `_get_model_names`).

llm-d's inference simulator v0.10.2 takes `--lora-modules` as "a list of space-separated JSON
strings" with name and path (pkg/common/parser.go) and `--max-loras`/`--max-cpu-loras` like
vLLM (function/policy/simulator_flags.yaml), and lists the adapters at /v1/models too.
"""

from __future__ import annotations

import json

from function.model.adapters import LoraPlan


def vllm_lora_args(lora: LoraPlan | None) -> list[str]:
    if lora is None:
        return []
    return [
        "--enable-lora",
        "--max-loras",
        str(lora.slots),
        "--max-lora-rank",
        str(lora.max_rank),
        "--max-cpu-loras",
        str(lora.slots),
        "--lora-modules",
        *(f"{a.name}={a.repo}" for a in lora.adapters),
    ]


def simulator_lora_args(names_and_repos: tuple[tuple[str, str], ...]) -> list[str]:
    if not names_and_repos:
        return []
    n = str(len(names_and_repos))
    modules = [
        json.dumps({"name": name, "path": repo}, separators=(",", ":"))
        for name, repo in names_and_repos
    ]
    return ["--max-loras", n, "--max-cpu-loras", n, "--lora-modules", *modules]
