"""Placement by clusterSelector: the model lands on the right cluster in each situation (none
fits, one fits, ties, cluster lost, capacity full, sticky, claim changed), and
status.placement says why for every matching cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import EXAMPLES, engine_image, load_yaml, simulator_image

from function.cluster import placement
from function.cluster.peers import REQUIREMENT as PEERS
from function.cluster.place import PLACEMENT_REQUIREMENT
from function.compose import compose
from function.limits import GPU_TYPES
from function.outcome import Inputs, Outcome

AWS = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
SELECTOR = {"matchLabels": {"team": "a"}}


def cluster(
    name: str,
    gpu: str = "l4",
    per_node: int = 4,
    max_nodes: int = 2,
    *,
    ready: bool = True,
    vllm: bool = True,
    lws: bool = False,
) -> dict[str, Any]:
    """An InferenceCluster as Crossplane returns it: labelled team=a, with status."""
    c = copy.deepcopy(AWS)
    c["metadata"] = {"name": name, "namespace": "a-team", "labels": {"team": "a"}}
    st = c["status"]
    st["gpu"].update(
        type=gpu, memoryGiB=GPU_TYPES[gpu].memory_gib, perNode=per_node, maxNodes=max_nodes
    )
    st["gpu"].pop("allocatable", None)
    st["gpu"].pop("instanceType", None)
    st["apps"]["vllm"] = vllm
    st["apps"]["lws"] = lws
    st["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    st["providerConfigName"] = name
    st["modelsProviderConfig"] = {"name": name, "scoped": False}
    return c


def claim(model: str = "Qwen/Qwen2.5-7B-Instruct", name: str = "m", **params: Any) -> dict:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {
            "name": name,
            "namespace": "a-team",
            "creationTimestamp": "2026-11-02T00:00:00Z",
        },
        "spec": {"parameters": {"model": model, "clusterSelector": SELECTOR, **params}},
    }


def running(name: str, on: str, gpus: int, most: int) -> dict[str, Any]:
    """A model already placed on `on` (earlier), holding gpus x most."""
    xr = claim(f"example/{name}", name)
    xr["metadata"]["creationTimestamp"] = "2026-11-01T00:00:00Z"
    xr["status"] = {"placement": {"cluster": on}, "plan": {"gpus": gpus}, "replicas": {"max": most}}
    return xr


def run(xr: dict, clusters: list[dict], others: list[dict] | None = None) -> Outcome:
    return compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            required={
                PLACEMENT_REQUIREMENT: clusters,
                PEERS: [xr, *(others or [])],
                "inference-cluster": [],
            },
        )
    )


def chosen(out: Outcome) -> str | None:
    return (out.placement or {}).get("cluster")


def verdicts(out: Outcome) -> dict[str, str]:
    return {c["name"]: c["reason"] for c in (out.placement or {}).get("candidates", [])}


# (case, claim params, clusters, models already placed, chosen cluster or None, reasons)
CASES: list[tuple[str, dict, list, list, str | None, dict[str, str]]] = [
    (
        "one fits: the other's GPU is too small",
        {"model": "Qwen/Qwen2.5-72B-Instruct"},
        [cluster("small", "l4"), cluster("big", "h100", 8)],
        [],
        "big",
        {"small": "4 x l4 (21.95 GiB) per node: Qwen/Qwen2.5-72B-Instruct needs about 158 GiB"},
    ),
    (
        "smallest GPU that fits first",
        {},
        [cluster("h100s", "h100", 8), cluster("l4s", "l4")],
        [],
        "l4s",
        {"h100s": "fits, but l4s comes first (smallest GPU that fits, then most free GPUs, "},
    ),
    (
        "same GPU: most free GPUs first",
        {},
        [cluster("a", "l4"), cluster("b", "l4", max_nodes=4)],
        [],
        "b",
        {"a": "fits, but b comes first"},
    ),
    (
        "tie: the name decides",
        {},
        [cluster("zeta", "l4"), cluster("alpha", "l4")],
        [],
        "alpha",
        {"zeta": "fits, but alpha comes first"},
    ),
    (
        "capacity full on one, the other has room",
        {"replicas": 2},
        [cluster("full", "l4", max_nodes=1), cluster("room", "l4", max_nodes=1)],
        [("busy", "full", 1, 3)],
        "room",
        {"full": "needs 2 GPUs (2 x 1), 1 of 4 free"},
    ),
    (
        "capacity full everywhere: none",
        {"replicas": 2},
        [cluster("full", "l4", max_nodes=1)],
        [("busy", "full", 2, 2)],
        None,
        {"full": "needs 2 GPUs (2 x 1), 0 of 4 free"},
    ),
    (
        "not Ready and without vLLM: skipped",
        {},
        [cluster("down", ready=False), cluster("novllm", vllm=False), cluster("up")],
        [],
        "up",
        {"down": "not Ready", "novllm": "InferenceCluster a-team/novllm does not run the vLLM"},
    ),
    (
        "none fits: every reason said",
        {"model": "moonshotai/Kimi-K2.5"},
        [cluster("l4s", "l4"), cluster("a100s", "a100-40gb", 8)],
        [],
        None,
        {"l4s": "4 x l4", "a100s": "8 x a100-40gb"},
    ),
    (
        "larger than a node: only where LeaderWorkerSet spans nodes",
        {"model": "moonshotai/Kimi-K2-Instruct"},
        [cluster("one-node", "h200", 8, 2), cluster("spans", "h200", 8, 2, lws=True)],
        [],
        "spans",
        {"one-node": "8 x h200 (139.81 GiB) per node: moonshotai/Kimi-K2-Instruct needs about"},
    ),
    (
        "no cluster matches",
        {},
        [],
        [],
        None,
        {},
    ),
    (
        # Gemma 3's sliding-window layers hold full-length KV with the hybrid KV cache manager
        # off: 27B then needs two H100s, and placement sizes it as the plan will.
        "the claim's vLLM arguments count: hybrid KV cache manager off",
        {
            "model": "google/gemma-3-27b-it",
            "engine": {"extraArgs": ["--disable-hybrid-kv-cache-manager"]},
        },
        [cluster("one", "h100", 1, 4), cluster("two", "h100", 2, 2)],
        [],
        "two",
        {"one": "1 x h100 (79.11 GiB) per node: google/gemma-3-27b-it needs about"},
    ),
    (
        "the same model with the manager on fits one H100",
        {"model": "google/gemma-3-27b-it"},
        [cluster("one", "h100", 1, 4), cluster("two", "h100", 2, 2)],
        [],
        "one",
        {"two": "fits, but one comes first"},
    ),
    (
        "simulated: needs no GPU, so the smallest GPU is fine",
        {"model": "Qwen/Qwen2.5-72B-Instruct", "engine": {"simulate": True}},
        [cluster("big", "h200", 8), cluster("small", "t4", 1)],
        [],
        "small",
        {},
    ),
]


@pytest.mark.parametrize(
    ("params", "clusters", "placed", "expected", "reasons"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_placement(params, clusters, placed, expected, reasons) -> None:
    others = [running(n, on, g, m) for n, on, g, m in placed]
    out = run(claim(**params), clusters, others)
    assert out.fatal is None, out.fatal
    assert chosen(out) == expected, out.placement
    got = verdicts(out)
    assert set(got) == {c["metadata"]["name"] for c in clusters}, "every cluster is explained"
    for name, start in reasons.items():
        assert got[name].startswith(start), (name, got[name])
    placement_cond = next(c for c in out.conditions if c.type == "Placement")
    if expected is None:
        assert (placement_cond.status, placement_cond.reason) == ("False", "NoCluster")
        assert placement_cond.message.startswith("spec.parameters.clusterSelector (team=a): ")
        assert out.status == {"placement": out.placement}, "status says why, nothing composed"
        assert not out.resources
    else:
        assert placement_cond.status == "True"
        assert out.status["placement"]["cluster"] == expected
        objects = [o for o in out.resources.values() if o["kind"] == "Object"]
        assert objects and {o["spec"]["providerConfigRef"]["name"] for o in objects} == {expected}
        usage = out.resources["usage-inference-cluster"]
        assert usage["spec"]["of"]["resourceRef"]["name"] == expected


def test_placement_is_sticky_until_the_cluster_goes_or_the_claim_changes() -> None:
    clusters = [cluster("l4s", "l4"), cluster("h100s", "h100", 8)]
    xr = claim()
    first = run(xr, clusters)
    assert chosen(first) == "l4s"
    # Placed: a better cluster appearing later moves nothing.
    xr["status"] = {"placement": first.placement}
    later = run(
        xr, [*clusters, cluster("a100s", "a100-40gb", 8), cluster("aaa", "l4", max_nodes=8)]
    )
    assert chosen(later) == "l4s"
    assert verdicts(later)["l4s"].startswith("placed here before")
    assert verdicts(later)["aaa"] == "the model runs on l4s, which still matches"
    # Its cluster not Ready for a moment: it stays.
    blip = run(xr, [cluster("l4s", "l4", ready=False), clusters[1]])
    assert chosen(blip) == "l4s"
    # Its cluster gone (deleted, or no longer labelled): it moves.
    lost = run(xr, [clusters[1]])
    assert chosen(lost) == "h100s"
    assert lost.placement["reason"].endswith("(l4s no longer matches the selector)")
    # The claim changed what placement depends on: placed again from scratch.
    changed = copy.deepcopy(xr)
    changed["spec"]["parameters"]["model"] = "Qwen/Qwen2.5-72B-Instruct"
    assert chosen(run(changed, clusters)) == "h100s"


def test_models_placed_by_selector_count_on_their_cluster() -> None:
    """A model placed there by its selector holds GPUs of that cluster's budget, as a named one."""
    full = [cluster("only", "l4", max_nodes=1)]
    out = run(claim(replicas=4), full, [running("first", "only", 1, 1)])
    assert chosen(out) is None
    assert verdicts(out)["only"] == "needs 4 GPUs (4 x 1), 3 of 4 free"


