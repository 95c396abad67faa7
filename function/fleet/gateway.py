"""The global Gateway a fleet's route attaches to: the InferenceCluster `globalEndpoint.
clusterRef` names (fetched as a required resource), read from what its apps.globalEndpoint
publishes (`status.globalEndpoint`: the Gateway and its URL), and where the claim's objects
go there (its own namespace's name, which the cluster's tenancy must allow)."""

from __future__ import annotations

from dataclasses import dataclass

from function.claim.spec import LLMSpec, P
from function.cluster.target import CLUSTER_API_VERSION, CLUSTER_KIND
from function.kube import dig
from function.outcome import Condition, Inputs, Outcome
from function.policy import tenancy

REQUIREMENT = "global-endpoint-cluster"
FIELD = f"{P}.globalEndpoint.clusterRef.name"


@dataclass(frozen=True)
class Gateway:
    cluster: str
    provider_config: str
    namespace: str  # where the route, its backends and the key copies go
    gateway: tuple[str, str]  # the Gateway's name and namespace
    endpoint: str  # its URL
    credential_secrets: tuple[str, ...] = ()


def find_gateway(spec: LLMSpec, inputs: Inputs, out: Outcome) -> Gateway | None:
    """The global Gateway, or None with a GlobalEndpoint condition saying why (the cluster is
    being looked up, missing, not publishing a Gateway, or refusing the claim's namespace)."""
    assert spec.fleet is not None and spec.fleet.gateway_cluster is not None
    name = spec.fleet.gateway_cluster
    ref = f"InferenceCluster {spec.namespace}/{name}"
    out.requirements[REQUIREMENT] = {
        "apiVersion": CLUSTER_API_VERSION,
        "kind": CLUSTER_KIND,
        "matchName": name,
        "namespace": spec.namespace,
    }
    if REQUIREMENT not in inputs.required:
        out.conditions.append(
            Condition("GlobalEndpoint", "Unknown", "Resolving", f"looking up {ref}")
        )
        return None
    found = inputs.required[REQUIREMENT]
    if not found:
        return _missing(
            out,
            "NotFound",
            f"{FIELD}: {ref} does not exist; create it (with apps.globalEndpoint) or name another",
        )
    cluster = found[0]
    status = dig(cluster, "status") or {}
    gw_name = dig(status, "globalEndpoint", "gateway", "name")
    gw_ns = dig(status, "globalEndpoint", "gateway", "namespace")
    endpoint = dig(status, "globalEndpoint", "endpoint")
    enabled = dig(cluster, "spec", "parameters", "apps", "globalEndpoint", "enabled") is True
    if not enabled:
        return _missing(
            out,
            "NoGateway",
            f"{FIELD}: {ref} runs no global Gateway: set spec.parameters.apps.globalEndpoint."
            f"enabled: true on {ref}",
        )
    pc = dig(status, "modelsProviderConfig", "name") or status.get("providerConfigName")
    # A moment not Ready changes nothing (as for placements): the route keeps following the
    # placements as long as the cluster has published its Gateway.
    if not all(isinstance(v, str) and v for v in (gw_name, gw_ns, endpoint, pc)):
        out.conditions.append(
            Condition(
                "GlobalEndpoint",
                "Unknown",
                "GatewayNotReady",
                f"{ref} has not published its global Gateway (status.globalEndpoint) yet",
            )
        )
        return None
    allowed = tuple(
        v for v in dig(status, "tenancy", "allowedNamespaces") or [] if isinstance(v, str)
    )
    reserved = tuple(
        v for v in dig(status, "tenancy", "reservedNamespaces") or [] if isinstance(v, str)
    )
    problem = tenancy.problem(
        target_namespace=spec.namespace,
        claim_namespace=spec.namespace,
        cluster_allowed=allowed,
        cluster=name,
        cluster_reserved=reserved,
    )
    if problem:
        return _missing(out, "NamespaceNotAllowed", f"{FIELD}: {problem}")
    credentials = dig(status, "credentialsSecrets")
    return Gateway(
        cluster=name,
        provider_config=str(pc),
        namespace=spec.namespace,
        gateway=(str(gw_name), str(gw_ns)),
        endpoint=str(endpoint).rstrip("/"),
        credential_secrets=tuple(v for v in credentials if isinstance(v, str))
        if isinstance(credentials, list)
        else (),
    )


# Why there is no Gateway, when the route stays as it is meanwhile: the cluster is being
# looked up, gone for now, or has not published its Gateway. Not when the platform took it
# away (the app off, the namespace no longer allowed): that is honoured.
KEEP = ("Resolving", "NotFound", "GatewayNotReady")


def _missing(out: Outcome, reason: str, message: str) -> None:
    out.conditions.append(Condition("GlobalEndpoint", "False", reason, message))
    out.warnings.append(message)
    return None
