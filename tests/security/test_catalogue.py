"""The security catalogue: every hostile claim in catalogue.yaml is refused with exactly the
message written there (or rendered harmless), and every benign control still renders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import harness
import pytest
from conftest import parse_yaml

CASES: list[dict[str, Any]] = parse_yaml(harness.CATALOGUE.read_text())
HOSTILE = [c for c in CASES if c["expect"] != "renders"]


def test_the_catalogue_is_large_and_well_formed() -> None:
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names), "case names are unique"
    assert len(HOSTILE) >= 50
    assert any(c["expect"] == "renders" for c in CASES), "benign controls"
    for c in CASES:
        assert c["expect"] in ("refused", "neutralised", "renders"), c["name"]
        assert ("refusal" in c) == (c["expect"] == "refused"), c["name"]
        assert c["expect"] != "neutralised" or c.get("absent"), f"{c['name']}: what stays out?"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    out = harness.run(case)
    assert out.schema_errors == case.get("schema", []), "what the API server says"
    assert out.fatal == case.get("refusal"), "what the function says"
    if out.fatal:
        assert out.composed == 0, "a refused claim composes nothing"
    leaked = [s for s in case.get("absent", []) if s in out.readable]
    assert not leaked, f"readable in the composed resources or status: {leaked}"


def _alias_bomb() -> str:
    """Nine levels of nine aliases: 9**9 nodes once expanded."""
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(f"    {line}" for line in lines)


_CLAIM = """apiVersion: inference.devopstoolkit.ai/v1alpha1
kind: LLMInference
metadata: {name: qwen, namespace: a-team}
spec:
  parameters:
    model: Qwen/Qwen2.5-1.5B-Instruct
"""

# (case, file content, what the CLI says on stderr after "dot-inference: <file>: ")
CLI = [
    (
        "an alias bomb",
        _CLAIM + _alias_bomb() + "\n",
        "invalid YAML (line 1, column 1): its anchors and aliases expand to more than 200,000 "
        "nodes; write the values out instead of nesting aliases",
    ),
    (
        "a key given twice (the second one would win silently)",
        _CLAIM + "    providerConfigName: pc\n    targetNamespace: a-team\n"
        "    targetNamespace: kube-system\n",
        "invalid YAML (line 9, column 5): found duplicate key 'targetNamespace' (first at line 8)",
    ),
    (
        "nesting past the parser's stack",
        "a: " + "[" * 50_000 + "]" * 50_000 + "\n",
        "invalid YAML: nested too deeply",
    ),
    (
        "not an object",
        "just a string\n",
        "it holds no composite resource that a Composition in the package composes",
    ),
]


@pytest.mark.parametrize(("case", "text", "says"), CLI, ids=[c[0] for c in CLI])
def test_the_cli_refuses_hostile_yaml_without_a_traceback(
    case: str, text: str, says: str, tmp_path: Path
) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(text)
    run = subprocess.run(
        [sys.executable, "-m", "dot_inference.cli", "render", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=harness.CATALOGUE.parents[2],
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip() == f"dot-inference: {path}: {says}", run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
