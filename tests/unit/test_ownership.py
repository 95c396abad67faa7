"""No takeover of foreign objects (function/policy/ownership.py): an object that exists and
is not the claim's is refused by name, on the control plane and on another cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import engine_image

from function.compose import compose
from function.keys import NAMESPACE, RUNTIME
from function.outcome import Inputs
from function.policy import ownership

UID = "0b5c1a52-6f0e-4a57-9a57-2b0c5f1e7a10"


def claim(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": "a-team", "uid": UID},
        "spec": {"parameters": {"model": "Qwen/Qwen2.5-1.5B-Instruct", **params}},
    }


def runtime(owner_refs: list[dict[str, Any]] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "qwen", "namespace": "a-team"}
    if owner_refs is not None:
        meta["ownerReferences"] = owner_refs
    return {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "metadata": meta,
    }


def controller_ref(kind: str, name: str, uid: str) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": uid, "controller": True}


# (case, what Crossplane found under the runtime's name, the refusal or None)
CONTROL_PLANE = [
    ("nothing there", [], None),
    (
        "made by hand",
        [runtime(None)],
        "metadata.name: VLLMRuntime a-team/qwen already exists and it was not created by "
        "Crossplane; the claim does not take it over. Give the claim another name, or delete or "
        "rename that VLLMRuntime",
    ),
    (
        "another claim's",
        [runtime([controller_ref("LLMInference", "other", "1111")])],
        "metadata.name: VLLMRuntime a-team/qwen already exists and it is controlled by "
        "LLMInference other; the claim does not take it over",
    ),
    ("this claim's own", [runtime([controller_ref("LLMInference", "qwen", UID)])], None),
    (
        "owned but not controlled",
        [runtime([{"kind": "ConfigMap", "name": "x", "uid": "2", "controller": False}])],
        "metadata.name: VLLMRuntime a-team/qwen already exists and it was not created by",
    ),
]


@pytest.mark.parametrize(
    ("case", "found", "refusal"), CONTROL_PLANE, ids=[c[0] for c in CONTROL_PLANE]
)
def test_control_plane_objects_are_composed_only_when_absent_or_ours(
    case: str, found: list[dict[str, Any]], refusal: str | None
) -> None:
    first = compose(Inputs(xr=claim(), engine_image=engine_image()))
    requirement = first.requirements[f"existing-{RUNTIME}"]
    assert requirement == {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "matchName": "qwen",
        "namespace": "a-team",
    }
    required = {name: [] for name in first.requirements} | {f"existing-{RUNTIME}": found}
    out = compose(Inputs(xr=claim(), engine_image=engine_image(), required=required))
    if refusal is None:
        assert out.fatal is None and RUNTIME in out.resources, case
    else:
        assert out.fatal is not None and out.fatal.startswith(refusal), out.fatal
        assert out.resources == {}


def test_objects_already_composed_are_not_looked_up_again() -> None:
    first = compose(Inputs(xr=claim(), engine_image=engine_image()))
    observed = {k: copy.deepcopy(v) for k, v in first.resources.items()}
    out = compose(Inputs(xr=claim(), engine_image=engine_image(), observed=observed))
    assert not [r for r in out.requirements if r.startswith("existing-")]


REMOTE = {"providerConfigName": "gpu-cluster"}


def _remote(observed: dict[str, Any] | None = None) -> dict[str, Any]:
    required = {f"existing-{k}": [] for k in ("vllm-runtime", "model-cache", "namespace")}
    out = compose(
        Inputs(
            xr=claim(**REMOTE),
            engine_image=engine_image(),
            observed=observed or {},
            required=required,
        )
    )
    assert out.fatal is None, out.fatal
    return out.resources


def test_remote_objects_start_observe_only_and_carry_the_owner() -> None:
    composed = _remote()
    for key, obj in composed.items():
        if obj["kind"] != "Object":
            continue
        manifest = obj["spec"]["forProvider"]["manifest"]
        assert manifest["metadata"]["annotations"][ownership.OWNER_ANNOTATION] == "a-team/qwen"
        if key.startswith(NAMESPACE):
            # created once and never deleted: nothing to take over
            assert obj["spec"]["managementPolicies"] == [
                "Observe",
                "Create",
                "Update",
                "LateInitialize",
            ]
        else:
            assert obj["spec"]["managementPolicies"] == ["Observe"], key


def _probe(status: dict[str, Any] | None, policies: list[str] | None = None) -> dict[str, Any]:
    key = next(k for k in _remote() if k.startswith(RUNTIME))
    obj = copy.deepcopy(_remote()[key])
    if policies is not None:
        obj["spec"]["managementPolicies"] = policies
    if status is not None:
        obj["status"] = status
    return {key: obj}


def _found(annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "qwen", "namespace": "a-team"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"atProvider": {"manifest": {"kind": "VLLMRuntime", "metadata": meta}}}


ABSENT = {
    "conditions": [
        {
            "type": "Synced",
            "status": "False",
            "reason": "ReconcileError",
            "message": ownership.ABSENT_MESSAGE,
        }
    ]
}
OTHER_ERROR = {
    "conditions": [
        {
            "type": "Synced",
            "status": "False",
            "reason": "ReconcileError",
            "message": "observe failed: connection refused",
        }
    ]
}

# (case, the runtime's observed Object, the policies it gets now, or the refusal)
PROBES: list[tuple[str, dict[str, Any], Any]] = [
    ("not looked yet", _probe(None), ["Observe"]),
    ("the provider could not look", _probe(OTHER_ERROR), ["Observe"]),
    ("absent there", _probe(ABSENT), None),
    ("ours there", _probe(_found({ownership.OWNER_ANNOTATION: "a-team/qwen"})), None),
    (
        "another claim's there",
        _probe(_found({ownership.OWNER_ANNOTATION: "b-team/qwen"})),
        "metadata.name: VLLMRuntime a-team/qwen already exists on the cluster of ProviderConfig "
        "gpu-cluster and it belongs to b-team/qwen; the claim does not take it over",
    ),
    (
        "made by hand there",
        _probe(_found({})),
        "metadata.name: VLLMRuntime a-team/qwen already exists on the cluster of ProviderConfig "
        f"gpu-cluster and it has no {ownership.OWNER_ANNOTATION} annotation",
    ),
    ("composed before with full policies", _probe(_found(None), policies=["*"]), None),
]


@pytest.mark.parametrize(("case", "observed", "expected"), PROBES, ids=[c[0] for c in PROBES])
def test_remote_objects_manage_only_what_was_absent_or_ours(
    case: str, observed: dict[str, Any], expected: Any
) -> None:
    required = {f"existing-{k}": [] for k in ("vllm-runtime", "model-cache", "namespace")}
    out = compose(
        Inputs(
            xr=claim(**REMOTE), engine_image=engine_image(), observed=observed, required=required
        )
    )
    if isinstance(expected, str):
        assert out.fatal is not None and out.fatal.startswith(expected), out.fatal
        return
    assert out.fatal is None, out.fatal
    (key,) = observed
    assert out.resources[key]["spec"].get("managementPolicies") == expected, case
