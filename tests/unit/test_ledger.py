"""Each cluster's ledger (function/cluster/ledger.py): a model's Usage of its cluster carries
what the other models read of it, and reading it gives the same answers as reading the model whole.

The entry round-trips to the same Peer as the LLMInference it was written from, whatever the
LLMInference holds; a Usage being deleted, forged or garbled is skipped; first come first
served holds; the requirements select exactly the cluster's ledger and its own models; no
secret and no field the readers do not need is ever written; and a reconcile reading the
ledger decides exactly what it decides reading the same models whole.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    control_plane,
    engine_image,
    ledger_usage,
    load_yaml,
    request,
    run,
    select,
    settle,
    simulator_image,
)
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from function.cluster import ledger, peers
from function.cluster.peers import REQUIREMENT as NAMESPACE
from function.cluster.target import REQUIREMENT as CLUSTER
from function.compose import compose
from function.keys import CLUSTER_USAGE
from function.outcome import Inputs, Outcome

AWS = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
API = "inference.devopstoolkit.ai/v1alpha1"


def claim(
    name: str = "m",
    model: str = "Qwen/Qwen2.5-1.5B-Instruct",
    created: str | None = "2026-06-01T00:00:00Z",
    status: dict[str, Any] | None = None,
    **params: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "a-team"}
    if created:
        metadata["creationTimestamp"] = created
    xr: dict[str, Any] = {
        "apiVersion": API,
        "kind": "LLMInference",
        "metadata": metadata,
        "spec": {"parameters": {"model": model, "clusterRef": {"name": "inference-aws"}, **params}},
    }
    if status is not None:
        xr["status"] = status
    return xr


def running(
    name: str,
    gpus: int,
    most: int,
    created: str,
    model: str = "Qwen/Qwen2.5-0.5B-Instruct",
    **params: Any,
) -> dict[str, Any]:
    """A model (another than the claim's) whose function has published its plan."""
    return claim(
        name,
        model=model,
        created=created,
        status={"plan": {"gpus": gpus}, "replicas": {"max": most}, "servedModelNames": [model]},
        **params,
    )


def own_model(xr: dict[str, Any], cluster: str = "inference-aws") -> dict[str, Any]:
    """`xr` as one of `cluster`'s own models (spec.parameters.models): its controller."""
    xr = copy.deepcopy(xr)
    xr["metadata"]["ownerReferences"] = [
        {"apiVersion": API, "kind": "InferenceCluster", "name": cluster, "controller": True}
    ]
    return xr


def ledger_of(xr: dict[str, Any], others: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """What Crossplane returns for the two requirements of a model on inference-aws."""
    world = control_plane(xr, others, AWS)
    asked = ledger.requirements("a-team", "inference-aws", AWS)
    return {name: select(r, world) for name, r in asked.items()}


def reconcile(xr: dict[str, Any], others: list[dict[str, Any]]) -> Outcome:
    """The model's reconcile beside `others` on inference-aws, as Crossplane runs it, and
    the steady one after it on the ledger alone (conftest.settle)."""
    return settle(
        Inputs(xr=xr, engine_image=engine_image(), simulator_image=simulator_image()),
        control_plane(xr, others, AWS),
    )


def compose_with(xr: dict[str, Any], required: dict[str, list[Any]]) -> Outcome:
    return compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            required={CLUSTER: [AWS], **required},
        )
    )


def answers(out: Outcome) -> dict[str, Any]:
    """What a reconcile decides: the status it publishes, its conditions and messages, and
    every object it composes."""
    return {
        "fatal": out.fatal,
        "status": out.status,
        "conditions": out.conditions,
        "warnings": out.warnings,
        "notes": out.notes,
        "resources": out.resources,
    }


# --------------------------------------------------------------------------- the entry

