"""One model over several clusters (function/fleet/): the placements as LLMInferences, the
global route's backends and weights following each placement's Serving status, spillover,
and every refusal naming its field. Run as Crossplane runs the function (conftest.settle)
against examples/state/llm-two-regions.yaml plus the control plane's InferenceCluster."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest
from conftest import EXAMPLES, by_base, load_yaml, settle

from function.cluster.spread import STAY
from function.fleet import children
from function.fleet.pipeline import GATEWAY_USAGE, POLICY, ROUTE
from function.outcome import Inputs

NS = "a-team"
STATE = load_yaml(EXAMPLES / "state" / "llm-two-regions.yaml")
CLAIM = load_yaml(EXAMPLES / "llm-two-regions.yaml")[0]
GATEWAY_CLUSTER = next(d for d in STATE if d["metadata"]["name"] == "control-plane")
KEY = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {
        "name": "together-api-key",
        "namespace": NS,
        "labels": {"inference.devopstoolkit.ai/gateway-key": "true"},
    },
    "data": {"api-key": "c2VjcmV0"},
}
SPILL = {
    "url": "https://api.together.xyz/v1",
    "model": "Qwen/Qwen2.5-7B-Instruct-Turbo",
    "apiKeySecretRef": {"name": "together-api-key"},
}


def claim(**params: Any) -> dict[str, Any]:
    xr = copy.deepcopy(CLAIM)
    xr["metadata"]["creationTimestamp"] = "2026-06-01T00:00:00Z"
    for k, v in params.items():
        if v is None:
            xr["spec"]["parameters"].pop(k, None)
        else:
            xr["spec"]["parameters"][k] = v
    return xr


def child(cluster: str, serving: bool, ready: int) -> dict[str, Any]:
    """A placement as Crossplane observes it once its function has run."""
    obj = children.manifest("qwen-7b", NS, CLAIM["spec"]["parameters"], cluster)
    obj["status"] = {
        "conditions": [
            {"type": "Ready", "status": "True" if serving else "False"},
            {"type": "Serving", "status": "True" if serving else "False"},
        ],
        "replicas": {"ready": ready, "max": 2},
        "plan": {"gpus": 1},
        "endpoint": f"http://llm.{cluster}.example.com",
    }
    return obj


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def run(
    xr: dict[str, Any],
    observed: dict[str, dict[str, Any]] | None = None,
    world: list[dict[str, Any]] | None = None,
) -> Any:
    base = [*STATE, KEY] if world is None else world
    # The fleet's own placements are LLMInferences of the namespace, too.
    mine = [o for k, o in (observed or {}).items() if k.startswith(children.KEY_PREFIX)]
    return settle(Inputs(xr=xr, observed=observed or {}), [*base, *mine])


def weights(out: Any) -> dict[str, int]:
    rule = by_base(out.resources, ROUTE)["spec"]["forProvider"]["manifest"]["spec"]["rules"][0]
    return {b["name"]: b["weight"] for b in rule["backendRefs"]}


def condition(out: Any, typ: str) -> Any:
    return next(c for c in out.conditions if c.type == typ)


# --- the route's weights follow what each placement reports -------------------------------


@dataclass
class WeightCase:
    id: str
    serving: dict[str, tuple[bool, int]]  # cluster -> (serving, ready replicas)
    expected: dict[str, int]
    spillover: list[dict[str, Any]] = field(default_factory=list)


WEIGHT_CASES = [
    WeightCase(
        "nothing observed yet: every placement weighs 0",
        {},
        {"qwen-7b-at-inference-aws": 0, "qwen-7b-at-inference-google": 0},
    ),
    WeightCase(
        "each serving placement weighs its ready replicas",
        {"inference-aws": (True, 2), "inference-google": (True, 1)},
        {"qwen-7b-at-inference-aws": 2, "qwen-7b-at-inference-google": 1},
    ),
    WeightCase(
        "a placement that does not serve weighs 0, whatever its replicas said",
        {"inference-aws": (True, 2), "inference-google": (False, 1)},
        {"qwen-7b-at-inference-aws": 2, "qwen-7b-at-inference-google": 0},
    ),
    WeightCase(
        "spillover of weight 0 takes nothing while a placement serves",
        {"inference-aws": (True, 1), "inference-google": (False, 0)},
        {"qwen-7b-at-inference-aws": 1, "qwen-7b-at-inference-google": 0, "qwen-7b-spillover-0": 0},
        [SPILL],
    ),
    WeightCase(
        "spillover of weight 0 takes everything while no placement serves",
        {"inference-aws": (False, 0), "inference-google": (False, 0)},
        {"qwen-7b-at-inference-aws": 0, "qwen-7b-at-inference-google": 0, "qwen-7b-spillover-0": 1},
        [SPILL],
    ),
    WeightCase(
        "a weighted spillover always shares, in units of one ready replica",
        {"inference-aws": (True, 2), "inference-google": (True, 2)},
        {"qwen-7b-at-inference-aws": 2, "qwen-7b-at-inference-google": 2, "qwen-7b-spillover-0": 1},
        [{**SPILL, "weight": 1}],
    ),
]


@pytest.mark.parametrize("case", WEIGHT_CASES, ids=[c.id for c in WEIGHT_CASES])
def test_route_weights_follow_serving(case: WeightCase) -> None:
    observed = {
        children.key(cluster): child(cluster, *state) for cluster, state in case.serving.items()
    }
    out = run(claim(spillover=case.spillover or None), observed)
    assert out.fatal is None, out.fatal
    assert weights(out) == case.expected
    rows = {r["cluster"]: r["weight"] for r in out.status["placement"]["placements"]}
    assert rows == {
        k: case.expected[f"qwen-7b-at-{k}"] for k in ("inference-aws", "inference-google")
    }
    serving = sum(1 for s, _ in case.serving.values() if s)
    assert condition(out, "Serving").status == ("True" if serving else "False")
    assert out.status["replicas"] == {"ready": sum(n for _, n in case.serving.values())}
    assert out.xr_ready is False  # the route's objects on the gateway are not Ready yet


def test_the_route_and_its_backends() -> None:
    out = run(claim(spillover=[SPILL]))
    assert out.status["endpoint"] == "http://models.a-team.example.com/a-team/qwen-7b"
    route = by_base(out.resources, ROUTE)
    assert (
        route["spec"]["providerConfigRef"]["name"]
        == GATEWAY_CLUSTER["status"]["modelsProviderConfig"]["name"]
    )
    manifest = route["spec"]["forProvider"]["manifest"]
    assert manifest["metadata"]["namespace"] == NS
    assert manifest["spec"]["parentRefs"][0]["name"] == "global-gateway"
    assert manifest["spec"]["rules"][0]["matches"][0]["path"] == {
        "type": "PathPrefix",
        "value": "/a-team/qwen-7b",
    }
    aws = by_base(out.resources, "global-backend-inference-aws")["spec"]["forProvider"]["manifest"]
    assert aws["spec"] == {"static": {"host": "llm.inference-aws.example.com", "port": 80}}
    spill = by_base(out.resources, "global-spillover-0")["spec"]["forProvider"]["manifest"]["spec"]
    assert spill["ai"]["provider"] == {
        "openai": {"model": "Qwen/Qwen2.5-7B-Instruct-Turbo"},
        "host": "api.together.xyz",
        "port": 443,
        "pathPrefix": "/v1",
    }
    # The key by reference: the copy's name and the claim's key, never a value.
    assert spill["policies"]["auth"] == {
        "secretRef": {"name": "qwen-7b-spillover-0-key", "key": "api-key"}
    }
    copy_ = by_base(out.resources, "secret-spillover-0")
    assert "data" not in copy_["spec"]["forProvider"]["manifest"]
    assert copy_["spec"]["references"][0]["patchesFrom"]["name"] == "together-api-key"
    policy = by_base(out.resources, POLICY)["spec"]["forProvider"]["manifest"]
    assert policy["spec"]["targetRefs"][0] == {
        "group": "gateway.networking.k8s.io",
        "kind": "HTTPRoute",
        "name": "qwen-7b",
    }
    assert out.resources[GATEWAY_USAGE]["spec"]["of"]["resourceRef"] == {"name": "control-plane"}


def test_placements_are_llminferences_on_their_cluster() -> None:
    out = run(claim())
    placed = {k: v for k, v in out.resources.items() if k.startswith(children.KEY_PREFIX)}
    assert sorted(placed) == ["placement-inference-aws", "placement-inference-google"]
    aws = placed["placement-inference-aws"]
    assert aws["metadata"]["name"] == "qwen-7b-inference-aws"
    params = aws["spec"]["parameters"]
    assert params["clusterRef"] == {"name": "inference-aws"}
    for gone in children.FLEET_FIELDS:
        assert gone not in params
    assert params["autoscaling"] == {"minReplicas": 1, "maxReplicas": 2}
    assert condition(out, "Placement").reason == "Placed"
    assert out.status["placement"]["summary"] == "2/2"


def test_losing_a_cluster_moves_only_its_placement() -> None:
    observed = {
        children.key("inference-aws"): child("inference-aws", True, 1),
        children.key("inference-google"): child("inference-google", True, 1),
    }
    before = run(claim(), observed)
    world = [d for d in [*STATE, KEY] if d["metadata"]["name"] != "inference-google"]
    after = run(claim(), observed, world)
    assert after.resources["placement-inference-aws"] == before.resources["placement-inference-aws"]
    assert "placement-inference-google" not in after.resources
    assert condition(after, "Placement").reason == "TooFewClusters"
    assert after.status["placement"]["summary"] == "1/2"
    assert "1 of 2 placements missing" in after.status["placement"]["missing"]
    assert weights(after) == {"qwen-7b-at-inference-aws": 1}


def test_its_own_placements_hold_no_gpus_against_it() -> None:
    """Re-placed with its placements on the clusters (holding GPUs there), the fleet decides
    the same: their GPUs are its own."""
    observed = {children.key(c): child(c, True, 2) for c in ("inference-aws", "inference-google")}
    for o in observed.values():
        o["status"]["replicas"]["max"] = 3  # the GKE cluster's three L4s, all held
    out = run(claim(), observed)
    assert condition(out, "Placement").reason == "Placed", condition(out, "Placement").message
    for row in out.status["placement"]["placements"]:
        assert row["reason"] == STAY, row  # not "can no longer run it ..., it stays"
    google = next(
        c for c in out.status["placement"]["candidates"] if c["name"] == "inference-google"
    )
    assert google["freeGPUs"] == 3


def test_a_placement_name_taken_by_another_claim_is_refused_there() -> None:
    other = copy.deepcopy(CLAIM)
    other["metadata"]["name"] = "qwen-7b-inference-google"
    other["spec"]["parameters"] = {"model": "Qwen/Qwen3-0.6B"}
    out = run(claim(), world=[*STATE, KEY, other])
    reasons = {c["name"]: c["reason"] for c in out.status["placement"]["candidates"]}
    assert (
        "LLMInference a-team/qwen-7b-inference-google, which is another claim's name"
        in (reasons["inference-google"])
    )
    assert "placement-inference-google" not in out.resources


def test_a_gateway_cluster_without_the_app_is_a_condition_not_a_crash() -> None:
    bare = copy.deepcopy(GATEWAY_CLUSTER)
    bare["spec"]["parameters"]["apps"] = {}
    world = [d for d in STATE if d is not GATEWAY_CLUSTER]
    out = run(claim(), world=[*world, bare, KEY])
    assert out.fatal is None
    got = condition(out, "GlobalEndpoint")
    assert (got.status, got.reason) == ("False", "NoGateway")
    assert "spec.parameters.globalEndpoint.clusterRef.name" in got.message
    assert not any(k.startswith(ROUTE) for k in out.resources)
    assert "placement-inference-aws" in out.resources  # the placements still run


def test_a_missing_spillover_key_leaves_the_endpoint_out() -> None:
    out = run(claim(spillover=[SPILL]), world=list(STATE))
    assert not any(k.startswith("global-spillover-0") for k in out.resources)
    assert any("Secret a-team/together-api-key does not exist" in w for w in out.warnings)


@pytest.mark.parametrize(
    ("secret", "key", "type_"),
    [
        ("gcp-creds", "creds", "Opaque"),  # inference-google's credentials (it matched)
        ("inference-aws-kubeconfig", "kubeconfig", "connection.crossplane.io/v1alpha1"),
    ],
)
def test_a_cluster_credential_is_never_a_spillover_key(secret: str, key: str, type_: str) -> None:
    """The gateway would send the key to the spillover URL: a cluster's credentials never."""
    stolen = {**KEY, "type": type_, "metadata": {"name": secret, "namespace": NS}}
    stolen["data"] = {key: "c2VjcmV0"}
    spill = {**SPILL, "apiKeySecretRef": {"name": secret, "key": key}}
    out = run(claim(spillover=[spill]), world=[*STATE, stolen])
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.spillover[0].apiKeySecretRef:")
    assert "never copied" in out.fatal or "only Opaque Secrets" in out.fatal, out.fatal
    assert out.resources == {}


