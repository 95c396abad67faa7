"""The required resources a pipeline step asks for: its bootstrap requirements and the
resources that match a ResourceSelector."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.crossplane.convert import to_struct
from function.kube import dig as _get

# --------------------------------------------------------------------------- required resources


def _labels(obj: dict) -> dict:
    return _get(obj, "metadata", "labels") or {}


def fetch_required(selector: Any, required: Iterable[dict]) -> Any:
    """The resources matching a ResourceSelector, as a Resources message (empty when none
    match, so the function sees the requirement answered)."""
    out = fnv1.Resources()
    ns = selector.namespace if selector.HasField("namespace") and selector.namespace else None
    match = selector.WhichOneof("match")
    found = []
    for obj in required:
        if obj.get("apiVersion") != selector.api_version or obj.get("kind") != selector.kind:
            continue
        if ns is not None and _get(obj, "metadata", "namespace") != ns:
            continue
        name = _get(obj, "metadata", "name")
        if match == "match_name":
            if name == selector.match_name:
                found = [obj]
                break
        elif match == "match_labels":
            labels = _labels(obj)
            if all(labels.get(k) == v for k, v in selector.match_labels.labels.items()):
                found.append(obj)
        else:
            found.append(obj)
    # Crossplane sorts by "<namespace>/<name>" as one string (stable when listing across
    # namespaces; "a-b/x" comes before "a/x").
    found.sort(
        key=lambda o: (
            f"{_get(o, 'metadata', 'namespace') or ''}/{_get(o, 'metadata', 'name') or ''}"
        )
    )
    for obj in found:
        out.items.add().resource.CopyFrom(to_struct(obj))
    return out


def _requirement_selectors(step: dict) -> list[dict]:
    """A step's bootstrap `requirements.requiredResources` (Crossplane v2)."""
    reqs = step.get("requirements")
    return (reqs.get("requiredResources") or []) if isinstance(reqs, dict) else []


def _selector_from_step(sel: dict) -> Any:
    s = fnv1.ResourceSelector(
        api_version=str(sel.get("apiVersion", "")), kind=str(sel.get("kind", ""))
    )
    if sel.get("name"):
        s.match_name = str(sel["name"])
    elif isinstance(sel.get("matchLabels"), dict):
        s.match_labels.labels.update({str(k): str(v) for k, v in sel["matchLabels"].items()})
    if sel.get("namespace"):
        s.namespace = str(sel["namespace"])
    return s