# Values as a claim or a status may hold them: valid ones, edge cases and junk.
junk = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 9) | st.text(max_size=6)
counts = st.sampled_from([1, 2, 4, 8, 2.0, 0, -1, 1.5, True, "2"]) | junk
names = st.sampled_from(["", "qwen", "qwen-7b", "Qwen/Qwen2.5-7B-Instruct"]) | junk
name_lists = st.lists(names, max_size=3) | junk
side = st.fixed_dictionaries({}, optional={"gpu": counts, "replicas": counts}) | junk
parameters = st.fixed_dictionaries(
    {},
    optional={
        "model": names,
        "aliases": name_lists,
        "gpu": counts,
        "replicas": counts,
        "autoscaling": st.fixed_dictionaries({}, optional={"maxReplicas": counts}) | junk,
        "disaggregation": st.fixed_dictionaries({}, optional={"prefill": side, "decode": side})
        | junk,
        "targetNamespace": names,
        "engine": st.fixed_dictionaries({}, optional={"simulate": junk}) | junk,
        "ingressHost": names,
        "clusterRef": st.fixed_dictionaries({}, optional={"name": names}) | junk,
        "clusterSelector": st.none() | st.just({"matchLabels": {"team": "a"}}) | junk,
    },
)
statuses = (
    st.fixed_dictionaries(
        {},
        optional={
            "plan": st.fixed_dictionaries(
                {},
                optional={
                    "gpus": counts,
                    "disaggregation": st.fixed_dictionaries({}, optional={"gpus": counts}) | junk,
                },
            )
            | junk,
            "replicas": st.fixed_dictionaries({}, optional={"max": counts}) | junk,
            "servedModelNames": name_lists,
            "placement": st.fixed_dictionaries({}, optional={"cluster": names}) | junk,
        },
    )
    | st.none()
)
xrs = st.fixed_dictionaries(
    {
        "apiVersion": st.just(API),
        "kind": st.just("LLMInference"),
        "metadata": st.fixed_dictionaries(
            {"name": names, "namespace": st.just("a-team")},
            optional={"creationTimestamp": names | st.just("2026-01-01T00:00:00Z")},
        ),
        "spec": st.fixed_dictionaries({"parameters": parameters}) | junk,
    },
    optional={"status": statuses},
)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xr=xrs)
def test_an_entry_reads_as_the_model_it_was_written_from(xr: dict[str, Any]) -> None:
    """Whatever the LLMInference holds, the entry written from it (with its status) reads
    back as the same Peer, on the same cluster; and reducing it again changes nothing."""
    back = ledger.read_entry(ledger.entry(xr, xr.get("status")))
    if back is None:  # no name: no entry, and no peer either
        assert peers._peer(xr) is None
        return
    assert peers._peer(back) == peers._peer(xr)
    assert peers.cluster_of(back) == peers.cluster_of(xr)
    assert ledger.minimal(back) == back
    assert ledger.entry(back, back.get("status")) == ledger.entry(xr, xr.get("status"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(xr=xrs, status=statuses)
def test_the_entry_holds_the_status_this_reconcile_publishes(xr: dict[str, Any], status) -> None:
    """The entry says what the reconcile that writes it publishes, not the status the model
    had before it."""
    published = {**xr, "status": status}
    back = ledger.read_entry(ledger.entry(xr, status))
    if back is None:
        assert peers._peer(published) is None
        return
    assert peers._peer(back) == peers._peer(published)
    assert peers.cluster_of(back) == peers.cluster_of(published)


@pytest.mark.parametrize(
    "xr",
    [
        running("a", 4, 1, "2026-01-01T00:00:00Z", ingressHost="a.example.com"),
        claim("b", aliases=["chat", "qwen"], autoscaling={"maxReplicas": 3}),
        claim("c", engine={"simulate": True}, replicas=2, targetNamespace="team-b"),
        claim("d", created=None, gpu=2),
        claim(
            "e",
            model="openai/gpt-oss-120b",
            disaggregation={"prefill": {"replicas": 2, "gpu": 1}, "decode": {"gpu": 4}},
            status={"plan": {"gpus": 4, "disaggregation": {"gpus": 6}}, "replicas": {"max": 1}},
        ),
        {
            **claim("f", status={"placement": {"cluster": "inference-aws"}}),
            "spec": {"parameters": {"model": "x/y", "clusterSelector": {"matchLabels": {}}}},
        },
    ],
    ids=["running", "autoscaled", "simulated", "no time", "disaggregated", "placed"],
)
def test_a_ledger_usage_reads_as_its_model(xr: dict[str, Any]) -> None:
    """The Usage a model composes (function/backends/resources.py, stamped by the function, with
    the metadata Crossplane adds) reads back as the model, in its cluster's ledger only."""
    usage = ledger_usage(xr)
    assert usage is not None
    assert usage["metadata"]["labels"][ledger.CLUSTER_LABEL] == "inference-aws"
    back = ledger.from_usage(usage, "inference-aws")
    assert back is not None and peers._peer(back) == peers._peer(xr)
    assert ledger.from_usage(usage, "inference-gcp") is None


# Every field an LLMInference may carry that the ledger must not: each holds this value.
SECRET = "sk-secret0123456789abcdef"
UNRELATED = {
    "hfTokenSecretRef": {"name": SECRET, "key": SECRET},
    "apiKeySecretRef": {"name": SECRET, "key": SECRET},
    "engine": {
        "simulate": True,
        "extraArgs": ["--api-key", SECRET],
        "env": [{"name": "HF_TOKEN", "value": SECRET}],
        "image": f"example.com/{SECRET}:1",
    },
    "storage": {"size": SECRET},
    "autoscaling": {"maxReplicas": 2, "metric": SECRET},
    "disaggregation": {"prefill": {"gpu": 1, "extraArgs": [SECRET]}, "decode": {SECRET: SECRET}},
    "clusterSelector": {"matchLabels": {"team": SECRET}},
    "providerConfigName": SECRET,
}
ALLOWED = {
    ("metadata", "name"),
    ("metadata", "creationTimestamp"),
    ("spec", "parameters", "model"),
    ("spec", "parameters", "aliases"),
    ("spec", "parameters", "gpu"),
    ("spec", "parameters", "replicas"),
    ("spec", "parameters", "autoscaling", "maxReplicas"),
    ("spec", "parameters", "disaggregation"),
    ("spec", "parameters", "disaggregation", "prefill", "gpu"),
    ("spec", "parameters", "disaggregation", "prefill", "replicas"),
    ("spec", "parameters", "disaggregation", "decode", "gpu"),
    ("spec", "parameters", "disaggregation", "decode", "replicas"),
    ("spec", "parameters", "targetNamespace"),
    ("spec", "parameters", "engine", "simulate"),
    ("spec", "parameters", "ingressHost"),
    ("spec", "parameters", "clusterRef", "name"),
    ("spec", "parameters", "clusterSelector"),
    ("status", "plan", "gpus"),
    ("status", "plan", "disaggregation", "gpus"),
    ("status", "replicas", "max"),
    ("status", "servedModelNames"),
    ("status", "placement", "cluster"),
}


def _leaves(obj: Any, path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    if isinstance(obj, dict) and obj:
        return {leaf for k, v in obj.items() for leaf in _leaves(v, (*path, k))}
    return {path}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    xr=xrs,
    extra=st.dictionaries(st.sampled_from(sorted(UNRELATED)), st.just(None), max_size=9),
    status_extra=st.booleans(),
)
def test_no_secret_nor_unrelated_field_is_ever_written(
    xr: dict[str, Any], extra: dict[str, Any], status_extra: bool
) -> None:
    xr = copy.deepcopy(xr)
    xr["metadata"] |= {
        "labels": {"team": SECRET},
        "annotations": {"note": SECRET},
        "uid": SECRET,
    }
    if isinstance(xr["spec"], dict):
        xr["spec"]["parameters"] |= {k: copy.deepcopy(UNRELATED[k]) for k in extra}
        xr["spec"][SECRET] = SECRET
    status = xr.get("status") if isinstance(xr.get("status"), dict) else {}
    if status_extra:
        plan = status.get("plan") if isinstance(status.get("plan"), dict) else {}
        status = {
            **status,
            "endpoint": SECRET,
            "conditions": [{"message": SECRET}],
            "plan": {**plan, "engineArgs": [SECRET], "why": SECRET},
        }
    text = ledger.entry(xr, status)
    assert SECRET not in text
    assert _leaves(json.loads(text)) <= ALLOWED | {("metadata",), ("spec", "parameters")}


def test_the_composed_usage_is_the_models_entry() -> None:
    """The Usage compose composes carries the cluster label and the entry of exactly what
    the reconcile publishes (its plan, the replicas the budget allows)."""
    xr = claim(autoscaling={"minReplicas": 1, "maxReplicas": 4})
    older = running("older", 4, 1, "2026-01-01T00:00:00Z")
    out = reconcile(xr, [older])
    assert out.fatal is None, out.fatal
    usage = out.resources[CLUSTER_USAGE]
    assert usage["metadata"]["labels"][ledger.CLUSTER_LABEL] == "inference-aws"
    entry = json.loads(usage["metadata"]["annotations"][ledger.ENTRY_ANNOTATION])
    assert entry == ledger.minimal(xr, out.status)
    assert entry["status"]["replicas"] == {"max": 4}
    assert entry["status"]["plan"] == {"gpus": 1}


def test_a_kept_usage_says_what_the_model_publishes_now() -> None:
    """While its cluster is not ready the model keeps what runs, its Usage too: the entry
    then says what the reconcile publishes (no plan), as the model's own status does."""
    xr = running("m", 1, 4, "2026-06-01T00:00:00Z")
    usage = ledger_usage(xr)
    assert usage is not None
    not_ready = copy.deepcopy(AWS)
    del not_ready["status"]["apps"]
    out = compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            observed={CLUSTER_USAGE: usage},
            required={CLUSTER: [not_ready]},
        )
    )
    kept = out.resources[CLUSTER_USAGE]
    assert kept["spec"] == usage["spec"]
    assert kept["metadata"]["labels"][ledger.CLUSTER_LABEL] == "inference-aws"
    entry = json.loads(kept["metadata"]["annotations"][ledger.ENTRY_ANNOTATION])
    assert entry == ledger.minimal(xr, out.status) and "status" not in entry


