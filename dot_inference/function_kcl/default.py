"""Target Default: the program's items as function-kcl applies them to the desired state (the
XR's status, composed resources and their readiness, and the meta.krm.kcl.dev items)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.function_kcl.common import (
    _READY,
    ANNOTATION_COMPOSITION_RESOURCE_NAME,
    ANNOTATION_READY,
    META_API_VERSION,
    _Fatal,
    _is_list_of_dicts,
    _mergo,
    _str,
)

# --------------------------------------------------------------------------------------------
# Target Default


class _SideEffects:
    def __init__(self) -> None:
        self.conditions: list[Any] = []
        self.events: list[Any] = []
        self.context: dict[str, Any] = {}


def _process_default(
    data: list[dict[str, Any]],
    oxr: dict[str, Any],
    dxr: dict[str, Any],
    dxr_details: dict[str, bytes],
    desired: dict[str, dict[str, Any]],
    ready: dict[str, int],
    extra: dict[str, fnv1.ResourceSelector],
    required: dict[str, fnv1.ResourceSelector],
    side: _SideEffects,
) -> None:
    seen: dict[str, str] = {}
    xr_api, xr_kind = _str(oxr.get("apiVersion")), _str(oxr.get("kind"))
    for obj in data:
        api_version, kind = _str(obj.get("apiVersion")), _str(obj.get("kind"))
        if api_version == xr_api and kind == xr_kind:
            # Only the status of the XR item counts (res.go, Default target).
            dst = dxr.get("status", {})
            src = obj.get("status", {})
            if dst is None:
                dst = {}
            if src is None:
                src = {}
            if not isinstance(dst, dict):
                raise _Fatal("cannot get desired composite status: status is not an object")
            if not isinstance(src, dict):
                raise _Fatal("cannot get templated composite status: status is not an object")
            _mergo(dst, src)
            dxr["status"] = dst
            continue
        if api_version == META_API_VERSION:
            _process_meta(kind, obj, dxr_details, extra, required, side)
            continue
        annotations = _annotations(obj)
        ready_value = fnv1.READY_UNSPECIFIED
        if annotations is not None and ANNOTATION_READY in annotations:
            ready_value = _ready_value(annotations.pop(ANNOTATION_READY))
        name = _resource_name(obj)
        _check_duplicate(seen, name, obj)
        desired[name] = obj
        ready[name] = ready_value


def _process_meta(
    kind: str,
    obj: dict[str, Any],
    dxr_details: dict[str, bytes],
    extra: dict[str, fnv1.ResourceSelector],
    required: dict[str, fnv1.ResourceSelector],
    side: _SideEffects,
) -> None:
    if kind == "CompositeConnectionDetails":
        details = obj.get("data")
        if isinstance(details, dict) and all(isinstance(v, str) for v in details.values()):
            for k, v in details.items():
                try:
                    dxr_details[k] = base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    dxr_details[k] = b""  # upstream ignores the decode error
    elif kind == "ExtraResources":
        for key, req in _requirements(obj, "extra resources").items():
            if key in extra:
                raise _Fatal(f'duplicate extra resource key "{key}"')
            extra[key] = _selector(req, name_key="matchName", namespace_key="matchNamespace")
    elif kind == "RequiredResources":
        for key, req in _requirements(obj, "required resources").items():
            if key in required:
                raise _Fatal(f'duplicate required resource key "{key}"')
            required[key] = _selector(req, name_key="name", namespace_key="namespace")
    elif kind == "Conditions":
        conditions = obj.get("conditions")
        if conditions is not None and not _is_list_of_dicts(conditions):
            raise _Fatal("cannot get condition resources: conditions must be a list of objects")
        side.conditions = list(conditions or [])  # json.Unmarshal into a slice replaces it
    elif kind == "Events":
        events = obj.get("events")
        if events is not None and not _is_list_of_dicts(events):
            raise _Fatal("cannot get event resources: events must be a list of objects")
        side.events = list(events or [])
    elif kind == "Context":
        ctx = obj.get("data")
        if ctx is not None and not isinstance(ctx, dict):
            raise _Fatal("cannot get context resource: data must be an object")
        side.context.update(ctx or {})  # json.Unmarshal into a map merges top-level keys
    else:
        raise _Fatal(
            f'invalid kind "{kind}" for apiVersion "{META_API_VERSION}" - must be '
            "CompositeConnectionDetails or ExtraResources"
        )


def _requirements(obj: dict[str, Any], what: str) -> dict[str, dict[str, Any]]:
    reqs = obj.get("requirements")
    if reqs is None:
        return {}
    if not isinstance(reqs, dict) or not all(isinstance(v, dict) for v in reqs.values()):
        raise _Fatal(f"cannot get {what} requirements: requirements must be a map of objects")
    for key, r in reqs.items():
        for field, value in r.items():
            if field == "matchLabels":
                ok = value is None or (
                    isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
                )
            else:
                ok = value is None or isinstance(value, str)
            if not ok:
                raise _Fatal(
                    f"cannot get {what} requirements: {key}.{field}: unexpected value "
                    f"{json.dumps(value)}"
                )
    return reqs


def _selector(r: dict[str, Any], *, name_key: str, namespace_key: str) -> fnv1.ResourceSelector:
    sel = fnv1.ResourceSelector(api_version=r.get("apiVersion") or "", kind=r.get("kind") or "")
    if r.get(namespace_key):
        sel.namespace = r[namespace_key]
    if r.get(name_key):
        sel.match_name = r[name_key]
    else:
        sel.match_labels.SetInParent()
        for k, v in (r.get("matchLabels") or {}).items():
            sel.match_labels.labels[k] = v
    return sel


def _annotations(obj: dict[str, Any]) -> dict[str, str] | None:
    """unstructured GetAnnotations: None unless a string map."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    ann = meta.get("annotations")
    if not isinstance(ann, dict) or not all(isinstance(v, str) for v in ann.values()):
        return None
    return ann


def _resource_name(obj: dict[str, Any]) -> str:
    """GetResourceName: the annotation (removed) or metadata.name."""
    annotations = _annotations(obj)
    if annotations is not None and ANNOTATION_COMPOSITION_RESOURCE_NAME in annotations:
        return annotations.pop(ANNOTATION_COMPOSITION_RESOURCE_NAME)
    meta = obj.get("metadata")
    return _str(meta.get("name")) if isinstance(meta, dict) else ""


def _ready_value(value: str) -> int:
    if value not in _READY:
        raise _Fatal(
            f'invalid function input: invalid "{ANNOTATION_READY}" annotation value "{value}": '
            "must be True, False, or Unspecified"
        )
    return _READY[value]


def _check_duplicate(seen: dict[str, str], name: str, obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    kind_and_name = (
        f"{_str(obj.get('kind'))}/{_str(meta.get('name')) if isinstance(meta, dict) else ''}"
    )
    if name in seen:
        raise _Fatal(
            f'multiple composed resources with name "{name}" returned: {seen[name]} and '
            f"{kind_and_name}. Set different metadata.name or "
            f'metadata.annotations."{ANNOTATION_COMPOSITION_RESOURCE_NAME}" to distinguish them.'
        )
    seen[name] = kind_and_name
