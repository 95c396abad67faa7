"""What Crossplane sets on what render prints: the composed resources' metadata (name,
labels, annotation, owner reference) and the conditions of the XR."""

from __future__ import annotations

from dot_inference.crossplane.composition import _q
from dot_inference.crossplane.documents import RenderError
from function.kube import dig as _get

ANNOTATION_RESOURCE_NAME = "crossplane.io/composition-resource-name"
LABEL_COMPOSITE = "crossplane.io/composite"
LABEL_CLAIM_NAME = "crossplane.io/claim-name"
LABEL_CLAIM_NAMESPACE = "crossplane.io/claim-namespace"

# Crossplane's render stamps every condition with this time: a real one would be noise.
CONDITION_TIME = "2024-01-01T00:00:00Z"
# crossplane-runtime resource.DefaultFirstN.
_FIRST_N = 3


# --------------------------------------------------------------------------- output shaping


def _first_n_and_some_more(names: list[str], n: int = _FIRST_N) -> str:
    # crossplane-runtime resource.StableNAndSomeMore
    names = sorted(names)
    if len(names) > n:
        return f"{', '.join(names[:n])}, and {len(names) - n} more"
    if len(names) == n:
        return f"{', '.join(names[: n - 1])}, and {names[n - 1]}"
    return ", ".join(names)


def _condition(type_: str, status: str, reason: str, message: str = "") -> dict:
    c = {"type": type_, "status": status, "lastTransitionTime": CONDITION_TIME, "reason": reason}
    if message:
        c["message"] = message
    return c


def _same_condition(a: dict, b: dict) -> bool:
    keys = ("type", "status", "reason", "message", "observedGeneration")
    return all(a.get(k) == b.get(k) for k in keys)


def set_conditions(obj: dict, *conditions: dict) -> None:
    """crossplane-runtime ConditionedStatus.SetConditions on an unstructured object."""
    status = obj.setdefault("status", {})
    if not isinstance(status, dict):
        status = obj["status"] = {}
    existing = status.get("conditions")
    if not isinstance(existing, list):
        existing = status["conditions"] = []
    for new in conditions:
        for i, old in enumerate(existing):
            if isinstance(old, dict) and old.get("type") == new.get("type"):
                if not _same_condition(old, new):
                    existing[i] = new
                break
        else:
            existing.append(new)


def set_composed_metadata(cd: dict, xr: dict, name: str) -> None:
    """render.go SetComposedResourceMetadata: generateName, namespace, the
    composition-resource-name annotation, the composite label and the controller ref."""
    meta = cd.get("metadata")
    if not isinstance(meta, dict):
        meta = cd["metadata"] = {}
    xr_meta = xr.get("metadata") or {}
    xr_labels = xr_meta.get("labels") or {}
    prefix = xr_labels.get(LABEL_COMPOSITE) or xr_meta.get("name", "")
    if not meta.get("name") and not meta.get("generateName"):
        meta["generateName"] = f"{prefix}-"
    if xr_meta.get("namespace"):
        meta["namespace"] = xr_meta["namespace"]
    annotations = meta.get("annotations")
    meta["annotations"] = {
        **(annotations if isinstance(annotations, dict) else {}),
        ANNOTATION_RESOURCE_NAME: name,
    }
    labels = dict(meta["labels"]) if isinstance(meta.get("labels"), dict) else {}
    labels[LABEL_COMPOSITE] = prefix
    claim_ref = _get(xr, "spec", "claimRef")
    if xr_labels.get(LABEL_CLAIM_NAME) and xr_labels.get(LABEL_CLAIM_NAMESPACE):
        labels[LABEL_CLAIM_NAMESPACE] = xr_labels[LABEL_CLAIM_NAMESPACE]
        labels[LABEL_CLAIM_NAME] = xr_labels[LABEL_CLAIM_NAME]
    elif isinstance(claim_ref, dict) and claim_ref.get("name"):
        labels[LABEL_CLAIM_NAMESPACE] = claim_ref.get("namespace", "")
        labels[LABEL_CLAIM_NAME] = claim_ref["name"]
    meta["labels"] = labels

    uid = xr_meta.get("uid", "")
    owner = {
        "apiVersion": xr.get("apiVersion", ""),
        "kind": xr.get("kind", ""),
        "name": xr_meta.get("name", ""),
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    for r in refs:
        if r.get("controller") and r.get("uid", "") != uid:
            raise RenderError(
                f"composed resource {_q(name)} is already controlled by {r.get('kind')} "
                f"{r.get('name')} (UID {r.get('uid')})"
            )
    for i, r in enumerate(refs):
        if r.get("uid", "") == uid:
            refs[i] = owner
            break
    else:
        refs.append(owner)
    meta["ownerReferences"] = refs
