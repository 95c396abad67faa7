"""The fields that run one model over several clusters: `placement` (how many clusters, spread
by what), `globalEndpoint` (the one URL in front of them) and `spillover` (endpoints outside
the fleet). All three are additive: without `placement` a claim is placed on one cluster
exactly as before.

A spillover URL is where the control plane's gateway will send tenants' requests, so it must
name a public host (function/hosts.py): a name under a suffix of the Public Suffix List. An IP
literal (the cloud's metadata address, a pod) or an in-cluster name would let a claim reach
what its namespace does not own."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from function.claim.fields import (
    DNS_SUBDOMAIN,
    LABEL_KEY,
    P,
    SecretRef,
    SpecError,
    int_in,
    secret_ref,
    short,
)
from function.hosts import public_dns_name
from function.limits import HF_MODEL_ID_MAX_PART, MAX_PLACEMENTS, MAX_SPILLOVER

# spreadBy's default: the cluster's provider and region (function/cluster/spread.py).
SPREAD_BY_REGION = "region"
DEFAULT_SPILLOVER_KEY = "api-key"
# A bound for the API, in units of one ready replica (Gateway API itself takes backendRef
# weights up to 1,000,000): a spillover above 100 replicas' worth is no longer an overflow.
MAX_SPILLOVER_WEIGHT = 100
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")


@dataclass(frozen=True)
class Spillover:
    """An OpenAI-compatible endpoint outside the fleet: where, which model there, the key's
    Secret (in the claim's namespace) and its weight (0: only while no placement serves)."""

    url: str
    scheme: str
    host: str
    port: int
    path: str  # the API's base path ("" for the provider's default, /v1)
    model: str
    secret: SecretRef
    weight: int

    @property
    def tls(self) -> bool:
        return self.scheme == "https"


@dataclass(frozen=True)
class Fleet:
    """placement.clusters over the clusters clusterSelector matches, at most one per value of
    `spread_by`; the InferenceCluster whose global Gateway fronts them (None: no global
    endpoint) and the spillover endpoints behind it."""

    clusters: int
    spread_by: str = SPREAD_BY_REGION
    gateway_cluster: str | None = None
    spillover: tuple[Spillover, ...] = ()
    # The key clients must send to the global endpoint (globalEndpoint.apiKeySecretRef).
    gateway_key: SecretRef | None = None


def parse_fleet(params: dict, has_selector: bool) -> Fleet | None:
    placement = params.get("placement")
    endpoint = params.get("globalEndpoint")
    spill = params.get("spillover")
    if placement is None:
        if endpoint is not None:
            raise SpecError(
                f"{P}.globalEndpoint",
                endpoint,
                f"{P}.globalEndpoint routes to every placement of the model: set {P}.placement "
                "(clusters: 1 for one) with clusterSelector",
            )
        if spill is not None:
            raise SpecError(
                f"{P}.spillover",
                spill,
                f"{P}.spillover is a backend of the global route: set {P}.globalEndpoint",
            )
        return None
    f = f"{P}.placement"
    if not has_selector:
        raise SpecError(
            f,
            placement,
            f"{f} spreads the model over the clusters {P}.clusterSelector matches: set "
            "clusterSelector (clusterRef names one cluster)",
        )
    if not isinstance(placement, dict):
        raise SpecError(f, placement, f"{f} must be an object: {{clusters: 2, spreadBy: region}}")
    clusters = int_in(placement.get("clusters"), 1, MAX_PLACEMENTS)
    if clusters is None:
        raise SpecError(
            f"{f}.clusters",
            placement.get("clusters"),
            f"{f}.clusters: {short(placement.get('clusters'))} is not a count of clusters "
            f"from 1 to {MAX_PLACEMENTS}",
        )
    spread_by = placement.get("spreadBy", SPREAD_BY_REGION)
    if not isinstance(spread_by, str) or len(spread_by) > 316 or not LABEL_KEY.match(spread_by):
        raise SpecError(
            f"{f}.spreadBy",
            spread_by,
            f"{f}.spreadBy: {short(spread_by)} is neither `region` nor a label key (e.g. "
            "topology.kubernetes.io/zone)",
        )
    gateway = _gateway_cluster(endpoint)
    if gateway is not None and params.get("ingressHost") is not None:
        raise SpecError(
            f"{P}.ingressHost",
            params.get("ingressHost"),
            f"{P}.ingressHost and {P}.globalEndpoint are exclusive: every placement would "
            "publish the same host (one cluster's, wherever DNS points) and the global route "
            "would send to a name the claim chose; the route reaches each placement through "
            "its cluster's router host (apps.vllm.endpoint.host), so remove ingressHost",
        )
    if gateway is not None and params.get("apiKeySecretRef") is not None:
        raise SpecError(
            f"{P}.apiKeySecretRef",
            params.get("apiKeySecretRef"),
            f"{P}.apiKeySecretRef and {P}.globalEndpoint are exclusive: the global route reaches "
            "each placement through its cluster's router, which cannot serve a model guarded "
            "by a key (it lists models without one); remove apiKeySecretRef, or globalEndpoint "
            "to call each placement at its own URL",
        )
    if spill is not None and gateway is None:
        raise SpecError(
            f"{P}.spillover",
            spill,
            f"{P}.spillover is a backend of the global route: set {P}.globalEndpoint",
        )
    return Fleet(
        clusters,
        spread_by,
        gateway,
        _spillover(spill, str(params.get("model") or "")),
        _gateway_key(endpoint),
    )


def _gateway_cluster(endpoint: object) -> str | None:
    if endpoint is None:
        return None
    f = f"{P}.globalEndpoint.clusterRef.name"
    ref = endpoint.get("clusterRef") if isinstance(endpoint, dict) else None
    name = ref.get("name") if isinstance(ref, dict) else None
    if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        raise SpecError(
            f,
            name,
            f"{f}: {short(name)} is not the name of an InferenceCluster (the one with "
            "apps.globalEndpoint, in this namespace)",
        )
    return name


def _gateway_key(endpoint: object) -> SecretRef | None:
    if not isinstance(endpoint, dict):
        return None
    return secret_ref(endpoint, "apiKeySecretRef", DEFAULT_SPILLOVER_KEY, f"{P}.globalEndpoint")


def _spillover(value: object, model: str) -> tuple[Spillover, ...]:
    if value is None:
        return ()
    f = f"{P}.spillover"
    if not isinstance(value, list) or len(value) > MAX_SPILLOVER:
        raise SpecError(f, value, f"{f} must be a list of at most {MAX_SPILLOVER} endpoints")
    out: list[Spillover] = []
    for i, item in enumerate(value):
        here = f"{f}[{i}]"
        if not isinstance(item, dict):
            raise SpecError(here, item, f"{here} must be an object: {{url, apiKeySecretRef}}")
        scheme, host, port, path = _public_url(item.get("url"), f"{here}.url")
        target = item.get("model", model)
        if (
            not isinstance(target, str)
            or not target
            or len(target) > 2 * HF_MODEL_ID_MAX_PART + 1
            or not _MODEL.match(target)
        ):
            raise SpecError(
                f"{here}.model",
                target,
                f"{here}.model: {short(target)} is not a model name (letters, digits and . _ "
                ": / -, e.g. Qwen/Qwen3-8B)",
            )
        weight = int_in(item.get("weight", 0), 0, MAX_SPILLOVER_WEIGHT)
        if weight is None:
            raise SpecError(
                f"{here}.weight",
                item.get("weight"),
                f"{here}.weight: {short(item.get('weight'))} is not a weight from 0 (only "
                f"while no placement serves) to {MAX_SPILLOVER_WEIGHT}",
            )
        url = str(item["url"])
        if any(s.url == url and s.model == target for s in out):
            raise SpecError(here, url, f"{here}: {url} ({target}) is listed twice")
        out.append(Spillover(url, scheme, host, port, path, target, _key(item, here), int(weight)))
    return tuple(out)


def _key(item: dict, here: str) -> SecretRef:
    """A spillover endpoint's key: required, a Secret reference like every other."""
    ref = secret_ref(item, "apiKeySecretRef", DEFAULT_SPILLOVER_KEY, here)
    if ref is None:
        f = f"{here}.apiKeySecretRef"
        raise SpecError(
            f,
            None,
            f"{f} is required: the Secret in this namespace holding the API key ({{name, key}}, "
            f"key defaults to {DEFAULT_SPILLOVER_KEY}); a key is never written inline",
        )
    return ref


def _public_url(value: object, f: str) -> tuple[str, str, int, str]:
    """(scheme, host, port, path) of an http(s) URL on a public DNS name."""
    example = "e.g. https://api.together.xyz/v1"
    if not isinstance(value, str) or len(value) > 2048:
        raise SpecError(f, value, f"{f}: {short(value)} is not a URL ({example})")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise SpecError(f, value, f"{f}: {short(value)} is not a URL ({example})") from None
    host = (parts.hostname or "").lower()
    if parts.scheme != "https" or not host:
        raise SpecError(
            f,
            value,
            f"{f}: {short(value)} is not an https URL; the endpoint's key travels with every "
            f"request, so only TLS will do ({example})",
        )
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise SpecError(
            f,
            value,
            f"{f}: {short(value)} carries credentials, a query or a fragment; give the base URL "
            "only (the key goes in apiKeySecretRef)",
        )
    if not public_dns_name(host):
        raise SpecError(
            f,
            value,
            f"{f}: {host} is not a public DNS name under a public suffix; the global gateway "
            "sends requests only to endpoints outside the clusters, and a pod's resolver reads "
            "any other name through its search list (an IP address or an in-cluster name "
            f"could reach what this namespace does not own), {example}",
        )
    path = parts.path.rstrip("/")
    return parts.scheme, host, port or 443, path
