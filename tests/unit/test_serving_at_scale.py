"""Serving at scale on one cluster, as compose decides it: replicas, KEDA autoscaling, the GPU
budget, served names behind the cluster's router, its endpoint, and the simulator.

Each refusal names the field, the value and what would work; every object rendered here is
validated against the pinned CRDs (KEDA v2.20.2, production-stack at the operator pin) and the
core schemas, unpruned.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    control_plane,
    engine_image,
    fetched,
    load_yaml,
    ready_object,
    settle,
    simulator_image,
)

from dot_inference.apiserver import validate_objects
from function.cluster import ledger
from function.cluster.peers import REQUIREMENT as PEERS
from function.compose import compose
from function.keys import CACHE, RUNTIME, SCALER, SIMULATOR, SIMULATOR_SERVICE
from function.outcome import Inputs, Outcome
from function.policy import simulator_cli as simulator

AWS = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]


def cluster(*, keda: bool = True, endpoint: str | None = None, **gpu: Any) -> dict[str, Any]:
    """The EKS cluster of examples/cluster-aws.yaml as its status says (4 x L4 per node, 2
    nodes at most), with KEDA on or off and the router's endpoint."""
    c = copy.deepcopy(AWS)
    c["status"]["apps"]["keda"] = keda
    c["status"]["gpu"].update(gpu)
    c["status"]["endpoint"] = (
        endpoint or "http://vllm-stack-router-service.a-team.svc.cluster.local"
    )
    return c


def claim(
    name: str = "m",
    model: str = "Qwen/Qwen2.5-1.5B-Instruct",
    created: str | None = None,
    **params: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "a-team"}
    if created:
        metadata["creationTimestamp"] = created
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": metadata,
        "spec": {"parameters": {"model": model, "clusterRef": {"name": "inference-aws"}, **params}},
    }


def run(
    xr: dict[str, Any],
    *,
    state: dict[str, Any] | None = None,
    others: list[dict[str, Any]] | None = None,
    observed: dict[str, Any] | None = None,
) -> Outcome:
    return settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            observed=observed or {},
        ),
        control_plane(xr, others or [], state or cluster()),
    )


def by_key(out: Outcome, base: str) -> tuple[str, dict[str, Any]]:
    """The composed resource for composition key `base` (keys carry the target's suffix)."""
    key = next(k for k in out.resources if _base(k) == base)
    return key, out.resources[key]


def _base(key: str) -> str:
    # Keys on another cluster end with -<6 hex> (function/cluster/target.py Target.suffix).
    head, _, tail = key.rpartition("-")
    return head if len(tail) == 6 and all(c in "0123456789abcdef" for c in tail) else key


def manifest(out: Outcome, base: str) -> dict[str, Any]:
    return by_key(out, base)[1]["spec"]["forProvider"]["manifest"]


def cond(out: Outcome, typ: str) -> tuple[str, str, str]:
    c = next(c for c in out.conditions if c.type == typ)
    return c.status, c.reason, c.message


def valid(out: Outcome) -> None:
    report = validate_objects(list(out.resources.values()))
    assert report.ok, report.summary()


# --------------------------------------------------------------------------- autoscaling


def test_an_autoscaled_model_is_scaled_by_keda_once_its_weights_are_cached() -> None:
    xr = claim(autoscaling={"minReplicas": 1, "maxReplicas": 3})
    first = run(xr)
    assert first.fatal is None, first.fatal
    # While the model downloads: no pod, nothing for KEDA to scale from.
    assert manifest(first, RUNTIME)["spec"]["deploymentConfig"]["replicas"] == 0
    assert not [k for k in first.resources if _base(k) == SCALER]
    done = run(xr, observed=fetched(first))
    runtime = manifest(done, RUNTIME)
    assert "replicas" not in runtime["spec"]["deploymentConfig"], (
        "KEDA owns the count: a server-side apply that wrote it would take it back"
    )
    scaled = manifest(done, SCALER)
    assert scaled["metadata"]["name"] == runtime["metadata"]["name"] == "m"
    assert scaled["metadata"]["name"] != "m-scaledobject", (
        "the operator deletes <runtime>-scaledobject of a runtime without autoscalingConfig"
    )
    assert scaled["metadata"]["namespace"] == runtime["metadata"]["namespace"]
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "name": "m",
    }
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 3)
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["metadata"]["valueLocation"] == (
        'vllm:num_requests_waiting{model_name="Qwen/Qwen2.5-1.5B-Instruct"}'
    )
    assert trigger["metadata"]["url"] == "http://m.a-team.svc.cluster.local:8000/metrics"
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 300
    assert "autoscalingConfig" not in runtime["spec"], "the operator's own autoscaler stays off"
    valid(done)


