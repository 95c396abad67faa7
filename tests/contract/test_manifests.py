"""The PRD's Phase 1 plain manifests: what the PRD's table promises, and the same objects the
real Composition renders for the matching claim."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.crossplane import documents, render

# The PRD's "Models & Hardware" table (seeds/000: PRD #1), one row per manifest.
PRD_TABLE = [
    ("vllm-qwen.yaml", "Qwen/Qwen2.5-1.5B-Instruct", "1", "4", "8Gi", True),
    ("vllm-embedding.yaml", "BAAI/bge-base-en-v1.5", "1", "2", "4Gi", True),
    ("vllm-kimi.yaml", "moonshotai/Kimi-K2.5", "8", "16", "64Gi", True),
]


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


@pytest.mark.parametrize(
    ("manifest", "model", "gpu", "cpu", "memory", "ingress"),
    PRD_TABLE,
    ids=[r[0] for r in PRD_TABLE],
)
def test_manifest_matches_prd_table(
    manifest: str, model: str, gpu: str, cpu: str, memory: str, ingress: bool
) -> None:
    docs = _by_kind(load_yaml(EXAMPLES / "manifests" / manifest))
    runtime = docs["VLLMRuntime"]["spec"]
    assert runtime["model"]["modelURL"] == model
    assert runtime["deploymentConfig"]["resources"] == {"cpu": cpu, "memory": memory, "gpu": gpu}
    assert ("Ingress" in docs) is ingress
    if gpu != "1":
        assert runtime["vllmConfig"]["tensorParallelSize"] == int(gpu)


def _strip_crossplane(obj: dict[str, Any]) -> dict[str, Any]:
    meta = dict(obj["metadata"])
    for key in ("ownerReferences", "generateName"):
        meta.pop(key, None)
    meta["annotations"] = {
        k: v for k, v in meta.get("annotations", {}).items() if not k.startswith("crossplane.io/")
    }
    meta["labels"] = {
        k: v for k, v in meta.get("labels", {}).items() if not k.startswith("crossplane.io/")
    }
    meta = {k: v for k, v in meta.items() if v}
    return {**obj, "metadata": meta}


@pytest.mark.parametrize("manifest", [r[0] for r in PRD_TABLE])
def test_manifest_agrees_with_the_composition(manifest: str) -> None:
    claim = load_yaml(EXAMPLES / manifest.replace("vllm-", "llm-"))[0]
    result = render.render_in_package(documents.load_package(PACKAGE), claim)
    assert result.fatal is None
    rendered = sorted((_strip_crossplane(o) for o in result.composed), key=lambda o: o["kind"])
    plain = sorted(load_yaml(EXAMPLES / "manifests" / manifest), key=lambda o: o["kind"])
    assert rendered == plain
