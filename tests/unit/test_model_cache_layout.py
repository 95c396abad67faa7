"""The attach rule, modelled: a ReadWriteOnce claim that pods on two nodes mount fails (the
second pod waits in ContainerCreating with a Multi-Attach error), and a ReadWriteMany claim
binds only on a class that provides it.

`attach_problems` reads rendered objects the way the cluster would run them: which pods
mount which claim, how many may run at once (a fixed count, KEDA's maximum, a Job until it
has finished), and which are pinned beside another's pods (a required pod affinity on the
node's hostname). Pods nothing pins may land on any GPU node, up to the cluster's. It is
applied to every example, once downloaded, and to a table of claims on pools of 1, 2, 4
and 8 GPUs per node, with fixed replicas and autoscaling: each either renders objects the
rule accepts, or is refused with the field named.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    control_plane,
    engine_image,
    fetched,
    llmd_images,
    load_yaml,
    on_cluster,
    settle,
    simulator_image,
)

from dot_inference.crossplane import documents, render
from function.keys import CACHE, RUNTIME
from function.outcome import Inputs, Outcome

PKG = documents.load_package(EXAMPLES.parent / "package")
HOSTNAME = "kubernetes.io/hostname"


@dataclass(frozen=True)
class Mount:
    claim: tuple[str, str]  # (namespace, name)
    what: str
    pods: int
    labels: dict[str, str]
    pinned_to: dict[str, str] | None  # a required pod affinity: beside the pods with these


def unwrap(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Manifests as the cluster receives them (provider-kubernetes Objects opened)."""
    out = []
    for o in objects:
        manifest = (o.get("spec") or {}).get("forProvider", {}).get("manifest")
        out.append(manifest if o.get("kind") == "Object" and manifest else o)
    return out


def _keda_max(objects: list[dict[str, Any]], kind: str, name: str) -> int | None:
    for o in objects:
        ref = (o.get("spec") or {}).get("scaleTargetRef") or {}
        if o.get("kind") == "ScaledObject" and (ref.get("kind"), ref.get("name")) == (kind, name):
            return int(o["spec"].get("maxReplicaCount", 100))
    return None