def test_kv_cache_usage_and_the_scale_down_delay_reach_keda() -> None:
    xr = claim(
        autoscaling={
            "maxReplicas": 2,
            "metric": "kvCacheUsage",
            "target": 70,
            "scaleDownDelaySeconds": 60,
        }
    )
    out = run(xr, observed=fetched(run(xr)))
    scaled = manifest(out, SCALER)
    meta = scaled["spec"]["triggers"][0]["metadata"]
    assert meta["valueLocation"].startswith("vllm:kv_cache_usage_perc{")
    assert (meta["targetValue"], meta["aggregationType"]) == ("0.7", "average")
    behavior = scaled["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 60
    valid(out)


def test_replicas_keda_chose_are_kept_and_shown() -> None:
    """KEDA wrote 3 into the runtime through the scale subresource: the desired manifest
    leaves the count out, and status shows KEDA's choice and what the controller reports."""
    xr = claim(autoscaling={"maxReplicas": 4})
    observed = fetched(run(xr))
    key = by_key(run(xr, observed=observed), RUNTIME)[0]
    live = copy.deepcopy(manifest(run(xr, observed=observed), RUNTIME))
    live["spec"]["deploymentConfig"]["replicas"] = 3
    live["status"] = {"replicas": 3, "availableReplicas": 2}
    observed[key] = {
        "spec": {"forProvider": {"manifest": live}},
        "status": {
            "atProvider": {"manifest": live},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    out = run(xr, observed=observed)
    assert "replicas" not in manifest(out, RUNTIME)["spec"]["deploymentConfig"]
    assert out.status["replicas"] == {
        "min": 1,
        "max": 4,
        "autoscaled": True,
        "desired": 3,
        "current": 3,
        "ready": 2,
        "selector": "app.kubernetes.io/component=engine,app.kubernetes.io/name=m,"
        "app.kubernetes.io/part-of=dot-inference",
    }


def test_fixed_replicas() -> None:
    xr = claim(replicas=2)
    out = run(xr, observed=fetched(run(xr)))
    assert manifest(out, RUNTIME)["spec"]["deploymentConfig"]["replicas"] == 2
    assert not [k for k in out.resources if _base(k) == SCALER]
    assert out.status["replicas"] == {
        "min": 2,
        "max": 2,
        "autoscaled": False,
        "desired": 2,
        "current": 0,
        "ready": 0,
        "selector": "app.kubernetes.io/component=engine,app.kubernetes.io/name=m,"
        "app.kubernetes.io/part-of=dot-inference",
    }


def test_autoscaling_on_a_cluster_without_keda_is_refused() -> None:
    out = run(claim(autoscaling={"maxReplicas": 2}), state=cluster(keda=False))
    assert out.fatal == (
        "spec.parameters.autoscaling needs KEDA on the cluster, and InferenceCluster "
        "inference-aws does not run it: set spec.parameters.apps.keda.enabled: true on "
        "InferenceCluster inference-aws, or fix the count with spec.parameters.replicas"
    )
    assert not out.resources


# --------------------------------------------------------------------------- GPU budget


def peer(name: str, created: str, gpus: int, most: int, **params: Any) -> dict[str, Any]:
    """Another model on the cluster, as Crossplane returns it (with the status it published)."""
    params.setdefault("model", f"example/{name}")
    xr = claim(name, created=created, **params)
    xr["status"] = {"plan": {"gpus": gpus}, "replicas": {"max": most}}
    return xr


def test_the_budget_caps_max_replicas_to_what_the_pool_has_left() -> None:
    xr = claim(created="2026-11-02T00:00:00Z", gpu=2, autoscaling={"maxReplicas": 4})
    out = run(xr, others=[peer("early", "2026-11-01T00:00:00Z", 4, 1)])
    assert out.fatal is None, out.fatal
    status, reason, message = cond(out, "GPUBudget")
    assert (status, reason) == ("False", "Capped")
    assert message == (
        "spec.parameters.autoscaling.maxReplicas 4 capped to 2: 4 x 2 GPU(s) would need 8 GPUs "
        "and InferenceCluster inference-aws's GPU pool has 8 GPUs (gpu.maxNodes 2 x "
        "gpu.perNode 4); models created before this one or already running hold 4 (early 4), "
        "so 4 are free"
    )
    assert message in out.warnings
    assert out.status["replicas"]["max"] == 2 and out.status["replicas"]["requestedMax"] == 4


def test_a_model_that_does_not_fit_beside_earlier_ones_is_refused() -> None:
    xr = claim(created="2026-11-02T00:00:00Z", gpu=4, replicas=2)
    out = run(xr, others=[peer("early", "2026-11-01T00:00:00Z", 2, 2)])
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.replicas: 2 replica(s) x 4 GPU(s) = 8 GPUs do not fit: InferenceCluster "
        "inference-aws's GPU pool has 8 GPUs (gpu.maxNodes 2 x gpu.perNode 4); models created "
        "before this one or already running hold 4 (early 4), so 4 are free; use "
        "spec.parameters.replicas 1 or fewer"
    ), out.fatal


def test_first_come_first_served() -> None:
    """Two models that do not fit together: the later one is refused, the earlier one is
    not, so they never refuse each other; simulated and deleted models hold nothing."""
    early = claim("early", created="2026-11-01T00:00:00Z", gpu=4, replicas=2)
    late = claim("late", created="2026-11-02T00:00:00Z", gpu=4, replicas=2)
    # The later one was refused, so it published no plan: it holds nothing.
    late_peer = claim(
        "late", model="example/late", created="2026-11-02T00:00:00Z", gpu=4, replicas=2
    )
    assert run(early, others=[late_peer]).fatal is None
    assert "do not fit" in (
        run(late, others=[peer("early", "2026-11-01T00:00:00Z", 4, 2)]).fatal or ""
    )
    simulated = peer("sim", "2026-11-01T00:00:00Z", 4, 2, engine={"simulate": True})
    gone = peer("gone", "2026-11-01T00:00:00Z", 4, 2)
    gone["metadata"]["deletionTimestamp"] = "2026-11-03T00:00:00Z"
    elsewhere = peer("other", "2026-11-01T00:00:00Z", 4, 2)
    elsewhere["spec"]["parameters"]["clusterRef"]["name"] = "another-cluster"
    assert run(late, others=[simulated, gone, elsewhere]).fatal is None
    # Same time: the name decides.
    assert "do not fit" in (
        run(
            claim("b", created="2026-11-01T00:00:00Z", gpu=4, replicas=2),
            others=[peer("a", "2026-11-01T00:00:00Z", 4, 2)],
        ).fatal
        or ""
    )


def test_a_malformed_peer_never_breaks_a_claim() -> None:
    broken = [
        {"metadata": {"name": "x"}},
        {
            "metadata": {"name": "y"},
            "spec": {"parameters": {"clusterRef": {"name": "inference-aws"}, "model": 3}},
        },
        {
            "metadata": {"name": "z"},
            "spec": {
                "parameters": {
                    "clusterRef": {"name": "inference-aws"},
                    "model": "a/b",
                    "replicas": "lots",
                    "gpu": -1,
                }
            },
            "status": {"plan": {"gpus": "x"}, "replicas": {"max": True}},
        },
        "not an object",
    ]
    # Created last, so every peer counts (an earlier one is counted, a later one is not).
    xr = claim(created="2026-12-31T00:00:00Z")
    junk_usages = [
        *broken,
        *[
            {
                "metadata": {
                    "name": f"junk-{i}",
                    "labels": {ledger.CLUSTER_LABEL: "inference-aws"},
                    "annotations": {ledger.ENTRY_ANNOTATION: text},
                    "ownerReferences": [
                        {
                            "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
                            "kind": "LLMInference",
                            "name": "w",
                            "controller": True,
                        },
                    ],
                }
            }
            for i, text in enumerate(
                [
                    '{"metadata":{"name":"w"},"spec":{"parameters":{"model":"a/b","gpu":"x",'
                    '"replicas":"lots","clusterRef":{"name":"inference-aws"}}},'
                    '"status":{"plan":{"gpus":"x"},"replicas":{"max":true}}}',
                    *("{", "[]", "null", "[" * 5000, '{"metadata":{"name":3}}', 7),
                ]
            )
        ],
    ]
    # As Crossplane would never return them, in every requirement peers are read from: the
    # cluster's own models and its ledger (a reconcile that gains nothing), then the whole
    # namespace (one that gains, or is refused).
    ledger_only = {
        "inference-cluster": [cluster()],
        ledger.CLUSTER_MODELS_REQUIREMENT: broken,
        ledger.LEDGER_REQUIREMENT: junk_usages,
    }
    for required in (ledger_only, {**ledger_only, PEERS: [xr, *broken]}):
        out = compose(
            Inputs(
                xr=xr,
                engine_image=engine_image(),
                simulator_image=simulator_image(),
                required=required,
            )
        )
        assert out.fatal is None, out.fatal
        assert cond(out, "GPUBudget")[:2] == ("True", "Fits")


# --------------------------------------------------------------------------- names and endpoint


def test_every_model_answers_to_its_id_and_aliases_behind_the_cluster_endpoint() -> None:
    out = run(claim(aliases=["qwen-small", "chat"]))
    args = manifest(out, RUNTIME)["spec"]["vllmConfig"]["extraArgs"]
    i = args.index("--served-model-name")
    assert args[i + 1 : i + 4] == ["Qwen/Qwen2.5-1.5B-Instruct", "qwen-small", "chat"]
    assert out.status["servedModelNames"] == ["Qwen/Qwen2.5-1.5B-Instruct", "qwen-small", "chat"]
    assert (
        out.status["endpoint"]
        == out.status["clusterEndpoint"]
        == ("http://vllm-stack-router-service.a-team.svc.cluster.local")
    )
    own = run(
        claim(ingressHost="qwen.example.com"), state=cluster(endpoint="https://llm.example.com")
    )
    assert own.status["endpoint"] == "http://qwen.example.com"
    assert own.status["clusterEndpoint"] == "https://llm.example.com"
    outside = run(claim(targetNamespace="a-team-staging"), state=_allowing("a-team-staging"))
    assert outside.fatal is None, outside.fatal
    assert "clusterEndpoint" not in outside.status, "the router only discovers its own namespace"
    assert outside.status["endpoint"] == "http://m.a-team-staging.svc.cluster.local"


def _allowing(namespace: str) -> dict[str, Any]:
    c = cluster()
    c["status"]["tenancy"]["allowedNamespaces"].append(namespace)
    return c


@pytest.mark.parametrize(
    ("mine", "theirs", "field"),
    [
        (
            {"aliases": ["chat"]},
            {"model": "Qwen/Qwen2.5-0.5B-Instruct", "aliases": ["chat"]},
            "spec.parameters.aliases[0]",
        ),
        (
            {"aliases": ["a", "Qwen/Qwen2.5-7B-Instruct"]},
            {"model": "Qwen/Qwen2.5-7B-Instruct"},
            "spec.parameters.aliases[1]",
        ),
        ({}, {"aliases": ["x"]}, "spec.parameters.model"),  # same model id
    ],
    ids=["same alias", "alias is another model's id", "same model"],
)
def test_a_name_another_model_serves_behind_the_router_is_refused(mine, theirs, field) -> None:
    other = claim("first", created="2026-11-01T00:00:00Z", **theirs)
    out = run(claim("second", created="2026-11-02T00:00:00Z", **mine), others=[other])
    assert out.fatal is not None and out.fatal.startswith(
        f"{field}: LLMInference a-team/first already serves"
    ), out.fatal
    assert "router" in out.fatal
    # The model that came first keeps its name.
    first = run(other, others=[claim("second", created="2026-11-02T00:00:00Z", **mine)])
    assert first.fatal is None, first.fatal


def test_names_in_another_namespace_do_not_clash() -> None:
    other = claim(
        "first", created="2026-11-01T00:00:00Z", aliases=["chat"], targetNamespace="a-team-staging"
    )
    out = run(claim("second", created="2026-11-02T00:00:00Z", aliases=["chat"]), others=[other])
    assert out.fatal is None, out.fatal


# --------------------------------------------------------------------------- simulator


def test_a_simulated_model_is_a_deployment_and_service_without_gpu_or_download() -> None:
    xr = claim(
        aliases=["qwen-small"],
        autoscaling={"maxReplicas": 3},
        engine={"simulate": True, "extraArgs": ["--max-num-seqs", "2", "--time-to-first-token=1s"]},
    )
    out = run(xr)
    assert out.fatal is None, out.fatal
    bases = sorted(_base(k) for k in out.resources)
    assert bases == sorted(
        [SIMULATOR, SIMULATOR_SERVICE, SCALER, "usage-inference-cluster", "usage-keda"]
    ), bases
    deployment = manifest(out, SIMULATOR)
    assert "replicas" not in deployment["spec"], "KEDA owns the count"
    pod = deployment["spec"]["template"]
    assert pod["metadata"]["labels"] == {
        "app.kubernetes.io/name": "m-sim",
        "app.kubernetes.io/part-of": "dot-inference",
        "app.kubernetes.io/component": "engine",
    }, "the router discovers engines by these labels"
    container = pod["spec"]["containers"][0]
    assert container["image"] == simulator_image()
    assert "nvidia.com/gpu" not in str(container["resources"])
    args = container["args"]
    assert args[:7] == [
        "--model",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "--served-model-name",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "qwen-small",
        "--port",
        "8000",
    ]
    assert "--force-dummy-tokenizer" in args
    assert args[-3:] == ["--max-num-seqs", "2", "--time-to-first-token=1s"], (
        "the claim's flags come last"
    )
    assert "--max-num-seqs" not in args[:-3], "the claim's --max-num-seqs replaces the plan's"
    flags = [a.split("=")[0] for a in args if a.startswith("--")]
    assert all(f in simulator.FLAGS for f in flags), "every flag is one the simulator declares"
    assert not simulator.problems(args[args.index("--force-dummy-tokenizer") :])
    service = manifest(out, SIMULATOR_SERVICE)
    assert deployment["metadata"]["name"] == service["metadata"]["name"] == "m-sim", (
        "not the claim's own name, which the operator's Deployment and Service of a "
        "VLLMRuntime carry"
    )
    assert service["spec"]["ports"][0]["targetPort"] == 8000
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    scaled = manifest(out, SCALER)
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "m-sim",
    }
    assert scaled["spec"]["triggers"][0]["metadata"]["url"].startswith("http://m-sim.a-team.svc")
    assert cond(out, "GPUBudget")[:2] == ("True", "Simulated")
    assert out.status["plan"]["simulated"] is True
    assert out.status["plan"]["engineArgs"][0] == "llm-d-inference-sim"
    valid(out)


def test_a_simulated_model_keeps_a_kv_cache_when_it_scales_on_it() -> None:
    out = run(
        claim(autoscaling={"maxReplicas": 2, "metric": "kvCacheUsage"}, engine={"simulate": True})
    )
    assert (
        "--enable-kvcache"
        in manifest(out, SIMULATOR)["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_a_simulated_model_runs_on_a_cluster_without_gpus() -> None:
    state = cluster()
    state["status"]["gpu"] = {"enabled": False}
    out = run(claim(engine={"simulate": True}), state=state)
    assert out.fatal is None, out.fatal
    assert out.status["plan"]["gpuAssumed"] is True
    real = run(claim(), state=state)
    assert real.fatal is not None and "has no GPU node pool" in real.fatal


def test_simulated_and_serving() -> None:
    xr = claim(engine={"simulate": True})
    key = by_key(run(xr), SIMULATOR)[0]
    live = {"status": {"availableReplicas": 1, "replicas": 1}}
    observed = {key: ready_object(live)}
    out = run(xr, observed=observed)
    assert cond(out, "Serving")[:2] == ("True", "Available")
    assert out.ready[key] is True
    assert out.status["replicas"]["ready"] == 1


@pytest.mark.parametrize(
    ("engine", "field", "start"),
    [
        (
            {"simulate": True, "extraArgs": ["--gpu-memory-utilization", "0.9"]},
            "extraArgs[0]",
            "--gpu-memory-utilization is not a flag of the inference simulator",
        ),
        (
            {"simulate": True, "extraArgs": ["--max-num-seqs", "two"]},
            "extraArgs[0]",
            "--max-num-seqs 'two' is not an int",
        ),
        (
            {"simulate": True, "extraArgs": ["--time-to-first-token", "1"]},
            "extraArgs[0]",
            "--time-to-first-token '1' is not a duration",
        ),
        (
            {"simulate": True, "extraArgs": ["--served-model-name", "x"]},
            "extraArgs[0]",
            "--served-model-name is not yours to set",
        ),
        (
            {"simulate": True, "extraArgs": ["--port=9000"]},
            "extraArgs[0]",
            "--port is not yours to set",
        ),
        ({"simulate": True, "image": "docker.io/x/y:1"}, "image", "applies to vLLM"),
        ({"simulate": "yes"}, "simulate", "'yes' is not true or false"),
    ],
)
def test_simulator_refusals(engine, field, start) -> None:
    out = run(claim(engine=engine))
    assert out.fatal is not None
    assert out.fatal.startswith(f"spec.parameters.engine.{field}: {start}"), out.fatal


# --------------------------------------------------------------------------- hostile input


@pytest.mark.parametrize(
    ("params", "start"),
    [
        ({"replicas": 0}, "spec.parameters.replicas: 0 is not a replica count"),
        ({"replicas": 65}, "spec.parameters.replicas: 65 is not a replica count"),
        ({"replicas": True}, "spec.parameters.replicas: True is not a replica count"),
        (
            {"replicas": 2, "autoscaling": {"maxReplicas": 3}},
            "spec.parameters.replicas and spec.parameters.autoscaling are exclusive",
        ),
        (
            {"autoscaling": {}},
            "spec.parameters.autoscaling.maxReplicas: None is not a replica count",
        ),
        (
            {"autoscaling": {"minReplicas": 0, "maxReplicas": 2}},
            "spec.parameters.autoscaling.minReplicas: 0 is not a replica count from 1 to 64. "
            "Scaling to zero is not offered",
        ),
        (
            {"autoscaling": {"minReplicas": 3, "maxReplicas": 2}},
            "spec.parameters.autoscaling.minReplicas (3) must not exceed",
        ),
        (
            {"autoscaling": {"maxReplicas": 2, "metric": "cpu"}},
            "spec.parameters.autoscaling.metric: 'cpu' is not offered; use waitingRequests, "
            "kvCacheUsage",
        ),
        (
            {"autoscaling": {"maxReplicas": 2, "metric": "kvCacheUsage", "target": 120}},
            "spec.parameters.autoscaling.target: 120 is not a target for kvCacheUsage",
        ),
        (
            {"autoscaling": {"maxReplicas": 2, "scaleDownDelaySeconds": -5}},
            "spec.parameters.autoscaling.scaleDownDelaySeconds: -5 is not a delay",
        ),
        ({"autoscaling": "fast"}, "spec.parameters.autoscaling must be an object"),
        ({"aliases": ["bad name"]}, "spec.parameters.aliases[0]: 'bad name' is not a model name"),
        ({"aliases": ['x"}) or vector(1']}, "spec.parameters.aliases[0]: "),
        ({"aliases": ["-x"]}, "spec.parameters.aliases[0]: '-x' is not a model name"),
        ({"aliases": ["a", "a"]}, "spec.parameters.aliases[1]: a is already a name of this model"),
        (
            {"aliases": ["Qwen/Qwen2.5-1.5B-Instruct"]},
            "spec.parameters.aliases[0]: Qwen/Qwen2.5-1.5B-Instruct is already a name",
        ),
        (
            {"aliases": [f"a{i}" for i in range(9)]},
            "spec.parameters.aliases must be a list of at most 8 names",
        ),
        ({"aliases": "chat"}, "spec.parameters.aliases must be a list"),
    ],
)
def test_refusals_name_the_field(params: dict[str, Any], start: str) -> None:
    out = run(claim(**params))
    assert out.fatal is not None and out.fatal.startswith(start), out.fatal
    assert not out.resources


# --------------------------------------------------------------------------- running models


def test_a_running_model_keeps_its_gpus_and_names_when_an_older_claim_is_edited() -> None:
    """First come, first served is by creation, but a model that already runs (its status
    says what it holds and serves) is never pushed out by an edit of an older claim."""
    running = peer("late", "2026-11-02T00:00:00Z", 4, 1, aliases=["chat"])
    running["status"]["servedModelNames"] = ["example/late", "chat"]
    older = claim("early", created="2026-11-01T00:00:00Z", gpu=4, replicas=2)
    out = run(older, others=[running])
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.replicas: 2 replica(s) x 4 GPU(s) = 8 GPUs do not fit"
    ), out.fatal
    assert "(late 4)" in out.fatal
    renamed = claim("early", created="2026-11-01T00:00:00Z", aliases=["chat"])
    out = run(renamed, others=[running])
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.aliases[0]: LLMInference a-team/late already serves chat"
    ), out.fatal
    # A name this model already serves stays its own (both published it: a race).
    renamed["status"] = {"servedModelNames": ["Qwen/Qwen2.5-1.5B-Instruct", "chat"]}
    assert run(renamed, others=[running]).fatal is None


def test_a_model_without_a_plan_yet_is_counted_as_its_own_function_will_plan_it() -> None:
    """Two models created together (a cluster's models): the earlier has published no plan
    yet, so this function plans it (Qwen2.5-14B takes 4 of this cluster's L4s) instead of
    counting one GPU; one its own function will refuse holds none."""
    first = claim("a-first", model="Qwen/Qwen2.5-14B-Instruct", created="2026-11-01T00:00:00Z")
    out = run(claim("b", created="2026-11-01T00:00:00Z", gpu=4, replicas=2), others=[first])
    assert out.fatal is not None and "(a-first 4 estimated)" in out.fatal, out.fatal
    too_big = claim("a-big", model="Qwen/Qwen2.5-72B-Instruct", created="2026-11-01T00:00:00Z")
    out = run(claim("b", created="2026-11-01T00:00:00Z", gpu=4, replicas=2), others=[too_big])
    assert out.fatal is None, out.fatal


def test_an_api_key_model_is_not_behind_the_router() -> None:
    """vLLM's --api-key guards /v1/models, which the router reads without a key: it would
    never list the model, so the model's own endpoint is its endpoint, and a warning says
    why."""
    out = run(claim(apiKeySecretRef={"name": "key"}))
    assert out.fatal is None, out.fatal
    assert out.status["endpoint"] == "http://m.a-team.svc.cluster.local"
    assert "clusterEndpoint" not in out.status
    assert any(
        w.startswith("spec.parameters.apiKeySecretRef: InferenceCluster") for w in out.warnings
    )


def test_a_simulated_model_with_an_api_key_is_refused() -> None:
    out = run(claim(apiKeySecretRef={"name": "key"}, engine={"simulate": True}))
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.apiKeySecretRef: the inference simulator"
    ), out.fatal