def test_a_model_placed_nowhere_leaves_every_ledger() -> None:
    """A selector that matches no cluster any more: the model's kept Usage loses the label,
    as its status loses status.placement.cluster, so it counts on no cluster."""
    xr = claim(status={"placement": {"cluster": "inference-aws"}})
    xr["spec"]["parameters"].pop("clusterRef")
    xr["spec"]["parameters"]["clusterSelector"] = {"matchLabels": {"team": "nobody"}}
    usage = ledger_usage(xr)
    assert usage is not None
    out = compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            observed={CLUSTER_USAGE: usage},
            required={"inference-clusters": [], NAMESPACE: [xr]},
        )
    )
    kept = out.resources[CLUSTER_USAGE]
    assert ledger.CLUSTER_LABEL not in kept["metadata"]["labels"]
    assert (
        peers.cluster_of(json.loads(kept["metadata"]["annotations"][ledger.ENTRY_ANNOTATION]))
        is None
    )


# --------------------------------------------------------------------------- reading it


def test_a_usage_being_deleted_is_not_read() -> None:
    gone = ledger_usage(running("gone", 4, 2, "2026-01-01T00:00:00Z"))
    assert gone is not None
    assert ledger.from_usage(gone, "inference-aws") is not None
    gone["metadata"]["deletionTimestamp"] = "2026-06-02T00:00:00Z"
    assert ledger.from_usage(gone, "inference-aws") is None
    found = ledger.on_cluster({ledger.LEDGER_REQUIREMENT: [gone]}, "inference-aws", "m")
    assert found == []


