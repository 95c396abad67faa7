"""Parity between what real Crossplane composed and what `dot-inference render` composes
offline from the same inputs.

The inputs are what Crossplane gave the pipeline: the XR as the API server stores it (status
included), the composed resources as they are (observed), and whatever the functions ask for
(required resources), fetched from the plane for each requirement the offline render meets,
until no new one appears. The comparison leaves out names and the metadata the API server
and Crossplane generate (uid, resourceVersion, managedFields, owner references, timestamps);
everything the offline render sets must be in the real object with the same value (the API
server's defaults may add more), and both sides must compose the same resources.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from dot_inference.controlplane.kube import Kube, condition
from dot_inference.crossplane import documents, render

NAME = "crossplane.io/composition-resource-name"
# Metadata that is not the render's to compare: names (generated for composed resources),
# what the API server writes, and the owner references that carry the XR's uid.
GENERATED_META = (
    "name",
    "generateName",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
# Condition fields the API server or Crossplane stamp.
STAMPED = ("lastTransitionTime", "observedGeneration")


@dataclass
class Parity:
    xr: str
    differences: list[str] = field(default_factory=list)
    real: dict[str, dict[str, Any]] = field(default_factory=dict)
    offline: dict[str, dict[str, Any]] = field(default_factory=dict)
    fatal: str | None = None


def composed(kube: Kube, xr: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The XR's composed resources as they are now, by composition resource name."""
    out: dict[str, dict[str, Any]] = {}
    ns = xr["metadata"].get("namespace")
    for ref in ((xr.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []:
        obj = kube.get(ref["apiVersion"], ref["kind"], ref["name"], ref.get("namespace") or ns)
        if obj is None:
            continue
        name = (obj["metadata"].get("annotations") or {}).get(NAME)
        if name:
            out[name] = obj
    return out


def _world(kube: Kube, requirements: dict[str, Any], seen: set[tuple], world: list[dict]) -> bool:
    """Fetch from the plane what `requirements` (a render's, by step) select; whether
    anything new was asked."""
    grew = False
    for step in requirements.values():
        for sel in ((step or {}).get("resources") or {}).values():
            key = (sel.get("apiVersion"), sel.get("kind"), sel.get("namespace"))
            if key in seen:
                continue
            seen.add(key)
            grew = True
            try:
                world.extend(kube.list(sel["apiVersion"], sel["kind"], sel.get("namespace")))
            except Exception:  # a kind the plane does not serve: nothing of it exists
                continue
    return grew


def offline(pkg: documents.Package, kube: Kube, xr: dict[str, Any], observed: list[dict]) -> Any:
    """The offline render of `xr` with the plane's state as its inputs."""
    world: list[dict[str, Any]] = []
    seen: set[tuple] = set()
    result = render.render_in_package(pkg, xr, observed=observed, required=world)
    for _ in range(6):
        if not _world(kube, result.requirements or {}, seen, world):
            break
        result = render.render_in_package(pkg, xr, observed=observed, required=world)
    return result


def check(
    pkg: documents.Package, kube: Kube, api_version: str, kind: str, ns: str, name: str
) -> Parity:
    xr = kube.get(api_version, kind, name, ns)
    assert xr is not None, f"{kind} {ns}/{name} is not on the plane"
    real = composed(kube, xr)
    result = offline(pkg, kube, xr, list(real.values()))
    out = Parity(f"{kind} {ns}/{name}", real=real, fatal=result.fatal)
    if result.fatal:
        # Refused offline: refused on the plane with the same words, nothing composed.
        synced = condition(xr, "Synced") or {}
        if synced.get("status") != "False" or result.fatal not in synced.get("message", ""):
            out.differences.append(
                f"refused offline ({result.fatal}); on the plane Synced is {short(synced)}"
            )
        if real:
            out.differences.append(f"refused offline, yet on the plane it composes {sorted(real)}")
        return out
    out.offline = {c["metadata"]["annotations"][NAME]: c for c in result.composed}
    for missing in sorted(set(out.offline) - set(real)):
        out.differences.append(f"{missing}: composed offline, not on the plane")
    for extra in sorted(set(real) - set(out.offline)):
        out.differences.append(f"{extra}: on the plane, not composed offline")
    for key in sorted(set(real) & set(out.offline)):
        want = strip(out.offline[key])
        out.differences += [f"{key}: {d}" for d in contains(want, real[key], "")]
    status = (result.xr or {}).get("status") or {}
    out.differences += [
        f"XR: {d}" for d in contains(xr_status(status), xr_status(xr.get("status") or {}), "status")
    ]
    return out


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """What the render decided of a composed resource, as the API server stores it: without
    generated metadata and status; a Secret's stringData written into its data (base64), as
    the API server writes it (by design: stringData is write-only)."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in GENERATED_META}
    out = {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}
    if obj.get("kind") == "Secret" and obj.get("apiVersion") == "v1" and "stringData" in out:
        import base64

        data = dict(out.get("data") or {})
        for k, v in (out.pop("stringData") or {}).items():
            data[k] = base64.b64encode(str(v).encode()).decode()
        out["data"] = data
    return out


def xr_status(status: dict[str, Any]) -> dict[str, Any]:
    """The XR's status as the function decided it: its conditions by type, without the
    stamps, and not Crossplane's own (Synced, Ready: the pipeline's readiness is compared
    through the composed resources)."""
    out = {k: v for k, v in status.items() if k != "conditions"}
    out["conditions"] = {
        c.get("type", ""): {k: v for k, v in c.items() if k not in STAMPED and k != "type"}
        for c in status.get("conditions") or []
        if c.get("type") not in ("Synced", "Ready")
    }
    return out


_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(m|k|Ki|Mi|Gi|Ti|Pi|M|G|T|P|E|Ei)?$")
_UNITS = {
    None: 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def _quantity(value: str) -> Decimal | None:
    m = _QUANTITY.match(value)
    if not m:
        return None
    try:
        return Decimal(m.group(1)) * Decimal(_UNITS[m.group(2)])
    except InvalidOperation:
        return None


def same(a: Any, b: Any) -> bool:
    """Equal as the API server stores them: numbers by value (1 and 1.0), quantities by
    amount (the API server writes a core kind's quantities canonically: 4000m is 4)."""
    if a == b:
        return True
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        return float(a) == float(b)
    if isinstance(a, str) and isinstance(b, str):
        qa, qb = _quantity(a), _quantity(b)
        return qa is not None and qa == qb
    return False


def contains(expected: Any, actual: Any, path: str) -> list[str]:
    """Where `actual` lacks or differs from what `expected` says (dicts: every key of
    expected; lists: the same length, item by item)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: {short(actual)} where the render has an object"]
        out = []
        for k, v in expected.items():
            if k not in actual:
                if v in (None, {}, []):  # the API server drops empty values
                    continue
                out.append(f"{path}.{k}: missing on the plane (render: {short(v)})")
            else:
                out += contains(v, actual[k], f"{path}.{k}")
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: {short(actual)} on the plane, {short(expected)} rendered"]
        return [
            d
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for d in contains(e, a, f"{path}[{i}]")
        ]
    if not same(expected, actual):
        return [f"{path}: {short(actual)} on the plane, {short(expected)} rendered"]
    return []


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
