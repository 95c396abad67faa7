"""Deleting an XR completes: the rendered Usages order every deletion that could otherwise
hang, and they form no cycle.

Crossplane deletes composed resources all at once; a Usage holds its `of` until its `by` is
gone. What must outlive what, for a deletion to finish:

- an Object or Release needs its ProviderConfig to reach the cluster (else its finalizer
  never goes);
- a ProviderConfig needs the composed resource that writes its kubeconfig Secret (EKS
  ClusterAuth, AKS and GKE clusters);
- a nested LLMInference's Objects need the cluster's provider-kubernetes ProviderConfig;
- a cloud resource needs every resource it references (a `*Selector` or `*Ref` field in
  spec.forProvider, read from the provider's own CRD: "Selector for a VPC in ec2 to populate
  vpcId"): node pools before the cluster, the cluster before its subnets and roles, subnets
  before the VPC;
- a CRD the XR installs is never deleted by it (deleting it deletes every object of that kind
  on the cluster, and an Object whose kind is gone cannot finish deleting);
- and the Usages form no cycle (a cycle is a deletion that never ends).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.apiserver import schema_dirs
from dot_inference.crossplane import documents, render

Key = tuple[str, str, str]  # (API group, kind, name)


def _key(api_version: str, kind: str, name: str) -> Key:
    return (api_version.rsplit("/", 1)[0] if "/" in api_version else "", kind, name)


def _of(obj: dict[str, Any]) -> Key:
    return _key(obj["apiVersion"], obj["kind"], obj["metadata"]["name"])


def _ref(ref: dict[str, Any]) -> Key:
    return _key(ref["apiVersion"], ref["kind"], ref["resourceRef"]["name"])


@functools.cache
def _package() -> documents.Package:
    return documents.load_package(PACKAGE)


def _cluster_claims() -> dict[str, dict[str, Any]]:
    """ "<example file>:<name>" -> each InferenceCluster of the examples (rendered when a test
    asks for it, not while collecting: every worker collects)."""
    pkg = _package()
    return {
        f"{path.name}:{xr['metadata']['name']}": xr
        for path in sorted(EXAMPLES.glob("cluster-*.yaml"))
        for xr in documents.load_objects(path)
        if render.is_handled_xr(pkg, xr)
    }


CLAIMS = _cluster_claims()
NAMES = list(CLAIMS)


@functools.cache
def _composed(name: str) -> list[dict[str, Any]]:
    result = render.render_in_package(_package(), CLAIMS[name])
    assert result.fatal is None, result.fatal
    return result.composed


def _protects(composed: list[dict[str, Any]]) -> set[tuple[Key, Key]]:
    """(of, by) of every Usage."""
    return {
        (_ref(u["spec"]["of"]), _ref(u["spec"]["by"])) for u in composed if u["kind"] == "Usage"
    }


@functools.cache
def _crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(API group, kind) -> the served version's spec.forProvider schema, from the
    providers' CRDs beside the project."""
    out = {}
    for folder in schema_dirs():
        for path in sorted(folder.glob("provider-upjet-*/*.yaml")):
            for crd in load_yaml(path):
                if crd.get("kind") != "CustomResourceDefinition":
                    continue
                for v in crd["spec"]["versions"]:
                    if v.get("served"):
                        props = v["schema"]["openAPIV3Schema"].get("properties") or {}
                        fp = (props.get("spec") or {}).get("properties", {}).get("forProvider")
                        if fp:
                            out[(crd["spec"]["group"], crd["spec"]["names"]["kind"])] = fp
    return out


# "Selector for a VPC in ec2 to populate vpcId", "Selector for a list of Subnet in ec2 to
# populate subnetIds", "Selector for a Cluster to populate clusterName" (same API group).
_REFERENCE = re.compile(
    r"^(?:Selector for|Reference to) (?:an? |a list of )?(\w+)(?: in (\w+))? to populate"
)


