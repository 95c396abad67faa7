"""Models larger than one node: a LeaderWorkerSet group per replica (apps.lws), tensor
parallel inside each node and a pipeline stage per node, with the same model cache, probes,
GPU pool and tenancy rules as one node; refused, with what would work, where the cluster
cannot span nodes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    as_kubelet,
    control_plane,
    engine_image,
    load_yaml,
    ready_object,
    settle,
    simulator_image,
)

from dot_inference.apiserver import validate_objects
from function.keys import LWS, LWS_SERVICE, SCALER
from function.limits import GPU_TYPES, GpuShape
from function.model import sizing
from function.model.catalog_lookup import lookup
from function.outcome import Inputs, Outcome
from function.policy import vllm_cli

PAIR = load_yaml(EXAMPLES / "state" / "llm-kimi-k2-multinode.yaml")[0]
H200 = GpuShape(GPU_TYPES["h200"].memory_gib, 8, "h200", False)
H100 = GpuShape(GPU_TYPES["h100"].memory_gib, 8, "h100", False)


def cluster(
    *, lws: bool = True, max_nodes: int = 2, keda: bool = False, shared: bool = False
) -> dict[str, Any]:
    """The H200 pair of examples/cluster-multinode.yaml; its shared (Filestore) class only
    when `shared`: a pod's own cache is what most tests here look at."""
    c = copy.deepcopy(PAIR)
    if not shared:
        c["status"]["storage"].pop("shared", None)
    c["status"]["apps"]["lws"] = lws
    c["status"]["apps"]["keda"] = keda
    c["status"]["gpu"]["maxNodes"] = max_nodes
    if keda:
        c["status"]["keda"] = {"release": "inference-h200-pair-app-keda"}
    return c


def claim(model: str = "moonshotai/Kimi-K2-Instruct", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "k2", "namespace": "a-team"},
        "spec": {
            "parameters": {"model": model, "clusterRef": {"name": "inference-h200-pair"}, **params}
        },
    }


def run(xr: dict, state: dict | None = None, observed: dict | None = None) -> Outcome:
    return settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            observed=observed or {},
        ),
        control_plane(xr, [], state or cluster()),
    )


def manifest(out: Outcome, base: str) -> dict[str, Any]:
    key = next(k for k in out.resources if k.startswith(f"{base}-"))
    return out.resources[key]["spec"]["forProvider"]["manifest"]


# (model, GPU, nodes one replica may span) -> (tensor parallel, pipeline parallel, data
# parallel, nodes) the function picks: a dense model tensor parallel inside each node and a
# pipeline stage per node; a mixture of experts data + expert parallel across them
# (function/model/expert_parallel.py: MLA models one rank per GPU).
TOPOLOGIES = [
    ("moonshotai/Kimi-K2-Instruct", H200, 2, (1, 1, 16, 2)),  # FP8, 969 GiB of weights
    ("moonshotai/Kimi-K2-Instruct", H200, 1, None),  # one node: refused
    ("meta-llama/Llama-3.1-405B-Instruct", H100, 4, (8, 2, 1, 2)),  # BF16
    ("deepseek-ai/DeepSeek-V3", H100, 4, (1, 1, 16, 2)),
    (
        "Qwen/Qwen2.5-72B-Instruct",
        GpuShape(GPU_TYPES["l4"].memory_gib, 4, "l4", False),
        4,
        (4, 3, 1, 3),
    ),
    ("Qwen/Qwen2.5-7B-Instruct", H100, 4, (1, 1, 1, 1)),  # fits one GPU: never spans nodes
    ("BAAI/bge-m3", H100, 4, (1, 1, 1, 1)),
]


@pytest.mark.parametrize(("model", "gpu", "span", "expected"), TOPOLOGIES)
def test_the_fewest_nodes_that_hold_the_model(model, gpu, span, expected) -> None:
    if expected is None:
        with pytest.raises(sizing.SizingError, match="more than a node offers"):
            sizing.plan(lookup(model), None, gpu, None, span)
        return
    plan = sizing.plan(lookup(model), None, gpu, None, span)
    split = (
        plan.tensor_parallel_size,
        plan.pipeline_parallel_size,
        plan.data_parallel_size,
        plan.nodes,
    )
    assert split == expected
    tp, pp, dp, nodes = expected
    assert plan.gpus == tp * pp * dp
    assert plan.expert_parallel is (dp > 1)
    assert plan.fits and plan.max_model_len >= 4096
    if plan.nodes > 1:
        # One node fewer would not hold it: the function takes the fewest.
        fewer = sizing.plan(lookup(model), gpu.per_node * (nodes - 1), gpu, None, span)
        assert not fewer.fits


