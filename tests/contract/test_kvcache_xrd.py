"""The LLMInference XRD's spec.parameters.kvCache: what the schema and its CEL rules accept
and reject, validated the way the API server would, from the generated package/ XRD."""

from __future__ import annotations

from typing import Any

import pytest
from test_llminference_xrd import errors, xr

ACCEPTED = [
    ("on", xr(model="a/b", kvCache={"enabled": True})),
    ("off", xr(model="a/b", kvCache={"enabled": False})),
    ("with a size", xr(model="a/b", kvCache={"enabled": True, "cpuSize": "64Gi"})),
    ("shared", xr(model="a/b", kvCache={"enabled": True, "shared": True})),
    (
        "off with llmd",
        xr(model="a/b", backend="llmd", clusterRef={"name": "c"}, kvCache={"enabled": False}),
    ),
]


@pytest.mark.parametrize("obj", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted(obj: dict[str, Any]) -> None:
    assert errors(obj) == []


REJECTED = [
    ("enabled a string", xr(model="a/b", kvCache={"enabled": "yes"}), "kvCache.enabled"),
    ("size in GB", xr(model="a/b", kvCache={"enabled": True, "cpuSize": "16GB"}), "cpuSize"),
    ("size 0", xr(model="a/b", kvCache={"enabled": True, "cpuSize": "0Gi"}), "cpuSize"),
    ("shared a string", xr(model="a/b", kvCache={"enabled": True, "shared": "yes"}), "shared"),
    ("size a number", xr(model="a/b", kvCache={"enabled": True, "cpuSize": 16}), "cpuSize"),
    (
        "with llmd (CEL)",
        xr(model="a/b", backend="llmd", clusterRef={"name": "c"}, kvCache={"enabled": True}),
        "kvCache is wired through the production stack",
    ),
    (
        "with the simulator (CEL)",
        xr(model="a/b", engine={"simulate": True}, kvCache={"enabled": True}),
        "holds no KV cache to offload",
    ),
    (
        "with adapters (CEL)",
        xr(
            model="a/b",
            kvCache={"enabled": True},
            adapters=[{"name": "b-sql", "source": "a/b-sql"}],
        ),
        "kvCache and adapters are exclusive",
    ),
]


@pytest.mark.parametrize(("obj", "says"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected(obj: dict[str, Any], says: str) -> None:
    errs = errors(obj)
    assert errs, "the schema accepted it"
    assert any(says in e for e in errs), errs
