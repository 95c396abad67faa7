"""Who may deploy what where: the namespaces a claim's objects may land in on the target.

A claim (an LLMInference, created by an application team in its namespace) deploys by
default only into the namespace of its own name on the target cluster. Its InferenceCluster
(the platform team's) adds the namespace its vLLM router watches and any it lists in
`spec.parameters.tenancy.allowedNamespaces`; the cluster publishes the result in
`status.tenancy.allowedNamespaces`. System namespaces are never allowed, whatever a cluster
says: Kubernetes' own (`kube-*`), Crossplane's, and those of the apps an InferenceCluster
installs (the production-stack operator, the GPU Operator, the ingress controller). The
platform admin's policy (an EnvironmentConfig only the platform team can write) may allow a
claim namespace more.

Also what a claim shares with other teams on one cluster: hosts (one ledger per ingress
controller; the control plane's spans every namespace), where the KV cache may travel
(kv_addresses), and, in function/storage.py, how much disk a model cache may take.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

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
    policy = f"{POLICY_KIND} {POLICY_NAME}, data.{POLICY_KEY}.{claim_namespace}"
    more = (
        f"the platform team can allow more in spec.parameters.tenancy.allowedNamespaces of {where}"
        f", or in its tenancy policy ({policy})"
        if cluster
        else "without an InferenceCluster (clusterRef) a claim deploys only into the namespace "
        f"of its own name, or where the platform's tenancy policy allows ({policy})"
    )
    return (
        f"{field}: claims in namespace {claim_namespace} may not deploy into {target_namespace} "
        f"on {where}; allowed: {', '.join(may)} ({more})"
    )


# --- What a platform admin allows (an EnvironmentConfig on the control plane) ---------------

# A cluster-scoped object only the platform team can write (Crossplane's EnvironmentConfig,
# which the function reads as a required resource): which claim namespaces may deploy into
# which other namespaces, past the rules above. `*` is every claim namespace.
#
#   apiVersion: apiextensions.crossplane.io/v1beta1
#   kind: EnvironmentConfig
#   metadata: {name: dot-inference-tenancy}
#   data:
#     targetNamespaces:
#       a-team: [target-ns]
POLICY_API_VERSION = "apiextensions.crossplane.io/v1beta1"
POLICY_KIND = "EnvironmentConfig"
POLICY_NAME = "dot-inference-tenancy"
POLICY_KEY = "targetNamespaces"
POLICY_ANY = "*"


def admin_allowed(policy: dict | None, claim_namespace: str) -> tuple[str, ...]:
    """The namespaces the platform admin's policy lets `claim_namespace` deploy into (never a
    reserved one: the policy cannot open a system namespace either)."""
    data = policy.get("data") if isinstance(policy, dict) else None
    table = data.get(POLICY_KEY) if isinstance(data, dict) else None
    if not isinstance(table, dict):
        return ()
    out: list[str] = []
    for key in (claim_namespace, POLICY_ANY):
        names = table.get(key)
        for n in names if isinstance(names, list) else []:
            if isinstance(n, str) and n and not reserved(n) and n not in out:
                out.append(n)
    return tuple(out)


# --- Hosts: one ledger per ingress controller ---------------------------------------------------

# An IPv4 literal's last label is all digits; a DNS name's top-level label never is. Gateway
# API forbids IPs in `hostnames` and Kubernetes in an Ingress rule's `host`, though neither
# pattern can tell them from names.
_NUMERIC_LAST_LABEL = re.compile(r"(^|\.)[0-9]+$")


def ip_literal(host: str) -> bool:
    return bool(_NUMERIC_LAST_LABEL.search(host))


def url_host(url: str | None) -> str | None:
    """The host of an http(s) URL, or None; in-cluster names (`*.svc.cluster.local`) are
    nobody's public host."""
    m = re.match(r"^https?://([^/:]+)", url or "")
    host = m.group(1) if m else None
    return None if host is None or host.endswith((".svc", ".cluster.local", ".local")) else host


@dataclass(frozen=True)
class HostHolder:
    host: str
    holder: str  # what messages call it: "LLMInference b-team/qwen", "... router"
    created: str  # metadata.creationTimestamp; "" when not known (counts as latest)
    key: tuple[str, str, str]  # (namespace, kind, name): tie-break and self

    def before(self, created: str, key: tuple[str, str, str]) -> bool:
        return (self.created or "~", self.key) < (created or "~", key)


def _dig(obj: Any, *keys: str) -> Any:
    for k in keys:
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def _meta(obj: dict) -> tuple[str, str, str, bool]:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    ns, name = meta.get("namespace"), meta.get("name")
    created = meta.get("creationTimestamp")
    return (
        ns if isinstance(ns, str) else "",
        name if isinstance(name, str) else "",
        created if isinstance(created, str) else "",
        bool(meta.get("deletionTimestamp")),
    )


