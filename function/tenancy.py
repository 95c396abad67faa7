"""Who may deploy what where: the namespaces a claim's objects may land in on the target.

A claim (an LLMInference, created by an application team in its namespace) deploys by
default only into the namespace of its own name on the target cluster. Its InferenceCluster
(the platform team's) adds the namespace its vLLM router watches and any it lists in
`spec.parameters.tenancy.allowedNamespaces`; the cluster publishes the result in
`status.tenancy.allowedNamespaces`. System namespaces are never allowed, whatever a cluster
says: Kubernetes' own (`kube-*`), Crossplane's, and those of the apps an InferenceCluster
installs (the production-stack operator, the GPU Operator, the ingress controller).
"""

from __future__ import annotations

from collections.abc import Iterable

# Namespaces of the apps an InferenceCluster installs (kcl/inferencecluster/program:
# operator.k `_operatorNamespace`, apps.k `_nvidia`, `_keda`, `_lws` and `_ingress`, llmd.k
# `_llmdNamespace`; the cluster also publishes them in status.tenancy.reservedNamespaces, and
# a test keeps the two equal), and Crossplane's.
RESERVED = frozenset(
    {
        "crossplane-system",
        "production-stack-system",
        "gpu-operator",
        "traefik",
        "keda",
        "lws-system",
        "agentgateway-system",
        "dot-inference-system",
    }
)
RESERVED_PREFIX = "kube-"


def reserved(namespace: str, extra: Iterable[str] = ()) -> bool:
    """Whether `namespace` belongs to the system or to a cluster app (never a model's)."""
    return namespace.startswith(RESERVED_PREFIX) or namespace in RESERVED or namespace in set(extra)


def allowed(claim_namespace: str, cluster_allowed: Iterable[str] = ()) -> list[str]:
    """The target namespaces a claim of `claim_namespace` may use, in a stable order."""
    out = [claim_namespace]
    out += [n for n in cluster_allowed if n not in out]
    return out


def problem(
    *,
    target_namespace: str,
    claim_namespace: str,
    cluster_allowed: Iterable[str],
    cluster: str | None,
    field: str,
    cluster_reserved: Iterable[str] = (),
) -> str | None:
    """Why the claim may not deploy into `target_namespace`, or None."""
    may = [
        n for n in allowed(claim_namespace, cluster_allowed) if not reserved(n, cluster_reserved)
    ]
    where = f"InferenceCluster {claim_namespace}/{cluster}" if cluster else "the target cluster"
    if reserved(target_namespace, cluster_reserved):
        use = (
            f"use one of {', '.join(may)}"
            if may
            else f"create the claim in a team's namespace (not {claim_namespace})"
        )
        return (
            f"{field}: {target_namespace} is a system namespace on {where} (Kubernetes', "
            f"Crossplane's or a cluster app's) and never takes models; {use}"
        )
    if target_namespace in may:
        return None
    more = (
        f"the platform team can allow more in spec.parameters.tenancy.allowedNamespaces of {where}"
        if cluster
        else "without an InferenceCluster (clusterRef) a claim deploys only into the namespace "
        "of its own name"
    )
    return (
        f"{field}: claims in namespace {claim_namespace} may not deploy into {target_namespace} "
        f"on {where}; allowed: {', '.join(may)} ({more})"
    )