def _references(value: Any, schema: dict[str, Any]) -> list[tuple[str, str | None, dict[str, Any]]]:
    """(kind, API group prefix, selector or ref) of every reference in a forProvider value,
    as the CRD describes each field."""
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [r for v in value for r in _references(v, items)]
    if not isinstance(value, dict):
        return []
    props = schema.get("properties") or {}
    out = []
    for k, v in value.items():
        field = props.get(k) or {}
        m = _REFERENCE.match(" ".join(str(field.get("description", "")).split()))
        if m and (k.endswith("Selector") or k.endswith("Ref")):
            out.append((m.group(1), m.group(2), v))
        else:
            out.extend(_references(v, field))
    return out


def _referenced(composed: list[dict[str, Any]], o: dict[str, Any]) -> list[dict[str, Any]]:
    """The composed resources `o` references."""
    group = o["apiVersion"].rsplit("/", 1)[0]
    schema = _crd_schemas().get((group, o["kind"]))
    forprovider = (o.get("spec") or {}).get("forProvider")
    if schema is None or not isinstance(forprovider, dict):
        return []
    out = []
    for kind, prefix, ref in _references(forprovider, schema):
        for t in composed:
            t_group = t["apiVersion"].rsplit("/", 1)[0]
            if t["kind"] != kind or not (
                t_group.startswith(prefix + ".") if prefix else t_group == group
            ):
                continue
            labels = t["metadata"].get("labels") or {}
            if "name" in ref:  # a *Ref names its target
                hit = ref["name"] == t["metadata"]["name"]
            else:  # every selector here selects only what this XR composed
                hit = all(labels.get(k) == v for k, v in (ref.get("matchLabels") or {}).items())
            if hit:
                out.append(t)
    return out


def _needs(composed: list[dict[str, Any]]) -> set[tuple[Key, Key, str]]:
    """(of, by, why) for every edge a deletion needs."""
    by_name = {(o["kind"], o["metadata"]["name"]): o for o in composed}
    writers = {
        o["spec"]["writeConnectionSecretToRef"]["name"]: o
        for o in composed
        if isinstance(o.get("spec"), dict) and o["spec"].get("writeConnectionSecretToRef")
    }
    needs: set[tuple[Key, Key, str]] = set()
    for o in composed:
        group = o["apiVersion"].rsplit("/", 1)[0]
        pc_ref = (o.get("spec") or {}).get("providerConfigRef")
        if o["kind"] in ("Object", "Release") and pc_ref and pc_ref["kind"] == "ProviderConfig":
            pc = (group, "ProviderConfig", pc_ref["name"])
            needs.add((pc, _of(o), f"{o['kind']} reaches the cluster through its ProviderConfig"))
        if o["kind"] == "ProviderConfig":
            secret = o["spec"].get("credentials", {}).get("secretRef", {}).get("name")
            if secret in writers:
                needs.add(
                    (
                        _of(writers[secret]),
                        _of(o),
                        "the ProviderConfig's kubeconfig is written here",
                    )
                )
        for t in _referenced(composed, o):
            needs.add((_of(t), _of(o), f"{o['kind']} references {t['kind']}"))
        if o["kind"] == "LLMInference":
            cluster = o["spec"]["parameters"]["clusterRef"]["name"]
            # The models' own ProviderConfig where the cluster scopes them (identity.k).
            name = (
                f"{cluster}-models"
                if ("ProviderConfig", f"{cluster}-models") in by_name
                else cluster
            )
            pc = ("kubernetes.m.crossplane.io", "ProviderConfig", name)
            needs.add((pc, _of(o), "a nested model's Objects use the models' ProviderConfig"))
    return needs


@pytest.mark.parametrize("name", NAMES)
def test_every_edge_a_deletion_needs_is_a_usage(name: str) -> None:
    """Each `of` outlives its `by`: a Usage between them, or a chain of Usages."""
    composed = _composed(name)
    have = _outlives(_protects(composed))
    missing = sorted(
        f"{by} needs {of}: {why}" for of, by, why in _needs(composed) if (of, by) not in have
    )
    assert not missing, "\n".join(missing)


def _outlives(edges: set[tuple[Key, Key]]) -> set[tuple[Key, Key]]:
    """The transitive closure of (of, by)."""
    closure = set(edges)
    while True:
        more = {(a, d) for a, b in closure for c, d in closure if b == c} - closure
        if not more:
            return closure
        closure |= more


