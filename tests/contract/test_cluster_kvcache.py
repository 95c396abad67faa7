"""InferenceCluster apps.vllm.cacheServer and the router's routing logics, through the
generated package: what the XRD rejects, what the composition refuses, what the router's
values are for each logic offered, and the CacheServer valid against the vendored CRD."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from test_cluster_render import ANSI, _example, _render, package  # noqa: F401 (fixture)

from dot_inference.apiserver import validate_objects


def cluster(**vllm: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": "c", "namespace": "a-team"},
        "spec": {"parameters": {"provider": "local", "apps": {"vllm": vllm}}},
    }


XRD_REJECTED = [
    ("kvaware", cluster(enabled=True, endpoint={"routingLogic": "kvaware"}), "routingLogic"),
    (
        "disaggregated-prefill",
        cluster(enabled=True, endpoint={"routingLogic": "disaggregated_prefill"}),
        "routingLogic",
    ),
    (
        "disaggregated-prefill-orchestrated",
        cluster(enabled=True, endpoint={"routingLogic": "disaggregated_prefill_orchestrated"}),
        "routingLogic",
    ),
    (
        "cache-server-memory-in-GB",
        cluster(enabled=True, cacheServer={"enabled": True, "memory": "16GB"}),
        "cacheServer.memory",
    ),
    (
        "cache-server-enabled-a-string",
        cluster(enabled=True, cacheServer={"enabled": "yes"}),
        "enabled",
    ),
]


@pytest.mark.parametrize(
    ("xr", "says"), [c[1:] for c in XRD_REJECTED], ids=[c[0] for c in XRD_REJECTED]
)
def test_the_xrd_rejects(xr: dict, says: str, package: dict) -> None:  # noqa: F811
    report = validate_objects([xr], schema_paths=package["schemas"])
    assert not report.ok
    assert says in report.summary()


def test_a_cache_server_needs_the_production_stack(package: dict) -> None:  # noqa: F811
    result = _render(package, cluster(enabled=False, cacheServer={"enabled": True}))
    assert result.fatal
    assert (
        "spec.parameters.apps.vllm.cacheServer runs through the production-stack operator: "
        "set spec.parameters.apps.vllm.enabled: true"
    ) in ANSI.sub("", result.fatal)


ROUTER = [
    ("roundrobin", {}, {"routingLogic": "roundrobin"}),
    (
        "session",
        {"routingLogic": "session", "sessionKey": "x-user"},
        {"routingLogic": "session", "sessionKey": "x-user"},
    ),
    ("prefixaware", {"routingLogic": "prefixaware"}, {"routingLogic": "prefixaware"}),
]


@pytest.mark.parametrize(
    ("endpoint", "expected"), [c[1:] for c in ROUTER], ids=[c[0] for c in ROUTER]
)
def test_the_router_values_for_each_logic(endpoint: dict, expected: dict, package: dict) -> None:  # noqa: F811
    result = _render(package, cluster(enabled=True, endpoint=endpoint))
    assert not result.fatal, result.fatal
    release = next(
        o
        for o in result.composed
        if o["kind"] == "Release" and o["spec"]["forProvider"]["chart"]["name"] == "vllm-stack"
    )
    router = release["spec"]["forProvider"]["values"]["routerSpec"]
    assert {k: router[k] for k in ("routingLogic", "sessionKey") if k in router} == expected
    assert result.xr["status"]["vllm"]["routingLogic"] == expected["routingLogic"]


def test_the_cache_server_is_valid_and_published(package: dict) -> None:  # noqa: F811
    result = _render(package, copy.deepcopy(_example("cluster-rag.yaml")))
    assert not result.fatal, result.fatal
    objects = [o for o in result.composed if o["kind"] == "Object"]
    servers = [
        o["spec"]["forProvider"]["manifest"]
        for o in objects
        if o["spec"]["forProvider"]["manifest"]["kind"] == "CacheServer"
    ]
    assert len(servers) == 1
    report = validate_objects(servers, schema_paths=package["schemas"])
    assert report.ok and report.valid, report.summary()
    ns = servers[0]["metadata"]["namespace"]
    assert result.xr["status"]["vllm"]["cacheServer"] == {
        "url": f"lm://{servers[0]['metadata']['name']}.{ns}.svc.cluster.local:80",
        "serde": "naive",
    }


def on_aws(size: str, memory: str | None) -> dict[str, Any]:
    c = copy.deepcopy(_example("cluster-rag.yaml"))
    c["spec"]["parameters"]["nodes"]["size"] = size
    server = c["spec"]["parameters"]["apps"]["vllm"]["cacheServer"]
    server.pop("memory", None)
    if memory is not None:
        server["memory"] = memory
    return c


# The CacheServer's pod runs on the general pool (the operator gives it no GPU toleration):
# (case, nodes.size, cacheServer.memory, the refusal or None)
CACHE_SERVER_FIT = [
    ("the default on small nodes", "small", None, None),
    ("half a small node", "small", "4Gi", None),
    ("more than half a small node", "small", "5Gi", "at most 4Gi, or a larger"),
    ("16Gi on large nodes", "large", "16Gi", None),
    ("32Gi on large nodes", "large", "32Gi", "at most 16Gi"),
    ("in Mi", "medium", "8192Mi", None),
    ("in Ti", "large", "1Ti", "at most 16Gi"),
]


@pytest.mark.parametrize(
    ("size", "memory", "says"),
    [c[1:] for c in CACHE_SERVER_FIT],
    ids=[c[0] for c in CACHE_SERVER_FIT],
)
def test_the_cache_server_fits_the_general_pool(
    size: str,
    memory: str | None,
    says: str | None,
    package: dict,  # noqa: F811
) -> None:
    result = _render(package, on_aws(size, memory))
    if says is None:
        assert not result.fatal, result.fatal
        (server,) = [
            o["spec"]["forProvider"]["manifest"]
            for o in result.composed
            if o["kind"] == "Object"
            and o["spec"]["forProvider"]["manifest"]["kind"] == "CacheServer"
        ]
        assert server["spec"]["resources"] == {"cpu": "500m", "memory": memory or "4Gi"}
    else:
        fatal = ANSI.sub("", result.fatal or "")
        assert "spec.parameters.apps.vllm.cacheServer.memory" in fatal and says in fatal, fatal
