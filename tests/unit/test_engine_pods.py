"""Why a claim's engine does not start, in the scheduler's words: where the engine runs on the
control plane itself (no cluster), the claim reads its pods (a required resource) and its
Serving condition quotes the first one the scheduler could not place (function/status.py)."""

from __future__ import annotations

from typing import Any

import pytest

from function.cluster.target import Target
from function.outcome import Outcome
from function.status import PODS_REQUIREMENT, pods_requirement, unschedulable

NO_ROOM = (
    "0/11 nodes are available: 4 Insufficient nvidia.com/gpu, 7 node(s) didn't match "
    "Pod's node affinity/selector."
)


def pod(name: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"conditions": list(conditions)}}


UNSCHEDULED = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": NO_ROOM,
}
SCHEDULED = {"type": "PodScheduled", "status": "True"}

CASES = [
    ("no pods yet", [], ""),
    ("scheduled", [pod("m-1", SCHEDULED)], ""),
    (
        "unschedulable: the scheduler's words",
        [pod("m-1", UNSCHEDULED)],
        f"pod m-1 cannot be scheduled: {NO_ROOM}",
    ),
    (
        "the first by name of several",
        [pod("m-2", UNSCHEDULED), pod("m-1", SCHEDULED), pod("m-0", UNSCHEDULED)],
        f"pod m-0 cannot be scheduled: {NO_ROOM}",
    ),
    (
        "not scheduled for another reason (a gate): not the scheduler's refusal",
        [pod("m-1", {**UNSCHEDULED, "reason": "SchedulingGated"})],
        "",
    ),
    ("malformed: no crash", [{"status": {"conditions": [None, "x"]}}, {}], ""),
]


@pytest.mark.parametrize(("pods", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_unschedulable(pods: list[dict[str, Any]], want: str) -> None:
    assert unschedulable(pods) == want


REQUIREMENT_CASES = [
    ("on the control plane: its pods, by the claim's name", None, True),
    ("on a cluster: provider-kubernetes' side, not read", "gpus-models", False),
]


@pytest.mark.parametrize(
    ("provider_config", "required"),
    [c[1:] for c in REQUIREMENT_CASES],
    ids=[c[0] for c in REQUIREMENT_CASES],
)
def test_pods_requirement(provider_config: str | None, required: bool) -> None:
    out = Outcome()
    pods_requirement("qwen", Target(provider_config=provider_config, namespace="a-team"), out)
    assert (PODS_REQUIREMENT in out.requirements) is required
    if required:
        assert out.requirements[PODS_REQUIREMENT] == {
            "apiVersion": "v1",
            "kind": "Pod",
            "matchLabels": {
                "app.kubernetes.io/name": "qwen",
                "app.kubernetes.io/part-of": "dot-inference",
            },
            "namespace": "a-team",
        }
