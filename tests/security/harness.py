"""Run one catalogue case the way a claim meets the product: the API server validates it
against the XRD (schema, patterns, CEL), then Crossplane runs the Composition's pipeline with
what exists on the control plane (the InferenceCluster's status, Secrets, objects already
there). Pure data in, plain results out; tests/security/test_catalogue.py asserts."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import EXAMPLES, PACKAGE, ledger_usage, load_yaml, merge_patch

from dot_inference.apiserver import validate_objects
from dot_inference.crossplane import documents, render
from dot_inference.function_kcl import user_message

CATALOGUE = Path(__file__).with_name("catalogue.yaml")
_PKG = documents.load_package(PACKAGE)
# The InferenceCluster an LLMInference with clusterRef finds (its status as a real one
# publishes it), in the claims' namespace.
_CLUSTER = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
_MODEL = "Qwen/Qwen2.5-1.5B-Instruct"


_CLUSTER_CLAIM = next(
    d for d in load_yaml(EXAMPLES / "cluster-local.yaml") if d.get("kind") == "InferenceCluster"
)


def claim(case: dict[str, Any]) -> dict[str, Any]:
    """The claim of a case: the LLMInference `qwen` in `namespace` (a-team) with `params` over
    a model, or (kind: InferenceCluster) examples/cluster-local.yaml with `params` merged (in
    `namespace` when the case gives one)."""
    if case.get("kind") == "InferenceCluster":
        xr = copy.deepcopy(_CLUSTER_CLAIM)
        xr["spec"]["parameters"] = merge_patch(xr["spec"]["parameters"], case.get("params") or {})
        xr["metadata"]["namespace"] = case.get("namespace", xr["metadata"]["namespace"])
        return xr
    params = {"model": _MODEL, **copy.deepcopy(case.get("params") or {})}
    if "repeat" in case:
        _repeat(params, **case["repeat"])
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": case.get("namespace", "a-team")},
        "spec": {"parameters": params},
    }


def _repeat(params: dict[str, Any], path: str, count: int, item: Any) -> None:
    """params.<path> (dotted) as `count` copies of `item`, `{i}` in its strings numbering
    them: a long list without writing it out."""

    def numbered(value: Any, i: int) -> Any:
        if isinstance(value, str):
            return value.replace("{i}", str(i))
        if isinstance(value, dict):
            return {k: numbered(v, i) for k, v in value.items()}
        return value

    *parents, leaf = path.split(".")
    node = params
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = [numbered(item, i) for i in range(count)]


def world(case: dict[str, Any]) -> list[dict[str, Any]]:
    """What exists on the control plane: the case's objects, those of examples/state/<state>.yaml
    when the case names one (a fleet's clusters and the gateway's), and the InferenceCluster
    (its status patched by `cluster`) when the case has one."""
    out = copy.deepcopy(case.get("world") or [])
    if "state" in case:
        out.extend(load_yaml(EXAMPLES / "state" / f"{case['state']}.yaml"))
    # The models there are on their cluster's ledger too (function/cluster/ledger.py): the
    # Usage each composed, as its function wrote it.
    out.extend(u for u in map(ledger_usage, out) if u is not None)
    if "cluster" in case:
        cluster = copy.deepcopy(_CLUSTER)
        cluster["metadata"]["namespace"] = case.get("namespace", "a-team")
        cluster["status"] = merge_patch(cluster["status"], case["cluster"] or {})
        out.append(cluster)
    return out


@dataclass(frozen=True)
class Outcome:
    schema_errors: list[str]
    fatal: str | None
    # Everything a user or another tenant could read: composed resources, the XR's status,
    # the function's results, as one JSON text.
    readable: str
    composed: int


def run(case: dict[str, Any]) -> Outcome:
    xr = claim(case)
    report = validate_objects([xr], schema_paths=[PACKAGE])
    errors = [e for _, errs in report.invalid for e in errs]
    result = render.render_in_package(_PKG, xr, required=world(case))
    readable = json.dumps(
        {"composed": result.composed, "status": result.xr.get("status"), "results": result.results},
        sort_keys=True,
    )
    fatal = user_message(result.fatal) if result.fatal else None
    return Outcome(errors, fatal, readable, len(result.composed))