def test_a_selector_claim_is_refused_with_a_named_cluster() -> None:
    out = run(claim(clusterRef={"name": "x"}), [])
    assert out.fatal is not None and out.fatal.startswith(
        "spec.parameters.clusterSelector, spec.parameters.clusterRef and "
        "spec.parameters.providerConfigName are exclusive"
    )


@pytest.mark.parametrize(
    ("selector", "start"),
    [
        ({"matchLabels": {}}, "spec.parameters.clusterSelector.matchLabels must name 1 to 16"),
        ({}, "spec.parameters.clusterSelector.matchLabels must name 1 to 16"),
        ({"matchLabels": {"bad key!": "a"}}, "spec.parameters.clusterSelector.matchLabels: "),
        ({"matchLabels": {"team": "a b"}}, "spec.parameters.clusterSelector.matchLabels.team: "),
    ],
)
def test_bad_selectors_are_refused(selector: dict, start: str) -> None:
    xr = claim()
    xr["spec"]["parameters"]["clusterSelector"] = selector
    out = run(xr, [])
    assert out.fatal is not None and out.fatal.startswith(start), out.fatal


def test_the_claim_hash_follows_what_placement_depends_on() -> None:
    base = {"model": "a/b", "clusterSelector": SELECTOR}
    same = {**base, "ingressHost": "x.example.com", "engine": {"extraArgs": ["--foo"]}}
    assert placement.claim_hash(base) == placement.claim_hash(same)
    for change in ({"model": "a/c"}, {"gpu": 2}, {"replicas": 2}, {"engine": {"simulate": True}}):
        assert placement.claim_hash({**base, **change}) != placement.claim_hash(base), change