@pytest.mark.parametrize("cloud", ["cluster-aws.yaml", "cluster-google.yaml", "cluster-azure.yaml"])
def test_cloud_references_are_found_in_the_crds(cloud: str) -> None:
    """The walk reads every reference the clouds' resources make (else the test above
    could pass by seeing none): per cloud, the edges between the cloud resources."""
    composed = _composed(next(n for n in NAMES if n.startswith(cloud + ":")))
    edges = {
        (of[1], by[1]) for of, by, why in _needs(composed) if why.endswith(f"references {of[1]}")
    }
    expected = {
        "cluster-aws.yaml": {
            ("VPC", "Subnet"),
            ("VPC", "InternetGateway"),
            ("VPC", "RouteTable"),
            ("VPC", "MainRouteTableAssociation"),
            ("RouteTable", "Route"),
            ("InternetGateway", "Route"),
            ("RouteTable", "MainRouteTableAssociation"),
            ("RouteTable", "RouteTableAssociation"),
            ("Subnet", "RouteTableAssociation"),
            ("Role", "RolePolicyAttachment"),
            ("Role", "Cluster"),
            ("Subnet", "Cluster"),
            ("Cluster", "ClusterAuth"),
            ("Cluster", "NodeGroup"),
            ("Role", "NodeGroup"),
            ("Subnet", "NodeGroup"),
            ("Cluster", "Addon"),
            ("VPC", "SecurityGroup"),
            ("SecurityGroup", "SecurityGroupIngressRule"),
            ("FileSystem", "MountTarget"),
            ("Subnet", "MountTarget"),
            ("SecurityGroup", "MountTarget"),
            ("Role", "RolePolicy"),
            ("Cluster", "PodIdentityAssociation"),
            ("Role", "PodIdentityAssociation"),
        },
        "cluster-google.yaml": {
            ("Network", "Subnetwork"),
            ("Network", "Cluster"),
            ("Subnetwork", "Cluster"),
            ("Cluster", "NodePool"),
        },
        "cluster-azure.yaml": {
            ("ResourceGroup", "KubernetesCluster"),
            ("KubernetesCluster", "KubernetesClusterNodePool"),
        },
    }[cloud]
    assert edges == expected


@pytest.mark.parametrize("name", NAMES)
def test_deleting_everything_terminates(name: str) -> None:
    """Delete all at once; each round, whatever no remaining resource uses goes."""
    composed = _composed(name)
    edges = _protects(composed)
    remaining = {_of(o) for o in composed if o["kind"] != "Usage"}
    rounds = 0
    while remaining:
        free = {k for k in remaining if not any(of == k and by in remaining for of, by in edges)}
        assert free, f"deletion never ends: {sorted(remaining)} wait on each other"
        remaining -= free
        rounds += 1
    assert rounds >= 2 or not edges


@pytest.mark.parametrize("name", NAMES)
def test_installed_crds_are_never_deleted(name: str) -> None:
    composed = _composed(name)
    for o in composed:
        manifest = (o.get("spec") or {}).get("forProvider", {}).get("manifest") or {}
        if o["kind"] == "Object" and manifest.get("kind") == "CustomResourceDefinition":
            policies = o["spec"].get("managementPolicies", ["*"])
            assert "Delete" not in policies and "*" not in policies, o["metadata"]["name"]


def _llm(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": "a-team"},
        "spec": {"parameters": {"model": "Qwen/Qwen2.5-1.5B-Instruct", **params}},
    }


def _cluster(router_namespace: str, allowed: tuple[str, ...] = ()) -> dict[str, Any]:
    from conftest import load_yaml

    state = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")[0]
    state["status"]["vllm"]["namespace"] = router_namespace
    state["status"].setdefault("tenancy", {})["allowedNamespaces"] = list(allowed)
    return state


_STAGING = {"inference-cluster": [_cluster("a-team", ("a-team-staging",))]}