def test_a_model_being_deleted_frees_its_gpus() -> None:
    """A model being deleted (its Usage with it) holds nothing: the next one gets them all."""
    xr = claim(autoscaling={"minReplicas": 1, "maxReplicas": 8})
    big = running("big", 4, 1, "2026-01-01T00:00:00Z")
    capped = reconcile(xr, [big])
    assert capped.fatal is None and capped.status["replicas"]["max"] == 4
    big["metadata"]["deletionTimestamp"] = "2026-06-02T00:00:00Z"
    free = reconcile(xr, [big])
    assert free.fatal is None and free.status["replicas"]["max"] == 8


@pytest.mark.parametrize(
    ("case", "change"),
    [
        ("no controller", lambda u: u["metadata"].pop("ownerReferences")),
        (
            "controlled by another model",
            lambda u: u["metadata"]["ownerReferences"][0].update(name="someone-else"),
        ),
        (
            "controlled by another kind",
            lambda u: u["metadata"]["ownerReferences"][0].update(kind="InferenceCluster"),
        ),
        (
            "not the controller",
            lambda u: u["metadata"]["ownerReferences"][0].update(controller=False),
        ),
        (
            "in another ledger",
            lambda u: u["metadata"]["labels"].update({ledger.CLUSTER_LABEL: "x"}),
        ),
        ("no entry", lambda u: u["metadata"]["annotations"].pop(ledger.ENTRY_ANNOTATION)),
        (
            "an entry of a model on another cluster",
            lambda u: u["metadata"]["annotations"].update(
                {
                    ledger.ENTRY_ANNOTATION: u["metadata"]["annotations"][
                        ledger.ENTRY_ANNOTATION
                    ].replace('"inference-aws"', '"inference-gcp"')
                }
            ),
        ),
    ],
)
def test_an_entry_not_the_models_own_is_not_read(case: str, change: Any) -> None:
    """Only a Usage Crossplane composed for the model its entry names, in that cluster's
    ledger, counts: another tenant's hand-made Usage cannot speak for a model."""
    usage = ledger_usage(running("a", 4, 2, "2026-01-01T00:00:00Z"))
    assert usage is not None
    change(usage)
    assert ledger.on_cluster({ledger.LEDGER_REQUIREMENT: [usage]}, "inference-aws", "m") == [], case


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(max_size=200)
    | st.builds(
        json.dumps,
        st.recursive(
            junk, lambda i: st.lists(i) | st.dictionaries(st.text(max_size=12), i), max_leaves=20
        ),
    )
    | st.sampled_from(["[" * 3000, "{" * 3000, "1" * 5000, "1e999", "NaN", "null", '"x"'])
    | junk,
    labels=junk | st.dictionaries(st.text(max_size=8), junk, max_size=3),
    refs=junk | st.lists(junk | st.dictionaries(st.text(max_size=8), junk), max_size=2),
)
def test_a_garbled_entry_is_skipped_never_an_error(text: Any, labels: Any, refs: Any) -> None:
    usage = {
        "metadata": {
            "labels": labels,
            "annotations": {ledger.ENTRY_ANNOTATION: text},
            "ownerReferences": refs,
        }
    }
    xr = ledger.read_entry(text)
    assert xr is None or isinstance(xr["metadata"]["name"], str)
    if xr is not None:
        peers._peer(xr), peers.cluster_of(xr)
    ledger.from_usage(usage, "inference-aws")
    ledger.on_cluster(
        {ledger.LEDGER_REQUIREMENT: [usage, text], ledger.CLUSTER_MODELS_REQUIREMENT: [text]},
        "inference-aws",
        "m",
    )


