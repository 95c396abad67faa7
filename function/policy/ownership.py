"""No takeover: what a claim composes never takes over an object that exists and is not its own.

Two places where an object may already exist:

- **The control plane** (the claim's namespace). Crossplane applies composed resources with
  server-side apply and ForceOwnership (crossplane v2.3.4
  `internal/controller/apiextensions/composite/composition_functions.go`): an object that
  exists with no controller is adopted, and later deleted with the claim. So before an
  object is first composed, the function asks Crossplane for it (a required resource) and
  composes it only if it is absent or already controlled by this claim.
- **Another cluster** (through a provider-kubernetes `Object`). provider-kubernetes v1.2.1
  updates whatever it finds under the manifest's name and deletes it with the Object. So a
  new Object starts observe-only: once the provider has looked, the function lets it create
  (or manage) the object only if it was absent or carries this claim's owner annotation.
  Everything the function places on another cluster carries that annotation.

Pure functions over plain data; `compose` turns a refusal into a fatal result.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from function.kube import dig

# Who composed an object on another cluster: "<claim namespace>/<claim name>".
OWNER_ANNOTATION = "inference.devopstoolkit.ai/owner"

# A new Object only looks (crossplane-runtime managementPolicies).
PROBE_POLICIES = ["Observe"]

# What an observe-only managed resource says when what it observes does not exist:
# crossplane-runtime v2.0.0-rc.1 (the version provider-kubernetes v1.2.1 builds with),
# pkg/reconciler/managed/reconciler.go: ReconcileError(Wrap(errExternalResourceNotExist,
# errReconcileObserve)) -> Synced=False, reason ReconcileError, this message.
ABSENT_MESSAGE = "observe failed: external resource does not exist"

# The Object has looked and the way is clear / it is still looking / it found someone else's.
RemoteState = Literal["clear", "probing", "foreign"]


def owner(namespace: str, name: str) -> str:
    """The owner annotation's value for the claim `namespace/name`."""
    return f"{namespace}/{name}"


def annotate(manifest: Mapping[str, Any], value: str) -> dict[str, Any]:
    """`manifest` with the owner annotation set to `value` (a copy)."""
    metadata = dict(manifest.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), OWNER_ANNOTATION: value}
    return {**manifest, "metadata": metadata}


@dataclass(frozen=True)
class Remote:
    """What a remote Object may do now: `state`, and for a foreign object who owns it."""

    state: RemoteState
    found_owner: str | None = None


def remote(observed_object: Mapping[str, Any] | None, claim_owner: str) -> Remote:
    """Whether the Object composed under this key may create and manage its manifest.

    - never observed: `probing` (compose it observe-only);
    - it was composed with more than Observe (it already manages the object: composed
      before, or let through earlier): `clear`;
    - observe-only and the provider found the object: `clear` if it carries
      `claim_owner`, else `foreign`;
    - observe-only and the provider reports the object absent: `clear`;
    - observe-only and not yet reported: `probing`.
    """
    if observed_object is None:
        return Remote("probing")
    policies = dig(observed_object, "spec", "managementPolicies")
    if policies != PROBE_POLICIES:
        return Remote("clear")
    found = dig(observed_object, "status", "atProvider", "manifest")
    if isinstance(found, Mapping) and found:
        value = dig(found, "metadata", "annotations", OWNER_ANNOTATION)
        if value == claim_owner:
            return Remote("clear")
        return Remote("foreign", value if isinstance(value, str) else None)
    conditions = dig(observed_object, "status", "conditions")
    for c in conditions if isinstance(conditions, list) else []:
        if (
            isinstance(c, Mapping)
            and c.get("type") == "Synced"
            and c.get("status") == "False"
            and c.get("message") == ABSENT_MESSAGE
        ):
            return Remote("clear")
    return Remote("probing")


def made(observed_object: Mapping[str, Any] | None, claim_owner: str) -> bool:
    """Whether the manifest of an observed Object exists on its cluster and is this claim's:
    the provider has read it back (`status.atProvider.manifest`) carrying `claim_owner`. The
    desired manifest in `spec` says nothing of that: the Object may still be looking."""
    found = dig(observed_object, "status", "atProvider", "manifest")
    return (
        isinstance(found, Mapping)
        and dig(found, "metadata", "annotations", OWNER_ANNOTATION) == claim_owner
    )


def controller(found: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The controller owner reference of an object, or None."""
    refs = dig(found, "metadata", "ownerReferences")
    for r in refs if isinstance(refs, list) else []:
        if isinstance(r, Mapping) and r.get("controller") is True:
            return r
    return None


def foreign_on_control_plane(found: Mapping[str, Any], xr_uid: str | None) -> str | None:
    """Why the existing control-plane object `found` is not this claim's (whose uid is
    `xr_uid`), or None when it is."""
    ref = controller(found)
    if ref is None:
        return "it was not created by Crossplane"
    if xr_uid and ref.get("uid") == xr_uid:
        return None
    return f"it is controlled by {ref.get('kind', '?')} {ref.get('name', '?')}"