def _pinned(pod: dict[str, Any]) -> dict[str, str] | None:
    terms = ((pod.get("affinity") or {}).get("podAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or []
    for t in terms:
        if t.get("topologyKey") == HOSTNAME:
            return dict((t.get("labelSelector") or {}).get("matchLabels") or {})
    return None


def mounts(objects: list[dict[str, Any]], finished: set[str]) -> list[Mount]:
    """Every pod template that mounts a claim, with the pods it may run at once."""
    out = []
    for o in objects:
        kind, meta = o.get("kind"), o.get("metadata") or {}
        ns, name = meta.get("namespace", ""), meta.get("name", "")
        spec = o.get("spec") or {}
        if kind == "VLLMRuntime" and (spec.get("storageConfig") or {}).get("enabled"):
            deploy = spec.get("deploymentConfig") or {}
            count = deploy.get("replicas")
            if count is None:
                count = _keda_max(objects, kind, name) or 1  # the CRD's default
            out.append(Mount((ns, name), f"VLLMRuntime {name}", count, {"app": name}, None))
            continue
        templates: list[tuple[dict[str, Any], int]] = []
        if kind == "Job" and name not in finished:
            templates = [(spec.get("template") or {}, 1)]
        elif kind in ("Deployment", "StatefulSet"):
            count = spec.get("replicas")
            count = _keda_max(objects, kind, name) or 1 if count is None else count
            templates = [(spec.get("template") or {}, count)]
        elif kind == "LeaderWorkerSet":
            lwt = spec.get("leaderWorkerTemplate") or {}
            count = spec.get("replicas")
            count = _keda_max(objects, kind, name) or 1 if count is None else count
            size = lwt.get("size", 1)
            templates = [
                (lwt.get("leaderTemplate") or {}, count),
                (lwt.get("workerTemplate") or {}, count * (size - 1)),
            ]
        for template, count in templates:
            pod = template.get("spec") or {}
            for v in pod.get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim and count:
                    labels = (template.get("metadata") or {}).get("labels") or {}
                    out.append(Mount((ns, claim), f"{kind} {name}", count, labels, _pinned(pod)))
    return out


def attach_problems(
    objects: list[dict[str, Any]],
    *,
    max_nodes: int | None,
    rwx_classes: set[str],
    finished: set[str] = frozenset(),
) -> list[str]:
    """What the attach rule refuses, as messages; none when every claim can serve its pods."""
    objects = unwrap(objects)
    claims = {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") == "PersistentVolumeClaim"
    }
    runtimes = {
        (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
        for o in objects
        if o.get("kind") == "VLLMRuntime"
    }
    problems = []
    by_claim: dict[tuple[str, str], list[Mount]] = {}
    for m in mounts(objects, finished):
        by_claim.setdefault(m.claim, []).append(m)
    for claim, ms in by_claim.items():
        pvc = claims.get(claim)
        if pvc is None and claim not in runtimes:
            # A claim the user staged weights on (spec.parameters.source pvc://), mounted
            # read-only by the one copy: its modes are the user's (docs/llminference.md).
            continue
        if pvc is not None:
            modes = pvc["spec"].get("accessModes") or []
            class_name = pvc["spec"].get("storageClassName")
        else:  # the production-stack controller makes the claim from storageConfig
            storage = runtimes[claim]["spec"]["storageConfig"]
            modes, class_name = [storage.get("accessMode", "ReadWriteMany")], None
        free = [m for m in ms if not (m.pinned_to and _follows(m.pinned_to, ms))]
        pods = sum(m.pods for m in free)
        nodes = pods if max_nodes is None else min(pods, max_nodes)
        who = ", ".join(f"{m.what} ({m.pods})" for m in ms)
        if "ReadWriteOnce" in modes and nodes > 1:
            problems.append(
                f"ReadWriteOnce claim {claim[0]}/{claim[1]} is mounted by {who}: {pods} pods "
                f"that may land on {nodes} nodes"
            )
        if "ReadWriteMany" in modes and class_name not in rwx_classes:
            problems.append(
                f"ReadWriteMany claim {claim[0]}/{claim[1]} is on class {class_name}, which "
                f"provides no ReadWriteMany (the cluster's: {sorted(rwx_classes) or 'none'})"
            )
    return problems


def _follows(selector: dict[str, str], ms: list[Mount]) -> bool:
    """Whether a pinned pod's selector matches pods of another mount of the same claim."""
    return any(
        m.labels and all(m.labels.get(k) == v for k, v in selector.items())
        for m in ms
        if m.pinned_to != selector
    )


# --- the model itself --------------------------------------------------------------------


def _pvc(name: str, mode: str, cls: str | None = "block") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "t"},
        "spec": {"accessModes": [mode], **({"storageClassName": cls} if cls else {})},
    }


def _deployment(name: str, claim: str, replicas: int | None, pin: str | None = None) -> dict:
    pod: dict[str, Any] = {
        "volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": claim}}]
    }
    if pin:
        term = {"labelSelector": {"matchLabels": {"app": pin}}, "topologyKey": HOSTNAME}
        pod["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    spec: dict[str, Any] = {"template": {"metadata": {"labels": {"app": name}}, "spec": pod}}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"kind": "Deployment", "metadata": {"name": name, "namespace": "t"}, "spec": spec}


MODEL_CASES = [
    ("one pod on RWO", [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 1)], 4, False),
    ("two pods on RWO, two nodes", [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 2)], 2, True),
    ("two pods on RWO, one node", [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 2)], 1, False),
    ("two pods, nodes unknown", [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 2)], None, True),
    (
        "a pod pinned beside the other",
        [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 1), _deployment("b", "c", 1, "a")],
        3,
        False,
    ),
    (
        "two unpinned deployments",
        [_pvc("c", "ReadWriteOnce"), _deployment("a", "c", 1), _deployment("b", "c", 1)],
        3,
        True,
    ),
    (
        "RWX on a shared class",
        [_pvc("c", "ReadWriteMany", "nfs"), _deployment("a", "c", 4)],
        4,
        False,
    ),
    (
        "RWX on a block class",
        [_pvc("c", "ReadWriteMany", "block"), _deployment("a", "c", 1)],
        4,
        True,
    ),
    (
        "KEDA's maximum counts",
        [
            _pvc("c", "ReadWriteOnce"),
            _deployment("a", "c", None),
            {
                "kind": "ScaledObject",
                "metadata": {"name": "a", "namespace": "t"},
                "spec": {
                    "scaleTargetRef": {"kind": "Deployment", "name": "a"},
                    "maxReplicaCount": 3,
                },
            },
        ],
        2,
        True,
    ),
]