def test_the_function_answers_whatever_the_ledger_holds() -> None:
    """Through the gRPC entry point, junk in both requirements: an answer, not a crash."""
    xr = claim()
    good = ledger_usage(running("a", 1, 1, "2026-01-01T00:00:00Z"))
    junk_usage = copy.deepcopy(good)
    junk_usage["metadata"]["annotations"][ledger.ENTRY_ANNOTATION] = '{"metadata":{"name":'
    rsp = run(
        request(
            xr,
            required={
                CLUSTER: [AWS],
                ledger.LEDGER_REQUIREMENT: [good, junk_usage, {"kind": "Usage"}, {}],
                ledger.CLUSTER_MODELS_REQUIREMENT: [{"metadata": {"name": 3}}, {}],
            },
        )
    )
    fatal = [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]
    assert not fatal, fatal
    assert len(rsp.desired.resources) > 0
    budget = next(c.message for c in rsp.conditions if c.type == "GPUBudget")
    assert "(a 1)" in budget, "the good entry is read through the adapter"


CREATED = [
    ("b", "2026-01-01T00:00:00Z"),
    ("a", "2026-01-01T00:00:00Z"),
    ("late", "2026-09-01T00:00:00Z"),
    ("early", "2025-01-01T00:00:00Z"),
    ("untimed", None),
    ("own", "2025-06-01T00:00:00Z"),
]


@pytest.mark.parametrize("rotate", range(len(CREATED)))
def test_first_come_first_served(rotate: int) -> None:
    """Whatever order Crossplane lists them in, the ledger's models and the cluster's own
    come out oldest first (creation time, then name; a model with no time last), as the
    whole namespace read gave them."""
    order = CREATED[rotate:] + CREATED[:rotate]
    xrs = [claim(n, created=t) for n, t in order]
    xrs = [own_model(x) if x["metadata"]["name"] == "own" else x for x in xrs]
    required = ledger_of(claim(), xrs)
    required[ledger.LEDGER_REQUIREMENT].reverse()
    found = ledger.on_cluster(required, "inference-aws", "m")
    assert [p.name for p in found] == ["early", "own", "a", "b", "late", "untimed"]
    assert found == peers.on_cluster(xrs, "inference-aws", "m")


def test_the_first_model_keeps_its_gpus_whoever_asks_later() -> None:
    """The older model holds its GPUs; the later one gets what is left, and a model created
    after it that already runs keeps what it was allowed."""
    first = running("first", 4, 1, "2026-01-01T00:00:00Z")
    xr = claim(autoscaling={"minReplicas": 1, "maxReplicas": 8})
    out = reconcile(xr, [first])
    assert out.status["replicas"]["max"] == 4
    later = running("later", 1, 2, "2026-12-01T00:00:00Z")
    out = reconcile(xr, [first, later])
    assert out.status["replicas"]["max"] == 2


