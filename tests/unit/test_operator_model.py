"""What the production-stack operator's model (dot_inference/production_stack_operator.py) got
wrong until it ran beside the operator itself on the control plane (docs/operator-
comparison.md): one case per difference found, each what the operator at the pinned commit
does (operator/internal/controller/vllmruntime_controller.go)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from dot_inference import production_stack_operator as operator

BASE: dict[str, Any] = {
    "apiVersion": "production-stack.vllm.ai/v1alpha1",
    "kind": "VLLMRuntime",
    "metadata": {"name": "m", "namespace": "t", "labels": {"team": "t"}},
    "spec": {
        "model": {"modelURL": "Qwen/Qwen2.5-7B-Instruct"},
        "vllmConfig": {"v1": True, "port": 8000},
        "deploymentConfig": {
            "image": {"registry": "docker.io", "name": "lmcache/vllm-openai:v0.4.2"},
            "nodeSelectorTerms": [],
        },
    },
}


def runtime(**spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    for key, value in spec.items():
        out["spec"][key] = {**out["spec"].get(key, {}), **value}
    return out


def container(rt: dict[str, Any]) -> dict[str, Any]:
    return operator.deployment_for(rt)["spec"]["template"]["spec"]["containers"][0]


LMCACHE_CASES = [
    {
        "name": "v1: the LMCacheConnectorV1 connector, last of the arguments",
        "runtime": runtime(lmCacheConfig={"enabled": True}),
        "last_args": [
            "--kv-transfer-config",
            '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
        ],
        "env": [
            "LMCACHE_LOG_LEVEL",
            "LMCACHE_USE_EXPERIMENTAL",
            "VLLM_RPC_TIMEOUT",
            # The CRD's defaults: cpuOffloadingBufferSize 4Gi, diskOffloadingBufferSize 8Gi.
            "LMCACHE_LOCAL_CPU",
            "LMCACHE_MAX_LOCAL_CPU_SIZE",
            "LMCACHE_LOCAL_DISK",
            "LMCACHE_MAX_LOCAL_DISK_SIZE",
        ],
    },
    {
        "name": "v0: the LMCacheConnector connector",
        "runtime": runtime(lmCacheConfig={"enabled": True}, vllmConfig={"v1": False}),
        "last_args": [
            "--kv-transfer-config",
            '{"kv_connector":"LMCacheConnector","kv_role":"kv_both"}',
        ],
        "env": [
            "LMCACHE_LOG_LEVEL",
            "LMCACHE_USE_EXPERIMENTAL",
            "VLLM_RPC_TIMEOUT",
            # The CRD's defaults: cpuOffloadingBufferSize 4Gi, diskOffloadingBufferSize 8Gi.
            "LMCACHE_LOCAL_CPU",
            "LMCACHE_MAX_LOCAL_CPU_SIZE",
            "LMCACHE_LOCAL_DISK",
            "LMCACHE_MAX_LOCAL_DISK_SIZE",
        ],
    },
    {
        "name": "CPU, disk and remote buffers become their variables, in the operator's order",
        "runtime": runtime(
            lmCacheConfig={
                "enabled": True,
                "cpuOffloadingBufferSize": "30",
                "diskOffloadingBufferSize": "100",
                "remoteUrl": "lm://lmcache-server.t.svc.cluster.local:80",
                "remoteSerde": "naive",
            }
        ),
        "last_args": [
            "--kv-transfer-config",
            '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
        ],
        "env": [
            "LMCACHE_LOG_LEVEL",
            "LMCACHE_USE_EXPERIMENTAL",
            "VLLM_RPC_TIMEOUT",
            "LMCACHE_LOCAL_CPU",
            "LMCACHE_MAX_LOCAL_CPU_SIZE",
            "LMCACHE_LOCAL_DISK",
            "LMCACHE_MAX_LOCAL_DISK_SIZE",
            "LMCACHE_REMOTE_URL",
            "LMCACHE_REMOTE_SERDE",
        ],
    },
    {
        "name": "off: no connector, no variables",
        "runtime": runtime(),
        "last_args": ["--no-enable-chunked-prefill", "--no-enable-prefix-caching"],
        "env": [],
    },
]


@pytest.mark.parametrize("case", LMCACHE_CASES, ids=[c["name"] for c in LMCACHE_CASES])
def test_lmcache_arguments_and_variables(case: dict[str, Any]) -> None:
    c = container(case["runtime"])
    assert c["args"][-2:] == case["last_args"]
    names = [e["name"] for e in c["env"] if e["name"].startswith(("LMCACHE", "VLLM_RPC"))]
    assert names == case["env"]
    if case["runtime"]["spec"].get("lmCacheConfig", {}).get("enabled"):
        json.loads(c["args"][-1])  # the connector is JSON vLLM parses


def test_every_vllmruntime_gets_a_service() -> None:
    svc = operator.service_for(runtime(vllmConfig={"port": 8080}))
    assert svc["metadata"] == {"name": "m", "namespace": "t"}
    assert svc["spec"]["selector"] == {"app": "m", "team": "t"}
    assert svc["spec"]["ports"] == [
        {"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}
    ]


PVC_CASES = [
    {"name": "storage off: none", "storage": {}, "want": None},
    {
        "name": "on: the CRD's defaults (10Gi, ReadWriteMany), no class",
        "storage": {"enabled": True},
        "want": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}},
    },
    {
        "name": "on: an access mode the operator does not know is ReadWriteOnce",
        "storage": {"enabled": True, "accessMode": "ReadWriteOncePod"},
        "want": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}},
    },
    {
        "name": "on: its size, access mode and class",
        "storage": {
            "enabled": True,
            "size": "620Gi",
            "accessMode": "ReadWriteMany",
            "storageClassName": "fast",
        },
        "want": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": "620Gi"}},
            "storageClassName": "fast",
        },
    },
]


@pytest.mark.parametrize("case", PVC_CASES, ids=[c["name"] for c in PVC_CASES])
def test_the_claim_the_operator_creates(case: dict[str, Any]) -> None:
    claim = operator.pvc_for(runtime(storageConfig=case["storage"]))
    assert (claim and claim["spec"]) == case["want"]
    if claim:
        assert claim["metadata"]["name"] == "m"
        assert claim["metadata"]["labels"] == {"app": "m", "team": "t"}
