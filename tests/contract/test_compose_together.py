"""Cluster and model compose together: an LLMInference sizes itself for the InferenceCluster
it references (the cluster's rendered status, as Crossplane would supply it), refuses what
the cluster cannot serve, and a cluster's `models` round-trip to VLLMRuntimes on that
cluster's ProviderConfig and GPU pool. Every rendered object validates."""

from __future__ import annotations

import copy
import re
from functools import cache
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.apiserver import validate_objects
from dot_inference.crossplane import documents, render
from dot_inference.generate import created
from function.limits import GPU_TYPES

PKG = documents.load_package(PACKAGE)


def _render(
    xr: dict[str, Any],
    required: list[dict[str, Any]] | None = None,
    observed: list[dict[str, Any]] | None = None,
) -> render.RenderResult:
    return render.render_in_package(PKG, xr, required=required or [], observed=observed or [])


@cache
def cluster_state(example: str) -> dict[str, Any]:
    """The InferenceCluster of examples/<example> with the status its render publishes."""
    claim = load_yaml(EXAMPLES / example)[0]
    result = _render(claim)
    assert result.fatal is None, result.fatal
    # Again once its resources exist, as Crossplane would supply it (its models' identity
    # ready: status.modelsProviderConfig.ready).
    result = _render(claim, observed=[created(r) for r in result.composed])
    assert result.fatal is None, result.fatal
    return {**claim, "status": result.xr["status"]}


def llm(model: str, cluster: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": cluster["metadata"]["namespace"]},
        "spec": {
            "parameters": {
                "model": model,
                "clusterRef": {"name": cluster["metadata"]["name"]},
                **params,
            }
        },
    }


def runtime_manifest(result: render.RenderResult) -> dict[str, Any]:
    obj = next(
        o
        for o in result.composed
        if re.fullmatch(
            r"vllm-runtime(-[0-9a-f]{6})?",
            o["metadata"]["annotations"]["crossplane.io/composition-resource-name"],
        )
    )
    assert obj["kind"] == "Object"
    return obj["spec"]["forProvider"]["manifest"]


def assert_valid(result: render.RenderResult, xr: dict[str, Any]) -> None:
    report = validate_objects([{**xr, "status": result.xr.get("status", {})}, *result.composed])
    assert report.invalid == [] and report.no_schema == [], (report.invalid, report.no_schema)


# Each provider's GPU drives the count; memory per GPU as function/limits.yaml gives it (CUDA's
# figure), so the cluster status and the plan agree on one table.
SIZING = [
    ("aws: 4 x L4 per node", "cluster-aws.yaml", "Qwen/Qwen2.5-14B-Instruct", 4, "l4"),
    ("existing: 8 x H100", "cluster-existing.yaml", "Qwen/Qwen2.5-72B-Instruct", 4, "h100"),
    ("google: 8 x H200", "cluster-with-models.yaml", "Qwen/Qwen2.5-32B-Instruct", 1, "h200"),
    ("google: 1 x L4, a small model", "cluster-google.yaml", "Qwen/Qwen2.5-3B-Instruct", 1, "l4"),
    ("local: 1 x L4, an embedding model", "cluster-local.yaml", "BAAI/bge-base-en-v1.5", 1, "l4"),
    (
        "google H200: Kimi-K2.5 on one node",
        "cluster-with-models.yaml",
        "moonshotai/Kimi-K2.5",
        8,
        "h200",
    ),
]


@pytest.mark.parametrize(
    ("example", "model", "gpus", "gpu_type"),
    [c[1:] for c in SIZING],
    ids=[c[0] for c in SIZING],
)
def test_cluster_gpu_drives_the_gpu_count(
    example: str, model: str, gpus: int, gpu_type: str
) -> None:
    memory = GPU_TYPES[gpu_type].memory_gib
    cluster = cluster_state(example)
    xr = llm(model, cluster)
    result = _render(xr, [cluster])
    assert result.fatal is None, result.fatal
    plan = result.xr["status"]["plan"]
    assert (
        plan["gpus"],
        plan["gpuType"],
        plan["gpuMemoryGiB"],
        plan["gpuAssumed"],
        plan["fits"],
    ) == (gpus, gpu_type, memory, False, True)
    manifest = runtime_manifest(result)
    assert manifest["spec"]["deploymentConfig"]["resources"]["gpu"] == str(gpus)
    gpu_status = cluster["status"]["gpu"]
    terms = manifest["spec"]["deploymentConfig"]["nodeSelectorTerms"][0]["matchExpressions"]
    assert {t["key"]: t["values"][0] for t in terms} == gpu_status["nodeSelector"]
    assert manifest["spec"]["deploymentConfig"]["toleration"] == gpu_status["tolerations"]
    assert_valid(result, xr)