# --------------------------------------------------------------------------- asking for it


def test_a_model_on_a_cluster_asks_for_its_ledger_and_its_own_models_only() -> None:
    xr = claim()
    out = compose_with(xr, {})
    assert NAMESPACE not in out.requirements, "no longer the whole namespace"
    assert out.requirements[ledger.LEDGER_REQUIREMENT] == {
        "apiVersion": "protection.crossplane.io/v1beta1",
        "kind": "Usage",
        "matchLabels": {"inference.devopstoolkit.ai/cluster": "inference-aws"},
        "namespace": "a-team",
    }
    assert out.requirements[ledger.CLUSTER_MODELS_REQUIREMENT] == {
        "apiVersion": API,
        "kind": "LLMInference",
        "matchLabels": {"crossplane.io/composite": "inference-aws"},
        "namespace": "a-team",
    }


@pytest.mark.parametrize(
    ("labels", "composite"),
    [
        ({}, "inference-aws"),
        ({"crossplane.io/composite": "inference-aws"}, "inference-aws"),
        ({"crossplane.io/composite": "platform"}, "platform"),
        ({"crossplane.io/composite": 7}, "inference-aws"),
        ({"crossplane.io/composite": "not a label value"}, "inference-aws"),
    ],
    ids=["no label", "its own name", "composed by platform", "junk", "no label value"],
)
def test_the_clusters_own_models_are_selected_by_its_composite_label(
    labels: dict[str, Any], composite: str
) -> None:
    """Crossplane labels everything a cluster composes, its models too, with the cluster's
    own crossplane.io/composite label: its name, or its root's when something composes it."""
    cluster = copy.deepcopy(AWS)
    cluster["metadata"]["labels"] = labels
    asked = ledger.requirements("a-team", "inference-aws", cluster)
    assert asked[ledger.CLUSTER_MODELS_REQUIREMENT]["matchLabels"] == {
        ledger.COMPOSITE_LABEL: composite
    }
    assert asked[ledger.LEDGER_REQUIREMENT]["matchLabels"] == {
        ledger.CLUSTER_LABEL: "inference-aws"
    }


def test_placement_and_unlabellable_clusters_still_read_the_namespace() -> None:
    """A selector claim already reads every model of the namespace to choose its cluster;
    a cluster whose name no label can hold has no ledger: both read the namespace whole."""
    long = "c" * 64
    xr = claim()
    xr["spec"]["parameters"]["clusterRef"] = {"name": long}
    cluster = copy.deepcopy(AWS)
    cluster["metadata"]["name"] = long
    other = running("other", 2, 1, "2026-01-01T00:00:00Z", clusterRef={"name": long})
    out = compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            required={CLUSTER: [cluster], NAMESPACE: [xr, other]},
        )
    )
    assert ledger.LEDGER_REQUIREMENT not in out.requirements
    assert NAMESPACE in out.requirements
    assert "other" in next(c.message for c in out.conditions if c.type == "GPUBudget")
    usage = out.resources[CLUSTER_USAGE]
    assert ledger.CLUSTER_LABEL not in usage["metadata"]["labels"]


def test_a_clusters_own_model_is_read_whole_and_before_any_entry_of_its_name() -> None:
    own = own_model(running("own", 4, 1, "2026-01-01T00:00:00Z"))
    stale = ledger_usage(running("own", 1, 1, "2026-01-01T00:00:00Z"))
    required = {
        ledger.CLUSTER_MODELS_REQUIREMENT: [own],
        ledger.LEDGER_REQUIREMENT: [stale],
    }
    (found,) = ledger.on_cluster(required, "inference-aws", "m")
    assert found == peers._peer(own)


# --------------------------------------------------------------------------- same answers

