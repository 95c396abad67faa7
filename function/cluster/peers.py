"""The other models on the same InferenceCluster: the GPUs they hold and the names they serve.

An InferenceCluster and the LLMInferences on it share a namespace (clusterRef names a
cluster in the claim's own namespace), so the function asks Crossplane for every
LLMInference there (a required resource) and keeps those whose clusterRef is the same
cluster. Each is read defensively: another team's claim may be half-written or already
being deleted, and must never make this one fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from function.kube import dig

API_VERSION = "inference.devopstoolkit.ai/v1alpha1"
KIND = "LLMInference"
REQUIREMENT = "llminferences"


@dataclass(frozen=True)
class Peer:
    name: str
    created: str  # metadata.creationTimestamp (RFC 3339, UTC), "" when not known
    served_names: tuple[str, ...]
    target_namespace: str | None  # spec.parameters.targetNamespace (None: the router's)
    gpus: int  # per replica: its plan's, else its claim's, else 1 (gpus_planned says which)
    max_replicas: int
    simulate: bool
    gpus_planned: bool = True  # False: the model has not published a plan nor asked a count
    # What the model's function already published (status): it runs with these.
    published_names: tuple[str, ...] = ()
    published_gpus: int | None = None  # status.replicas.max x status.plan.gpus
    # Prefill and decode pods (disaggregation): `gpus` is all of theirs, the claim's own
    # counts where it has published no plan (a missing gpu counted as one; `pd_sides`, each
    # side's (replicas, gpu or None), lets the caller plan the missing ones).
    disaggregated: bool = False
    pd_sides: tuple[tuple[int, int | None], ...] = ()
    ingress_host: str | None = None  # spec.parameters.ingressHost

    @property
    def model(self) -> str:
        return self.served_names[0]

    @property
    def gpus_held(self) -> int:
        """The most GPUs this model may run on: simulated replicas run on CPUs."""
        return 0 if self.simulate else self.gpus * self.max_replicas

    def before(self, created: str, name: str) -> bool:
        """Whether this model came first (creation time, then name; a missing time counts
        as later than any)."""
        return (self.created or "~", self.name) < (created or "~", name)


def positive_int(value: Any) -> int | None:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, list) else ()


def _peer(xr: dict[str, Any]) -> Peer | None:
    name = dig(xr, "metadata", "name")
    params = dig(xr, "spec", "parameters")
    model = dig(params, "model")
    if not isinstance(name, str) or not isinstance(model, str) or not model:
        return None
    created = dig(xr, "metadata", "creationTimestamp")
    # GPUs per replica: what the function planned, else what the claim asks, else one.
    planned = positive_int(dig(xr, "status", "plan", "gpus"))
    gpus = planned or positive_int(params.get("gpu"))
    # Replicas: the maximum the function allowed (after the budget), else what is asked.
    allowed = positive_int(dig(xr, "status", "replicas", "max"))
    most = allowed
    if most is None:
        most = positive_int(dig(params, "autoscaling", "maxReplicas"))
        most = most or positive_int(params.get("replicas")) or 1
    pd = params.get("disaggregation")
    if isinstance(pd, dict):
        # Prefill and decode pods: all their GPUs, as one "replica" (its status says them).
        planned = positive_int(dig(xr, "status", "plan", "disaggregation", "gpus"))
        sides = [pd.get(s) if isinstance(pd.get(s), dict) else {} for s in ("prefill", "decode")]
        asked = sum(
            (positive_int(s.get("gpu")) or 1) * (positive_int(s.get("replicas")) or 1)
            for s in sides
        )
        gpus = planned or asked
        allowed = most = 1
        known = planned is not None or all(positive_int(s.get("gpu")) for s in sides)
        pd_sides = tuple(
            (positive_int(s.get("replicas")) or 1, positive_int(s.get("gpu"))) for s in sides
        )
    namespace = params.get("targetNamespace")
    simulate = dig(params, "engine", "simulate") is True
    return Peer(
        name=name,
        created=created if isinstance(created, str) else "",
        served_names=(model, *strings(params.get("aliases")), *adapter_names(params)),
        target_namespace=namespace if isinstance(namespace, str) and namespace else None,
        gpus=gpus or 1,
        max_replicas=most,
        simulate=simulate,
        gpus_planned=known if isinstance(pd, dict) else gpus is not None,
        disaggregated=isinstance(pd, dict),
        pd_sides=pd_sides if isinstance(pd, dict) else (),
        ingress_host=host if isinstance(host := params.get("ingressHost"), str) and host else None,
        published_names=strings(dig(xr, "status", "servedModelNames")),
        published_gpus=planned * allowed if planned and allowed and not simulate else None,
    )


def on_cluster(found: list[dict[str, Any]], cluster: str, me: str) -> list[Peer]:
    """The LLMInferences in `found` that run on InferenceCluster `cluster`, except `me` and
    those being deleted, in first-come order."""
    return by_cluster(found, me).get(cluster, [])


def by_cluster(found: list[dict[str, Any]], me: str) -> dict[str, list[Peer]]:
    """Every LLMInference in `found` but `me` and those being deleted, by the cluster it
    runs on, each list in first-come order (read once for all of a selector's clusters)."""
    out: dict[str, list[Peer]] = {}
    for xr in found:
        if not isinstance(xr, dict) or dig(xr, "metadata", "name") == me:
            continue
        if dig(xr, "metadata", "deletionTimestamp"):
            continue
        cluster = cluster_of(xr)
        if cluster is None:
            continue
        peer = _peer(xr)
        if peer is not None:
            out.setdefault(cluster, []).append(peer)
    for peers in out.values():
        peers.sort(key=lambda p: (p.created or "~", p.name))
    return out


def adapter_names(params: dict[str, Any]) -> tuple[str, ...]:
    """The names of a model's LoRA adapters (spec.parameters.adapters[].name), which the
    router routes like the model's own."""
    found = params.get("adapters")
    if not isinstance(found, list):
        return ()
    return strings([a.get("name") for a in found if isinstance(a, dict)])


def published_names(xr: dict[str, Any]) -> tuple[str, ...]:
    """The names an LLMInference's status says it serves."""
    return strings(dig(xr, "status", "servedModelNames"))


def cluster_of(xr: dict[str, Any]) -> str | None:
    """The InferenceCluster an LLMInference runs on: the one it names, or the one placement
    chose for its clusterSelector (status.placement.cluster)."""
    named = dig(xr, "spec", "parameters", "clusterRef", "name")
    if isinstance(named, str) and named:
        return named
    if dig(xr, "spec", "parameters", "clusterSelector") is None:
        return None
    placed = dig(xr, "status", "placement", "cluster")
    return placed if isinstance(placed, str) and placed else None