def local_clusters(clusters: Iterable[dict]) -> dict[tuple[str, str], dict]:
    """The InferenceClusters whose cluster is the control plane itself (provider `local`), by
    (namespace, name): their routers and models share its ingress controller."""
    out = {}
    for c in clusters:
        if isinstance(c, dict) and _dig(c, "spec", "parameters", "provider") == "local":
            ns, name, _, deleting = _meta(c)
            if name and not deleting:
                out[(ns, name)] = c
    return out


def _on_control_plane(model: dict, local: dict[tuple[str, str], dict]) -> bool:
    params = _dig(model, "spec", "parameters")
    if not isinstance(params, dict):
        return False
    ns = _meta(model)[0]
    ref = _dig(params, "clusterRef", "name")
    if isinstance(ref, str) and ref:
        return (ns, ref) in local
    if isinstance(params.get("clusterSelector"), dict):
        placed = _dig(model, "status", "placement", "cluster")
        return isinstance(placed, str) and (ns, placed) in local
    # Without a cluster or a ProviderConfig, Crossplane composes into the control plane.
    return not params.get("providerConfigName")


def control_plane_hosts(models: Iterable[dict], clusters: Iterable[dict]) -> list[HostHolder]:
    """Every host served by the control plane's ingress controller, in every namespace: the
    routers of `local` InferenceClusters (apps.vllm.endpoint.host) and the LLMInferences that
    run on the control plane (no cluster, or a `local` one)."""
    local = local_clusters(clusters)
    out = []
    for (ns, name), c in sorted(local.items()):
        host = _dig(c, "spec", "parameters", "apps", "vllm", "endpoint", "host")
        if isinstance(host, str) and host:
            out.append(
                HostHolder(
                    host,
                    f"InferenceCluster {ns}/{name}'s router (spec.parameters.apps.vllm.endpoint"
                    ".host)",
                    _meta(c)[2],
                    (ns, "InferenceCluster", name),
                )
            )
    for m in models:
        if not isinstance(m, dict):
            continue
        ns, name, created, deleting = _meta(m)
        host = _dig(m, "spec", "parameters", "ingressHost")
        if name and not deleting and isinstance(host, str) and host and _on_control_plane(m, local):
            out.append(
                HostHolder(host, f"LLMInference {ns}/{name}", created, (ns, "LLMInference", name))
            )
    return out


def first_holder(
    host: str, holders: Iterable[HostHolder], created: str, me: tuple[str, str, str]
) -> HostHolder | None:
    """Who holds `host` before `me` (first come, then namespace, kind and name), or None."""
    earlier = [h for h in holders if h.host == host and h.key != me and h.before(created, me)]
    return min(earlier, key=lambda h: (h.created or "~", h.key)) if earlier else None


# --- Where the KV cache may travel ------------------------------------------------------------

# Addresses inside the pod: vLLM's own default for kv_ip is 127.0.0.1 (config/kv_transfer.py).
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})
KV_TRANSFER_FLAG = "--kv-transfer-config"
# The NIXL side channel's host (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_HOST): where peers reach
# this engine's KV cache.
KV_ENV = ("VLLM_NIXL_SIDE_CHANNEL_HOST",)
_URL_HOST = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?(\[[^\]]+\]|[^/:?#]+)", re.IGNORECASE)


def kv_addresses(args: Sequence[str], env: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """(where, address) of every place a claim's own engine settings send the KV cache: the
    `kv_ip` of `--kv-transfer-config` (as JSON, or as `--kv-transfer-config.kv_ip`), URLs in
    its `kv_connector_extra_config`, and the NIXL side-channel host variable."""
    from function import engine_args

    out: list[tuple[str, str]] = []
    for i, arg in enumerate(args):
        if engine_args.flag_name(arg) != KV_TRANSFER_FLAG:
            continue
        key = arg.split("=", 1)[0]
        value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
        sub = key.split(".", 1)[1] if "." in key else None
        if sub is not None:
            if sub.replace("-", "_") == "kv_ip":
                out.append((f"{key}", value))
            elif sub.replace("-", "_").startswith("kv_connector_extra_config") and (
                m := _URL_HOST.match(value)
            ):
                out.append((key, m.group(1).strip("[]")))
            continue
        try:
            config = json.loads(value)
        except ValueError:
            continue
        if not isinstance(config, dict):
            continue
        ip = config.get("kv_ip")
        if isinstance(ip, str) and ip:
            out.append((f"{KV_TRANSFER_FLAG} kv_ip", ip))
        extra = config.get("kv_connector_extra_config")
        for k, v in sorted(extra.items()) if isinstance(extra, dict) else []:
            if isinstance(v, str) and (m := _URL_HOST.match(v)):
                out.append(
                    (f"{KV_TRANSFER_FLAG} kv_connector_extra_config.{k}", m.group(1).strip("[]"))
                )
    out += [(name, value) for name, value in env if name in KV_ENV and value]
    return out