# --- refusals name the field ---------------------------------------------------------------

HOSTILE = [
    ("metadata endpoint", {"spillover": [{**SPILL, "url": "https://169.254.169.254/v1"}]},
     "spec.parameters.spillover[0].url: 169.254.169.254 is not a public DNS name"),
    ("in-cluster Service", {"spillover": [{**SPILL, "url": "https://vault.vault.svc.cluster.local"}]},
     "spec.parameters.spillover[0].url: vault.vault.svc.cluster.local is not a public DNS name"),
    ("single-label name", {"spillover": [{**SPILL, "url": "https://kubernetes/v1"}]},
     "spec.parameters.spillover[0].url: kubernetes is not a public DNS name"),
    ("localhost", {"spillover": [{**SPILL, "url": "https://localhost:8080"}]},
     "spec.parameters.spillover[0].url: localhost is not a public DNS name"),
    ("IPv6 literal", {"spillover": [{**SPILL, "url": "https://[::1]:80/v1"}]},
     "spec.parameters.spillover[0].url: ::1 is not a public DNS name"),
    ("credentials in the URL", {"spillover": [{**SPILL, "url": "https://k:s@api.together.xyz"}]},
     "spec.parameters.spillover[0].url: 'https://k:s@api.together.xyz' carries credentials"),
    ("not http", {"spillover": [{**SPILL, "url": "file:///etc/passwd"}]},
     "spec.parameters.spillover[0].url: 'file:///etc/passwd' is not an https URL"),
    ("plain http would send the key in clear", {"spillover": [{**SPILL, "url": "http://api.together.xyz/v1"}]},
     "spec.parameters.spillover[0].url: 'http://api.together.xyz/v1' is not an https URL"),
    ("a namespace's Service by its search-list name",
     {"spillover": [{**SPILL, "url": "https://qwen.b-team/v1"}]},
     "spec.parameters.spillover[0].url: qwen.b-team is not a public DNS name"),
    ("an API key beside the global endpoint", {"apiKeySecretRef": {"name": "k"}},
     "spec.parameters.apiKeySecretRef and spec.parameters.globalEndpoint are exclusive"),
    ("ingressHost beside the global endpoint", {"ingressHost": "metadata.google.internal.nip.io"},
     "spec.parameters.ingressHost and spec.parameters.globalEndpoint are exclusive"),
    ("no key reference", {"spillover": [{"url": "https://api.together.xyz/v1"}]},
     "spec.parameters.spillover[0].apiKeySecretRef is required"),
    ("a key name no Secret has", {"spillover": [{**SPILL, "apiKeySecretRef": {"name": "A/B"}}]},
     "spec.parameters.spillover[0].apiKeySecretRef.name: 'A/B' is not a Secret name"),
    ("weight out of range", {"spillover": [{**SPILL, "weight": 1000}]},
     "spec.parameters.spillover[0].weight: 1000 is not a weight from 0"),
    ("listed twice", {"spillover": [SPILL, SPILL]},
     "spec.parameters.spillover[1]: https://api.together.xyz/v1 (Qwen/Qwen2.5-7B-Instruct-Turbo) "
     "is listed twice"),
    ("placement without a selector",
     {"clusterSelector": None, "globalEndpoint": None, "clusterRef": {"name": "x"}},
     "spec.parameters.placement spreads the model over the clusters"),
    ("no clusters", {"placement": {"clusters": 0}},
     "spec.parameters.placement.clusters: 0 is not a count of clusters from 1 to 12"),
    ("more clusters than a route holds", {"placement": {"clusters": 13}},
     "spec.parameters.placement.clusters: 13 is not a count of clusters from 1 to 12"),
    ("a spread key no label can be", {"placement": {"clusters": 2, "spreadBy": "a b"}},
     "spec.parameters.placement.spreadBy: 'a b' is neither `region` nor a label key"),
    ("a gateway cluster name no cluster has", {"globalEndpoint": {"clusterRef": {"name": "../x"}}},
     "spec.parameters.globalEndpoint.clusterRef.name: '../x' is not the name of an "
     "InferenceCluster"),
    ("spillover without the global endpoint", {"globalEndpoint": None, "spillover": [SPILL]},
     "spec.parameters.spillover is a backend of the global route: set "
     "spec.parameters.globalEndpoint"),
    ("global endpoint without placement",
     {"placement": None},
     "spec.parameters.globalEndpoint routes to every placement of the model"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("params", "message"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_refusals_name_the_field(params: dict[str, Any], message: str) -> None:
    out = run(claim(**params))
    assert out.fatal is not None, "accepted"
    assert out.fatal.startswith(message) or message in out.fatal, out.fatal
    assert out.resources == {}


def test_every_object_validates_against_its_pinned_crd() -> None:
    """The placements (the LLMInference XRD), the Usage, the Objects and what they carry to
    the gateway's cluster: HTTPRoute (Gateway API v1.6.1), AgentgatewayBackend of both kinds
    and AgentgatewayPolicy (agentgateway v1.4.1), the key's copy; CEL rules evaluated."""
    from dot_inference.apiserver import validate_objects

    observed = {children.key("inference-aws"): child("inference-aws", True, 2)}
    out = run(claim(spillover=[SPILL, {**SPILL, "model": "other", "weight": 3}]), observed)
    assert out.fatal is None, out.fatal
    kinds = sorted(
        (o.get("spec", {}).get("forProvider", {}).get("manifest") or o)["kind"]
        for o in out.resources.values()
    )
    assert kinds == sorted(
        ["LLMInference"] * 2
        + ["AgentgatewayBackend"] * 4
        + ["HTTPRoute", "AgentgatewayPolicy", "Secret", "Secret", "Usage"]
    )
    composed = [
        {**o, "metadata": {**o.get("metadata", {}), "namespace": NS}}
        for o in out.resources.values()
    ]
    report = validate_objects(composed)
    assert report.invalid == [], report.invalid
    assert report.no_schema == [], report.no_schema
    assert report.cel_not_evaluated == 0, report.cel_not_evaluated_rules


def test_when_no_cluster_can_take_any_placement_what_runs_is_kept() -> None:
    observed = {children.key("inference-aws"): child("inference-aws", True, 1)}
    world = [
        d
        for d in STATE
        if d["kind"] != "InferenceCluster" or d["metadata"]["name"] == "control-plane"
    ]
    out = run(claim(), observed, [*world, KEY])
    assert out.fatal is None
    assert "placement-inference-aws" in out.resources  # kept, not deleted
    assert condition(out, "Placement").reason == "NoCluster"
    assert out.status["placement"]["placements"][0]["cluster"] == "inference-aws"
    assert "2 of 2 placements missing" in out.status["placement"]["missing"]
    # The route still follows what the kept placement reports: serving, then not.
    assert weights(out) == {"qwen-7b-at-inference-aws": 1}
    observed[children.key("inference-aws")] = child("inference-aws", False, 0)
    assert weights(run(claim(), observed, [*world, KEY])) == {"qwen-7b-at-inference-aws": 0}
    spilled = run(claim(spillover=[SPILL]), observed, [*world, KEY])
    assert weights(spilled) == {"qwen-7b-at-inference-aws": 0, "qwen-7b-spillover-0": 1}


@pytest.mark.parametrize(
    ("serving", "route_ready", "expected"),
    [
        ({"inference-aws": (True, 1)}, True, True),
        ({"inference-aws": (False, 0)}, True, False),
        ({"inference-aws": (True, 1)}, False, False),
    ],
    ids=["a placement serves through the route", "none serves", "the route is not there yet"],
)
def test_ready_when_a_placement_serves_through_the_route(
    serving: dict[str, tuple[bool, int]], route_ready: bool, expected: bool
) -> None:
    observed = {children.key(k): child(k, *v) for k, v in serving.items()}
    first = run(claim(), observed)
    if route_ready:
        for k, v in first.resources.items():
            if k.startswith("global-"):
                observed[k] = ready(v)
    out = run(claim(), observed)
    assert out.xr_ready is expected
    assert condition(out, "GlobalEndpoint").reason == ("Routed" if route_ready else "Creating")


def test_a_spillover_key_must_be_marked_for_it() -> None:
    unmarked = {**KEY, "metadata": {"name": "together-api-key", "namespace": NS}}
    out = run(claim(spillover=[SPILL]), world=[*STATE, unmarked])
    assert out.fatal is not None
    assert out.fatal.startswith(
        "spec.parameters.spillover[0].apiKeySecretRef: Secret a-team/together-api-key is not "
        'labelled inference.devopstoolkit.ai/gateway-key: "true"'
    )
    assert out.resources == {}


def test_a_forged_fleet_label_does_not_hide_another_claims_gpus() -> None:
    """Another claim of the namespace labelled as if it were this fleet's placement still
    holds its GPUs, and its name is still refused as a placement's: the fleet knows its own
    placements by what Crossplane observed it compose."""
    forged = child("inference-google", True, 3)
    forged["metadata"]["labels"]["crossplane.io/composite"] = "qwen-7b"
    forged["status"]["replicas"]["max"] = 3  # all three L4s of the GKE cluster
    out = run(claim(), world=[*STATE, KEY, forged])
    reasons = {c["name"]: c["reason"] for c in out.status["placement"]["candidates"]}
    assert "another claim's name" in reasons["inference-google"]
    assert "placement-inference-google" not in out.resources


def test_a_new_placement_comes_after_the_models_already_on_its_cluster() -> None:
    """Created after the fleet but before its placement there, a model holding the GKE
    cluster's three L4s keeps them: the placement would be judged by its own (later) time, so
    the fleet does not choose that cluster."""
    other = copy.deepcopy(CLAIM)
    other["metadata"] = {
        "name": "other",
        "namespace": NS,
        "creationTimestamp": "2026-07-01T00:00:00Z",  # after the claim (2026-06-01)
    }
    other["spec"]["parameters"] = {
        "model": "Qwen/Qwen3-0.6B",
        "clusterRef": {"name": "inference-google"},
        "replicas": 3,
    }
    other["spec"]["parameters"]["gpu"] = 1  # not running yet: what it asks for counts
    out = run(claim(), world=[*STATE, KEY, other])
    reasons = {c["name"]: c["reason"] for c in out.status["placement"]["candidates"]}
    assert reasons["inference-google"] == "needs 1 GPUs (1 x 1), 0 of 3 free"
    assert "placement-inference-google" not in out.resources


@pytest.mark.parametrize(
    ("gateway", "kept"),
    [("gone", True), ("its app turned off", False)],
)
def test_a_gateway_cluster_out_of_reach_keeps_the_route(gateway: str, kept: bool) -> None:
    """The route, its backends, policy and Usage stay while the gateway's cluster is gone for
    now, as placements stay on a missing cluster; turned off by the platform, they go."""
    observed = {children.key("inference-aws"): child("inference-aws", True, 1)}
    first = run(claim(), observed)
    for k, v in first.resources.items():
        if not k.startswith(children.KEY_PREFIX):
            observed[k] = ready(v)
    xr = claim()
    xr["status"] = {"endpoint": first.status["endpoint"]}
    world = [d for d in STATE if d is not GATEWAY_CLUSTER]
    if gateway != "gone":
        off = copy.deepcopy(GATEWAY_CLUSTER)
        off["spec"]["parameters"]["apps"]["globalEndpoint"]["enabled"] = False
        world.append(off)
    out = run(xr, observed, [*world, KEY])
    routed = {k for k in first.resources if not k.startswith(children.KEY_PREFIX)}
    assert (routed <= set(out.resources)) is kept, routed - set(out.resources)
    assert ("endpoint" in out.status) is kept
    assert condition(out, "GlobalEndpoint").status == "False"
    assert out.xr_ready is False


def test_a_moment_not_ready_keeps_the_route_following_the_placements() -> None:
    down = copy.deepcopy(GATEWAY_CLUSTER)
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    world = [d for d in STATE if d is not GATEWAY_CLUSTER] + [down, KEY]
    observed = {children.key("inference-aws"): child("inference-aws", True, 2)}
    out = run(claim(), observed, world)
    assert weights(out) == {"qwen-7b-at-inference-aws": 2, "qwen-7b-at-inference-google": 0}


@pytest.mark.parametrize("first", ["inference-google", "inference-aws"])
def test_asking_for_fewer_keeps_the_first_placed(first: str) -> None:
    """The order placements were made in is status.placement.placements': asked for one
    fewer, the claim keeps the first placed, whichever name sorts first."""
    clusters = ["inference-aws", "inference-google"]
    observed = {children.key(c): child(c, True, 1) for c in clusters}
    xr = claim(placement={"clusters": 1})
    order = [first, *(c for c in clusters if c != first)]
    xr["status"] = {"placement": {"placements": [{"cluster": c} for c in order]}}
    out = run(xr, observed)
    placed = [k for k in out.resources if k.startswith(children.KEY_PREFIX)]
    assert placed == [children.key(first)]


CLIENT_KEY = {
    "apiVersion": "v1",
    "kind": "Secret",
    "type": "Opaque",
    "metadata": {
        "name": "qwen-clients",
        "namespace": NS,
        "labels": {"inference.devopstoolkit.ai/gateway-key": "true"},
    },
    "data": {"api-key": "Y2xpZW50"},
}


def test_the_global_endpoint_checks_a_client_key() -> None:
    """With globalEndpoint.apiKeySecretRef the route's policy refuses a request without the
    key (agentgateway's apiKeyAuthentication), the key copied by reference; every object
    still validates against its CRD."""
    from dot_inference.apiserver import validate_objects

    endpoint = {
        "clusterRef": {"name": "control-plane"},
        "apiKeySecretRef": {"name": "qwen-clients"},
    }
    out = run(claim(globalEndpoint=endpoint), world=[*STATE, KEY, CLIENT_KEY])
    assert out.fatal is None, out.fatal
    policy = by_base(out.resources, POLICY)["spec"]["forProvider"]["manifest"]["spec"]["traffic"]
    assert policy["apiKeyAuthentication"] == {
        "mode": "Strict",
        "secretRef": {"name": "qwen-7b-global-key"},
    }
    copy_ = by_base(out.resources, "global-client-key")
    assert "data" not in copy_["spec"]["forProvider"]["manifest"]
    assert copy_["spec"]["references"][0]["patchesFrom"]["name"] == "qwen-clients"
    composed = [
        {**o, "metadata": {**o.get("metadata", {}), "namespace": NS}}
        for o in out.resources.values()
    ]
    report = validate_objects(composed)
    assert report.invalid == [] and report.no_schema == [], (report.invalid, report.no_schema)


def test_no_route_is_open_while_its_client_key_is_missing() -> None:
    endpoint = {
        "clusterRef": {"name": "control-plane"},
        "apiKeySecretRef": {"name": "qwen-clients"},
    }
    out = run(claim(globalEndpoint=endpoint), world=[*STATE, KEY])
    assert not any(k.startswith((ROUTE, POLICY)) for k in out.resources)
    got = condition(out, "GlobalEndpoint")
    assert (got.status, got.reason) == ("False", "WaitingForKey")
    assert "placement-inference-aws" in out.resources  # the placements run meanwhile
    assert out.xr_ready is False


def test_a_cluster_credential_is_never_the_client_key() -> None:
    stolen = {**KEY, "metadata": {"name": "gcp-creds", "namespace": NS}, "data": {"creds": "e30="}}
    endpoint = {
        "clusterRef": {"name": "control-plane"},
        "apiKeySecretRef": {"name": "gcp-creds", "key": "creds"},
    }
    out = run(claim(globalEndpoint=endpoint), world=[*STATE, stolen])
    assert out.fatal is not None
    assert out.fatal.startswith("spec.parameters.globalEndpoint.apiKeySecretRef:")
    assert "never copied" in out.fatal


GUARDED = {"clusterRef": {"name": "control-plane"}, "apiKeySecretRef": {"name": "qwen-clients"}}


def test_a_guarded_route_comes_only_after_its_key_and_policy() -> None:
    """The HTTPRoute is composed only once the key's copy and the policy that checks it are
    Ready there: the endpoint is never open, not even for a moment."""
    observed: dict[str, Any] = {children.key("inference-aws"): child("inference-aws", True, 1)}
    world = [*STATE, KEY, CLIENT_KEY]
    first = run(claim(globalEndpoint=GUARDED), observed, world)
    assert not any(k.startswith(ROUTE) for k in first.resources)
    assert condition(first, "GlobalEndpoint").reason == "WaitingForKey"
    assert "endpoint" not in first.status
    for k, v in first.resources.items():
        if k.startswith((POLICY, "global-client-key")):
            observed[k] = ready(v)
    then = run(claim(globalEndpoint=GUARDED), observed, world)
    assert weights(then) == {"qwen-7b-at-inference-aws": 1, "qwen-7b-at-inference-google": 0}
    # The key's Secret deleted: the route goes, its key and policy stay.
    for k, v in then.resources.items():
        observed[k] = ready(v)
    gone = run(claim(globalEndpoint=GUARDED), observed, [*STATE, KEY])
    assert not any(k.startswith(ROUTE) for k in gone.resources)
    assert any(k.startswith(POLICY) for k in gone.resources)
    assert any(k.startswith("global-client-key") for k in gone.resources)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("c2VjcmV0Cg==", "a trailing newline (echo)"),
        ("eyJrZXkiOiAieCJ9", "JSON"),
        ("", "empty"),
    ],
)
def test_a_client_key_the_gateway_would_never_match_is_refused(value: str, why: str) -> None:
    bad = copy.deepcopy(CLIENT_KEY)
    bad["data"] = {"api-key": value}
    out = run(claim(globalEndpoint=GUARDED), world=[*STATE, KEY, bad])
    assert out.fatal is not None, why
    assert "which the gateway would never match" in out.fatal


def test_a_key_named_like_its_copy_is_refused() -> None:
    """On the control plane's own gateway the copy goes into the claim's namespace: a source
    named like the copy would be taken over by it."""
    same = copy.deepcopy(CLIENT_KEY)
    same["metadata"]["name"] = "qwen-7b-global-key"
    endpoint = {**GUARDED, "apiKeySecretRef": {"name": "qwen-7b-global-key"}}
    out = run(claim(globalEndpoint=endpoint), world=[*STATE, KEY, same])
    assert out.fatal is not None
    assert "has the name of the copy the claim makes of it" in out.fatal


def test_another_gateway_composes_new_objects_there() -> None:
    """The keys carry the gateway's ProviderConfig: naming another gateway composes new
    objects, and Crossplane deletes the old ones through their own ProviderConfig."""
    other = copy.deepcopy(GATEWAY_CLUSTER)
    other["metadata"]["name"] = "edge"
    other["status"]["modelsProviderConfig"]["name"] = "edge-models"
    first = run(claim())
    moved = run(claim(globalEndpoint={"clusterRef": {"name": "edge"}}), world=[*STATE, other, KEY])
    before = {k for k in first.resources if k.startswith("global-")}
    after = {k for k in moved.resources if k.startswith("global-")}
    assert before and after and not before & after


def test_objects_on_the_gateway_start_observe_only() -> None:
    """No takeover: each Object on the gateway's cluster only looks until the provider has
    shown its object absent or this claim's (function/policy/ownership.py)."""
    out = run(claim())
    for k, v in out.resources.items():
        if k.startswith("global-"):
            assert v["spec"]["managementPolicies"] == ["Observe"], k


def test_spillover_never_passes_through_to_the_providers_api() -> None:
    out = run(claim(spillover=[SPILL]))
    spec = by_base(out.resources, "global-spillover-0")["spec"]["forProvider"]["manifest"]["spec"]
    assert spec["policies"]["ai"]["routes"] == {
        "/v1/chat/completions": "Completions",
        "/v1/embeddings": "Embeddings",
        "/v1/models": "Models",
    }


WHY_NOT = [
    # (name, the placement as observed) -> what the parent's Serving condition quotes
    ("not created yet", None, "qwen-7b-inference-aws: not created yet"),
    (
        "refused: its own refusal",
        {
            "type": "Synced",
            "status": "False",
            "reason": "ReconcileError",
            "message": "cannot compose resources: pipeline step returned a fatal result: "
            "spec.parameters.aliases: qwen-7b already serves behind the router",
        },
        "qwen-7b-inference-aws: cannot compose resources: pipeline step returned a fatal "
        "result: spec.parameters.aliases: qwen-7b already serves behind the router",
    ),
    (
        "waiting: its Serving condition",
        {
            "type": "Serving",
            "status": "False",
            "reason": "Downloading",
            "message": "the model downloads into its cache",
        },
        "qwen-7b-inference-aws: the model downloads into its cache",
    ),
]


@pytest.mark.parametrize(("said", "quoted"), [c[1:] for c in WHY_NOT], ids=[c[0] for c in WHY_NOT])
def test_the_parent_says_why_each_placement_does_not_serve(
    said: dict[str, Any] | None, quoted: str
) -> None:
    """A placement refused on its cluster (say, the model already served there behind the
    router) or still starting is quoted by the claim that made it, not only counted."""
    observed = {children.key("inference-google"): child("inference-google", True, 1)}
    if said is not None:
        refused = child("inference-aws", False, 0)
        refused["status"]["conditions"] = [said]
        observed[children.key("inference-aws")] = refused
    out = run(claim(), observed)
    assert out.fatal is None, out.fatal
    serving = condition(out, "Serving")
    assert serving.message == f"1 of 2 placement(s) serve: inference-google; {quoted}"
    row = next(r for r in out.status["placement"]["placements"] if r["cluster"] == "inference-aws")
    assert f"{row['name']}: {row['why']}" == quoted
