"""spec.parse: every field read into plain data, every bad value a SpecError naming it."""

from __future__ import annotations

import pytest

from function.claim.engine import EngineOverrides
from function.claim.spec import SecretRef, SpecError, parse
from function.limits import MAX_GPUS_MULTI_NODE


def xr(**params: object) -> dict:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": "a-team"},
        "spec": {"parameters": params},
    }


GOOD = [
    (
        "three fields",
        xr(model="Qwen/Qwen2.5-1.5B-Instruct", gpu=1, ingressHost="q.example.com"),
        {"model": "Qwen/Qwen2.5-1.5B-Instruct", "gpu": 1, "ingress_host": "q.example.com"},
    ),
    ("gpu omitted", xr(model="BAAI/bge-base-en-v1.5"), {"gpu": None, "ingress_host": None}),
    ("gpu as a float from a protobuf Struct", xr(model="a/b", gpu=8.0), {"gpu": 8}),
    (
        "provider config with default target namespace",
        xr(model="a/b", providerConfigName="gpu-cluster"),
        {"provider_config_name": "gpu-cluster", "target_namespace": None, "remote": True},
    ),
    (
        "provider config and target namespace",
        xr(model="a/b", providerConfigName="pc", targetNamespace="models"),
        {"target_namespace": "models"},
    ),
    (
        "cluster reference",
        xr(model="a/b", clusterRef={"name": "gpus"}),
        {"cluster_ref": "gpus", "remote": True},
    ),
    (
        "token ref with default key",
        xr(model="a/b", hfTokenSecretRef={"name": "hf"}),
        {"hf_token_secret": SecretRef("hf", "token")},
    ),
    (
        "token ref with key",
        xr(model="a/b", hfTokenSecretRef={"name": "hf", "key": "HF_TOKEN"}),
        {"hf_token_secret": SecretRef("hf", "HF_TOKEN")},
    ),
    (
        "engine overrides",
        xr(
            model="a/b",
            engine={
                "image": "ghcr.io/me/vllm:1",
                "maxModelLen": 4096,
                "extraArgs": ["--enforce-eager"],
                "env": [{"name": "HF_HUB_OFFLINE", "value": "1"}],
            },
        ),
        {
            "engine": EngineOverrides(
                "ghcr.io/me/vllm:1", 4096, ("--enforce-eager",), (("HF_HUB_OFFLINE", "1"),)
            )
        },
    ),
    (
        "namespace defaults when absent",
        {"metadata": {"name": "x"}, "spec": {"parameters": {"model": "a/b"}}},
        {"namespace": "default", "remote": False},
    ),
]


@pytest.mark.parametrize(("xr_", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_parse(xr_: dict, expected: dict) -> None:
    spec = parse(xr_)
    for attr, value in expected.items():
        assert getattr(spec, attr) == value, attr


BAD = [
    ("no parameters", {"metadata": {"name": "x"}, "spec": {}}, "spec.parameters", "model"),
    ("no model", xr(gpu=1), "spec.parameters.model", "required"),
    ("model without org", xr(model="gpt2"), "spec.parameters.model", "org/name"),
    ("model not a string", xr(model=42), "spec.parameters.model", "org/name"),
    ("model part too long", xr(model="a/" + "b" * 97), "spec.parameters.model", "org/name"),
    ("gpu zero", xr(model="a/b", gpu=0), "spec.parameters.gpu", f"1 to {MAX_GPUS_MULTI_NODE}"),
    (
        "gpu too many",
        xr(model="a/b", gpu=MAX_GPUS_MULTI_NODE + 1),
        "spec.parameters.gpu",
        f"1 to {MAX_GPUS_MULTI_NODE}",
    ),
    ("gpu fractional", xr(model="a/b", gpu=1.5), "spec.parameters.gpu", "whole number"),
    ("gpu boolean", xr(model="a/b", gpu=True), "spec.parameters.gpu", "whole number"),
    ("gpu string", xr(model="a/b", gpu="2"), "spec.parameters.gpu", "whole number"),
    (
        "ingress host with scheme",
        xr(model="a/b", ingressHost="http://x.io"),
        "spec.parameters.ingressHost",
        "DNS name",
    ),
    (
        "target namespace alone",
        xr(model="a/b", targetNamespace="ns"),
        "spec.parameters.targetNamespace",
        "only with providerConfigName",
    ),
    (
        "cluster and provider config",
        xr(model="a/b", clusterRef={"name": "c"}, providerConfigName="p"),
        "spec.parameters.clusterRef",
        "exclusive",
    ),
    (
        "cluster ref without name",
        xr(model="a/b", clusterRef={}),
        "spec.parameters.clusterRef.name",
        "InferenceCluster",
    ),
    (
        "token ref without name",
        xr(model="a/b", hfTokenSecretRef={"key": "k"}),
        "spec.parameters.hfTokenSecretRef.name",
        "Secret name",
    ),
    (
        "image without registry",
        xr(model="a/b", engine={"image": "vllm"}),
        "spec.parameters.engine.image",
        "registry",
    ),
    (
        "max model len too small",
        xr(model="a/b", engine={"maxModelLen": 5}),
        "spec.parameters.engine.maxModelLen",
        "at least 128",
    ),
    (
        "extra args not strings",
        xr(model="a/b", engine={"extraArgs": [1]}),
        "spec.parameters.engine.extraArgs",
        "list of strings",
    ),
    (
        "env without value",
        xr(model="a/b", engine={"env": [{"name": "A"}]}),
        "spec.parameters.engine.env[0].value",
        "A needs a string value",
    ),
    (
        "env bad name",
        xr(model="a/b", engine={"env": [{"name": "1A", "value": "x"}]}),
        "spec.parameters.engine.env[0].name",
        "'1A' is not a variable name",
    ),
    ("no name", {"spec": {"parameters": {"model": "a/b"}}}, "metadata.name", "metadata.name"),
]


@pytest.mark.parametrize(("xr_", "field", "says"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_parse_rejects(xr_: dict, field: str, says: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(xr_)
    assert e.value.field == field
    assert says in e.value.message
    assert field in e.value.message or field == "metadata.name"
