"""Kubernetes names and objects as Crossplane reads them back: a path into an object (`dig`),
a DNS label from any string, and an observed object as the desired one it was (no status, no
server-set metadata). It imports nothing of the function: every layer reads it."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any


def dig(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]..., or None where any step is missing or not a map."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def dns_label(name: str) -> str:
    """`name` as a DNS-1035 label (Service names): lowercase, [a-z0-9-], starts with a
    letter, at most 63 characters; a short hash keeps shortened names distinct."""
    label = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    if not label or not label[0].isalpha():
        label = f"llm-{label}".rstrip("-")
    if label == name and len(label) <= 63:
        return label
    digest = hashlib.sha256(name.encode()).hexdigest()[:5]
    return f"{label[:57].rstrip('-')}-{digest}"


_DESIRED_METADATA = ("name", "namespace", "generateName", "labels", "annotations")


def desired_from_observed(observed: Mapping[str, Any]) -> dict[str, Any]:
    """An observed object as a desired one: what it says (kind, metadata we set, spec and
    the other content), without status and server-set metadata."""
    out = {k: v for k, v in observed.items() if k not in ("status", "metadata")}
    metadata = observed.get("metadata")
    if isinstance(metadata, Mapping):
        out["metadata"] = {k: metadata[k] for k in _DESIRED_METADATA if k in metadata}
    return out
