"""What every stage reads and writes: the function's Inputs (the XR, what Crossplane observed
and fetched, the Hub's answer) and the Outcome it accumulates (resources, status,
conditions, requirements)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from function import kube
from function.kube import dig
from function.model.hub import HubAnswer


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str = ""


@dataclass
class Outcome:
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: dict[str, bool] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # name -> {"apiVersion", "kind", "matchName" or "matchLabels", "namespace"}
    requirements: dict[str, dict[str, Any]] = field(default_factory=dict)
    fatal: str | None = None
    # Readiness of the XR itself when the composed resources cannot say (nothing composed
    # yet because the cluster is missing or not ready): never Ready without a serving engine.
    xr_ready: bool | None = None
    # Plan fields decided while building (the model cache), merged into status.plan.
    status_extra: dict[str, Any] = field(default_factory=dict)
    # status.placement, for a claim placed by clusterSelector.
    placement: dict[str, Any] | None = None
    # status.llmd, for a model llm-d serves.
    llmd: dict[str, Any] | None = None
    # How soon Crossplane runs the function again (function/requeue.py); None: the SDK's
    # default.
    ttl_seconds: int | None = None


@dataclass(frozen=True)
class Inputs:
    xr: dict[str, Any]
    observed: dict[str, dict[str, Any]] = field(default_factory=dict)
    engine_image: str | None = None  # the Composition's input: the pinned engine image
    simulator_image: str | None = None  # ...and the pinned inference simulator image
    # The llm-d backend's pinned images: vLLM's own (with NIXL), the endpoint picker and the
    # routing sidecar.
    llmd_engine_image: str | None = None
    picker_image: str | None = None
    sidecar_image: str | None = None
    # The pinned images that copy weights from spec.parameters.source: the AWS CLI (s3://) and
    # busybox (pvc://); function/backends/weights.py.
    s3_tool_image: str | None = None
    copy_tool_image: str | None = None
    # requirement name -> resources Crossplane found; a name absent here was not asked yet.
    required: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What the Hugging Face Hub said about a model the catalog lacks (fn.py asks, hub.py
    # answers); None: not asked (the catalog knows it, or the token Secret is being fetched).
    hub: HubAnswer | None = None
    # What the Hub said of each adapter's adapter_config.json (spec.parameters.adapters),
    # by repository; empty: not asked (simulated, offline render, no adapters).
    adapter_hub: dict[str, HubAnswer] = field(default_factory=dict)
    # Composed for `kubectl apply` alone (examples/manifests): no controller observes the
    # download and raises the replicas after it, so the engine starts as the claim asks and
    # downloads the weights into its cache claim itself.
    standalone: bool = False


def condition_true(obj: dict[str, Any] | None, typ: str = "Ready") -> bool:
    conditions = dig(obj, "status", "conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == typ and c.get("status") == "True"
        for c in conditions
    )


def keep_observed(inputs: Inputs, out: Outcome) -> None:
    """Keep what already runs: a missing cluster must not delete a serving model. Each object
    is returned as Crossplane must apply it (no status, no server-set metadata)."""
    for name, obj in inputs.observed.items():
        out.resources[name] = kube.desired_from_observed(obj)


def observed_manifest(obj: dict[str, Any] | None, remote: bool) -> dict[str, Any] | None:
    """An observed object itself: for an Object, the live copy the provider reads back."""
    if not remote or obj is None:
        return obj
    live = dig(obj, "status", "atProvider", "manifest")
    return live if isinstance(live, dict) else dig(obj, "spec", "forProvider", "manifest")


def created_at(inputs: Inputs) -> str:
    created = dig(inputs.xr, "metadata", "creationTimestamp")
    return created if isinstance(created, str) else ""
