"""spec.parameters.kvCache: LMCache CPU offloading through VLLMRuntime.lmCacheConfig, the
buffer sized from the GPU node's memory, the engine pod grown by it, status.plan.kvCache,
and every refusal naming the field."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    claim,
    load_yaml,
    on_cluster,
)

from dot_inference.apiserver import validate_objects
from function.backends import lmcache
from function.backends.production_stack import engine_command
from function.claim.fields import SpecError
from function.claim.spec import parse
from function.keys import RUNTIME
from function.model import kv_cache, sizing
from function.model.catalog_lookup import lookup
from function.outcome import Outcome
from function.plan.offload import OffloadError, memory_mib, size_offload, tokens
from function.policy import vllm_cli

RAG = next(
    o
    for o in load_yaml(EXAMPLES / "state" / "llm-rag-offload.yaml")
    if o["kind"] == "InferenceCluster"
)
NODE_MIB = RAG["status"]["gpu"]["allocatable"]["memoryMiB"]
PER_NODE = RAG["status"]["gpu"]["perNode"]
QWEN = "Qwen/Qwen2.5-7B-Instruct"


def on_rag(model: str = QWEN, **params: Any) -> dict[str, Any]:
    return claim(model, "rag", clusterRef={"name": RAG["metadata"]["name"]}, **params)


def run(xr: dict[str, Any], cluster: dict[str, Any] | None = RAG) -> Outcome:
    return on_cluster(xr, cluster)


def runtime(out: Outcome) -> dict[str, Any]:
    key = next(k for k in out.resources if k.startswith(RUNTIME))
    res = out.resources[key]
    return res["spec"]["forProvider"]["manifest"] if res["kind"] == "Object" else res


# --- the spec: hostile values, each refused naming the field ---------------------------------

SPEC_REFUSALS = [
    ("not-an-object", "yes", "spec.parameters.kvCache"),
    ("enabled-a-string", {"enabled": "true"}, "spec.parameters.kvCache.enabled"),
    ("enabled-a-number", {"enabled": 1}, "spec.parameters.kvCache.enabled"),
    ("size-in-GB", {"enabled": True, "cpuSize": "16GB"}, "spec.parameters.kvCache.cpuSize"),
    ("size-zero", {"enabled": True, "cpuSize": "0Gi"}, "spec.parameters.kvCache.cpuSize"),
    ("size-a-number", {"enabled": True, "cpuSize": 16}, "spec.parameters.kvCache.cpuSize"),
    ("size-over-1Ti", {"enabled": True, "cpuSize": "1025Gi"}, "spec.parameters.kvCache.cpuSize"),
    ("size-fraction", {"enabled": True, "cpuSize": "1.5Gi"}, "spec.parameters.kvCache.cpuSize"),
    ("unknown-field", {"enabled": True, "disk": "8Gi"}, "spec.parameters.kvCache.disk"),
    ("shared-a-string", {"enabled": True, "shared": "yes"}, "spec.parameters.kvCache.shared"),
]


@pytest.mark.parametrize(
    ("value", "field"), [c[1:] for c in SPEC_REFUSALS], ids=[c[0] for c in SPEC_REFUSALS]
)
def test_the_spec_refuses_what_is_not_a_kv_cache(value: Any, field: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(claim(QWEN, kvCache=value))
    assert e.value.field == field
    assert field in e.value.message


SPEC_READS = [
    ("absent", None, (False, None, False)),
    ("off", {"enabled": False}, (False, None, False)),
    ("on", {"enabled": True}, (True, None, False)),
    ("on-with-size", {"enabled": True, "cpuSize": "16Gi"}, (True, 16, False)),
    ("shared", {"enabled": True, "shared": True}, (True, None, True)),
]


@pytest.mark.parametrize(
    ("value", "expected"), [c[1:] for c in SPEC_READS], ids=[c[0] for c in SPEC_READS]
)
def test_the_spec_reads_kv_cache(value: Any, expected: tuple[bool, int | None, bool]) -> None:
    params = {} if value is None else {"kvCache": value}
    kv = parse(claim(QWEN, **params)).kv_cache
    assert (kv.enabled, kv.cpu_gib, kv.shared) == expected


# --- sizing: a pure function of the node, the pod and the claim ---------------------------------

# (explicit GiB, node MiB, GPUs per node, GPUs, pod MiB) -> (GiB per GPU, pod MiB) or the refusal
SIZING = [
    # 1 of 4 GPUs on a 192 GiB node: 48119 MiB share - 8 GiB - 1 GiB Job, 80% -> 30 GiB.
    ("share-of-a-4-gpu-node", (None, 192479, 4, 1, 8192), (30, 8192 + 30 * 1024)),
    ("whole-node-two-gpus", (None, 65536, 2, 2, 16384), (18, 16384 + 36 * 1024)),
    ("explicit-fits", (16, 192479, 4, 1, 8192), (16, 8192 + 16 * 1024)),
    ("explicit-without-node-facts", (8, None, 8, 2, 16384), (8, 16384 + 16 * 1024)),
    ("explicit-above-the-node", (200, 192479, 4, 1, 8192), "at most 179Gi fits"),
    ("node-too-small", (None, 9728, 1, 1, 8192), "leaves no room"),
    ("no-node-facts", (None, None, 8, 1, 8192), "set cpuSize"),
    # Boundaries: a request exactly the node's allocatable schedules; one MiB less does not.
    ("explicit-exactly-the-node", (8, 16384, 1, 1, 8192), (8, 16384)),
    ("explicit-one-mib-over", (8, 16383, 1, 1, 8192), r"is 16384 MiB, .* at most 7Gi fits"),
    ("explicit-room-for-one-gib", (2, 9716, 1, 1, 8192), "at most 1Gi fits"),
    ("explicit-no-room", (8, 9000, 1, 1, 8192), "no buffer fits beside the engine"),
    # 1280 MiB free after the pod and the Job: 80% is exactly 1 GiB.
    ("sized-exactly-one-gib", (None, 10496, 1, 1, 8192), (1, 8192 + 1024)),
    ("sized-just-under-one-gib", (None, 10495, 1, 1, 8192), r"cpuSize up to 2Gi \(the whole"),
    ("node-too-small-says-the-whole-node", (None, 9728, 1, 1, 8192), r"up to 1Gi \(the whole"),
]


@pytest.mark.parametrize(("given", "expected"), [c[1:] for c in SIZING], ids=[c[0] for c in SIZING])
def test_the_buffer_is_what_the_node_can_give(given: tuple, expected: Any) -> None:
    explicit, node, per_node, gpus, pod = given
    call = dict(
        explicit_gib=explicit, node_mib=node, per_node=per_node, gpus=gpus, pod_memory_mib=pod
    )
    if isinstance(expected, str):
        with pytest.raises(OffloadError, match=expected):
            size_offload(**call)
        return
    offload = size_offload(**call)
    assert (offload.cpu_gib_per_gpu, offload.pod_memory_mib) == expected
    assert offload.sized is (explicit is None)
    assert offload.cpu_gib == expected[0] * gpus
    if node is not None:
        assert offload.pod_memory_mib <= node  # it schedules


def test_tokens_are_gib_over_bytes_per_token() -> None:
    assert tokens(1, 1024) == 1024**2
    assert tokens(1, 1) == 1024**3
    assert tokens(1, 0) == 0


# What function/model/sizing.py writes as the pod's memory, in MiB; anything else is an error.
QUANTITIES = [("8Gi", 8192), ("7936Mi", 7936), ("1Mi", 1), ("8G", None), ("Gi", None)]
QUANTITIES += [("1.5Gi", None), ("8gi", None), ("8MI", None)]


@pytest.mark.parametrize(("quantity", "mib"), QUANTITIES, ids=[q for q, _ in QUANTITIES])
def test_memory_quantities(quantity: str, mib: int | None) -> None:
    if mib is None:
        with pytest.raises(ValueError, match=f"not a memory quantity in Gi or Mi: '{quantity}'"):
            memory_mib(quantity)
    else:
        assert memory_mib(quantity) == mib


# --- rendering: the runtime, the pod's memory, the command line, the plan -------------------


def test_offloading_renders_lmcache_config_and_grows_the_pod() -> None:
    off, on = run(on_rag()), run(on_rag(kvCache={"enabled": True}))
    assert not off.fatal and not on.fatal, (off.fatal, on.fatal)
    r_off, r_on = runtime(off), runtime(on)
    assert "lmCacheConfig" not in r_off["spec"]
    cfg = r_on["spec"]["lmCacheConfig"]
    # A plain number of GiB (LMCache float()s it), and the disk tier stated off.
    assert cfg == {"enabled": True, "cpuOffloadingBufferSize": "30", "diskOffloadingBufferSize": ""}
    # The operator forces LMCACHE_LOG_LEVEL=DEBUG; our variable comes after it and wins.
    env = r_on["spec"]["vllmConfig"]["env"]
    assert env[-1] == {"name": "LMCACHE_LOG_LEVEL", "value": "INFO"}
    assert not any(
        e["name"].startswith("LMCACHE_") for e in r_off["spec"]["vllmConfig"].get("env", [])
    )
    mem_off = r_off["spec"]["deploymentConfig"]["resources"]["memory"]
    mem_on = r_on["spec"]["deploymentConfig"]["resources"]["memory"]
    assert (mem_off, mem_on) == ("8Gi", "38Gi")
    plan = on.status["plan"]
    assert plan["memory"] == "38Gi"
    kv = plan["kvCache"]
    # The GPU tier is what the plan had without offloading.
    assert kv["gpu"]["gib"] == off.status["plan"]["kvCacheGiB"]
    assert kv["cpu"]["gib"] == 30 and kv["cpu"]["sizedFrom"] == "node memory"
    per_token = plan["perGPU"]["kvBytesPerToken"]
    assert kv["cpu"]["tokens"] == 30 * 1024**3 // per_token
    assert "kvCache" not in off.status["plan"]
    report = validate_objects([r_on])
    assert report.invalid == [] and report.valid, report


def test_the_command_line_is_the_operators_and_vllm_parses_it() -> None:
    out = run(on_rag(kvCache={"enabled": True, "cpuSize": "12Gi"}))
    args = out.status["plan"]["engineArgs"]
    assert args == engine_command(runtime(out))
    assert args[-2:] == ["--kv-transfer-config", lmcache.KV_TRANSFER_CONFIG]
    assert json.loads(args[-1])["kv_connector"] == "LMCacheConnectorV1"
    assert vllm_cli.problems(args[3:]) == []  # after `vllm serve MODEL`
    assert runtime(out)["spec"]["lmCacheConfig"]["cpuOffloadingBufferSize"] == "12"


def test_shared_wires_the_clusters_cache_server() -> None:
    out = run(on_rag(kvCache={"enabled": True, "shared": True}))
    cfg = runtime(out)["spec"]["lmCacheConfig"]
    url = RAG["status"]["vllm"]["cacheServer"]["url"]
    assert url.startswith("lm://") and url.endswith(":80")
    assert (cfg["remoteUrl"], cfg["remoteSerde"]) == (url, "naive")
    assert out.status["plan"]["kvCache"]["remote"] == {"url": url, "serde": "naive"}
    alone = runtime(run(on_rag(kvCache={"enabled": True})))["spec"]["lmCacheConfig"]
    assert "remoteUrl" not in alone and "remoteSerde" not in alone
    # The shared tier is added to the engine's own: its CPU buffer stays.
    assert cfg == {**alone, "remoteUrl": url, "remoteSerde": "naive"}
    assert alone["enabled"] is True and alone["cpuOffloadingBufferSize"] == "30"


# --- refusals through the whole function, each naming the field --------------------------------


LLMD = next(
    o for o in load_yaml(EXAMPLES / "state" / "llm-llmd.yaml") if o["kind"] == "InferenceCluster"
)


def without_cache_server() -> dict[str, Any]:
    c = copy.deepcopy(RAG)
    del c["status"]["vllm"]["cacheServer"]
    return c


REFUSALS = [
    (
        "shared-without-a-cache-server",
        on_rag(kvCache={"enabled": True, "shared": True}),
        without_cache_server(),
        "spec.parameters.kvCache.shared: InferenceCluster a-team/inference-rag runs no shared KV "
        "cache (status.vllm.cacheServer): set spec.parameters.apps.vllm.cacheServer.enabled: true",
    ),
    (
        "llmd-backend",
        claim(
            QWEN,
            "rag",
            backend="llmd",
            clusterRef={"name": "inference-llmd"},
            kvCache={"enabled": True},
        ),
        LLMD,
        "spec.parameters.kvCache.enabled: LMCache offloading is wired through",
    ),
    (
        "simulator",
        on_rag(engine={"simulate": True}, kvCache={"enabled": True}),
        RAG,
        "spec.parameters.kvCache.enabled: the inference simulator",
    ),
    (
        "pooling-model",
        on_rag("BAAI/bge-m3", kvCache={"enabled": True}),
        RAG,
        "is a embed (pooling) model",
    ),
    (
        "kv-transfer-in-extra-args",
        on_rag(
            kvCache={"enabled": True},
            engine={"extraArgs": ["--kv-transfer-config", '{"kv_connector":"NixlConnector"}']},
        ),
        RAG,
        "spec.parameters.engine.extraArgs sets --kv-transfer-config",
    ),
    (
        "lmcache-variable-in-env",
        on_rag(
            kvCache={"enabled": True},
            engine={"env": [{"name": "LMCACHE_MAX_LOCAL_CPU_SIZE", "value": "500"}]},
        ),
        RAG,
        "spec.parameters.engine.env[0]: LMCACHE_MAX_LOCAL_CPU_SIZE is not yours to set",
    ),
    (
        "adapters",
        on_rag(
            kvCache={"enabled": True},
            adapters=[{"name": "qwen-sql", "source": "a-team/qwen-sql-lora", "rank": 16}],
        ),
        RAG,
        "spec.parameters.kvCache.enabled: spec.parameters.adapters serves qwen-sql, and "
        "LMCache 0.4.2 keys a cached chunk by model and tokens, not by adapter",
    ),
    (
        "more-than-the-node",
        on_rag(kvCache={"enabled": True, "cpuSize": "500Gi"}),
        RAG,
        "spec.parameters.kvCache.cpuSize: 500Gi per GPU",
    ),
    (
        "no-node-memory-to-size-from",
        claim(QWEN, kvCache={"enabled": True}),
        None,
        "spec.parameters.kvCache.cpuSize: the cluster publishes no GPU node memory",
    ),
]


@pytest.mark.parametrize(
    ("xr", "cluster", "says"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_what_cannot_offload_is_refused_naming_the_field(xr: dict, cluster: Any, says: str) -> None:
    out = run(xr, cluster)
    assert out.fatal is not None and says in out.fatal, out.fatal
    assert out.resources == {} or not any(k.startswith(RUNTIME) for k in out.resources)


def test_a_model_with_state_space_layers_is_refused() -> None:
    facts = lookup(QWEN)
    hybrid = dataclasses.replace(
        facts, kv_layers=(*facts.kv_layers, kv_cache.LayerGroup("mamba", 4, state_bytes=1 << 20))
    )
    plan = sizing.plan(facts, None, sizing.GpuShape(24, 4, "l4", False))
    spec = parse(claim(QWEN, kvCache={"enabled": True}))
    assert lmcache.refusal(spec, facts, plan) is None
    why = lmcache.refusal(spec, hybrid, plan)
    assert why is not None and why.startswith("spec.parameters.kvCache.enabled") and "Mamba" in why


def test_a_multi_node_replica_is_refused() -> None:
    facts = lookup(QWEN)
    plan = dataclasses.replace(
        sizing.plan(facts, None, sizing.GpuShape(24, 4, "l4", False)), nodes=2
    )
    spec = parse(claim(QWEN, kvCache={"enabled": True}))
    why = lmcache.refusal(spec, facts, plan)
    assert why is not None and "LeaderWorkerSet" in why