REFUSALS = [
    (
        "model that fits no node: the numbers",
        "cluster-google.yaml",
        {"model": "moonshotai/Kimi-K2.5"},
        ["needs about 665 GiB", f"1 x {GPU_TYPES['l4'].memory_gib:g} GiB GPU"],
    ),
    (
        "explicit gpu above GPUs per node",
        "cluster-aws.yaml",
        {"model": "Qwen/Qwen2.5-32B-Instruct", "gpu": 8},
        ["more than the 4 GPUs a node has"],
    ),
]


@pytest.mark.parametrize(
    ("example", "params", "says"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_cluster_refuses(example: str, params: dict[str, Any], says: list[str]) -> None:
    cluster = cluster_state(example)
    result = _render(llm(cluster=cluster, **params), [cluster])
    assert result.fatal is not None and result.composed == []
    for text in says:
        assert text in result.fatal, result.fatal


def test_cluster_without_vllm_is_refused_with_the_field() -> None:
    claim = copy.deepcopy(load_yaml(EXAMPLES / "cluster-aws.yaml")[0])
    claim["spec"]["parameters"]["apps"]["vllm"]["enabled"] = False
    cluster = {**claim, "status": _render(claim).xr["status"]}
    result = _render(llm("Qwen/Qwen2.5-1.5B-Instruct", cluster), [cluster])
    assert result.fatal is not None
    assert (
        "set spec.parameters.apps.vllm.enabled: true on InferenceCluster a-team/inference-aws"
        in result.fatal
    )


def test_missing_cluster_composes_nothing_and_says_so() -> None:
    cluster = cluster_state("cluster-aws.yaml")
    result = _render(llm("Qwen/Qwen2.5-1.5B-Instruct", cluster), [])
    assert result.fatal is None and result.composed == []
    conditions = {c["type"]: c for c in result.xr["status"]["conditions"]}
    assert (conditions["Cluster"]["status"], conditions["Cluster"]["reason"]) == (
        "False",
        "NotFound",
    )
    # Ready means serving: nothing composed is not "all composed resources ready".
    assert conditions["Ready"]["status"] == "False"


def test_round_trip_cluster_models_to_vllm_runtimes() -> None:
    claim = load_yaml(EXAMPLES / "cluster-with-models.yaml")[0]
    cluster_result = _render(claim)
    assert cluster_result.fatal is None
    cluster = {**claim, "status": cluster_result.xr["status"]}
    nested = [o for o in cluster_result.composed if o["kind"] == "LLMInference"]
    models = [m["model"] for m in claim["spec"]["parameters"]["models"]]
    assert sorted(n["spec"]["parameters"]["model"] for n in nested) == sorted(models)
    usages = [
        o
        for o in cluster_result.composed
        if o["kind"] == "Usage" and o["spec"]["by"]["kind"] == "LLMInference"
    ]
    assert {u["spec"]["by"]["resourceRef"]["name"] for u in usages} == {
        n["metadata"]["name"] for n in nested
    }
    expected_models = [
        {"name": n["metadata"]["name"], "model": n["spec"]["parameters"]["model"], "ready": False}
        for n in nested
    ]
    by_name = sorted(cluster["status"]["models"], key=lambda m: m["name"])
    assert by_name == sorted(expected_models, key=lambda m: m["name"])
    for llm_xr in nested:
        # The nested XR as Crossplane gives it to the function: controlled by the cluster.
        xr = {k: llm_xr[k] for k in ("apiVersion", "kind", "spec")}
        xr["metadata"] = {
            k: llm_xr["metadata"][k] for k in ("name", "namespace", "ownerReferences")
        }
        assert xr["metadata"]["ownerReferences"][0]["kind"] == "InferenceCluster"
        assert xr["spec"]["parameters"]["clusterRef"] == {"name": "inference-h200"}
        result = _render(xr, [cluster])
        assert result.fatal is None, result.fatal
        assert result.xr["status"]["plan"]["fits"] is True
        assert not [o for o in result.composed if o["kind"] == "Usage"], (
            "the cluster's own models do not hold it: its deletion removes them first"
        )
        for obj in result.composed:
            assert obj["spec"]["providerConfigRef"] == {
                "kind": "ProviderConfig",
                "name": "inference-h200",
            }
        terms = runtime_manifest(result)["spec"]["deploymentConfig"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == ["nvidia-h200-141gb"]
        assert_valid(result, xr)


def test_removing_a_model_removes_its_llminference() -> None:
    claim = copy.deepcopy(load_yaml(EXAMPLES / "cluster-with-models.yaml")[0])
    before = {o["metadata"]["name"] for o in _render(claim).composed if o["kind"] == "LLMInference"}
    claim["spec"]["parameters"]["models"] = claim["spec"]["parameters"]["models"][:1]
    after = {o["metadata"]["name"] for o in _render(claim).composed if o["kind"] == "LLMInference"}
    assert after < before and len(after) == 1


MODEL_STATUS = [
    (
        "ready nested model",
        {"status": {"conditions": [{"type": "Ready", "status": "True"}], "endpoint": "http://k"}},
        {"ready": True, "endpoint": "http://k"},
    ),
    (
        "nested model still loading",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        {"ready": False},
    ),
]


@pytest.mark.parametrize(
    ("observed_status", "expected"), [c[1:] for c in MODEL_STATUS], ids=[c[0] for c in MODEL_STATUS]
)
def test_cluster_status_lists_model_readiness(
    observed_status: dict[str, Any], expected: dict[str, Any]
) -> None:
    claim = load_yaml(EXAMPLES / "cluster-with-models.yaml")[0]
    first = _render(claim)
    kimi = next(
        o for o in first.composed if o["kind"] == "LLMInference" and "kimi" in o["metadata"]["name"]
    )
    observed = [{**kimi, **observed_status}]
    result = render.render_in_package(PKG, claim, observed=observed)
    models = {m["name"]: m for m in result.xr["status"]["models"]}
    got = models[kimi["metadata"]["name"]]
    assert {k: got.get(k) for k in expected} == expected


CLUSTER_XRD_REJECTS = [
    (
        "a model listed twice",
        [{"model": "a/b"}, {"model": "a/b"}],
        True,
        'Duplicate value: map["model": "a/b"]',
    ),
    ("models without the vLLM stack", [{"model": "a/b"}], False, "set apps.vllm.enabled: true"),
    ("model id without org", [{"model": "qwen"}], True, "models"),
]


@pytest.mark.parametrize(
    ("models", "vllm", "says"),
    [c[1:] for c in CLUSTER_XRD_REJECTS],
    ids=[c[0] for c in CLUSTER_XRD_REJECTS],
)
def test_cluster_xrd_rejects_bad_models(
    models: list[dict[str, Any]], vllm: bool, says: str
) -> None:
    claim = copy.deepcopy(load_yaml(EXAMPLES / "cluster-aws.yaml")[0])
    claim["spec"]["parameters"]["models"] = models
    claim["spec"]["parameters"]["apps"]["vllm"]["enabled"] = vllm
    report = validate_objects([claim], schema_paths=[PACKAGE])
    errors = [e for _, errs in report.invalid for e in errs]
    assert any(says in e for e in errors), errors


@pytest.mark.parametrize(
    ("models", "fatal"),
    [
        (
            [{"model": "org-a/Foo-7B"}, {"model": "org-b/foo-7b"}],
            "spec.parameters.models: org-a/Foo-7B and org-b/foo-7b would both be the "
            "LLMInference inference-aws-foo-7b; set spec.parameters.models[].name on one of them",
        ),
        ([{"model": "org-a/Foo-7B"}, {"model": "org-b/foo-7b", "name": "foo-b"}], None),
        (
            [{"model": "org-a/Foo-7B", "name": "same"}, {"model": "org-b/Bar-7B", "name": "same"}],
            "org-a/Foo-7B and org-b/Bar-7B would both be the LLMInference same",
        ),
    ],
    ids=["names clash", "a name resolves it", "names given twice"],
)
def test_two_models_never_become_one_llminference(
    models: list[dict[str, Any]], fatal: str | None
) -> None:
    claim = copy.deepcopy(load_yaml(EXAMPLES / "cluster-aws.yaml")[0])
    claim["spec"]["parameters"]["models"] = models
    result = _render(claim)
    if fatal is None:
        assert result.fatal is None, result.fatal
        names = [o["metadata"]["name"] for o in result.composed if o["kind"] == "LLMInference"]
        assert sorted(names) == ["foo-b", "inference-aws-foo-7b"]
    else:
        assert result.fatal and fatal in result.fatal
        assert not result.composed
