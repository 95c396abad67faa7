"""The CRD schema Crossplane generates for an XRD: the user's ``spec`` and ``status`` plus
Crossplane's machinery, for the composite resource and for a v1 XRD's claim."""

from __future__ import annotations

import copy
from typing import Any

# --------------------------------------------------------------------------------------------
# Crossplane XRD -> CRD schema (crossplane internal/xcrd: crd.go, schemas.go)


def _obj(props: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props or {}}
    if required:
        out["required"] = required
    return out


_STR = {"type": "string"}
_MATCH_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def _xr_spec_props(scope: str, policy: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "compositionRef": _obj({"name": _STR}, ["name"]),
        "compositionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionRevisionRef": _obj({"name": _STR}, ["name"]),
        "compositionRevisionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionUpdatePolicy": {
            "type": "string",
            "enum": ["Automatic", "Manual"],
            "default": policy,
        },
        "resourceRefs": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
            "items": _obj(
                {"apiVersion": _STR, "name": _STR, "kind": _STR}
                | ({} if scope == "Namespaced" else {"namespace": _STR}),
                ["apiVersion", "kind"],
            ),
        },
    }
    if scope == "LegacyCluster":
        props["claimRef"] = _obj(
            {"apiVersion": _STR, "kind": _STR, "namespace": _STR, "name": _STR},
            ["apiVersion", "kind", "namespace", "name"],
        )
        props["writeConnectionSecretToRef"] = _obj(
            {"name": _STR, "namespace": _STR}, ["name", "namespace"]
        )
        return props
    return {
        "crossplane": {
            "type": "object",
            "description": "Configures how Crossplane will reconcile this composite resource",
            "properties": props,
        }
    }


def _claim_spec_props() -> dict[str, Any]:
    return {
        "compositionRef": _obj({"name": _STR}, ["name"]),
        "compositionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionRevisionRef": _obj({"name": _STR}, ["name"]),
        "compositionRevisionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"]},
        "compositeDeletePolicy": {"type": "string", "enum": ["Background", "Foreground"]},
        "resourceRef": _obj(
            {"apiVersion": _STR, "kind": _STR, "name": _STR}, ["apiVersion", "kind", "name"]
        ),
        "writeConnectionSecretToRef": _obj({"name": _STR}, ["name"]),
    }


def _xr_status_props(scope: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": _obj(
                {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": _STR,
                    "reason": _STR,
                    "status": _STR,
                    "type": _STR,
                    "observedGeneration": {"type": "integer", "format": "int64"},
                },
                ["lastTransitionTime", "reason", "status", "type"],
            ),
        }
    }
    published = _obj({"lastPublishedTime": {"type": "string", "format": "date-time"}})
    if scope in ("Namespaced", "Cluster"):
        props["crossplane"] = _obj({"connectionDetails": published})
    else:
        props["connectionDetails"] = published
        props["claimConditionTypes"] = {
            "type": "array",
            "x-kubernetes-list-type": "set",
            "items": _STR,
        }
    return props


def _xr_schema(
    user: dict[str, Any], scope: str, policy: str, *, claim: bool
) -> tuple[dict[str, Any], int]:
    """The openAPIV3Schema of the CRD Crossplane generates for an XR (or a claim)."""
    user = copy.deepcopy(user)
    uprops = user.get("properties") or {}
    max_len = 63
    umeta_name = ((uprops.get("metadata") or {}).get("properties") or {}).get("name") or {}
    if isinstance(umeta_name.get("maxLength"), int) and umeta_name["maxLength"] < max_len:
        max_len = umeta_name["maxLength"]

    xspec = uprops.get("spec") or {}
    spec: dict[str, Any] = {"type": "object", "properties": {}}
    if xspec.get("required"):
        spec["required"] = list(xspec["required"])
    if xspec.get("x-kubernetes-preserve-unknown-fields"):
        spec["x-kubernetes-preserve-unknown-fields"] = True
    if xspec.get("x-kubernetes-validations"):
        spec["x-kubernetes-validations"] = list(xspec["x-kubernetes-validations"])
    if xspec.get("oneOf"):
        spec["oneOf"] = list(xspec["oneOf"])
    spec["properties"].update(xspec.get("properties") or {})
    spec["properties"].update(_claim_spec_props() if claim else _xr_spec_props(scope, policy))

    xstatus = uprops.get("status") or {}
    status: dict[str, Any] = {"type": "object", "properties": {}}
    for key in ("required", "x-kubernetes-validations", "oneOf"):
        if xstatus.get(key):
            status[key] = xstatus[key]
    status["properties"].update(xstatus.get("properties") or {})
    status["properties"].update(_xr_status_props("LegacyCluster" if claim else scope))

    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _obj({"name": {"type": "string", "maxLength": max_len}}),
            "spec": spec,
            "status": status,
        },
    }
    return schema, max_len