SCENARIOS = {
    "budget capped by older running models": (
        claim(autoscaling={"minReplicas": 1, "maxReplicas": 8}),
        [running("a", 2, 1, "2026-01-01T00:00:00Z"), running("b", 1, 2, "2026-02-01T00:00:00Z")],
    ),
    "an older model without a plan yet": (
        claim(replicas=2, gpu=4),
        [claim("a-first", model="Qwen/Qwen2.5-14B-Instruct", created="2026-06-01T00:00:00Z")],
    ),
    "a younger running model keeps its GPUs": (
        claim(autoscaling={"minReplicas": 1, "maxReplicas": 8}),
        [running("young", 4, 1, "2026-12-01T00:00:00Z")],
    ),
    "simulated models hold no GPU": (
        claim(autoscaling={"minReplicas": 1, "maxReplicas": 8}),
        [
            running(f"sim-{i}", 1, 3, "2026-01-01T00:00:00Z", engine={"simulate": True})
            for i in range(4)
        ],
    ),
    "an alias an older model answers to": (
        claim(aliases=["chat"]),
        [
            claim(
                "first",
                model="Qwen/Qwen2.5-0.5B-Instruct",
                aliases=["chat"],
                created="2026-01-01T00:00:00Z",
            )
        ],
    ),
    "a name a younger model already serves": (
        claim(aliases=["chat"]),
        [
            claim(
                "young",
                created="2026-12-01T00:00:00Z",
                status={"servedModelNames": ["Qwen/Qwen2.5-0.5B-Instruct", "chat"]},
                model="Qwen/Qwen2.5-0.5B-Instruct",
            )
        ],
    ),
    "a host an older model holds": (
        claim(ingressHost="chat.example.com"),
        [
            claim(
                "first",
                model="Qwen/Qwen2.5-0.5B-Instruct",
                ingressHost="chat.example.com",
                created="2026-01-01T00:00:00Z",
            )
        ],
    ),
    "models on other clusters and in another namespace": (
        claim(autoscaling={"minReplicas": 1, "maxReplicas": 8}),
        [
            running("gcp", 4, 2, "2026-01-01T00:00:00Z", clusterRef={"name": "inference-gcp"}),
            {
                **running("elsewhere", 4, 2, "2026-01-01T00:00:00Z"),
                "metadata": {"name": "elsewhere", "namespace": "b-team"},
            },
        ],
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_reading_the_ledger_decides_what_reading_the_models_whole_does(scenario: str) -> None:
    """The same models read from the ledger (their Usages) and whole (as the namespace gave
    them): the same peers in the same order; and the reconcile after the model's first one,
    once its own entry is in the ledger, decides on the ledger alone exactly what the first
    decided on the whole namespace (conftest.settle checks it)."""
    xr, others = SCENARIOS[scenario]
    whole = [x for x in others if x["metadata"]["namespace"] == "a-team"]
    assert ledger.on_cluster(ledger_of(xr, others), "inference-aws", "m") == peers.on_cluster(
        [xr, *whole], "inference-aws", "m"
    )
    out = reconcile(xr, others)
    assert out.fatal is None or "already" in out.fatal or "fit" in out.fatal, out.fatal


# --------------------------------------------------------------------------- confirming


def test_a_first_reconcile_confirms_on_the_whole_namespace() -> None:
    """Two claims applied together, reconciled at once: neither is in the ledger yet. Each
    decides on the whole namespace, as before the ledger: the older fits, the younger is
    refused; on the ledger alone both would have taken the whole pool, and then refused
    each other for good (each counting the other's published GPUs)."""
    a = claim("a", created="2026-06-01T00:00:00Z", replicas=2, gpu=4)
    b = claim("b", "Qwen/Qwen2.5-7B-Instruct", created="2026-06-01T00:00:01Z", replicas=2, gpu=4)
    for xr in (a, b):
        alone = compose_with(xr, ledger_of(xr, []))
        assert alone.fatal is None, "the ledger alone lets it in"
        assert alone.requirements[NAMESPACE] == {
            "apiVersion": API,
            "kind": "LLMInference",
            "namespace": "a-team",
        }, "a model not in its ledger yet confirms on the namespace"
    assert reconcile(a, [b]).fatal is None
    refused = reconcile(b, [a])
    assert refused.fatal is not None and "(a 8)" in refused.fatal, refused.fatal


def test_a_refusal_is_confirmed_not_fatal_before() -> None:
    """Crossplane stops asking at a fatal result: a refusal decided on the ledger asks for
    the namespace instead of being fatal, and the confirmed call refuses."""
    first = running("first", 4, 2, "2026-01-01T00:00:00Z")
    xr = claim(replicas=2, gpu=4)
    on_ledger = compose_with(xr, ledger_of(xr, [first]))
    assert on_ledger.fatal is None and NAMESPACE in on_ledger.requirements
    confirmed = compose_with(xr, {**ledger_of(xr, [first]), NAMESPACE: [xr, first]})
    assert confirmed.fatal is not None and "(first 8)" in confirmed.fatal
    assert NAMESPACE in confirmed.requirements, "asked again: the requirements settle"


def entry_of(**changes: Any) -> dict[str, Any]:
    """The observed Usage of `held` (below) with its entry changed."""
    xr = copy.deepcopy(HELD)
    for path, value in changes.items():
        *head, last = path.split("__")
        node = xr
        for key in head:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    usage = ledger_usage(xr)
    assert usage is not None
    return usage


HELD = running("m", 1, 4, "2026-06-01T00:00:00Z", model="Qwen/Qwen2.5-1.5B-Instruct")
HELD["spec"]["parameters"] |= {"aliases": ["chat"], "ingressHost": "m.example.com"}
HELD["status"]["servedModelNames"] = ["Qwen/Qwen2.5-1.5B-Instruct", "chat"]


@pytest.mark.parametrize(
    ("case", "observed", "now", "confirm"),
    [
        ("the same", entry_of(), {}, False),
        ("fewer replicas", entry_of(), {"status__replicas__max": 2}, False),
        ("fewer names", entry_of(), {"status__servedModelNames": ["chat"]}, False),
        ("no host now", entry_of(), {"spec__parameters__ingressHost": None}, False),
        ("simulated now", entry_of(), {"spec__parameters__engine": {"simulate": True}}, False),
        ("no entry yet", None, {}, True),
        (
            "a garbled entry",
            {"metadata": {"annotations": {ledger.ENTRY_ANNOTATION: "{"}}},
            {},
            True,
        ),
        ("another model's entry", entry_of(metadata__name="x"), {}, True),
        ("more replicas", entry_of(), {"status__replicas__max": 5}, True),
        ("more GPUs per replica", entry_of(), {"status__plan__gpus": 2}, True),
        ("no GPUs before", entry_of(spec__parameters__engine={"simulate": True}), {}, True),
        (
            "a new name",
            entry_of(),
            {"status__servedModelNames": ["Qwen/Qwen2.5-1.5B-Instruct", "other"]},
            True,
        ),
        ("another host", entry_of(), {"spec__parameters__ingressHost": "n.example.com"}, True),
        ("a host at last", entry_of(spec__parameters__ingressHost=None), {}, True),
        ("another namespace", entry_of(), {"spec__parameters__targetNamespace": "x"}, True),
        (
            "another cluster",
            entry_of(),
            {"spec__parameters__clusterRef": {"name": "inference-gcp"}},
            True,
        ),
    ],
)
def test_what_is_confirmed_on_the_whole_namespace(
    case: str, observed: Any, now: dict[str, Any], confirm: bool
) -> None:
    """A gain (anything more than the model's own entry says it holds) is confirmed; the
    same, or less, is decided on the ledger."""
    xr = copy.deepcopy(HELD)
    for path, value in now.items():
        *head, last = path.split("__")
        node = xr
        for key in head:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value
    assert ledger.to_confirm(observed, xr, xr["status"], refused=False) is confirm, case
    assert ledger.to_confirm(observed, xr, xr["status"], refused=True), "a refusal, always"


def test_the_adapter_reads_only_what_the_ledger_needs_of_a_usage() -> None:
    """A Usage as the API server returns it (managedFields, status, spec) is read as the
    metadata the ledger needs; any other required resource whole."""
    from crossplane.function import resource

    from function import fn

    usage = ledger_usage(running("a", 1, 1, "2026-01-01T00:00:00Z"))
    assert usage is not None
    usage["metadata"] |= {
        "uid": "u",
        "resourceVersion": "7",
        "finalizers": ["usage.apiextensions.crossplane.io"],
        "managedFields": [{"manager": "crossplane", "fieldsV1": {"f:spec": {"f:of": {}}}}] * 20,
    }
    usage["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    struct = resource.dict_to_struct(usage)
    read = fn._required(ledger.LEDGER_REQUIREMENT, struct)
    assert read == {"metadata": {k: usage["metadata"][k] for k in ledger.READ_METADATA[:3]}}
    assert ledger.from_usage(read, "inference-aws") == ledger.from_usage(usage, "inference-aws")
    assert fn._required("inference-cluster", struct) == fn.struct_to_dict(struct)
    assert fn._required(ledger.LEDGER_REQUIREMENT, resource.dict_to_struct({"metadata": 3})) == {}