def test_a_two_node_replica_is_a_leader_worker_set() -> None:
    # Tensor parallel inside each node and a pipeline stage per node: a mixture of experts
    # without expert parallelism (the layout every dense model larger than a node gets).
    out = run(claim(parallelism={"expert": False}))
    assert out.fatal is None, out.fatal
    plan = out.status["plan"]
    assert (plan["gpus"], plan["tensorParallelSize"], plan["pipelineParallelSize"]) == (16, 8, 2)
    assert plan["topology"] == (
        "2 nodes x 8 h200: tensor parallel 8 inside each node, pipeline parallel 2 across nodes"
    )
    kinds = sorted(
        o["spec"]["forProvider"]["manifest"]["kind"]
        for o in out.resources.values()
        if o["kind"] == "Object"
    )
    assert kinds == ["LeaderWorkerSet", "Service"], "no VLLMRuntime, no shared claim, no Job"
    lws = manifest(out, LWS)
    name = lws["metadata"]["name"]
    assert name.startswith("k2-") and name != "k2" and len(name) <= 45, (
        "short, and never the claim's name (the operator's Service of a one-node engine)"
    )
    group = lws["spec"]["leaderWorkerTemplate"]
    assert group["size"] == 2 and lws["spec"]["replicas"] == 1
    assert group["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Delete",
        "whenScaled": "Delete",
    }
    assert group["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert lws["spec"]["startupPolicy"] == "LeaderCreated"
    leader, worker = group["leaderTemplate"], group["workerTemplate"]
    assert leader["metadata"]["labels"]["app.kubernetes.io/component"] == "engine"
    assert worker["metadata"]["labels"]["app.kubernetes.io/component"] == "engine-worker", (
        "the router discovers the leader only"
    )
    for template, index in ((leader, 0), (worker, 1)):
        pod = template["spec"]
        c = pod["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert pod["runtimeClassName"] == "nvidia" and pod["enableServiceLinks"] is False
        assert pod["initContainers"][0]["name"] == "model-fetch"
        assert {"name": "HF_HUB_OFFLINE", "value": "1"} in c["env"]
        args = as_kubelet(c["args"], index)
        assert c["command"] == ["/opt/venv/bin/vllm", "serve"]
        assert vllm_cli.problems(args[1:]) == [], "vLLM 0.17.1's parser accepts it"
        i = args.index("--node-rank")
        assert args[i + 1] == str(index) and args[args.index("--nnodes") + 1] == "2"
        assert ("--headless" in args) is (index > 0)
    assert "startupProbe" in leader["spec"]["containers"][0]
    assert "readinessProbe" not in worker["spec"]["containers"][0], "workers serve no HTTP"
    claims = group["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["model-cache"]
    service = manifest(out, LWS_SERVICE)
    assert service["spec"]["selector"] == {
        "leaderworkerset.sigs.k8s.io/name": name,
        "leaderworkerset.sigs.k8s.io/worker-index": "0",
    }
    assert service["metadata"]["name"] == "k2-leader"
    report = validate_objects(list(out.resources.values()))
    assert report.ok, report.summary()


def test_an_explicit_count_above_a_node() -> None:
    out = run(claim(gpu=16))
    assert out.fatal is None, out.fatal
    assert out.status["plan"]["nodes"] == 2
    odd = run(claim(gpu=12))
    assert odd.fatal == (
        "spec.parameters.gpu: 12 GPUs span nodes of 8: use whole nodes (16) or at most 8"
    ), odd.fatal
    many = run(claim(gpu=32))
    assert many.fatal is not None and many.fatal.startswith(
        "spec.parameters.gpu: 32 GPUs are 4 nodes of 8, more than the 2 one replica may span"
    ), many.fatal
    no_lws = run(claim(gpu=16), cluster(lws=False))
    assert (
        no_lws.fatal is not None and "an InferenceCluster with apps.lws spans nodes" in no_lws.fatal
    )


def test_without_lws_a_model_larger_than_a_node_is_refused_with_what_would_work() -> None:
    out = run(claim(), cluster(lws=False))
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.model: moonshotai/Kimi-K2-Instruct needs about"
    ), out.fatal
    assert "apps.lws" in out.fatal


def test_more_nodes_than_the_pool_is_refused_by_the_budget() -> None:
    out = run(claim(replicas=2))
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.replicas: 2 replica(s) x 16 GPU(s) = 32 GPUs do not fit"
    ), out.fatal


def test_autoscaled_multi_node_replicas_scale_the_leader_worker_set() -> None:
    out = run(claim(autoscaling={"maxReplicas": 1}), cluster(keda=True))
    assert out.fatal is None, out.fatal
    assert "replicas" not in manifest(out, LWS)["spec"], "KEDA owns the count"
    scaled = manifest(out, SCALER)
    assert scaled["spec"]["scaleTargetRef"] == {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "name": manifest(out, LWS)["metadata"]["name"],
    }
    url = scaled["spec"]["triggers"][0]["metadata"]["url"]
    assert url.startswith("http://k2-leader.a-team.svc"), "the leaders' metrics"


def test_serving_when_the_group_is_ready() -> None:
    xr = claim()
    first = run(xr)
    key = next(k for k in first.resources if k.startswith(LWS))
    live = {"status": {"readyReplicas": 1, "replicas": 1}}
    observed = {key: ready_object(live)}
    out = run(xr, observed=observed)
    serving = next(c for c in out.conditions if c.type == "Serving")
    assert (serving.status, serving.reason) == ("True", "Available")
    assert out.ready[key] is True
    assert out.status["replicas"]["ready"] == 1


def test_a_new_model_cache_is_a_new_group() -> None:
    """A StatefulSet's volumeClaimTemplates never change: a cache of another size is a new
    LeaderWorkerSet (a new key: Crossplane deletes the old group), not a refused update."""
    first = run(claim())
    bigger = run(claim(storage={"size": "2Ti"}))
    key = next(k for k in first.resources if k.startswith(f"{LWS}-"))
    other = next(k for k in bigger.resources if k.startswith(f"{LWS}-"))
    assert key != other
    assert manifest(first, LWS)["metadata"]["name"] != manifest(bigger, LWS)["metadata"]["name"]


def test_the_api_key_is_never_missing_from_a_group() -> None:
    """Before the key's Secret is copied to the cluster, the pods already name the copy: they
    wait for it instead of serving without a key."""
    out = run(claim(apiKeySecretRef={"name": "key"}))
    assert out.fatal is None, out.fatal
    for role in ("leaderTemplate", "workerTemplate"):
        env = manifest(out, LWS)["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"][0][
            "env"
        ]
        key = next(e for e in env if e["name"] == "VLLM_API_KEY")
        assert key["valueFrom"]["secretKeyRef"] == {"name": "k2-api-key", "key": "api-key"}
        assert "--api-key" not in str(env), "never in an argument"


@pytest.mark.parametrize(
    "flag",
    [
        "--nnodes",
        "--node-rank",
        "--master-addr",
        "--master-port",
        "--headless",
        "--distributed-executor-backend",
        "--data-parallel-address",
    ],
)
def test_the_multi_node_wiring_is_not_the_claims_to_change(flag: str) -> None:
    out = run(claim(engine={"extraArgs": [flag, "1"]}))
    assert out.fatal is not None and "is not yours to set" in out.fatal, out.fatal


def test_a_replica_spans_at_most_the_limit_of_nodes() -> None:
    """A pool of many nodes still lets one replica span at most gpusPerReplica.maxNodes."""
    from function.claim.spec import parse
    from function.cluster.target import from_cluster
    from function.limits import MAX_NODES_PER_REPLICA

    big = from_cluster(parse(claim()), cluster(max_nodes=20))
    assert big.span == MAX_NODES_PER_REPLICA
    assert from_cluster(parse(claim()), cluster(lws=False, max_nodes=20)).span == 1
    llama = lookup("meta-llama/Llama-3.1-405B-Instruct")
    l4 = GpuShape(GPU_TYPES["l4"].memory_gib, 1, "l4", False)
    with pytest.raises(sizing.SizingError, match="more than the 8 nodes one replica may span"):
        sizing.plan(llama, None, l4, None, big.span)


def test_on_a_shared_class_the_group_reads_one_claim_downloaded_once() -> None:
    """Issue 24: every pod of a 2-node group downloaded the full model into its own claim,
    and again when the group was recreated. On a cluster with a ReadWriteMany class the
    group's pods share one claim, filled once by a Job before the group starts, and kept."""
    state = cluster(shared=True)
    xr = claim()
    first = run(xr, state)
    assert first.fatal is None, first.fatal
    lws = manifest(first, LWS)
    assert lws["spec"]["replicas"] == 0, "no group before the weights are in the cache"
    group = lws["spec"]["leaderWorkerTemplate"]
    assert "volumeClaimTemplates" not in group
    for role in ("leaderTemplate", "workerTemplate"):
        volumes = group[role]["spec"]["volumes"]
        assert {
            "name": "model-cache",
            "persistentVolumeClaim": {"claimName": "k2-cache"},
        } in volumes
    pvc = manifest(first, "shared-model-cache")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == state["status"]["storage"]["shared"]["className"]
    job = manifest(first, "model-fetch")
    assert job["spec"]["template"]["spec"]["volumes"][0]["persistentVolumeClaim"] == {
        "claimName": "k2-cache"
    }
    cache = first.status["plan"]["cache"]
    assert (cache["layout"], cache["claims"], cache["downloads"]) == ("shared", 1, 1)
    assert cache["size"] == cache["disk"]
    condition = next(c for c in first.conditions if c.type == "ModelCache")
    assert (condition.status, condition.reason) == ("False", "Downloading")
    assert validate_objects(list(first.resources.values())).ok
    fetch_key = next(k for k in first.resources if k.startswith("model-fetch"))
    done = run(
        xr,
        state,
        {fetch_key: {"status": {"atProvider": {"manifest": {"status": {"succeeded": 1}}}}}},
    )
    assert manifest(done, LWS)["spec"]["replicas"] == 1
    assert next(c for c in done.conditions if c.type == "ModelCache").reason == "Cached"
    # A new revision downloads beside the group serving now, which stays as it is.
    lws_key = next(k for k in done.resources if k.startswith(LWS))
    serving = copy.deepcopy(done.resources[lws_key])
    serving["status"] = {"atProvider": {"manifest": serving["spec"]["forProvider"]["manifest"]}}
    newer = claim(engine={"revision": "0123456789abcdef0123456789abcdef01234567"})
    moving = run(newer, state, {lws_key: serving})
    kept = moving.resources[lws_key]["spec"]["forProvider"]["manifest"]
    assert kept["spec"]["replicas"] == 1
    assert (
        "--revision"
        not in kept["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0][
            "args"
        ]
    ), "the running group keeps its revision until the new one is cached"


def test_without_a_shared_class_each_pod_has_its_own_cache_and_says_the_cost() -> None:
    out = run(claim())
    cache = out.status["plan"]["cache"]
    assert (cache["layout"], cache["claims"], cache["downloads"]) == ("perPod", 2, 2)
    assert "publishes no shared (ReadWriteMany) class" in cache["reason"]


def test_adapters_on_a_replica_over_several_nodes_are_refused() -> None:
    # Its pods start with HF_HUB_OFFLINE=1 from what the init containers fetched: vLLM could
    # not download the adapters, so the claim is refused rather than left crash-looping.
    xr = claim(
        "meta-llama/Llama-3.1-405B-Instruct",
        gpu=16,
        adapters=[{"name": "llama-sql", "source": "a-team/llama-405b-sql-lora", "rank": 16}],
    )
    out = run(xr)
    assert out.fatal is not None and out.fatal.startswith("spec.parameters.adapters:"), out.fatal
    assert "runs over 2 nodes (a LeaderWorkerSet)" in out.fatal
    assert not any(k.startswith(f"{LWS}-") for k in out.resources)
