"""How soon the function asks to be run again (function/requeue.py): one minute, as the SDK
and Crossplane's poll would, except while Crossplane drops the claim's watch events (its
circuit breaker is open) and something composed is not yet ready."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import request, run
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.outcome import Condition, Outcome
from function.requeue import SETTLED_SECONDS, SOON_SECONDS, circuit_open, ttl_seconds

OPEN = {
    "type": "Responsive",
    "status": "False",
    "reason": "WatchCircuitOpen",
    "message": "Too many watch events from Object/qwen-fetch (a-team). Allowing events "
    "periodically.",
}
CLOSED = {"type": "Responsive", "status": "True", "reason": "WatchCircuitClosed"}


def claim(*conditions: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": "a-team"},
        "spec": {"parameters": params or {"model": "Qwen/Qwen2.5-1.5B-Instruct"}},
        "status": {"conditions": list(conditions)},
    }


def outcome(ready: dict[str, bool], **fields: Any) -> Outcome:
    out = Outcome(resources={k: {} for k in ready}, ready=dict(ready))
    for k, v in fields.items():
        setattr(out, k, v)
    return out


def not_ready() -> Outcome:
    out = outcome({"runtime": True}, xr_ready=False)
    out.conditions.append(Condition("Cluster", "False", "NotReady", "identity not ready"))
    return out


def not_found() -> Outcome:
    out = outcome({"runtime": True}, xr_ready=False)
    out.conditions.append(Condition("Cluster", "False", "NotFound", "does not exist"))
    return out


CASES = [
    # (name, the XR's conditions, the outcome, the TTL)
    ("open, waiting on the download", [OPEN], outcome({"pvc": True, "fetch": False}), 10),
    ("open, nothing observed yet", [OPEN], outcome({"pvc": False}), 10),
    ("open, a readiness not decided", [OPEN], Outcome(resources={"pvc": {}}), 10),
    ("open, the cluster is looked up", [OPEN], outcome({}, xr_ready=False), 10),
    ("open, everything ready", [OPEN], outcome({"pvc": True, "runtime": True}), 60),
    ("open, refused", [OPEN], outcome({"pvc": False}, fatal="spec.parameters.gpu: ..."), 60),
    ("closed, waiting", [CLOSED], outcome({"pvc": True, "fetch": False}), 60),
    ("no condition yet (a new claim)", [], outcome({"pvc": False}), 60),
    ("Responsive False for another reason", [{**OPEN, "reason": "Other"}], outcome({}), 60),
    ("Responsive Unknown", [{**OPEN, "status": "Unknown"}], outcome({"x": False}), 60),
    ("the cluster is not ready for models", [CLOSED], not_ready(), 10),
    ("the cluster is not found (a person must act)", [CLOSED], not_found(), 60),
]


@pytest.mark.parametrize(
    ("conditions", "out", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_ttl(conditions: list[dict[str, Any]], out: Outcome, want: int) -> None:
    assert ttl_seconds(claim(*conditions), out) == want


def test_a_settled_claim_keeps_the_sdk_default_and_soon_beats_the_breakers_probe() -> None:
    from crossplane.function.response import DEFAULT_TTL

    assert DEFAULT_TTL.total_seconds() == SETTLED_SECONDS
    # While open, the breaker lets one event through every 30 s (internal/circuit/
    # token_bucket.go at v2.3.4, halfOpenInterval): sooner than that, or the TTL adds nothing.
    assert SOON_SECONDS < 30


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ({"conditions": [OPEN]}, True),
        ({"conditions": [CLOSED]}, False),
        ({"conditions": "not a list"}, False),
        ({"conditions": [None, 3, OPEN]}, True),
        ({}, False),
        (None, False),
    ],
)
def test_circuit_open_reads_any_status(status: Any, want: bool) -> None:
    assert circuit_open({"status": status}) is want


@pytest.mark.parametrize(
    ("name", "xr", "want"),
    [
        ("open: nothing composed is observed yet", claim(OPEN), SOON_SECONDS),
        ("closed", claim(CLOSED), SETTLED_SECONDS),
        ("open but refused", claim(OPEN, model="not a model id"), SETTLED_SECONDS),
    ],
)
def test_the_response_carries_it(name: str, xr: dict[str, Any], want: int) -> None:
    rsp = run(request(xr))
    assert rsp.meta.ttl.seconds == want, name
    if "refused" in name:
        assert any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results)
