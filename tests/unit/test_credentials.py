"""Which Secrets of a namespace hold a cluster's credentials, and whose they are
(function/policy/credentials.py). The security catalogue refuses copies of each; this pins the
index itself: every reference it reads, the namespace rules, and that it waits for Crossplane."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import no_credentials

from function.policy import credentials

NS = "a-team"


def cluster(name: str, ns: str = NS, **params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "InferenceCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"parameters": params},
    }


def config(kind: str, name: str, secret: dict[str, Any], ns: str | None = NS) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {
        "kind": kind,
        "metadata": meta,
        "spec": {"credentials": {"source": "Secret", "secretRef": secret}},
    }


CASES = [
    (
        "every SecretRef of a cluster's parameters, and what its status publishes",
        {
            "credentials-inferenceclusters": [
                {
                    **cluster(
                        "edge",
                        provider="existing",
                        kubeconfigSecretRef={"name": "edge-kc"},
                        modelsKubeconfigSecretRef={"name": "edge-models"},
                        apps={"monitoring": {"grafana": {"adminSecretRef": {"name": "graf"}}}},
                    ),
                    "status": {"credentialsSecrets": ["edge-published"]},
                }
            ]
        },
        {
            "edge-kc": "InferenceCluster a-team/edge",
            "edge-models": "InferenceCluster a-team/edge",
            "graf": "InferenceCluster a-team/edge",
            "edge-published": "InferenceCluster a-team/edge",
        },
    ),
    (
        "a namespaced ProviderConfig's Secret is in its own namespace",
        {
            "credentials-kubernetes": [
                config("ProviderConfig", "gpu", {"name": "gpu-kc", "key": "kubeconfig"})
            ],
            "credentials-helm": [
                config("ProviderConfig", "other", {"name": "theirs"}, ns="b-team")
            ],
        },
        {"gpu-kc": "ProviderConfig a-team/gpu"},
    ),
    (
        "a ClusterProviderConfig counts only for the namespace its Secret is in",
        {
            "credentials-kubernetes-cluster": [
                config("ClusterProviderConfig", "here", {"namespace": NS, "name": "k"}, ns=None),
                config(
                    "ClusterProviderConfig", "there", {"namespace": "b-team", "name": "x"}, ns=None
                ),
            ],
        },
        {"k": "ClusterProviderConfig here"},
    ),
    (
        "the first owner by kind and name wins, whatever the order of the lists",
        {
            "credentials-inferenceclusters": [
                cluster("b", kubeconfigSecretRef={"name": "shared"}),
                cluster("a", kubeconfigSecretRef={"name": "shared"}),
            ],
            "credentials-kubernetes": [config("ProviderConfig", "pc", {"name": "shared"})],
        },
        {"shared": "InferenceCluster a-team/a"},
    ),
    (
        "half-written objects are read defensively",
        {
            "credentials-inferenceclusters": [
                {"metadata": {"name": "x"}, "spec": "oops", "status": {"credentialsSecrets": 3}},
                "not an object",
            ],
            "credentials-helm": [{"spec": {"credentials": {"secretRef": {"name": 7}}}}],
        },
        {},
    ),
]


@pytest.mark.parametrize(("listed", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_owners(listed: dict[str, list[Any]], expected: dict[str, str]) -> None:
    assert credentials.owners({**no_credentials(NS), **listed}, NS) == expected


def test_nothing_is_known_until_crossplane_has_listed_every_kind() -> None:
    required = no_credentials(NS)
    required.pop("credentials-helm-cluster")
    assert credentials.owners(required, NS) is None


def test_namespaced_kinds_are_asked_in_the_namespace_and_cluster_kinds_everywhere() -> None:
    asked = credentials.requirements(NS)
    assert {k: v.get("namespace") for k, v in asked.items()} == {
        "credentials-inferenceclusters": NS,
        "credentials-kubernetes": NS,
        "credentials-kubernetes-cluster": None,
        "credentials-helm": NS,
        "credentials-helm-cluster": None,
    }
