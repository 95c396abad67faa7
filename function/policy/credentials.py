"""Which Secrets of a namespace hold a cluster's credentials, and whose they are.

A claim copies a Secret of its namespace to another cluster (a Hugging Face token, an API
key, a spillover or gateway key), where other people's pods and gateways read it. None of
those may be a cluster's credentials: not the target's, nor any other cluster's of the
namespace. So the function asks Crossplane for everything in the namespace that names a
credential Secret, and refuses a copy of any of them, naming its real owner:

- every InferenceCluster: each `*SecretRef` of its spec.parameters (kubeconfigSecretRef,
  modelsKubeconfigSecretRef, gcpCredentialsSecretRef, Grafana's adminSecretRef...), and
  what it publishes in status.credentialsSecrets (the kubeconfig its cloud cluster writes,
  a local cluster's models kubeconfig);
- every ProviderConfig of provider-kubernetes and provider-helm in the namespace, and every
  ClusterProviderConfig whose Secret is in the namespace: each `secretRef` under its spec
  (spec.credentials, spec.identity).

Those providers are dependencies of the Configuration, so their kinds always exist; a kind
that is not installed would fail Crossplane's list, and with it the claim.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from function.cluster.target import CLUSTER_API_VERSION, CLUSTER_KIND
from function.kube import dig

# requirement name -> (apiVersion, kind, namespaced)
_KINDS: dict[str, tuple[str, str, bool]] = {
    "credentials-inferenceclusters": (CLUSTER_API_VERSION, CLUSTER_KIND, True),
    "credentials-kubernetes": ("kubernetes.m.crossplane.io/v1alpha1", "ProviderConfig", True),
    "credentials-kubernetes-cluster": (
        "kubernetes.m.crossplane.io/v1alpha1",
        "ClusterProviderConfig",
        False,
    ),
    "credentials-helm": ("helm.m.crossplane.io/v1beta1", "ProviderConfig", True),
    "credentials-helm-cluster": ("helm.m.crossplane.io/v1beta1", "ClusterProviderConfig", False),
}


def requirements(namespace: str) -> dict[str, dict[str, Any]]:
    """What to ask Crossplane for: every object of each kind (in `namespace` where the kind
    is namespaced)."""
    return {
        name: {"apiVersion": api, "kind": kind, **({"namespace": namespace} if ns else {})}
        for name, (api, kind, ns) in _KINDS.items()
    }


def owners(required: dict[str, list[dict[str, Any]]], namespace: str) -> dict[str, str] | None:
    """Secret name (in `namespace`) -> the object whose credentials it holds ("InferenceCluster
    a-team/inference-aws"); None until Crossplane has fetched every kind. The first owner by
    kind and name wins, so the answer does not depend on the order of the lists."""
    if any(name not in required for name in _KINDS):
        return None
    found: dict[str, str] = {}
    for name, (_, kind, namespaced) in _KINDS.items():
        objs = [o for o in required.get(name) or [] if isinstance(o, dict)]
        for obj in sorted(objs, key=lambda o: str(dig(o, "metadata", "name"))):
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            own = str(meta.get("name", ""))
            who = f"{kind} {namespace}/{own}" if namespaced else f"{kind} {own}"
            if namespaced and meta.get("namespace") not in (None, namespace):
                continue
            names = _cluster_secrets(obj) if kind == CLUSTER_KIND else _config_secrets(obj)
            for secret, ns in names:
                # A namespaced object's Secret is in its own namespace; a cluster-scoped
                # one's names its namespace.
                here = ns in (None, namespace) if namespaced else ns == namespace
                if here:
                    found.setdefault(secret, who)
    return found


def _cluster_secrets(cluster: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    for ref in _refs(dig(cluster, "spec", "parameters"), lambda k: k.endswith("SecretRef")):
        yield ref, None
    published = dig(cluster, "status", "credentialsSecrets")
    for name in published if isinstance(published, list) else []:
        if isinstance(name, str) and name:
            yield name, None


def _config_secrets(config: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    spec = config.get("spec")
    for ref in _walk(spec, lambda k: k == "secretRef"):
        name, ns = ref.get("name"), ref.get("namespace")
        if isinstance(name, str) and name:
            yield name, ns if isinstance(ns, str) else None


def _refs(value: Any, key: Any) -> Iterator[str]:
    for ref in _walk(value, key):
        if isinstance(ref.get("name"), str) and ref["name"]:
            yield ref["name"]


def _walk(value: Any, key: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Every dict under a key `key(k)` accepts, at any depth (bounded: a spec is shallow)."""
    if depth > 16:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, dict) and isinstance(k, str) and key(k):
                yield v
            yield from _walk(v, key, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key, depth + 1)
