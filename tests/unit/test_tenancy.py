"""Who may deploy what where: a claim's objects land only in namespaces its own namespace may
use on the target, never in a system namespace (function/policy/tenancy.py, kcl/tenancy.k)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import (
    EXAMPLES,
    PACKAGE,
    ROOT,
    engine_image,
    llmd_images,
    load_yaml,
    no_credentials,
    simulator_image,
)

from function.compose import compose
from function.outcome import Inputs
from function.policy import tenancy

CLUSTER = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]


def claim(namespace: str = "a-team", **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": namespace},
        "spec": {"parameters": {"model": "Qwen/Qwen2.5-1.5B-Instruct", **params}},
    }


def cluster(router: str = "a-team", allowed: list[str] | None = None) -> dict[str, Any]:
    c = {**CLUSTER, "status": {**CLUSTER["status"]}}
    c["status"]["vllm"] = {**c["status"]["vllm"], "namespace": router}
    c["status"]["tenancy"] = {
        **c["status"].get("tenancy", {}),
        "allowedNamespaces": ["a-team", router, *(allowed or [])],
    }
    return c


ON_CLUSTER = {"clusterRef": {"name": "inference-aws"}}

# (case, claim, cluster or None, the namespace it lands in, or the start of the refusal)
CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, str]] = [
    ("own namespace through a ProviderConfig", claim(providerConfigName="pc"), None, "a-team"),
    (
        "another team's namespace through a ProviderConfig",
        claim(providerConfigName="pc", targetNamespace="b-team"),
        None,
        "spec.parameters.targetNamespace: claims in namespace a-team may not deploy into b-team "
        "on the target cluster; allowed: a-team (without an InferenceCluster",
    ),
    (
        "kube-system",
        claim(providerConfigName="pc", targetNamespace="kube-system"),
        None,
        "spec.parameters.targetNamespace: kube-system is a system namespace",
    ),
    ("the cluster's router namespace by default", claim(**ON_CLUSTER), cluster("llm"), "llm"),
    (
        "a namespace the cluster allows",
        claim(**ON_CLUSTER, targetNamespace="a-team-staging"),
        cluster(allowed=["a-team-staging"]),
        "a-team-staging",
    ),
    (
        "a namespace the cluster does not allow",
        claim(**ON_CLUSTER, targetNamespace="b-team"),
        cluster(allowed=["a-team-staging"]),
        "spec.parameters.targetNamespace: claims in namespace a-team may not deploy into b-team "
        "on InferenceCluster a-team/inference-aws; allowed: a-team, a-team-staging (the platform "
        "team can allow more in spec.parameters.tenancy.allowedNamespaces",
    ),
    (
        "a system namespace even when a cluster lists it",
        claim(**ON_CLUSTER, targetNamespace="gpu-operator"),
        cluster(allowed=["gpu-operator"]),
        "spec.parameters.targetNamespace: gpu-operator is a system namespace",
    ),
    (
        "the operator's namespace",
        claim(providerConfigName="pc", targetNamespace="production-stack-system"),
        None,
        "spec.parameters.targetNamespace: production-stack-system is a system namespace",
    ),
    (
        "a claim created in a system namespace, deploying elsewhere",
        claim("crossplane-system", providerConfigName="pc"),
        None,
        "metadata.namespace: crossplane-system is a system namespace",
    ),
]


@pytest.mark.parametrize(
    ("xr", "found", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_where_a_claim_may_deploy(
    xr: dict[str, Any], found: dict[str, Any] | None, expected: str
) -> None:
    # Crossplane's answers: the cluster, and the platform's tenancy policy (none here).
    required = {"inference-cluster": [found]} if found else {}
    out = compose(
        Inputs(xr=xr, engine_image=engine_image(), required={**required, "tenancy-policy": []})
    )
    if " " in expected:
        assert out.fatal and out.fatal.startswith(expected), out.fatal
        assert not out.resources
        return
    assert out.fatal is None, out.fatal
    manifests = [
        o["spec"]["forProvider"]["manifest"]
        for o in out.resources.values()
        if o["kind"] == "Object"
    ]
    assert manifests and {m["metadata"].get("namespace", expected) for m in manifests} == {expected}


def test_the_reserved_namespaces_have_one_home() -> None:
    """function/policy/tenancy.py and kcl/tenancy.k list the same namespaces, and the program's
    apps use only those."""
    text = (ROOT / "kcl" / "tenancy.k").read_text()
    listed = re.search(r"^reserved_namespaces = \[([^\]]*)\]", text, re.M)
    assert listed
    assert set(re.findall(r'"([^"]+)"', listed.group(1))) == set(tenancy.RESERVED)
    comp = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    params = comp["spec"]["pipeline"][0]["input"]["spec"]["params"]
    assert set(params["reservedNamespaces"]) == set(tenancy.RESERVED)


@pytest.mark.parametrize(
    ("claim_ns", "allowed", "expected"),
    [("a", [], ["a"]), ("a", ["b", "a", "c"], ["a", "b", "c"])],
)
def test_allowed_keeps_the_claims_namespace_first(
    claim_ns: str, allowed: list[str], expected: list[str]
) -> None:
    assert tenancy.allowed(claim_ns, allowed) == expected


def test_the_models_identity_grants_what_models_compose_and_no_more() -> None:
    """The ClusterRole a local/existing cluster binds for its models covers every kind the
    function composes on a cluster, with nothing else (no namespaces, no wildcards)."""
    from dot_inference.crossplane import documents, render

    pkg = documents.load_package(PACKAGE)
    result = render.render_in_package(pkg, load_yaml(EXAMPLES / "cluster-local.yaml")[0])
    role = next(
        o["spec"]["forProvider"]["manifest"]
        for o in result.composed
        if o["metadata"]["annotations"]["crossplane.io/composition-resource-name"]
        == "models-clusterrole"
    )
    granted = {
        (g, r)
        for rule in role["rules"]
        if "create" in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    # Read only: what an llm-d model's router Role grants (Kubernetes lets a Role grant only
    # what its creator holds).
    read_only = {
        (g, r)
        for rule in role["rules"]
        if "create" not in rule["verbs"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    plural = {
        "VLLMRuntime": "vllmruntimes",
        "Ingress": "ingresses",
        "Job": "jobs",
        "PersistentVolumeClaim": "persistentvolumeclaims",
        "Secret": "secrets",
        "ScaledObject": "scaledobjects",
        "Deployment": "deployments",
        "Service": "services",
        "LeaderWorkerSet": "leaderworkersets",
        "StatefulSet": "statefulsets",
        "InferencePool": "inferencepools",
        "HTTPRoute": "httproutes",
        "ServiceAccount": "serviceaccounts",
        "Role": "roles",
        "RoleBinding": "rolebindings",
        "ConfigMap": "configmaps",
    }
    state = {**CLUSTER, "status": {**CLUSTER["status"], "apps": {**CLUSTER["status"]["apps"]}}}
    state["status"]["apps"]["keda"] = True
    state["status"]["apps"]["lws"] = True
    state["status"]["apps"]["llmd"] = True
    state["status"]["llmd"] = {"gateway": {"name": "gw", "namespace": "agentgateway-system"}}
    state["status"]["gpu"] = {**state["status"]["gpu"], "rdma": {"enabled": True}}
    roles_grant: set[tuple[str, str]] = set()
    composed = set()
    scaled = {"autoscaling": {"maxReplicas": 2}}
    variants = [
        {"model": "Qwen/Qwen2.5-1.5B-Instruct"},
        {"model": "meta-llama/Llama-3.1-8B-Instruct"},  # gated: the token Secret
        {"model": "Qwen/Qwen2.5-1.5B-Instruct", "engine": {"simulate": True}, **scaled},
        {"model": "Qwen/Qwen2.5-32B-Instruct"},  # two nodes of 4 L4: a LeaderWorkerSet
        {"model": "Qwen/Qwen2.5-7B-Instruct", "backend": "llmd", **scaled},
        {
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "backend": "llmd",
            "disaggregation": {"prefill": {"gpu": 1}, "decode": {"gpu": 2}},
        },
    ]
    for params in variants:
        xr = claim(**ON_CLUSTER, ingressHost="q.example.com", **params)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "hf-token", "namespace": "a-team"},
            "type": "Opaque",
            "data": {"token": "eA=="},
        }
        out = compose(
            Inputs(
                xr=xr,
                engine_image=engine_image(),
                simulator_image=simulator_image(),
                required={
                    "inference-cluster": [state],
                    "secret-hf-token": [secret],
                    **no_credentials(),
                },
                **llmd_images(),
            )
        )
        assert out.fatal is None, out.fatal
        for o in out.resources.values():
            if o["kind"] == "Object":
                m = o["spec"]["forProvider"]["manifest"]
                composed.add((m["apiVersion"].rpartition("/")[0], plural[m["kind"]]))
                if m["kind"] == "Role":
                    roles_grant |= {
                        (g, r)
                        for rule in m["rules"]
                        for g in rule["apiGroups"]
                        for r in rule["resources"]
                    }
    assert composed == granted
    assert read_only == roles_grant - granted, "reads exactly what the routers' Roles grant"


# --------------------------------------------------------------------------- second pass


def test_the_tenancy_policy_has_one_home() -> None:
    """The policy object the function reads is the one kcl/tenancy.k describes: the program
    gets it as spec.params.tenancyPolicy, and install/tenancy-policy.yaml is it, empty."""
    comp = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    policy = comp["spec"]["pipeline"][0]["input"]["spec"]["params"]["tenancyPolicy"]
    assert policy == {
        "apiVersion": tenancy.POLICY_API_VERSION,
        "kind": tenancy.POLICY_KIND,
        "name": tenancy.POLICY_NAME,
        "key": tenancy.POLICY_KEY,
        "anyNamespace": tenancy.POLICY_ANY,
    }
    [installed] = load_yaml(ROOT / "install" / "tenancy-policy.yaml")
    assert (installed["kind"], installed["metadata"]["name"]) == (tenancy.POLICY_KIND, POLICY)
    assert installed["data"] == {tenancy.POLICY_KEY: {}}


POLICY = tenancy.POLICY_NAME


def policy(table: Any) -> dict[str, Any]:
    return {
        "kind": tenancy.POLICY_KIND,
        "metadata": {"name": POLICY},
        "data": {"targetNamespaces": table},
    }


@pytest.mark.parametrize(
    ("case", "obj", "expected"),
    [
        ("no policy", None, ()),
        ("the claim's namespace", policy({"a-team": ["x", "y"], "b-team": ["z"]}), ("x", "y")),
        (
            "every namespace, after its own",
            policy({"*": ["shared"], "a-team": ["x"]}),
            ("x", "shared"),
        ),
        ("never a system namespace", policy({"a-team": ["kube-system", "traefik", "x"]}), ("x",)),
        ("junk is ignored", policy({"a-team": "x"}), ()),
        ("junk entries are ignored", policy({"a-team": [1, None, "", "x"]}), ("x",)),
        ("not a table", policy(["a-team"]), ()),
    ],
)
def test_what_the_admin_policy_allows(case: str, obj: Any, expected: tuple[str, ...]) -> None:
    assert tenancy.admin_allowed(obj, "a-team") == expected


def _llm(ns: str, name: str, host: str, created: str = "2026-01-01T00:00:00Z", **params: Any):
    return {
        "kind": "LLMInference",
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
        "spec": {"parameters": {"model": "m/x", "ingressHost": host, **params}},
    }


def _ic(ns: str, name: str, provider: str, host: str | None = None) -> dict[str, Any]:
    apps = {"vllm": {"enabled": True, "endpoint": {"host": host}}} if host else {}
    return {
        "kind": "InferenceCluster",
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"parameters": {"provider": provider, "apps": apps}},
    }


CONFIGS = [
    {
        "metadata": {"namespace": "b-team", "name": "incluster"},
        "spec": {"credentials": {"source": "InjectedIdentity"}},
    },
    {
        "metadata": {"namespace": "b-team", "name": "pc"},
        "spec": {"credentials": {"source": "Secret"}},
    },
]
CLUSTERS = [
    _ic("b-team", "local", "local", "router.example.com"),
    _ic("b-team", "aws", "aws", "r2.example.com"),
]


@pytest.mark.parametrize(
    ("case", "model", "on_control_plane"),
    [
        ("no cluster", _llm("b-team", "m", "h"), True),
        ("a local cluster", _llm("b-team", "m", "h", clusterRef={"name": "local"}), True),
        ("a cloud cluster", _llm("b-team", "m", "h", clusterRef={"name": "aws"}), False),
        (
            "a local cluster of another namespace",
            _llm("c-team", "m", "h", clusterRef={"name": "local"}),
            False,
        ),
        (
            "a ProviderConfig (another cluster)",
            _llm("b-team", "m", "h", providerConfigName="pc"),
            False,
        ),
        (
            "a ProviderConfig with provider-kubernetes' own identity",
            _llm("b-team", "m", "h", providerConfigName="incluster"),
            True,
        ),
        (
            "that ProviderConfig, from another namespace",
            _llm("c-team", "m", "h", providerConfigName="incluster"),
            False,
        ),
        (
            "a local cluster's models ProviderConfig",
            _llm("b-team", "m", "h", providerConfigName="local-models"),
            True,
        ),
        (
            "placed on a local cluster",
            {
                **_llm("b-team", "m", "h", clusterSelector={"matchLabels": {}}),
                "status": {"placement": {"cluster": "local"}},
            },
            True,
        ),
        ("not placed yet", _llm("b-team", "m", "h", clusterSelector={"matchLabels": {}}), False),
        (
            "being deleted",
            {
                **_llm("b-team", "m", "h"),
                "metadata": {"namespace": "b-team", "name": "m", "deletionTimestamp": "x"},
            },
            False,
        ),
    ],
)
def test_who_serves_on_the_control_plane(case: str, model: dict, on_control_plane: bool) -> None:
    holders = tenancy.control_plane_hosts([model], CLUSTERS, CONFIGS)
    hosts = {h.host for h in holders}
    assert ("h" in hosts) is on_control_plane
    assert "router.example.com" in hosts, "a local cluster's router host"
    assert "r2.example.com" not in hosts, "a cloud cluster has its own ingress controller"


def test_the_first_holder_keeps_a_host() -> None:
    holders = tenancy.control_plane_hosts(
        [
            _llm("b-team", "old", "h", "2026-01-01T00:00:00Z"),
            _llm("c-team", "new", "h", "2026-03-01T00:00:00Z"),
        ],
        [],
    )
    me = ("a-team", "LLMInference", "qwen")
    assert tenancy.first_holder("h", holders, "2026-02-01T00:00:00Z", me).holder == (
        "LLMInference b-team/old"
    )
    assert tenancy.first_holder("h", holders, "2025-12-01T00:00:00Z", me) is None, "came first"
    assert tenancy.first_holder("other", holders, "", me) is None
    mine = ("b-team", "LLMInference", "old")
    assert tenancy.first_holder("h", holders, "2026-01-01T00:00:00Z", mine) is None, "itself"


KV = "--kv-transfer-config"
EXPANDS = "names a variable the kubelet expands, which hides the address"


@pytest.mark.parametrize(
    ("case", "args", "env", "expected"),
    [
        (
            "kv_ip in the JSON",
            [KV, '{"kv_connector":"X","kv_ip":"1.2.3.4"}'],
            [],
            [(KV + ".kv_ip", "1.2.3.4", None)],
        ),
        (
            "= and _",
            ['--kv_transfer_config={"kv_ip":"1.2.3.4"}'],
            [],
            [(KV + ".kv_ip", "1.2.3.4", None)],
        ),
        (
            "a unique prefix",
            ["--kv-transfer", '{"kv_ip":"1.2.3.4"}'],
            [],
            [(KV + ".kv_ip", "1.2.3.4", None)],
        ),
        (
            "a dotted key",
            ["--kv-transfer-config.kv_ip", "1.2.3.4"],
            [],
            [(KV + ".kv_ip", "1.2.3.4", None)],
        ),
        (
            "a prefix and a dotted key",
            ["--kv-tr.kv_ip=h.example.com"],
            [],
            [(KV + ".kv_ip", "h.example.com", None)],
        ),
        (
            "a URL in the connector's settings",
            [KV, '{"kv_connector_extra_config":{"remote_url":"lm://[::2]:1","n":3}}'],
            [],
            [(KV + ".kv_connector_extra_config.remote_url", "::2", None)],
        ),
        (
            "host:port and nested connectors",
            [
                KV,
                '{"kv_connector_extra_config":{"master_server_address":"m.example.com:50051","connectors":[{"kv_ip":"5.6.7.8"}]}}',
            ],
            [],
            [
                (KV + ".kv_connector_extra_config.connectors[0].kv_ip", "5.6.7.8", None),
                (KV + ".kv_connector_extra_config.master_server_address", "m.example.com", None),
            ],
        ),
        (
            "a proxy_ip",
            [KV + ".kv_connector_extra_config.proxy_ip=p.example.com"],
            [],
            [(KV + ".kv_connector_extra_config.proxy_ip", "p.example.com", None)],
        ),
        (
            "the encoder cache",
            ["--ec-transfer-config", '{"ec_ip":"1.2.3.4"}'],
            [],
            [("--ec-transfer-config.ec_ip", "1.2.3.4", None)],
        ),
        (
            "cache events sent out",
            ["--kv-events-config", '{"endpoint":"tcp://e.example.com:5557"}'],
            [],
            [("--kv-events-config.endpoint", "e.example.com", None)],
        ),
        ("cache events bound here", ["--kv-events-config", '{"endpoint":"tcp://*:5557"}'], [], []),
        (
            "a variable the kubelet expands",
            [KV, '{"kv_ip":"$(IP)"}'],
            [],
            [(KV + ".kv_ip", "$(IP)", EXPANDS)],
        ),
        ("not JSON", [KV, "not json"], [], [(KV, "not json", "is not JSON the function can read")]),
        (
            "the NIXL side channel",
            [],
            [("VLLM_NIXL_SIDE_CHANNEL_HOST", "9.9.9.9")],
            [("VLLM_NIXL_SIDE_CHANNEL_HOST", "9.9.9.9", None)],
        ),
        (
            "harmless settings",
            ["--max-model-len", "4096", KV, '{"kv_connector":"X","kv_role":"kv_both","kv_port":1}'],
            [("LMCACHE_CHUNK_SIZE", "256"), ("VLLM_LOGGING_LEVEL", "DEBUG")],
            [],
        ),
    ],
)
def test_where_a_claim_s_settings_send_the_kv_cache(
    case: str, args: list[str], env: list[tuple[str, str]], expected: list[tuple]
) -> None:
    got = [(s.where, s.address, s.problem) for s in tenancy.kv_addresses(args, env)]
    assert got == expected


def test_every_interface_is_not_the_pod() -> None:
    assert "0.0.0.0" not in tenancy.LOOPBACK


def test_a_host_on_the_control_plane_asks_for_every_namespace() -> None:
    """The control plane's ledger spans namespaces: the requirements name no namespace."""
    out = compose(Inputs(xr=claim(ingressHost="q.example.com"), engine_image=engine_image()))
    assert out.fatal is None, out.fatal
    assert out.requirements["control-plane-llminferences"] == {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
    }
    assert out.requirements["control-plane-inferenceclusters"]["kind"] == "InferenceCluster"
    on_cloud = compose(
        Inputs(
            xr=claim(ingressHost="q.example.com", **ON_CLUSTER),
            engine_image=engine_image(),
            required={"inference-cluster": [cluster()]},
        )
    )
    assert "control-plane-llminferences" not in on_cloud.requirements, "its own controller"


