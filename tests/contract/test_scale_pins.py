"""Serving at scale against what runs: the pinned KEDA, router chart, production-stack CRD and
inference simulator.

- (The KEDA chart installed is the release whose CRDs the ScaledObjects are validated against:
  tests/contract/test_vendored_schemas.py holds schemas/keda to the pin.)
- The simulator the Composition pins is the release whose parser `simulator_flags.yaml` was
  read from, and the command line the function gives it uses only flags it declares.
- The router values the InferenceCluster writes satisfy the vllm-stack chart's values schema
  (Helm refuses a release whose values do not).
- The router finds every engine a model composes: its discovery selector (published in the
  cluster's status) matches the pods of a VLLMRuntime and of a simulated engine.
- What the function leaves out for KEDA is exactly the scale subresource's replica path of
  the pinned VLLMRuntime CRD.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import EXAMPLES, PACKAGE, ROOT, composition_input, load_yaml, parse_yaml

from dot_inference.crossplane.documents import load_package
from dot_inference.crossplane.render import render_in_package
from dot_inference.pins import pin
from function.backends import resources
from function.policy import simulator_cli as simulator

SCHEMAS = ROOT / "schemas"
ROUTER_SCHEMA = parse_yaml(
    (Path(__file__).parent / "testdata" / "charts" / "vllm-stack-router.yaml").read_text()
)


@pytest.fixture(scope="module")
def pkg() -> Any:
    return load_package(PACKAGE)


def test_the_simulator_pinned_is_the_one_whose_flags_we_read() -> None:
    assert pin("inference_simulator") == simulator.VERSION
    image = composition_input()["simulator"]["image"]
    assert image == f"{pin('inference_simulator_image')}:{pin('inference_simulator')}"


_RENDERS: dict[str, Any] = {}


def _rendered(pkg: Any, example: str) -> Any:
    """The render of an example InferenceCluster (each rendered once per module)."""
    if example not in _RENDERS:
        _RENDERS[example] = render_in_package(pkg, load_yaml(EXAMPLES / example)[0])
    return _RENDERS[example]


def _router_values(pkg: Any, example: str) -> dict[str, Any]:
    result = _rendered(pkg, example)
    assert result.fatal is None, result.fatal
    release = next(
        o
        for o in result.composed
        if o["kind"] == "Release" and o["spec"]["forProvider"]["chart"]["name"] == "vllm-stack"
    )
    assert release["spec"]["forProvider"]["chart"]["version"] == ROUTER_SCHEMA["version"], (
        "tests/contract/testdata/charts/vllm-stack-router.yaml was read from another chart "
        "version than kcl/versions.k pins: read it again from that version's values.schema.json"
    )
    return copy.deepcopy(release["spec"]["forProvider"]["values"])


@pytest.mark.parametrize(
    "example", ["cluster-aws.yaml", "cluster-with-models.yaml", "cluster-local.yaml"]
)
def test_router_values_satisfy_the_charts_schema(pkg: Any, example: str) -> None:
    values = _router_values(pkg, example)
    jsonschema.Draft202012Validator(ROUTER_SCHEMA["schema"]).validate(values)


def test_a_wrong_routing_logic_would_be_refused_by_the_chart(pkg: Any) -> None:
    """The recorded schema is strict enough to catch a value Helm would refuse."""
    values = _router_values(pkg, "cluster-with-models.yaml")
    values["routerSpec"]["routingLogic"] = "least-loaded"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(ROUTER_SCHEMA["schema"]).validate(values)


def test_the_cluster_endpoint_is_the_routers_ingress(pkg: Any) -> None:
    xr = load_yaml(EXAMPLES / "cluster-with-models.yaml")[0]
    result = _rendered(pkg, "cluster-with-models.yaml")
    router = _router_values(pkg, "cluster-with-models.yaml")["routerSpec"]
    endpoint = xr["spec"]["parameters"]["apps"]["vllm"]["endpoint"]
    assert router["routingLogic"] == "session" and router["sessionKey"] == "x-session-id"
    assert router["ingress"]["hosts"][0]["host"] == endpoint["host"]
    assert router["ingress"]["tls"] == [{"secretName": "llm-tls", "hosts": [endpoint["host"]]}]
    assert router["ingress"]["className"] == result.xr["status"]["ingressClassName"]
    assert result.xr["status"]["endpoint"] == f"https://{endpoint['host']}"
    # The two models become LLMInferences on this cluster, with their aliases and replicas.
    models = {
        o["spec"]["parameters"]["model"]: o["spec"]["parameters"]
        for o in result.composed
        if o["kind"] == "LLMInference"
    }
    assert models["moonshotai/Kimi-K2.5"]["aliases"] == ["kimi"]
    assert models["BAAI/bge-m3"]["aliases"] == ["embed"]
    assert models["BAAI/bge-m3"]["autoscaling"] == {"maxReplicas": 4}


def _selector(text: str) -> dict[str, str]:
    return dict(term.split("=", 1) for term in text.split(","))


def test_the_router_discovers_every_engine_a_model_composes(pkg: Any) -> None:
    """The router lists the pods of its namespace that match its label selector
    (vllm-stack-0.1.12 src/vllm_router/service_discovery.py); the production-stack operator
    gives a VLLMRuntime's pods the runtime's labels."""
    result = _rendered(pkg, "cluster-local.yaml")
    selector = _selector(result.xr["status"]["vllm"]["engineSelector"])
    args = _router_values(pkg, "cluster-local.yaml")["routerSpec"]["extraArgs"]
    assert _selector(args[args.index("--k8s-label-selector") + 1]) == selector
    engines = {}
    for example in ("llm-qwen-on-aws.yaml", "llm-simulated.yaml"):
        rendered = render_in_package(
            pkg,
            load_yaml(EXAMPLES / example)[0],
            required=load_yaml(EXAMPLES / "state" / example),
        )
        assert rendered.fatal is None, rendered.fatal
        for o in rendered.composed:
            m = o["spec"]["forProvider"]["manifest"] if o["kind"] == "Object" else o
            if m["kind"] == "VLLMRuntime":  # the operator gives its pods these labels
                engines[example] = m["metadata"]["labels"]
            elif m["kind"] == "Deployment":
                engines[example] = m["spec"]["template"]["metadata"]["labels"]
    assert set(engines) == {"llm-qwen-on-aws.yaml", "llm-simulated.yaml"}
    for example, labels in engines.items():
        assert all(labels.get(k) == v for k, v in selector.items()), (example, labels)


def test_keda_owns_exactly_the_scale_subresources_replica_path() -> None:
    crd = load_yaml(SCHEMAS / "production-stack" / "production-stack.vllm.ai_vllmruntimes.yaml")[0]
    scale = crd["spec"]["versions"][0]["subresources"]["scale"]
    path = scale["specReplicasPath"].lstrip(".").split(".")
    assert path == ["spec", "deploymentConfig", "replicas"]
    runtime = {"kind": "VLLMRuntime", "spec": {"deploymentConfig": {"replicas": 1, "image": {}}}}
    left = resources.omit_replicas(runtime)
    node: Any = left
    for step in path[:-1]:
        node = node[step]
    assert path[-1] not in node and node == {"image": {}}
    assert runtime["spec"]["deploymentConfig"]["replicas"] == 1, "the input is not changed"


def test_a_scaled_object_validates_and_a_broken_one_does_not(pkg: Any) -> None:
    """The KEDA CRD at the pin is strict enough to catch a wrong shape."""
    from dot_inference.apiserver import validate_objects

    good = resources.scaled_object(
        name="m",
        namespace="a-team",
        model="a/b",
        target={"apiVersion": "apps/v1", "kind": "Deployment", "name": "m"},
        min_replicas=1,
        max_replicas=2,
        triggers=[{"type": "metrics-api", "metadata": {"url": "http://x"}}],
        polling_interval_s=15,
        scale_down_delay_s=300,
        scale_down_policy={"type": "Pods", "value": 1, "periodSeconds": 60},
    )
    assert validate_objects([good]).ok
    bad = {**good, "spec": {**good["spec"], "maxReplicaCount": "two"}}
    assert not validate_objects([bad]).ok
