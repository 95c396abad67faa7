"""The target stage: the cluster a claim names (fetched as a required resource), where its
namespace may deploy there, and the models already on it."""

from __future__ import annotations

from typing import Any

from function.claim.spec import LLMSpec, P, SpecError
from function.cluster import ledger, peers
from function.cluster.target import (
    CLUSTER_API_VERSION,
    CLUSTER_KIND,
    REQUIREMENT,
    ClusterNotReady,
    Target,
    from_cluster,
    without_cluster,
)
from function.outcome import Condition, Inputs, Outcome, keep_observed
from function.policy import tenancy

POLICY_REQUIREMENT = "tenancy-policy"


def policy_allowed(spec: LLMSpec, inputs: Inputs, out: Outcome) -> tuple[str, ...] | None:
    """What the platform admin's policy (the EnvironmentConfig tenancy.POLICY_NAME) lets the
    claim's namespace deploy into; None until Crossplane has looked it up."""
    out.requirements[POLICY_REQUIREMENT] = {
        "apiVersion": tenancy.POLICY_API_VERSION,
        "kind": tenancy.POLICY_KIND,
        "matchName": tenancy.POLICY_NAME,
    }
    if POLICY_REQUIREMENT not in inputs.required:
        return None
    found = inputs.required[POLICY_REQUIREMENT]
    return tenancy.admin_allowed(found[0] if found else None, spec.namespace)


def check_tenancy(spec: LLMSpec, target: Target, admin: tuple[str, ...] = ()) -> None:
    """A claim's objects go only where its namespace may deploy (function/policy/tenancy.py): its
    cluster's allowed namespaces, and those the platform admin's policy adds (`admin`)."""
    if target.provider_config is None:
        return  # Crossplane composes into the claim's own namespace
    if spec.target_namespace:
        field = f"{P}.targetNamespace"
    elif target.cluster and not spec.llmd:
        field = spec.cluster_field  # the cluster's router namespace
    else:
        field = "metadata.namespace"  # the claim's own namespace name
    problem = tenancy.problem(
        target_namespace=target.namespace,
        claim_namespace=spec.namespace,
        cluster_allowed=(*target.allowed_namespaces, *admin),
        cluster=target.cluster,
        cluster_reserved=target.reserved_namespaces,
    )
    if problem:
        raise SpecError(field, target.namespace, problem=problem)


def resolve_target(
    spec: LLMSpec, inputs: Inputs, out: Outcome, chosen: dict[str, Any] | None = None
) -> Target | None:
    target = find_target(spec, inputs, out, chosen)
    if target is None:
        return None
    # A claim through a ProviderConfig: the platform's policy may let its namespace deploy
    # into more (asked for at once, by name). On an InferenceCluster the cluster's own
    # allowedNamespaces decide: its models' identity is bound there and nowhere else.
    admin = policy_allowed(spec, inputs, out) if target.cluster is None else ()
    try:
        check_tenancy(spec, target, admin or ())
    except SpecError:
        if admin is not None or tenancy.reserved(target.namespace, target.reserved_namespaces):
            raise
        out.conditions.append(
            Condition(
                "Tenancy",
                "Unknown",
                "Resolving",
                f"looking up the platform's tenancy policy ({tenancy.POLICY_KIND} "
                f"{tenancy.POLICY_NAME})",
            )
        )
        return None
    return target


def find_target(
    spec: LLMSpec, inputs: Inputs, out: Outcome, chosen: dict[str, Any] | None = None
) -> Target | None:
    """The target: the control plane, a ProviderConfig's cluster, or an InferenceCluster
    (named in clusterRef and fetched, or `chosen` by placement among those fetched)."""
    if spec.cluster_ref is None:
        return without_cluster(spec)
    ref = f"InferenceCluster {spec.namespace}/{spec.cluster_ref}"
    if chosen is not None:
        return cluster_target(spec, chosen, ref, inputs, out)
    out.requirements[REQUIREMENT] = {
        "apiVersion": CLUSTER_API_VERSION,
        "kind": CLUSTER_KIND,
        "matchName": spec.cluster_ref,
        "namespace": spec.namespace,
    }
    if REQUIREMENT not in inputs.required:
        # First call of the reconcile: Crossplane fetches the cluster and calls again.
        out.conditions.append(Condition("Cluster", "Unknown", "Resolving", f"looking up {ref}"))
        return None
    found = inputs.required[REQUIREMENT]
    if not found:
        out.conditions.append(
            Condition(
                "Cluster",
                "False",
                "NotFound",
                f"{ref} does not exist; create it or fix {P}.clusterRef.name",
            )
        )
        out.warnings.append(f"{P}.clusterRef.name: {ref} not found; nothing new is composed")
        keep_observed(inputs, out)
        return None
    return cluster_target(spec, found[0], ref, inputs, out)


def cluster_target(
    spec: LLMSpec, cluster: dict[str, Any], ref: str, inputs: Inputs, out: Outcome
) -> Target | None:
    try:
        target = from_cluster(spec, cluster)
    except ClusterNotReady as e:
        out.conditions.append(Condition("Cluster", "False", "NotReady", str(e)))
        keep_observed(inputs, out)
        return None
    g = target.gpu
    pool = (
        "no GPU pool (a simulated model needs none)"
        if g.assumed
        else f"{g.per_node} x {g.type or 'GPU'} ({g.memory_gib:g} GiB) per node"
    )
    out.conditions.append(
        Condition(
            "Cluster",
            "True",
            "Found",
            f"{ref}: {pool}, ProviderConfig {target.provider_config}",
        )
    )
    return target


def models_beside(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome) -> list[peers.Peer]:
    """The other models on the same InferenceCluster (first come first); none without a
    cluster. The first call of a reconcile asks Crossplane for them and composes as if the
    model were alone: Crossplane calls again with them before it applies anything."""
    if target.cluster is None:
        return []
    if peers.REQUIREMENT not in out.requirements and ledger.labelable(target.cluster):
        # The cluster's ledger and its own models, selected by label (function/cluster/
        # ledger.py); the whole namespace too when compose asked for it to confirm a gain.
        cluster = next(iter(inputs.required.get(REQUIREMENT) or []), None)
        out.requirements |= ledger.requirements(spec.namespace, target.cluster, cluster)
        if peers.REQUIREMENT not in inputs.required:
            return ledger.on_cluster(inputs.required, target.cluster, spec.name)
    # Every model of the namespace: placement (clusterSelector) reads them all already, a
    # cluster whose name no label can hold has no ledger, and a gain is confirmed on them.
    out.requirements[peers.REQUIREMENT] = {
        "apiVersion": peers.API_VERSION,
        "kind": peers.KIND,
        "namespace": spec.namespace,
    }
    found = inputs.required.get(peers.REQUIREMENT) or []
    return peers.on_cluster(found, target.cluster, spec.name)
