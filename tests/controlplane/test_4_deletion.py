"""Deleting everything the examples made: a cluster a model runs on refuses deletion while the
model runs (the Usage webhook, naming the model); then every XR deleted at once completes, each
`of` of a Usage outliving its `by`, and nothing Crossplane composed is left behind."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from applied_examples import DOCS, existing
from conftest import NS, XR_API, xrs

from dot_inference.controlplane.kube import Kube, KubeError

USAGE = ("protection.crossplane.io/v1beta1", "Usage")


def _key(ref: dict[str, Any]) -> str:
    return f"{ref.get('kind')}/{(ref.get('resourceRef') or ref).get('name')}"


def test_a_cluster_refuses_deletion_while_a_model_uses_it(
    applied: list[dict[str, Any]], kube: Kube
) -> None:
    usages = kube.list(*USAGE, NS)
    by_model = next(
        (
            u
            for u in usages
            if u["spec"]["of"].get("kind") == "InferenceCluster"
            and u["spec"].get("by", {}).get("kind") == "LLMInference"
        ),
        None,
    )
    assert by_model is not None, "the examples run models on clusters"
    cluster = by_model["spec"]["of"]["resourceRef"]["name"]
    model = by_model["spec"]["by"]["resourceRef"]["name"]
    with pytest.raises(KubeError) as refused:
        kube.delete(XR_API, "InferenceCluster", cluster, NS)
    assert "in-use" in refused.value.message and f"LLMInference/{model}" in refused.value.message
    assert kube.get(XR_API, "InferenceCluster", cluster, NS) is not None


def test_deleting_everything_completes_in_the_order_the_usages_give(
    applied: list[dict[str, Any]], kube: Kube
) -> None:
    from parity import composed

    usages = kube.list(*USAGE, NS)
    order = [(_key(u["spec"]["of"]), _key(u["spec"]["by"])) for u in usages if u["spec"].get("by")]
    tracked: dict[str, dict[str, Any]] = {}
    for xr in xrs(kube, NS):
        tracked[f"{xr['kind']}/{xr['metadata']['name']}"] = xr
        for obj in composed(kube, xr).values():
            tracked[f"{obj['kind']}/{obj['metadata']['name']}"] = obj
    for xr in xrs(kube, NS):
        # The webhook refuses an XR in use: asked again until what uses it is gone, as
        # `kubectl delete` would be retried (Crossplane replays a deletion the Usage blocked
        # for what it composed, replayDeletion).
        try:
            kube.delete(XR_API, xr["kind"], xr["metadata"]["name"], NS)
        except KubeError as err:
            if "in-use" not in err.message:
                raise
    # When each disappeared, in rounds of looking at all of them: what a Usage protects may
    # go in the same round as what used it, never in an earlier one.
    gone_at: dict[str, int] = {}
    start, look = time.monotonic(), 0
    while time.monotonic() - start < 300 and len(gone_at) < len(tracked):
        look += 1
        present = existing(kube, [o for k, o in tracked.items() if k not in gone_at])
        for key, obj in tracked.items():
            if key in gone_at:
                continue
            if key not in present:
                gone_at[key] = look
            elif obj["apiVersion"] == XR_API:
                # Refused while in use: asked again.
                with contextlib.suppress(KubeError):
                    kube.delete(XR_API, obj["kind"], obj["metadata"]["name"], NS)
        time.sleep(0.5)
    left = sorted(set(tracked) - set(gone_at))
    held = held_by_orphaned_download_pods(kube)
    # Known, not fixed yet (found on this plane; docs/control-plane.md): what a download pod
    # orphaned by provider-kubernetes keeps, and what waits on it through the Usages.
    unexplained = [k for k in left if not any(h in k for h in held)]
    assert not unexplained, f"left behind after 300 s: {unexplained}"
    if not held:
        assert not kube.list(*USAGE, NS), "every Usage goes with what it protected"
    wrong = [
        f"{of} went in round {gone_at[of]}, before {by} (round {gone_at[by]}), which used it"
        for of, by in order
        if of in gone_at and by in gone_at and gone_at[of] < gone_at[by]
    ]
    assert not wrong, "\n".join(wrong)


def held_by_orphaned_download_pods(kube: Kube) -> set[str]:
    """The models (and their clusters) whose download pod outlived its Job: provider-kubernetes
    v1.2.1 deletes an Object's Job with the API's default propagation, which for batch/v1 Jobs
    orphans the pods, and a pod that was scheduled keeps its PersistentVolumeClaim in use
    (kube-controller-manager's pvc-protection), so the cache claim of a model on a cluster
    never finishes Terminating."""
    out: set[str] = set()
    for pod in kube.list("v1", "Pod", NS, selector="app.kubernetes.io/component=model-fetch"):
        if pod["metadata"].get("ownerReferences"):
            continue
        model = pod["metadata"]["labels"].get("app.kubernetes.io/name", "")
        out.add(model)
        for claim in kube.list("v1", "PersistentVolumeClaim", NS):
            if claim["metadata"]["name"] == model and claim["metadata"].get("deletionTimestamp"):
                out.add(model)
    # Their clusters' Objects wait on the claim's Object through the Usages.
    clusters = {
        d["metadata"]["name"]: (d["spec"]["parameters"].get("clusterRef") or {}).get("name")
        for _, d in DOCS
        if d["kind"] == "LLMInference"
    }
    return out | {c for m in list(out) if (c := clusters.get(m))}


@pytest.mark.xfail(
    strict=True,
    reason="found on the plane, not fixed: provider-kubernetes orphans a remote download Job's "
    "pod, which holds the model's cache claim in Terminating (docs/control-plane.md)",
)
def test_a_remote_models_download_pod_goes_with_its_job(
    applied: list[dict[str, Any]], kube: Kube
) -> None:
    assert not held_by_orphaned_download_pods(kube)