@pytest.mark.parametrize(
    ("example", "asks"),
    [
        (
            "cluster-local.yaml",
            {
                "tenancy-policy",
                "control-plane-llminferences",
                "control-plane-inferenceclusters",
                "control-plane-providerconfigs",
            },
        ),
        ("cluster-aws.yaml", set()),
        ("cluster-existing.yaml", set()),
    ],
)
def test_only_a_local_cluster_reads_the_control_plane(example: str, asks: set[str]) -> None:
    """A local cluster's program asks Crossplane for the platform's policy and, with a router
    host, for every LLMInference, InferenceCluster and ProviderConfig in every namespace (and
    for each other namespace it would use); other providers
    have their own cluster and ask for nothing."""
    from dot_inference.crossplane import documents, render

    pkg = documents.load_package(PACKAGE)
    [xr] = [d for d in load_yaml(EXAMPLES / example) if d["kind"] == "InferenceCluster"]
    result = render.render_in_package(pkg, xr)
    assert result.fatal is None, result.fatal
    asked = (result.requirements.get("kcl") or {}).get("resources") or {}
    assert set(asked) == asks
    for name in asks - {"tenancy-policy"}:
        assert "namespace" not in asked[name], "every namespace"


def test_a_host_served_already_is_kept_against_an_older_claim() -> None:
    """Age decides between claims that only ask; one that serves the host keeps it, so an
    older object cannot take a running model's host by editing its own."""
    serving = {
        **_llm("b-team", "new", "h", "2026-03-01T00:00:00Z"),
        "status": {"endpoint": "http://h"},
    }
    holders = tenancy.control_plane_hosts([serving], [])
    old = ("c-team", "LLMInference", "old")
    first = tenancy.first_holder("h", holders, "2026-01-01T00:00:00Z", old)
    assert first is not None and first.serving
    assert tenancy.first_holder("h", holders, "2026-01-01T00:00:00Z", old, serving=True) is None


