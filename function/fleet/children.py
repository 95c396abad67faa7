"""A fleet's placements as LLMInferences of their own: one per chosen cluster, named
`<claim>-<cluster>`, with the claim's parameters less what spreads it (clusterSelector,
placement, globalEndpoint, spillover) and `clusterRef` naming its cluster. Each then runs as
any claim with a clusterRef does (its GPU budget, router, autoscaling, Usage of its cluster,
ledger entry), and reports back through its status, which the fleet reads."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from function.backends.resources import PART_OF
from function.cluster.peers import API_VERSION, KIND
from function.kube import dig, dns_label
from function.outcome import condition_true
from function.status import observed_count

# What spreads a claim over clusters: the placements themselves never carry it.
FLEET_FIELDS = ("clusterSelector", "placement", "globalEndpoint", "spillover")
# The claim a placement belongs to (a label value: the claim's name, or a digest of a longer
# one), for people and selectors; the function knows its own placements by what Crossplane
# observed it compose, never by a label.
FLEET_LABEL = "inference.devopstoolkit.ai/fleet"
KEY_PREFIX = "placement-"


def key(cluster: str) -> str:
    """The composed resource name of the placement on `cluster`."""
    return KEY_PREFIX + cluster


def name(claim: str, cluster: str) -> str:
    return dns_label(f"{claim}-{cluster}")


def label_value(claim: str) -> str:
    if len(claim) <= 63:
        return claim
    return f"{claim[:50].rstrip('-.')}-{hashlib.sha256(claim.encode()).hexdigest()[:12]}"


def manifest(claim: str, namespace: str, params: Mapping[str, Any], cluster: str) -> dict[str, Any]:
    """The LLMInference that runs the claim's model on `cluster`."""
    child = {k: v for k, v in params.items() if k not in FLEET_FIELDS}
    child["clusterRef"] = {"name": cluster}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": name(claim, cluster),
            "namespace": namespace,
            "labels": {FLEET_LABEL: label_value(claim), "app.kubernetes.io/part-of": PART_OF},
        },
        "spec": {"parameters": child},
    }


def observed_names(observed: Mapping[str, Any]) -> set[str]:
    """The LLMInferences Crossplane observed this claim compose: its own placements."""
    return {
        str(dig(o, "metadata", "name"))
        for k, o in observed.items()
        if k.startswith(KEY_PREFIX) and isinstance(o, Mapping)
    }


def current(observed: Mapping[str, Any], published: Any) -> list[str]:
    """The clusters the claim runs on now (its placements Crossplane observed), in the order
    status.placement.placements lists them (first placed first), then by name."""
    clusters = []
    for k in sorted(observed):
        if not k.startswith(KEY_PREFIX):
            continue
        cluster = dig(observed[k], "spec", "parameters", "clusterRef", "name")
        if isinstance(cluster, str) and cluster:
            clusters.append(cluster)
    order = (
        [p.get("cluster") for p in published if isinstance(p, dict)]
        if isinstance(published, list)
        else []
    )
    rank = {c: i for i, c in enumerate(order) if isinstance(c, str)}
    return sorted(clusters, key=lambda c: (rank.get(c, len(rank)), c))


def created(child: Mapping[str, Any] | None) -> str:
    """A placement's creation time; "" (after every other model) before it exists."""
    value = dig(child, "metadata", "creationTimestamp")
    return value if isinstance(value, str) else ""


def serving(child: Mapping[str, Any] | None) -> tuple[bool, int]:
    """Whether a placement serves (its Serving condition) and its ready replicas."""
    if child is None:
        return False, 0
    ready = observed_count(dig(child, "status", "replicas", "ready")) or 0
    return condition_true(dict(child), "Serving"), ready


# How much of a placement's own words its parent quotes (a choice, not an upstream limit):
# enough for a refusal's field, value and the start of its fix, while a parent with several
# placements keeps a readable Serving condition; the whole of it is on the placement itself.
WHY_NOT_CHARS = 400


def why_not(child: Mapping[str, Any] | None) -> str:
    """Why a placement does not serve, in its own words: its refusal (Synced False: the
    function's fatal result as Crossplane reports it), else its Serving condition."""
    if child is None:
        return "not created yet"
    for typ in ("Synced", "Serving"):
        found = next(
            (
                c
                for c in dig(child, "status", "conditions") or []
                if isinstance(c, dict) and c.get("type") == typ and c.get("status") == "False"
            ),
            None,
        )
        message = str((found or {}).get("message") or "")
        if message:
            return (
                message if len(message) <= WHY_NOT_CHARS else message[: WHY_NOT_CHARS - 3] + "..."
            )
    return "not serving yet"


def endpoint(child: Mapping[str, Any] | None) -> str | None:
    url = dig(child, "status", "endpoint")
    return url if isinstance(url, str) and url else None
