"""The LLMInference XRD rejects what a schema can (types, patterns, ranges, CEL), with
messages; what it accepts, the examples use. Validated the way the API server would, from
the generated package/ XRD."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.apiserver import validate_objects

XRD = load_yaml(PACKAGE / "llminference" / "definition.yaml")[0]


def xr(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": "a-team"},
        "spec": {"parameters": params},
    }


def errors(obj: dict[str, Any]) -> list[str]:
    report = validate_objects([obj], schema_paths=[PACKAGE])
    assert not report.no_schema, report.no_schema
    return [e for _, errs in report.invalid for e in errs]


def test_xrd_is_namespaced_v2_with_printer_columns() -> None:
    spec = XRD["spec"]
    assert XRD["apiVersion"] == "apiextensions.crossplane.io/v2"
    assert spec["scope"] == "Namespaced"
    columns = [c["name"] for c in spec["versions"][0]["additionalPrinterColumns"]]
    assert columns[:6] == ["MODEL", "GPUS", "REPLICAS", "DESIRED", "READY", "ENDPOINT"]


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("llm-*.yaml")), ids=lambda p: p.name)
def test_examples_are_accepted(path: Any) -> None:
    for doc in load_yaml(path):
        if doc.get("kind") == "LLMInference":
            assert errors(doc) == []


ACCEPTED = [
    (
        "three fields",
        xr(model="Qwen/Qwen2.5-1.5B-Instruct", gpu=1, ingressHost="qwen.127.0.0.1.nip.io"),
    ),
    ("remote with namespace", xr(model="a/b", providerConfigName="pc", targetNamespace="models")),
    (
        "cluster with namespace",
        xr(model="a/b", clusterRef={"name": "gpus"}, targetNamespace="models"),
    ),
    (
        "engine hatches",
        xr(
            model="a/b",
            engine={
                "image": "docker.io/lmcache/vllm-openai:v1",
                "maxModelLen": 4096,
                "extraArgs": ["--enforce-eager"],
                "env": [{"name": "A_B", "value": "1"}],
            },
        ),
    ),
    (
        "adapters by id and by URL",
        xr(
            model="a/b",
            adapters=[
                {"name": "s", "source": "o/s", "rank": 16},
                {"name": "t", "source": "https://huggingface.co/o/t"},
            ],
        ),
    ),
    (
        "autoscaled with aliases",
        xr(
            model="a/b",
            aliases=["b", "org/b:latest"],
            autoscaling={
                "minReplicas": 2,
                "maxReplicas": 8,
                "metric": "kvCacheUsage",
                "target": 75,
            },
        ),
    ),
    ("fixed replicas", xr(model="a/b", replicas=4)),
    (
        "simulated",
        xr(model="a/b", engine={"simulate": True, "extraArgs": ["--max-num-seqs", "1"]}),
    ),
    (
        "llm-d with a profile",
        xr(model="a/b", backend="llmd", llmd={"profile": "load"}, clusterRef={"name": "c"}),
    ),
    (
        "llm-d disaggregated",
        xr(
            model="a/b",
            backend="llmd",
            clusterSelector={"matchLabels": {"gpu": "h100"}},
            disaggregation={"prefill": {"replicas": 4, "gpu": 1}, "decode": {"gpu": 4}},
        ),
    ),
    ("the production stack by name", xr(model="a/b", backend="productionStack")),
    (
        "a shared cache class of the claim's own",
        xr(model="a/b", replicas=2, storage={"className": "nfs", "accessMode": "ReadWriteMany"}),
    ),
]


@pytest.mark.parametrize("obj", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_accepted(obj: dict[str, Any]) -> None:
    assert errors(obj) == []


REJECTED = [
    ("model missing", xr(gpu=1), "model"),
    ("model without org", xr(model="qwen"), "spec.parameters.model"),
    ("gpu zero", xr(model="a/b", gpu=0), "spec.parameters.gpu"),
    ("gpu above 8 nodes of 8", xr(model="a/b", gpu=65), "spec.parameters.gpu"),
    ("gpu as a string", xr(model="a/b", gpu="2"), "spec.parameters.gpu"),
    (
        "ingress host with a scheme",
        xr(model="a/b", ingressHost="http://x.io"),
        "spec.parameters.ingressHost",
    ),
    ("unknown field", xr(model="a/b", replica=2), "replica"),
    (
        "a cache access mode Kubernetes has but the cache cannot use",
        xr(model="a/b", storage={"accessMode": "ReadOnlyMany"}),
        "spec.parameters.storage.accessMode",
    ),
    (
        "target namespace alone (CEL)",
        xr(model="a/b", targetNamespace="x"),
        "targetNamespace applies only with",
    ),
    (
        "cluster and provider config (CEL)",
        xr(model="a/b", clusterRef={"name": "c"}, providerConfigName="p"),
        "clusterRef and providerConfigName are exclusive",
    ),
    (
        "managed flag in extra args (CEL)",
        xr(model="a/b", engine={"extraArgs": ["--tensor-parallel-size=2"]}),
        "the parallel sizes (spec.parameters.gpu)",
    ),
    (
        "image without tag",
        xr(model="a/b", engine={"image": "docker.io/lmcache/vllm-openai"}),
        "spec.parameters.engine.image",
    ),
    ("env name invalid", xr(model="a/b", engine={"env": [{"name": "1X", "value": "v"}]}), "name"),
    (
        "duplicate env names",
        xr(model="a/b", engine={"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}),
        "env",
    ),
    ("token ref without name", xr(model="a/b", hfTokenSecretRef={"key": "t"}), "name"),
    (
        "replicas and autoscaling (CEL)",
        xr(model="a/b", replicas=2, autoscaling={"maxReplicas": 3}),
        "replicas and autoscaling are exclusive",
    ),
    ("replicas zero", xr(model="a/b", replicas=0), "spec.parameters.replicas"),
    ("replicas above the limit", xr(model="a/b", replicas=65), "spec.parameters.replicas"),
    ("autoscaling without a maximum", xr(model="a/b", autoscaling={}), "maxReplicas"),
    (
        "scale to zero",
        xr(model="a/b", autoscaling={"minReplicas": 0, "maxReplicas": 2}),
        "minReplicas",
    ),
    (
        "minimum above maximum (CEL)",
        xr(model="a/b", autoscaling={"minReplicas": 3, "maxReplicas": 2}),
        "autoscaling.minReplicas must not exceed autoscaling.maxReplicas",
    ),
    (
        "KV-cache target above 100 % (CEL)",
        xr(model="a/b", autoscaling={"maxReplicas": 2, "metric": "kvCacheUsage", "target": 120}),
        "autoscaling.target for kvCacheUsage is at most 100",
    ),
    (
        "unknown metric",
        xr(model="a/b", autoscaling={"maxReplicas": 2, "metric": "cpu"}),
        "metric",
    ),
    ("alias with a space", xr(model="a/b", aliases=["a b"]), "spec.parameters.aliases[0]"),
    ("alias with a quote", xr(model="a/b", aliases=['a"b']), "spec.parameters.aliases[0]"),
    ("duplicate aliases", xr(model="a/b", aliases=["x", "x"]), "aliases"),
    (
        "alias repeating the model (CEL)",
        xr(model="a/b", aliases=["a/b"]),
        "aliases must not repeat model",
    ),
    ("nine aliases", xr(model="a/b", aliases=[f"x{i}" for i in range(9)]), "aliases"),
    ("unknown backend", xr(model="a/b", backend="vllm"), "spec.parameters.backend"),
    (
        "adapter source not the Hub",
        xr(model="a/b", adapters=[{"name": "s", "source": "https://example.com/o/s"}]),
        "spec.parameters.adapters[0].source",
    ),
    (
        "adapter rank above vLLM's",
        xr(model="a/b", adapters=[{"name": "s", "source": "o/s", "rank": 513}]),
        "spec.parameters.adapters[0].rank",
    ),
    (
        "adapter without source",
        xr(model="a/b", adapters=[{"name": "s"}]),
        "source",
    ),
    (
        "two adapters, one name (CEL)",
        xr(model="a/b", adapters=[{"name": "s", "source": "o/s"}, {"name": "s", "source": "o/t"}]),
        "each adapter needs its own name",
    ),
    (
        "adapter named like an alias (CEL)",
        xr(model="a/b", aliases=["s"], adapters=[{"name": "s", "source": "o/s"}]),
        "an adapter's name must not be",
    ),
    (
        "adapters with llm-d (CEL)",
        xr(
            model="a/b",
            backend="llmd",
            clusterRef={"name": "c"},
            adapters=[{"name": "s", "source": "o/s"}],
        ),
        "adapters are served with backend productionStack",
    ),
    (
        "adapters with an API key (CEL)",
        xr(model="a/b", apiKeySecretRef={"name": "k"}, adapters=[{"name": "s", "source": "o/s"}]),
        "adapters and apiKeySecretRef are exclusive",
    ),
    (
        "unknown llm-d profile",
        xr(model="a/b", backend="llmd", clusterRef={"name": "c"}, llmd={"profile": "x"}),
        "spec.parameters.llmd.profile",
    ),
    (
        "llm-d settings on the production stack (CEL)",
        xr(model="a/b", llmd={"profile": "load"}),
        "llmd applies only with backend: llmd",
    ),
    (
        "disaggregation on the production stack (CEL)",
        xr(model="a/b", clusterRef={"name": "c"}, disaggregation={"prefill": {}}),
        "disaggregation runs on llm-d: set backend: llmd",
    ),
    (
        "disaggregation beside gpu (CEL)",
        xr(model="a/b", backend="llmd", clusterRef={"name": "c"}, gpu=2, disaggregation={}),
        "disaggregation is exclusive with gpu, replicas and autoscaling",
    ),
    (
        "llm-d without a cluster (CEL)",
        xr(model="a/b", backend="llmd"),
        "backend llmd attaches the model to an InferenceCluster's Gateway",
    ),
    (
        "a disaggregated side wider than a node",
        xr(
            model="a/b",
            backend="llmd",
            clusterRef={"name": "c"},
            disaggregation={"decode": {"gpu": 16}},
        ),
        "spec.parameters.disaggregation.decode.gpu",
    ),
    (
        "simulated with an engine image (CEL)",
        xr(model="a/b", engine={"simulate": True, "image": "docker.io/x/y:1"}),
        "engine.image applies to vLLM",
    ),
]


@pytest.mark.parametrize(("obj", "says"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED])
def test_rejected(obj: dict[str, Any], says: str) -> None:
    errs = errors(obj)
    assert errs, "the schema accepted it"
    assert any(says in e for e in errs), errs