def test_a_claim_through_a_provider_config_waits_for_the_policy() -> None:
    """The policy is asked for on the first call (by name); until Crossplane answers, a
    namespace only the policy could allow is neither composed nor refused."""
    xr = claim(providerConfigName="pc", targetNamespace="target-ns")
    first = compose(Inputs(xr=xr, engine_image=engine_image()))
    assert first.fatal is None and not first.resources
    assert first.requirements["tenancy-policy"]["matchName"] == tenancy.POLICY_NAME
    assert [c.reason for c in first.conditions if c.type == "Tenancy"] == ["Resolving"]
    none = compose(Inputs(xr=xr, engine_image=engine_image(), required={"tenancy-policy": []}))
    assert none.fatal and "where the platform's tenancy policy allows" in none.fatal
    allowed = compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            required={"tenancy-policy": [policy({"a-team": ["target-ns"]})]},
        )
    )
    assert allowed.fatal is None, allowed.fatal
    namespaced = {
        m["metadata"]["namespace"]
        for o in allowed.resources.values()
        if "namespace" in (m := o["spec"]["forProvider"]["manifest"])["metadata"]
    }
    assert namespaced == {"target-ns"}, "its objects land there (the Namespace itself has none)"
    system = compose(
        Inputs(
            xr=claim(providerConfigName="pc", targetNamespace="kube-system"),
            engine_image=engine_image(),
        )
    )
    assert system.fatal and "system namespace" in system.fatal, "refused at once"