@pytest.mark.parametrize(
    ("objects", "max_nodes", "fails"),
    [c[1:] for c in MODEL_CASES],
    ids=[c[0] for c in MODEL_CASES],
)
def test_the_attach_model(objects: list[dict], max_nodes: int | None, fails: bool) -> None:
    assert bool(attach_problems(objects, max_nodes=max_nodes, rwx_classes={"nfs"})) == fails


# --- every example -----------------------------------------------------------------------


def _done(resource: dict[str, Any]) -> dict[str, Any]:
    """A composed resource as observed once it exists; a download Job has succeeded."""
    out = copy.deepcopy(resource)
    manifest = (out.get("spec") or {}).get("forProvider", {}).get("manifest")
    inner = manifest if out.get("kind") == "Object" and manifest else out
    status = {"succeeded": 1} if inner.get("kind") == "Job" else {}
    if inner is out:
        out["status"] = status
    else:
        out["status"] = {
            "atProvider": {"manifest": {**inner, "status": status}},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    return out


def _examples() -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    out = []
    for path in sorted(EXAMPLES.glob("llm-*.yaml")):
        state = EXAMPLES / "state" / path.name
        required = load_yaml(state) if state.exists() else []
        for doc in load_yaml(path):
            if doc.get("kind") == "LLMInference":
                out.append((path.name, doc, required))
    for doc in load_yaml(EXAMPLES / "cluster-with-models.yaml"):
        # The cluster's own models, each an LLMInference the cluster composes.
        if doc.get("kind") == "InferenceCluster":
            rendered = render.render_in_package(PKG, doc)
            for r in rendered.composed:
                if r.get("kind") == "LLMInference":
                    out.append((f"cluster-with-models.yaml:{r['metadata']['name']}", r, [doc]))
    return out


def _shape(required: list[dict[str, Any]], xr: dict[str, Any]) -> tuple[int | None, set[str]]:
    """The GPU nodes and ReadWriteMany classes of the cluster the claim runs on."""
    ref = ((xr["spec"]["parameters"].get("clusterRef")) or {}).get("name")
    for c in required:
        if c.get("kind") != "InferenceCluster" or (ref and c["metadata"]["name"] != ref):
            continue
        status = c.get("status") or {}
        shared = ((status.get("storage") or {}).get("shared") or {}).get("className")
        return (status.get("gpu") or {}).get("maxNodes"), {shared} if shared else set()
    return None, set()


EXAMPLE_CLAIMS = _examples()


@pytest.mark.parametrize(
    ("xr", "required"), [c[1:] for c in EXAMPLE_CLAIMS], ids=[c[0] for c in EXAMPLE_CLAIMS]
)
def test_no_example_shares_a_read_write_once_claim_across_nodes(
    xr: dict[str, Any], required: list[dict[str, Any]]
) -> None:
    first = render.render_in_package(PKG, xr, required=required)
    assert first.fatal is None, first.fatal
    cached = render.render_in_package(
        PKG, xr, required=required, observed=[_done(r) for r in first.composed]
    )
    assert cached.fatal is None, cached.fatal
    max_nodes, rwx = _shape(required, xr)
    jobs = {o["metadata"]["name"] for o in unwrap(cached.composed) if o.get("kind") == "Job"}
    for objects, finished in ((first.composed, set()), (cached.composed, jobs)):
        assert (
            attach_problems(objects, max_nodes=max_nodes, rwx_classes=rwx, finished=finished) == []
        )


# --- a table of claims on pools of 1, 2, 4 and 8 GPUs per node ---------------------------

AWS = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
SHARED = {"className": "nfs", "readMiBps": 500}


def _cluster(per_node: int, max_nodes: int, shared: bool) -> dict[str, Any]:
    c = copy.deepcopy(AWS)
    c["status"]["gpu"].update(perNode=per_node, maxNodes=max_nodes)
    if shared:
        c["status"]["storage"]["shared"] = dict(SHARED)
    else:
        c["status"]["storage"].pop("shared", None)
    return c


def _claim(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": "a-team"},
        "spec": {
            "parameters": {
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "clusterRef": {"name": "inference-aws"},
                "gpu": 1,
                **params,
            }
        },
    }


def _run(xr: dict[str, Any], cluster: dict[str, Any], observed: dict | None = None) -> Outcome:
    return on_cluster(xr, cluster, observed)


COUNTS = [
    ("replicas 1", {"replicas": 1}, 1),
    ("replicas 2", {"replicas": 2}, 2),
    ("replicas 4", {"replicas": 4}, 4),
    ("autoscaling to 2", {"autoscaling": {"maxReplicas": 2}}, 2),
    ("autoscaling to 4", {"autoscaling": {"maxReplicas": 4}}, 4),
]
TABLE = [
    (
        f"{per_node} GPU(s) per node x {nodes}, {'shared' if shared else 'block only'}, {name}",
        per_node,
        nodes,
        shared,
        params,
        pods,
    )
    for per_node in (1, 2, 4, 8)
    for nodes in (1, 2)
    for shared in (False, True)
    for name, params, pods in COUNTS
    if pods <= per_node * nodes  # what the GPU budget allows (tested on its own elsewhere)
]


@pytest.mark.parametrize(
    ("per_node", "nodes", "shared", "params", "pods"),
    [c[1:] for c in TABLE],
    ids=[c[0] for c in TABLE],
)
def test_every_claim_either_shares_its_cache_safely_or_is_refused(
    per_node: int, nodes: int, shared: bool, params: dict[str, Any], pods: int
) -> None:
    cluster = _cluster(per_node, nodes, shared)
    xr = _claim(**params)
    first = _run(xr, cluster)
    field = "autoscaling.maxReplicas" if "autoscaling" in params else "replicas"
    if pods > 1 and nodes > 1 and not shared:
        assert first.fatal is not None, "pods on two nodes, one ReadWriteOnce claim"
        assert first.fatal.startswith(f"spec.parameters.{field}: {pods} engine pods may run")
        assert "Multi-Attach" in first.fatal and "ReadWriteMany" in first.fatal
        return
    assert first.fatal is None, first.fatal
    done = _run(xr, cluster, fetched(first))
    assert done.fatal is None, done.fatal
    rwx = {"nfs"} if shared else set()
    jobs = {
        o["metadata"]["name"] for o in unwrap(list(done.resources.values())) if o["kind"] == "Job"
    }
    assert (
        attach_problems(
            list(done.resources.values()), max_nodes=nodes, rwx_classes=rwx, finished=jobs
        )
        == []
    )
    layout = done.status["plan"]["cache"]
    if pods > 1 and nodes > 1:
        assert (layout["layout"], layout["accessMode"], layout["claims"]) == (
            "shared",
            "ReadWriteMany",
            1,
        )
        assert layout["storageClass"] == "nfs" and layout["loadMiBps"] == 500
    else:
        assert (layout["layout"], layout["accessMode"]) == ("oneNode", "ReadWriteOnce")
        assert layout["storageClass"] == "dot-inference-model-cache"


def test_a_new_download_beside_a_running_engine_goes_to_its_node() -> None:
    """A revision change downloads into the claim the engine holds: on a ReadWriteOnce claim
    the Job must run on the engine's node (required), not merely prefer it."""
    cluster = _cluster(4, 2, False)
    xr = _claim(replicas=1)
    first = _run(xr, cluster)
    done = _run(xr, cluster, fetched(first))
    runtime_key = next(k for k in done.resources if k.startswith(RUNTIME))
    running = copy.deepcopy(done.resources[runtime_key])
    manifest = running["spec"]["forProvider"]["manifest"]
    running["status"] = {"atProvider": {"manifest": manifest}}
    moved = copy.deepcopy(xr)
    moved["spec"]["parameters"]["engine"] = {"revision": "0123456789abcdef0123456789abcdef01234567"}
    claim_key = next(k for k in done.resources if k.startswith(CACHE))
    holding = _run(moved, cluster, {runtime_key: running, claim_key: fetched(first)[claim_key]})
    assert holding.fatal is None, holding.fatal
    objects = unwrap(list(holding.resources.values()))
    job = next(o for o in objects if o["kind"] == "Job")
    affinity = job["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" in affinity
    assert attach_problems(list(holding.resources.values()), max_nodes=2, rwx_classes=set()) == []


def test_a_claim_made_read_write_once_keeps_its_access_mode() -> None:
    """Kubernetes never changes a claim's access mode: raising the count of a model whose
    cache exists as ReadWriteOnce is refused with what to do, not applied and stuck."""
    cluster = _cluster(4, 2, True)
    xr = _claim(replicas=1)
    first = _run(xr, cluster)
    claim_key = next(k for k in first.resources if k.startswith(CACHE))
    claim = copy.deepcopy(first.resources[claim_key])
    claim["status"] = {"atProvider": {"manifest": claim["spec"]["forProvider"]["manifest"]}}
    more = _claim(replicas=2)
    out = _run(more, cluster, {claim_key: claim})
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.replicas: 2 engine pods may run on up to 2")
    assert "exists as ReadWriteOnce" in out.fatal


def test_storage_access_mode_names_a_shared_class_the_cluster_does_not_publish() -> None:
    cluster = _cluster(4, 2, False)
    out = _run(
        _claim(replicas=2, storage={"className": "cephfs", "accessMode": "ReadWriteMany"}), cluster
    )
    assert out.fatal is None, out.fatal
    objects = unwrap(list(out.resources.values()))
    pvc = next(o for o in objects if o["kind"] == "PersistentVolumeClaim")
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc["spec"]["storageClassName"] == "cephfs"
    refused = _run(_claim(replicas=2, storage={"className": "gp3"}), cluster)
    assert refused.fatal is not None and "spec.parameters.storage.className" in refused.fatal


def test_a_shared_class_with_a_smallest_volume_raises_the_cache_to_it() -> None:
    cluster = _cluster(4, 2, True)
    cluster["status"]["storage"]["shared"] = {
        "className": "zonal",
        "minGiB": 1024,
        "readMiBps": 260,
    }
    out = _run(_claim(replicas=2), cluster)
    assert out.fatal is None, out.fatal
    cache = out.status["plan"]["cache"]
    assert (cache["size"], cache["storageClass"], cache["disk"]) == ("1Ti", "zonal", "1Ti")


def test_multi_node_and_llmd_pods_say_what_their_caches_cost() -> None:
    """The Kimi-K2 pair (GKE, Filestore): one shared claim for the group, downloaded once.
    The llm-d cluster (existing, no shared class): a claim and a download per pod."""
    for example, layout, claims in (
        ("llm-kimi-k2-multinode.yaml", "shared", 1),
        ("llm-disaggregated.yaml", "perPod", 3),
    ):
        state = load_yaml(EXAMPLES / "state" / example)
        xr = load_yaml(EXAMPLES / example)[0]
        out = render.render_in_package(PKG, xr, required=state)
        assert out.fatal is None, out.fatal
        cache = out.xr["status"]["plan"]["cache"]
        assert (cache["layout"], cache["claims"], cache["downloads"]) == (layout, claims, claims)
        if layout == "perPod":
            assert "publishes no shared" in cache["reason"]


# --- any claim, any pool ------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_counts = st.one_of(
    st.fixed_dictionaries({"replicas": st.integers(1, 8)}),
    st.fixed_dictionaries(
        {"autoscaling": st.fixed_dictionaries({"maxReplicas": st.integers(1, 8)})}
    ),
)
_storage = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {"className": st.sampled_from(["gp3", "nfs", "cephfs"])},
        optional={"accessMode": st.sampled_from(["ReadWriteOnce", "ReadWriteMany"])},
    ),
    st.fixed_dictionaries({"accessMode": st.sampled_from(["ReadWriteOnce", "ReadWriteMany"])}),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    per_node=st.sampled_from([1, 2, 4, 8]),
    nodes=st.integers(1, 3),
    shared=st.booleans(),
    gpu=st.sampled_from([1, 2, 4, 8]),
    count=_counts,
    storage=_storage,
)
def test_no_claim_shares_a_read_write_once_cache_across_nodes(
    per_node: int, nodes: int, shared: bool, gpu: int, count: dict, storage: dict
) -> None:
    """Whatever the claim and the pool: refused, or no ReadWriteOnce claim on two nodes and no
    ReadWriteMany claim on a class that is not the cluster's shared one or the claim's own."""
    cluster = _cluster(per_node, nodes, shared)
    xr = _claim(**count, **({"storage": storage} if storage else {}))
    xr["spec"]["parameters"]["gpu"] = gpu
    first = _run(xr, cluster)
    if first.fatal is not None:
        assert "Traceback" not in first.fatal
        return
    done = _run(xr, cluster, fetched(first))
    assert done.fatal is None, done.fatal
    rwx = {"nfs"} if shared else set()
    if storage.get("accessMode") == "ReadWriteMany" and storage.get("className"):
        rwx.add(storage["className"])  # the claim says its class provides it
    objects = list(done.resources.values())
    jobs = {o["metadata"]["name"] for o in unwrap(objects) if o["kind"] == "Job"}
    assert attach_problems(objects, max_nodes=nodes, rwx_classes=rwx, finished=jobs) == []