def test_a_model_moves_when_its_cluster_can_no_longer_run_it_and_stays_when_none_can() -> None:
    clusters = [cluster("l4s", "l4"), cluster("spare", "l4", max_nodes=1)]
    xr = claim()
    xr["status"] = {"placement": run(xr, clusters).placement}
    assert xr["status"]["placement"]["cluster"] == "l4s"
    # A harmless edit (more replicas that still fit): it stays.
    more = copy.deepcopy(xr)
    more["spec"]["parameters"]["replicas"] = 2
    assert chosen(run(more, clusters)) == "l4s"
    # Its cluster turns vLLM off: it moves to one that can run it.
    gone = [cluster("l4s", "l4", vllm=False), clusters[1]]
    moved = run(xr, gone)
    assert chosen(moved) == "spare"
    assert moved.placement["reason"].endswith("(l4s can no longer run it)")
    # No other can either: it stays where it is and says why.
    stuck = run(xr, [cluster("l4s", "l4", vllm=False)])
    assert chosen(stuck) == "l4s"
    assert "l4s can no longer run it" in stuck.placement["reason"]
    assert stuck.placement["reason"].endswith("and no other matching cluster can; it stays")


def test_placement_skips_clusters_that_would_refuse_the_claim() -> None:
    """A cluster where its targetNamespace is not allowed, or whose router already serves one
    of its names, is no candidate (placement would otherwise choose it and then refuse)."""
    clusters = [cluster("aaa", "l4"), cluster("bbb", "l4")]
    clusters[1]["status"]["tenancy"]["allowedNamespaces"].append("team-b")
    out = run(claim(targetNamespace="team-b"), clusters)
    assert chosen(out) == "bbb", out.placement
    assert "may not deploy into team-b" in verdicts(out)["aaa"]
    taken = running("first", "aaa", 1, 1)
    taken["spec"]["parameters"]["aliases"] = ["chat"]
    out = run(claim(aliases=["chat"]), [cluster("aaa", "l4"), cluster("zzz", "l4")], [taken])
    assert chosen(out) == "zzz"
    assert "already serves chat" in verdicts(out)["aaa"]


def test_a_model_larger_than_a_node_is_told_about_apps_lws() -> None:
    """Llama-3.1-405B in BF16 needs more than 8 H100s offer; an H200 would hold it, and so
    would two nodes of H100s where replicas may span nodes: the reason says both."""
    out = run(claim("meta-llama/Llama-3.1-405B-Instruct"), [cluster("h100s", "h100", 8, 2)], [])
    reason = verdicts(out)["h100s"]
    assert "(e.g. H200 141 GB)" in reason
    assert reason.endswith(
        "; or let one replica span nodes: an InferenceCluster with apps.lws (and gpu.maxNodes "
        "above 1)"
    ), reason