def test_a_simulated_model_vllm_could_not_serve_is_simulated_with_a_warning() -> None:
    for params in (
        {"model": "Qwen/Qwen2.5-72B-Instruct"},  # 158 GiB on 4 x L4
        {"model": "acme/house-model"},  # nobody knows its size
        {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": 3},  # 28 heads
    ):
        out = run(claim(engine={"simulate": True}, **params))
        assert out.fatal is None, out.fatal
        assert any(
            w.startswith("spec.parameters.engine.simulate: the simulator serves it, but vLLM")
            for w in out.warnings
        ), out.warnings
    real = run(claim(model="Qwen/Qwen2.5-72B-Instruct"))
    assert real.fatal is not None and real.fatal.startswith("spec.parameters.model: "), real.fatal


def test_the_autoscaler_stays_while_a_new_model_downloads() -> None:
    """A model change while autoscaled: the engine serving the old model keeps its
    ScaledObject until the new weights are cached (then the new runtime gets its own)."""
    xr = claim(autoscaling={"maxReplicas": 3})
    first = run(xr)
    observed = fetched(first)
    serving = run(xr, observed=observed)
    key_runtime = by_key(serving, RUNTIME)[0]
    key_scaler = by_key(serving, SCALER)[0]
    live = copy.deepcopy(manifest(serving, RUNTIME))
    live["spec"]["deploymentConfig"]["replicas"] = 2
    observed[key_runtime] = {
        "spec": {"forProvider": {"manifest": live}},
        "status": {"atProvider": {"manifest": live}},
    }
    observed[key_scaler] = copy.deepcopy(serving.resources[key_scaler])
    changed = run(
        claim(model="Qwen/Qwen2.5-7B-Instruct", autoscaling={"maxReplicas": 3}), observed=observed
    )
    assert cond(changed, "ModelCache")[:2] == ("False", "Downloading")
    assert key_scaler in changed.resources, "the old engine stays under KEDA"
    kept = changed.resources[key_runtime]["spec"]["forProvider"]["manifest"]
    assert "replicas" not in kept["spec"]["deploymentConfig"], "and KEDA keeps its count"


def test_an_autoscaled_model_keeps_keda_installed() -> None:
    """A Usage of the cluster's KEDA Release: turning apps.keda off cannot uninstall KEDA
    under the model's ScaledObject (whose finalizer only KEDA removes)."""
    state = cluster()
    state["status"]["keda"] = {"release": "inference-aws-app-keda"}
    downloading = run(claim(autoscaling={"maxReplicas": 2}), state=state)
    assert "usage-keda" not in downloading.resources, "no ScaledObject yet, nothing needs KEDA"
    out = run(claim(autoscaling={"maxReplicas": 2}), state=state, observed=fetched(downloading))
    usage = out.resources["usage-keda"]
    assert usage["spec"]["of"] == {
        "apiVersion": "helm.m.crossplane.io/v1beta1",
        "kind": "Release",
        "resourceRef": {"name": "inference-aws-app-keda"},
    }
    scaler = out.resources[next(k for k in out.resources if k.startswith(SCALER))]
    assert usage["spec"]["by"] == {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "resourceRef": {"name": scaler["metadata"]["name"]},
    }, "by the ScaledObject: KEDA removes its finalizer"
    assert usage["spec"]["replayDeletion"] is True
    fixed = run(claim(), state=state)
    assert "usage-keda" not in run(claim(), state=state, observed=fetched(fixed)).resources, (
        "fixed replicas: none"
    )
    composed = claim(autoscaling={"maxReplicas": 2})
    composed["metadata"]["ownerReferences"] = [
        {"controller": True, "kind": "InferenceCluster", "name": "inference-aws"}
    ]
    own = run(composed, state=state)
    assert "usage-keda" not in run(composed, state=state, observed=fetched(own)).resources, (
        "the cluster's own models: its program keeps KEDA while they autoscale"
    )
    valid(out)


REMOTE_CLAIM = [
    # (name, what the cache claim's Object reports) -> the runtime mounts it
    ("still looking", {}, False),
    ("absent", {"conditions": [{"type": "Synced", "status": "False"}]}, False),
    ("made, this claim's", "ours", True),
]


@pytest.mark.parametrize(
    ("reported", "mounted"), [c[1:] for c in REMOTE_CLAIM], ids=[c[0] for c in REMOTE_CLAIM]
)
def test_a_remote_runtime_mounts_its_claim_once_the_provider_made_it(
    reported: Any, mounted: bool
) -> None:
    """On another cluster the claim exists once provider-kubernetes reads it back: the desired
    manifest in the Object's spec is no sign of it (the Object may still be looking), and
    the operator would make a claim of its own meanwhile."""
    xr = claim()
    first = run(xr)
    key, obj = by_key(first, CACHE)
    status = (
        {"atProvider": {"manifest": manifest(first, CACHE)}} if reported == "ours" else reported
    )
    out = run(xr, observed={key: {**copy.deepcopy(obj), "status": status}})
    assert out.fatal is None, out.fatal
    assert ("storageConfig" in manifest(out, RUNTIME)["spec"]) is mounted