# --- what changes over time (review of issue 24) ------------------------------------------


def _peer(name: str, gpus: int) -> dict[str, Any]:
    """An older model on the cluster that holds `gpus` GPUs."""
    xr = _claim(replicas=1)
    xr["spec"]["parameters"]["model"] = "Qwen/Qwen2.5-0.5B-Instruct"
    xr["metadata"] |= {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"}
    xr["spec"]["parameters"]["gpu"] = gpus
    xr["status"] = {"plan": {"gpus": gpus}, "replicas": {"max": 1}}
    return xr


def _run_with(xr: dict[str, Any], cluster: dict[str, Any], others: list[dict]) -> Outcome:
    return settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            observed={},
        ),
        control_plane(xr, others, cluster),
    )


@pytest.mark.parametrize("shared", [False, True], ids=["block only", "shared"])
def test_the_layout_follows_the_claim_not_what_other_models_leave(shared: bool) -> None:
    """The budget caps an autoscaling maximum to what other models leave; the cache layout
    must not follow that cap, or a model would change layout (and fail on its existing claim)
    when another model is deleted."""
    cluster = _cluster(1, 2, shared)
    xr = _claim(autoscaling={"minReplicas": 1, "maxReplicas": 2})
    xr["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
    alone = _run_with(xr, cluster, [])
    crowded = _run_with(xr, cluster, [_peer("older", 1)])
    assert (alone.fatal is None) == (crowded.fatal is None) == shared
    if shared:
        assert alone.status["plan"]["cache"]["layout"] == "shared"
        assert crowded.status["plan"]["cache"]["layout"] == "shared"
    else:
        assert alone.fatal == crowded.fatal


def _observed_claim(out: Outcome, key_prefix: str, **spec: Any) -> dict[str, Any]:
    key = next(k for k in out.resources if k.startswith(key_prefix))
    manifest = copy.deepcopy(out.resources[key]["spec"]["forProvider"]["manifest"])
    manifest["spec"] |= spec
    return {key: {"status": {"atProvider": {"manifest": manifest}}}}


def test_a_claim_made_read_write_once_is_not_rewritten_read_write_many() -> None:
    cluster = _cluster(4, 2, True)
    first = _run(_claim(replicas=1), cluster)
    observed = _observed_claim(first, CACHE)
    out = _run(_claim(replicas=1, storage={"accessMode": "ReadWriteMany"}), cluster, observed)
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.storage.accessMode: this model's cache claim")


def test_a_block_class_the_claim_names_is_not_replaced_by_the_shared_one() -> None:
    out = _run(_claim(replicas=2, storage={"className": "gp3"}), _cluster(4, 2, True))
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.replicas: 2 engine pods may run")
    assert "spec.parameters.storage.className asks for a ReadWriteOnce cache" in out.fatal
    assert "omit spec.parameters.storage.className to use" in out.fatal


def test_a_shared_claim_keeps_its_size_and_a_new_size_keeps_the_group() -> None:
    state = load_yaml(EXAMPLES / "state" / "llm-kimi-k2-multinode.yaml")
    cluster = next(d for d in state if d["kind"] == "InferenceCluster")
    xr = load_yaml(EXAMPLES / "llm-kimi-k2-multinode.yaml")[0]
    first = _run(xr, cluster)
    assert first.fatal is None, first.fatal
    group = next(k for k in first.resources if k.startswith("leader-worker-set"))
    grown = _observed_claim(first, "shared-model-cache", resources={"requests": {"storage": "3Ti"}})
    again = _run(xr, cluster, grown)
    assert again.fatal is None, again.fatal
    assert again.status["plan"]["cache"]["size"] == "3Ti", "a claim never shrinks"
    bigger = copy.deepcopy(xr)
    bigger["spec"]["parameters"]["storage"] = {"size": "4Ti"}
    resized = _run(bigger, cluster, grown)
    assert resized.fatal is None, resized.fatal
    assert group in resized.resources, "the group's pods have no claim of their own to resize"


def test_llmd_pods_waiting_for_a_shared_download_say_so() -> None:
    state = load_yaml(EXAMPLES / "state" / "llm-llmd.yaml")
    cluster = copy.deepcopy(next(d for d in state if d["kind"] == "InferenceCluster"))
    cluster["status"]["storage"]["shared"] = {"className": "cephfs"}
    xr = load_yaml(EXAMPLES / "llm-llmd.yaml")[0]
    out = settle(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            **llmd_images(),
        ),
        control_plane(xr, [], cluster),
    )
    assert out.fatal is None, out.fatal
    serving = next(c for c in out.conditions if c.type == "Serving")
    assert (serving.status, serving.reason) == ("False", "Downloading")
