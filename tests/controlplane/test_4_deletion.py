"""Deleting everything the examples made: a cluster a model runs on refuses deletion while the
model runs (the Usage webhook, naming the model); then every XR deleted at once completes, each
`of` of a Usage outliving its `by`, and nothing Crossplane composed is left behind."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest
from applied_examples import existing, source_objects
from conftest import NS, XR_API, xrs

from dot_inference.controlplane.kube import Kube, KubeError

USAGE = ("protection.crossplane.io/v1beta1", "Usage")


def _key(ref: dict[str, Any]) -> str:
    return f"{ref.get('kind')}/{(ref.get('resourceRef') or ref).get('name')}"


def test_a_cluster_refuses_deletion_while_a_model_uses_it(
    applied: list[dict[str, Any]], kube: Kube
) -> None:
    usages = kube.list(*USAGE, NS)

    def owner(u: dict[str, Any]) -> dict[str, Any]:
        refs = u["metadata"].get("ownerReferences") or []
        return next((r for r in refs if r.get("controller")), {})

    by_model = next(
        (
            u
            for u in usages
            if u["spec"]["of"].get("kind") == "InferenceCluster"
            and owner(u).get("kind") == "LLMInference"
        ),
        None,
    )
    assert by_model is not None, "the examples run models on clusters"
    cluster = by_model["spec"]["of"]["resourceRef"]["name"]
    model = owner(by_model)["name"]
    # By one of the model's objects on the cluster, never the model (a foreground deletion of
    # the model would wait on itself); the webhook names the model's Usage.
    assert by_model["spec"]["by"]["kind"] == "Object"
    with pytest.raises(KubeError) as refused:
        kube.delete(XR_API, "InferenceCluster", cluster, NS)
    message = refused.value.message
    # The webhook names one Usage of those that hold it (of the models on it).
    assert "in-use" in message and f'-uses-{cluster}"' in message, message
    assert model
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
    assert not left, f"left behind after 300 s: {left}"
    assert not kube.list(*USAGE, NS), "every Usage goes with what it protected"
    wrong = [
        f"{of} went in round {gone_at[of]}, before {by} (round {gone_at[by]}), which used it"
        for of, by in order
        if of in gone_at and by in gone_at and gone_at[of] < gone_at[by]
    ]
    assert not wrong, "\n".join(wrong)


def test_no_download_pod_outlives_its_job(applied: list[dict[str, Any]], kube: Kube) -> None:
    """provider-kubernetes deletes an Object's object with the API's default propagation,
    which for a batch/v1 Job orphans its pods; a scheduled orphan would keep the model's cache
    claim in use (pvc-protection) and its deletion Terminating forever. The Job asks for
    foreground deletion itself (its foregroundDeletion finalizer), so its pods go first."""
    left = kube.list("v1", "Pod", NS, selector="app.kubernetes.io/component=model-fetch")
    assert not left, [p["metadata"]["name"] for p in left]
    # Every model cache the examples composed is gone; the claim a user staged weights on
    # (examples/llm-pvc-weights.yaml's, applied_examples.source_objects) is the user's.
    assert not kube.list(
        "v1", "PersistentVolumeClaim", NS, selector="app.kubernetes.io/part-of=dot-inference"
    )
    staged = {
        o["metadata"]["name"] for o in source_objects() if o["kind"] == "PersistentVolumeClaim"
    }
    assert {c["metadata"]["name"] for c in kube.list("v1", "PersistentVolumeClaim", NS)} <= staged
