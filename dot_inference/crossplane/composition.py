"""Which Composition and XRD render an XR, as Crossplane picks them, and the XRD's schema
defaults applied to the XR."""

from __future__ import annotations

import copy
import json
from typing import Any

from dot_inference.crossplane.documents import Package, RenderError
from function.kube import dig as _get


def _type_ref(composition: dict) -> tuple[str, str]:
    ref = _get(composition, "spec", "compositeTypeRef") or {}
    return str(ref.get("apiVersion", "")), str(ref.get("kind", ""))


def handles(composition: dict, obj: Any) -> bool:
    """Whether `composition` composes objects of `obj`'s apiVersion and kind."""
    if not isinstance(obj, dict):
        return False
    return _type_ref(composition) == (obj.get("apiVersion"), obj.get("kind"))


def is_handled_xr(pkg: Package, obj: Any) -> bool:
    return any(handles(c, obj) for c in pkg.compositions)


def _xr_ref(xr: dict, field_name: str) -> Any:
    # Crossplane v2 keeps its machinery under spec.crossplane; v1 (legacy) XRs under spec.
    found = _get(xr, "spec", "crossplane", field_name)
    return found if found is not None else _get(xr, "spec", field_name)


def _describe(obj: dict) -> str:
    return f"{obj.get('kind', '?')}/{_get(obj, 'metadata', 'name') or '?'}"


def find_xrd(pkg: Package, xr: dict) -> dict | None:
    """The XRD that defines `xr`'s apiVersion and kind, if the package has one."""
    group, _, version = str(xr.get("apiVersion", "")).rpartition("/")
    for xrd in pkg.xrds:
        spec = xrd.get("spec") or {}
        if spec.get("group") != group or _get(spec, "names", "kind") != xr.get("kind"):
            continue
        if any(v.get("name") == version for v in spec.get("versions") or []):
            return xrd
    return None


def select_composition(pkg: Package, xr: dict) -> dict:
    """The Composition Crossplane would use for `xr`.

    By `spec.crossplane.compositionRef.name`; else the Compositions for the XR's type
    filtered by `compositionSelector.matchLabels`; else the XRD's `defaultCompositionRef`;
    else the only Composition for the type.
    """
    candidates = [c for c in pkg.compositions if handles(c, xr)]
    what = f"{xr.get('apiVersion')} {xr.get('kind')}"
    ref = _xr_ref(xr, "compositionRef")
    if isinstance(ref, dict) and ref.get("name"):
        for c in pkg.compositions:
            if _get(c, "metadata", "name") == ref["name"]:
                if not handles(c, xr):
                    api, kind = _type_ref(c)
                    raise RenderError(
                        f"{_describe(xr)}: Composition {_q(ref['name'])} composes {api} {kind}, "
                        f"not {what}"
                    )
                return c
        raise RenderError(
            f"{_describe(xr)}: compositionRef names {_q(ref['name'])}, which the "
            "package does not have"
        )
    if not candidates:
        raise RenderError(f"{_describe(xr)}: no Composition in the package composes {what}")
    selector = _xr_ref(xr, "compositionSelector")
    match_labels = (selector or {}).get("matchLabels") if isinstance(selector, dict) else None
    if match_labels:
        candidates = [
            c
            for c in candidates
            if all(
                (_get(c, "metadata", "labels") or {}).get(k) == v for k, v in match_labels.items()
            )
        ]
        if not candidates:
            raise RenderError(
                f"{_describe(xr)}: no Composition for {what} has labels {match_labels}"
            )
    elif len(candidates) > 1:
        xrd = find_xrd(pkg, xr)
        default = _get(xrd, "spec", "defaultCompositionRef", "name") if xrd else None
        for c in candidates:
            if default and _get(c, "metadata", "name") == default:
                return c
    if len(candidates) > 1:
        names = ", ".join(sorted(str(_get(c, "metadata", "name")) for c in candidates))
        raise RenderError(
            f"{_describe(xr)}: several Compositions compose {what} ({names}); set "
            "spec.crossplane.compositionRef.name"
        )
    return candidates[0]


# --------------------------------------------------------------------------- defaults


def _default(value: Any, schema: Any) -> None:
    """Apply OpenAPI defaults like the API server's structural defaulting: a property that
    is absent (or null and not nullable) gets a copy of its default; recurse into
    properties, additionalProperties and items."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, prop in props.items():
            if not isinstance(prop, dict) or "default" not in prop:
                continue
            if key not in value or (value[key] is None and not prop.get("nullable")):
                value[key] = copy.deepcopy(prop["default"])
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in props:
                _default(child, props[key])
            elif isinstance(extra, dict):
                _default(child, extra)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for child in value:
                _default(child, items)


def apply_xrd_defaults(xr: dict, xrd: dict) -> dict:
    """A copy of `xr` with the defaults of the XRD version it uses filled in."""
    out = copy.deepcopy(xr)
    version = str(xr.get("apiVersion", "")).rpartition("/")[2]
    for v in _get(xrd, "spec", "versions") or []:
        if v.get("name") == version:
            _default(out, _get(v, "schema", "openAPIV3Schema"))
            break
    return out


def _q(s: str) -> str:
    """Go's %q for the strings we quote in messages."""
    return json.dumps(s, ensure_ascii=False)
