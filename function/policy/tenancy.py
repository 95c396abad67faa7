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
(kv_addresses), and, in function/plan/storage.py, how much disk a model cache may take.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from function.hosts import url_host
from function.kube import dig

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
        "monitoring",
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
    cluster_reserved: Iterable[str] = (),
) -> str | None:
    """Why the claim may not deploy into `target_namespace` (said of the field that chose it),
    or None."""
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
            f"{target_namespace} is a system namespace on {where} (Kubernetes', "
            f"Crossplane's or a cluster app's) and never takes models; {use}"
        )
    if target_namespace in may:
        return None
    policy = f"{POLICY_KIND} {POLICY_NAME}, data.{POLICY_KEY}.{claim_namespace}"
    more = (
        f"the platform team can allow more in spec.parameters.tenancy.allowedNamespaces of {where}"
        if cluster
        else "without an InferenceCluster (clusterRef) a claim deploys only into the namespace "
        f"of its own name, or where the platform's tenancy policy allows ({policy})"
    )
    return (
        f"claims in namespace {claim_namespace} may not deploy into {target_namespace} "
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


@dataclass(frozen=True)
class HostHolder:
    host: str
    holder: str  # what messages call it: "LLMInference b-team/qwen", "... router"
    created: str  # metadata.creationTimestamp; "" when not known (counts as latest)
    key: tuple[str, str, str]  # (namespace, kind, name): tie-break and self
    # Whether it already serves the host (its status endpoint is on it): a holder that
    # serves keeps the host against one that only asks, whatever their ages, so an older
    # object cannot take a running model's host by editing its own.
    serving: bool = False

    @property
    def rank(self) -> tuple[bool, str, tuple[str, str, str]]:
        return (not self.serving, self.created or "~", self.key)


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


def serves(obj: dict, host: str) -> bool:
    """Whether `obj` publishes `host` as its endpoint (status.endpoint)."""
    return url_host(dig(obj, "status", "endpoint")) == host


def local_clusters(clusters: Iterable[dict]) -> dict[tuple[str, str], dict]:
    """The InferenceClusters whose cluster is the control plane itself (provider `local`), by
    (namespace, name): their routers and models share its ingress controller. One being
    deleted still counts: its models run until they are gone."""
    out = {}
    for c in clusters:
        if isinstance(c, dict) and dig(c, "spec", "parameters", "provider") == "local":
            ns, name, _, _ = _meta(c)
            if name:
                out[(ns, name)] = c
    return out


def control_plane_configs(
    configs: Iterable[dict], local: dict[tuple[str, str], dict]
) -> set[tuple[str, str]]:
    """The ProviderConfigs (namespace, name) that act on the control plane itself: those with
    provider-kubernetes' own identity (InjectedIdentity), and a `local` cluster's own and its
    models' (`<cluster>`, `<cluster>-models`)."""
    out = {(ns, n) for ns, name in local for n in (name, f"{name}-models")}
    for c in configs:
        if isinstance(c, dict) and dig(c, "spec", "credentials", "source") == "InjectedIdentity":
            ns, name, _, _ = _meta(c)
            out.add((ns, name))
    return out


def on_control_plane(
    model: dict, local: dict[tuple[str, str], dict], configs: set[tuple[str, str]]
) -> bool:
    """Whether what `model` exposes is served by the control plane's ingress controller."""
    params = dig(model, "spec", "parameters")
    if not isinstance(params, dict):
        return False
    ns = _meta(model)[0]
    ref = dig(params, "clusterRef", "name")
    if isinstance(ref, str) and ref:
        return (ns, ref) in local
    if "clusterSelector" in params:
        placed = dig(model, "status", "placement", "cluster")
        return isinstance(placed, str) and (ns, placed) in local
    pc = params.get("providerConfigName")
    if isinstance(pc, str) and pc:
        return (ns, pc) in configs
    return True  # Crossplane composes into the control plane


def control_plane_hosts(
    models: Iterable[dict], clusters: Iterable[dict], configs: Iterable[dict] = ()
) -> list[HostHolder]:
    """Every host served by the control plane's ingress controller, in every namespace: the
    routers of `local` InferenceClusters (apps.vllm.endpoint.host) and the LLMInferences that
    run on the control plane (no cluster, a `local` one, or a ProviderConfig acting on the
    control plane)."""
    local = local_clusters(clusters)
    pcs = control_plane_configs(configs, local)
    out = []
    for (ns, name), c in sorted(local.items()):
        host = dig(c, "spec", "parameters", "apps", "vllm", "endpoint", "host")
        if isinstance(host, str) and host:
            out.append(
                HostHolder(
                    host,
                    f"InferenceCluster {ns}/{name}'s router (spec.parameters.apps.vllm.endpoint"
                    ".host)",
                    _meta(c)[2],
                    (ns, "InferenceCluster", name),
                    serves(c, host),
                )
            )
    for m in models:
        if not isinstance(m, dict):
            continue
        ns, name, created, deleting = _meta(m)
        host = dig(m, "spec", "parameters", "ingressHost")
        if not name or deleting or not isinstance(host, str) or not host:
            continue
        if on_control_plane(m, local, pcs):
            key = (ns, "LLMInference", name)
            out.append(HostHolder(host, f"LLMInference {ns}/{name}", created, key, serves(m, host)))
    return out


def first_holder(
    host: str,
    holders: Iterable[HostHolder],
    created: str,
    me: tuple[str, str, str],
    serving: bool = False,
) -> HostHolder | None:
    """Who holds `host` before `me`, or None: one that already serves it, else the first to
    ask (creation time, then namespace, kind and name)."""
    mine = HostHolder(host, "", created, me, serving).rank
    earlier = [h for h in holders if h.host == host and h.key != me and h.rank < mine]
    return min(earlier, key=lambda h: h.rank) if earlier else None


# --- Where the KV cache may travel ------------------------------------------------------------

# Addresses inside the pod: vLLM's own default for kv_ip is 127.0.0.1 (config/kv_transfer.py).
# Not 0.0.0.0: listening on every interface lets any pod of the cluster reach the cache.
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
# The options whose JSON names where KV (or encoder) caches and cache events go (vLLM
# config/kv_transfer.py kv_ip and connector settings, config/ec_transfer.py ec_ip,
# config/kv_events.py endpoint, which a publisher connects to unless it is a wildcard bind).
KV_FLAGS = ("--kv-transfer-config", "--ec-transfer-config", "--kv-events-config")
# Variables that name where a connector sends the cache: the NIXL side channel's host
# (vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_HOST). LMCache's and Mooncake's own variables are
# refused outright (engine_args.KV_LIBRARY_ENV).
KV_ENV = ("VLLM_NIXL_SIDE_CHANNEL_HOST",)
_URL_HOST = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]*@)?(\[[^\]]+\]|[^/:?#]+)", re.IGNORECASE)
_HOST_PORT = re.compile(
    r"^(\[[0-9a-f:]+\]|[a-z0-9]([-a-z0-9.]*[a-z0-9])?):[0-9]{1,5}$", re.IGNORECASE
)
_IPV4 = re.compile(r"^[0-9]{1,3}(\.[0-9]{1,3}){3}$")
# Keys whose value is an address, in the connectors vLLM ships (kv_ip, ec_ip, P2pNccl's
# proxy_ip, Mooncake's master_server_address, ...): a bare host name there is one too.
_ADDRESS_KEY = re.compile(r"(^|_)(ip|host|hostname|address|addr|server|endpoint|url|proxy)(_|$)")


@dataclass(frozen=True)
class KvSend:
    where: str  # the flag (or flag and key) or variable that says it
    address: str  # the host it names, or the text that could not be read
    problem: str | None = None  # why it cannot be checked (then it is refused)


def _address(text: str, key: str) -> str | None:
    """The host `text` names, or None: a URL's, a host:port's, an IPv4 literal, or any
    value of a key that holds an address."""
    text = text.strip()
    if m := _URL_HOST.match(text):
        return m.group(1).strip("[]")
    if m := _HOST_PORT.match(text):
        return m.group(1).strip("[]")
    if _IPV4.match(text) or (_ADDRESS_KEY.search(key.lower()) and text):
        return text
    return None


def _walk(value: Any, where: str, key: str = "") -> list[KvSend]:
    if isinstance(value, dict):
        return [s for k, v in sorted(value.items()) for s in _walk(v, f"{where}.{k}", str(k))]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _walk(v, f"{where}[{i}]", key)]
    if not isinstance(value, str):
        return []
    if "$(" in value:
        return [
            KvSend(where, value, "names a variable the kubelet expands, which hides the address")
        ]
    host = _address(value, key)
    if host is None or host == "*":  # `*` binds here; it sends nothing
        return []
    return [KvSend(where, host)]


def kv_addresses(args: Sequence[str], env: Sequence[tuple[str, str]]) -> list[KvSend]:
    """Every place a claim's own engine settings send the KV cache (or encoder cache, or
    the cache's events) to: addresses in the JSON of `--kv-transfer-config`,
    `--ec-transfer-config` and `--kv-events-config` (in any spelling vLLM's parser reads:
    `_`, a unique prefix, `=`, dotted keys such as `--kv-transfer-config.kv_ip`), and the
    variables connectors read theirs from. What cannot be read is reported with a problem."""
    from function.policy import engine_args

    out: list[KvSend] = []
    for opt in engine_args.json_options(args, KV_FLAGS):
        if not opt.readable:
            out.append(KvSend(opt.where, str(opt.value)[:80], "is not JSON the function can read"))
        else:
            out += _walk(opt.value, opt.where, (opt.sub or "").rsplit(".", 1)[-1])
    for name, value in env:
        if name in KV_ENV:
            out += _walk(value, name, name)
    return out
