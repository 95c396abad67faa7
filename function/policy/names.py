"""Names and hosts a model answers to: one model per served name behind a router, one claim per
host on an ingress controller, first come, first served."""

from __future__ import annotations

from typing import Any

from function import kube
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster import peers
from function.cluster.target import CLUSTER_API_VERSION, CLUSTER_KIND, Target
from function.outcome import Inputs, Outcome
from function.policy import tenancy


def behind_router(spec: LLMSpec, target: Target) -> bool:
    """Whether the cluster's router serves the model: it discovers engines in its own
    namespace, and learns a pod's models from its /v1/models, which vLLM's --api-key guards
    and the router asks without a key (vllm-stack 0.1.12 service_discovery.py). An llm-d
    model has its own router (its endpoint picker)."""
    return target.routed and spec.api_key_secret is None and not spec.llmd


def check_served_names(
    spec: LLMSpec,
    target: Target,
    others: list[peers.Peer],
    created: str,
    inputs_xr: dict[str, Any],
    out: Outcome,
) -> None:
    """No two models behind one router may answer to the same name: the router would send a
    request for it to either. The model that came first keeps the name."""
    if target.routed and spec.api_key_secret is not None and target.router_endpoint:
        out.warnings.append(
            f"{P}.apiKeySecretRef: InferenceCluster {target.cluster}'s router does not serve "
            "this model: it learns each engine's models from /v1/models, which the API key "
            "guards, and asks without one; send requests to the model's own endpoint "
            f"({P}.ingressHost, or its Service)"
        )
    if not behind_router(spec, target):
        return
    mine = set(peers.published_names(inputs_xr))
    for peer in others:
        if (peer.target_namespace or target.router_namespace) != target.namespace:
            continue
        earlier = peer.before(created, spec.name)
        for i, served in enumerate(spec.routed_names):
            # A name belongs to the model that came first, and to one that already serves
            # it (a running model keeps its names when an older claim is edited).
            taken = served in peer.served_names and earlier
            taken = taken or (served in peer.published_names and served not in mine)
            if not taken:
                continue
            field = _name_field(spec, i)
            raise SpecError(
                field,
                served,
                problem=f"LLMInference {spec.namespace}/{peer.name} already serves {served} "
                f"behind InferenceCluster {target.cluster}'s router (namespace "
                f"{target.namespace}), which routes requests by that name; "
                + (
                    "use that model, or deploy this one into another namespace "
                    f"({P}.targetNamespace), outside the router"
                    if i == 0
                    else "choose another alias"
                    if i <= len(spec.aliases)
                    else "choose another adapter name"
                ),
            )


def _name_field(spec: LLMSpec, i: int) -> str:
    """The field that gives the i-th of the claim's routed names."""
    if i == 0:
        return f"{P}.model"
    if i <= len(spec.aliases):
        return f"{P}.aliases[{i - 1}]"
    return f"{spec.adapters[i - 1 - len(spec.aliases)].field}.name"


def check_host(spec: LLMSpec, target: Target, others: list[peers.Peer], created: str) -> None:
    """A host is one model's. On one cluster the model that asked first keeps it; and an llm-d
    model may not take a name the cluster itself answers to (the Gateway's Service, anything
    under .svc or .cluster.local): a route with that host would win over every model served
    under a path of the Gateway, and receive their requests."""
    host = spec.ingress_host
    if not host:
        return
    f = f"{P}.ingressHost"
    if spec.llmd and target.llmd_gateway is not None:
        gw_ns, gw_name = target.llmd_gateway
        internal = host.endswith((".svc", ".cluster.local", ".local")) or host in (
            gw_name,
            f"{gw_name}.{gw_ns}",
        )
        if internal:
            raise SpecError(
                f,
                host,
                problem=f"{host} is a name inside the cluster, where the Gateway "
                f"{gw_ns}/{gw_name} serves every llm-d model under its own path; a route for it "
                "would take their requests. Use a public DNS name for this model, or none (it "
                "is served under its path of the Gateway)",
            )
    if target.router_host == host:
        raise SpecError(
            f,
            host,
            problem=f"{host} is the host of InferenceCluster {spec.namespace}/{target.cluster}'s "
            "router (spec.parameters.apps.vllm.endpoint.host), which serves every model on "
            "that cluster; a model with the same host would take their requests. Choose "
            "another host, or none (the router serves this model by its name)",
        )
    for peer in others:
        if peer.ingress_host == host and peer.before(created, spec.name):
            raise SpecError(
                f,
                host,
                problem=f"{host} is already the host of LLMInference {spec.namespace}/{peer.name} "
                f"on InferenceCluster {target.cluster}, created before this one; choose another "
                "host",
            )


CONTROL_PLANE_MODELS = "control-plane-llminferences"


CONTROL_PLANE_CLUSTERS = "control-plane-inferenceclusters"


CONTROL_PLANE_CONFIGS = "control-plane-providerconfigs"


PROVIDER_CONFIG_API_VERSION = "kubernetes.m.crossplane.io/v1alpha1"


def check_shared_host(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome, created: str
) -> None:
    """The control plane's ingress controller serves every namespace: a host there belongs to
    the claim that already serves it, else to the first that asked, whatever its namespace (a
    model, or a `local` cluster's router). A claim is on the control plane without a cluster,
    on a `local` cluster, or through a ProviderConfig that acts there (InjectedIdentity, or a
    local cluster's). The first call of a reconcile asks Crossplane for every LLMInference,
    InferenceCluster and ProviderConfig; Crossplane calls again with them before it applies
    anything."""
    host = spec.ingress_host
    if not host or (target.cluster is not None and not target.control_plane):
        return
    for name, api, kind in (
        (CONTROL_PLANE_MODELS, CLUSTER_API_VERSION, peers.KIND),
        (CONTROL_PLANE_CLUSTERS, CLUSTER_API_VERSION, CLUSTER_KIND),
        (CONTROL_PLANE_CONFIGS, PROVIDER_CONFIG_API_VERSION, "ProviderConfig"),
    ):
        out.requirements[name] = {"apiVersion": api, "kind": kind}
    models = inputs.required.get(CONTROL_PLANE_MODELS) or []
    clusters = inputs.required.get(CONTROL_PLANE_CLUSTERS) or []
    configs = inputs.required.get(CONTROL_PLANE_CONFIGS) or []
    if spec.provider_config_name and not target.cluster:
        local = tenancy.local_clusters(clusters)
        if (spec.namespace, spec.provider_config_name) not in tenancy.control_plane_configs(
            configs, local
        ):
            return  # another cluster, with its own ingress controller
    holders = tenancy.control_plane_hosts(models, clusters, configs)
    me = (spec.namespace, peers.KIND, spec.name)
    first = tenancy.first_holder(host, holders, created, me, tenancy.serves(inputs.xr, host))
    if first is not None:
        f = f"{P}.ingressHost"
        why = "serves it already" if first.serving else "asked for it first"
        raise SpecError(
            f,
            host,
            f"{f}: {host} belongs to {first.holder}, which {why}, on the control plane's "
            "ingress controller, which every namespace shares; choose another host",
        )


def llmd_route(spec: LLMSpec, target: Target) -> tuple[str | None, str | None]:
    """(host, path prefix) of the model's HTTPRoute: its ingressHost, else its own path of
    the cluster's Gateway."""
    if spec.ingress_host:
        return spec.ingress_host, None
    return None, f"/{target.namespace}/{kube.dns_label(spec.name)}"