MOVES = [
    (
        "targetNamespace",
        _llm(clusterRef={"name": "inference-aws"}, targetNamespace="a-team"),
        _llm(clusterRef={"name": "inference-aws"}, targetNamespace="a-team-staging"),
        _STAGING,
        _STAGING,
    ),
    (
        "providerConfigName",
        _llm(providerConfigName="pc-1"),
        _llm(providerConfigName="pc-2"),
        {},
        {},
    ),
    ("control plane to another cluster", _llm(), _llm(providerConfigName="pc"), {}, {}),
    (
        "the cluster's router namespace",
        _llm(clusterRef={"name": "inference-aws"}),
        _llm(clusterRef={"name": "inference-aws"}),
        {"inference-cluster": [_cluster("models")]},
        {"inference-cluster": [_cluster("serving")]},
    ),
]


@pytest.mark.parametrize(
    ("case", "before", "after", "required_before", "required_after"),
    MOVES,
    ids=[m[0] for m in MOVES],
)
def test_moving_a_model_composes_new_objects(
    case: str, before: dict, after: dict, required_before: dict, required_after: dict
) -> None:
    """Crossplane keeps a composed resource's name for its key and deletes the keys that go,
    so a model that moves gets new keys and new Object names: its old engine is deleted where
    it runs (through its own ProviderConfig), not left running while the Objects point
    elsewhere."""
    from conftest import engine_image

    from function.compose import compose
    from function.outcome import Inputs

    old = compose(Inputs(xr=before, engine_image=engine_image(), required=required_before))
    new = compose(Inputs(xr=after, engine_image=engine_image(), required=required_after))
    assert old.fatal is None and new.fatal is None

    def placed(out: Any) -> set[str]:
        """Keys of what goes to the target (a Usage of the cluster stays on the control plane)."""
        return {k for k, o in out.resources.items() if o["kind"] != "Usage"}

    assert not placed(old) & placed(new), f"{case}: keys kept across the move"

    def names(out: Any) -> set[str]:
        return {o["metadata"]["name"] for o in out.resources.values() if o["kind"] == "Object"}

    assert not names(old) & names(new), f"{case}: Object names kept across the move"


def test_renders_cover_every_cluster_example() -> None:
    assert {n.split(":")[0] for n in NAMES} == {
        Path(p).name for p in EXAMPLES.glob("cluster-*.yaml")
    }


@pytest.mark.parametrize(
    ("owners", "usage"),
    [
        ([], True),
        (
            [
                {
                    "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
                    "kind": "InferenceCluster",
                    "name": "inference-aws",
                    "uid": "u",
                    "controller": True,
                }
            ],
            False,
        ),
        (
            [
                {
                    "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
                    "kind": "InferenceCluster",
                    "name": "another",
                    "uid": "u",
                    "controller": True,
                }
            ],
            True,
        ),
    ],
    ids=["standalone model", "the cluster's own model", "composed by another cluster"],
)
def test_a_model_keeps_its_cluster_unless_the_cluster_composed_it(
    owners: list[dict[str, Any]], usage: bool
) -> None:
    """Deleting a cluster that standalone models run on is refused (naming the model)
    instead of pulling the cluster from under them; its own models (spec.parameters.models)
    go first when it is deleted, so they must not hold it (that would never end)."""
    from conftest import engine_image

    from function.compose import compose
    from function.keys import CLUSTER_USAGE, RUNTIME
    from function.outcome import Inputs

    xr = _llm(clusterRef={"name": "inference-aws"})
    xr["metadata"]["ownerReferences"] = owners
    out = compose(
        Inputs(
            xr=xr,
            engine_image=engine_image(),
            required={"inference-cluster": [_cluster("a-team")]},
        )
    )
    found = out.resources.get(CLUSTER_USAGE)
    assert (found is not None) is usage
    if found:
        assert found["spec"]["of"] == {
            "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
            "kind": "InferenceCluster",
            "resourceRef": {"name": "inference-aws"},
        }
        # By the model's engine there (its Object), never the model itself: Crossplane keeps a
        # composed Usage until its `by` is gone, so a foreground deletion of the model would
        # wait on itself.
        engine = out.resources[next(k for k in out.resources if k.startswith(RUNTIME))]
        assert found["spec"]["by"] == {
            "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
            "kind": "Object",
            "resourceRef": {"name": engine["metadata"]["name"]},
        }
        assert "replayDeletion" not in found["spec"], "a refused delete is not replayed later"
        assert out.ready[CLUSTER_USAGE] is True
