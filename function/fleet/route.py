"""The global route of a model spread over clusters, as plain data: the weights (pure) and the
objects on the global Gateway (agentgateway v1.4.1, the pin of kcl/versions.k; field names
from its CRDs, vendored in schemas/agentgateway).

- One `AgentgatewayBackend` per placement: a `static` host and port (that cluster's public
  endpoint), TLS when it is https. A hostname backend gets its Host header rewritten to that
  name (agentgateway's `hostRewrite` defaults to `Auto` for hostname backends), which the
  remote cluster's Ingress routes by.
- One `AgentgatewayBackend` per spillover endpoint: an `ai` backend with the `openai`
  provider at that host, port and base path, chat completions and embeddings only (their
  model rewritten to the endpoint's name; nothing passes through), and the key from a Secret
  (`policies.auth.secretRef`, the key named there), never inline.
- One `HTTPRoute` on the global Gateway: the path `/<namespace>/<name>` (rewritten to `/`) to
  every backend, weighted. Gateway API: a backend of weight 0 gets no request, and a route
  whose backends all weigh 0 answers 500.
- One `AgentgatewayPolicy` on the route: retries on 502, 503 and 504, and with
  `globalEndpoint.apiKeySecretRef` the key every request must carry. agentgateway chooses the
  route's backend once per request, before its retry loop (v1.4.1 crates/agentgateway/src/
  proxy/httpproxy.rs `select_backend`), so a retry reaches the same placement: failover
  between placements is the weights' job, which follow each placement's Serving status.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from function.backends.resources import PART_OF
from function.claim.fleet import Spillover

BACKEND_API = "agentgateway.dev/v1alpha1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
# Our choice, not upstream's: the codes Gateway API says every implementation must retry
# (HTTPRouteRetry, v1.6.1), two retries (three tries in all: agentgateway v1.4.1 counts
# retries, proxy/httpproxy.rs) to ride out a router or pod restart without tripling a long
# generation, a quarter second apart.
RETRY = {"attempts": 2, "codes": [502, 503, 504], "backoff": "250ms"}
# How an `ai` backend reads each request (path suffix -> type; v1.4.1 crates/agentgateway/
# src/llm/policy/mod.rs). Chat completions and embeddings are parsed, their model rewritten;
# `/v1/models` is answered by the gateway, not the provider. Nothing passes through: a `*`
# Passthrough would carry the tenant's provider key to any path of the provider's API
# (files, batches, fine-tuning, DELETE included); an unmatched path is read as a chat
# completion, which a request of another shape fails.
AI_ROUTES = {
    "/v1/chat/completions": "Completions",
    "/v1/embeddings": "Embeddings",
    "/v1/models": "Models",
}


@dataclass(frozen=True)
class Leg:
    """A backend of the global route: a placement (cluster set) or a spillover endpoint."""

    name: str  # the AgentgatewayBackend's name
    weight: int
    cluster: str | None = None
    url: str | None = None


def placement_weight(serving: bool, ready: int) -> int:
    """A placement's weight: its ready replicas while it serves, else 0 (no request)."""
    return max(ready, 0) if serving else 0


def spillover_weights(spill: Sequence[Spillover], placed_total: int) -> list[int]:
    """Each spillover endpoint's weight: its own when above 0 (weighted overflow, in units of
    one ready replica); an endpoint of weight 0 takes the whole route only while no placement
    serves (`placed_total` is 0), evenly with the others of weight 0."""
    return [s.weight if s.weight > 0 else (0 if placed_total > 0 else 1) for s in spill]


def split_url(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL; None when it is none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _meta(name: str, namespace: str, model: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/component": "global"},
        "annotations": {"inference.devopstoolkit.ai/model": model},
    }


def static_backend(*, name: str, namespace: str, model: str, url: str) -> dict[str, Any]:
    """A placement's backend: that cluster's endpoint by host and port."""
    parts = split_url(url)
    assert parts is not None, url
    scheme, host, port = parts
    spec: dict[str, Any] = {"static": {"host": host, "port": port}}
    if scheme == "https":
        spec["policies"] = {"tls": {"sni": host}}
    return {
        "apiVersion": BACKEND_API,
        "kind": "AgentgatewayBackend",
        "metadata": _meta(name, namespace, model),
        "spec": spec,
    }


def spillover_backend(
    *, name: str, namespace: str, model: str, spill: Spillover, secret: str
) -> dict[str, Any]:
    """A spillover endpoint's backend: OpenAI-compatible at its host, its model, the key from
    `secret` (the copy on the gateway's cluster) under the key the claim named."""
    provider: dict[str, Any] = {
        "openai": {"model": spill.model},
        "host": spill.host,
        "port": spill.port,
    }
    if spill.path:
        provider["pathPrefix"] = spill.path
    policies: dict[str, Any] = {
        "auth": {"secretRef": {"name": secret, "key": spill.secret.key}},
        "ai": {"routes": dict(AI_ROUTES)},
    }
    if spill.tls:
        policies["tls"] = {"sni": spill.host}
    return {
        "apiVersion": BACKEND_API,
        "kind": "AgentgatewayBackend",
        "metadata": _meta(name, namespace, model),
        "spec": {"ai": {"provider": provider}, "policies": policies},
    }


def http_route(
    *,
    name: str,
    namespace: str,
    model: str,
    gateway: tuple[str, str],
    path: str,
    legs: Sequence[Leg],
) -> dict[str, Any]:
    """The route on the global Gateway `gateway` (name, namespace): `path` to every leg."""
    return {
        "apiVersion": GATEWAY_API,
        "kind": "HTTPRoute",
        "metadata": _meta(name, namespace, model),
        "spec": {
            "parentRefs": [
                {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": gateway[0],
                    "namespace": gateway[1],
                }
            ],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": path}}],
                    "filters": [
                        {
                            "type": "URLRewrite",
                            "urlRewrite": {
                                "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                            },
                        }
                    ],
                    "backendRefs": [
                        {
                            "group": "agentgateway.dev",
                            "kind": "AgentgatewayBackend",
                            "name": leg.name,
                            "weight": leg.weight,
                        }
                        for leg in legs
                    ],
                }
            ],
        },
    }


def route_policy(
    *, name: str, namespace: str, model: str, route: str, keys: str | None = None
) -> dict[str, Any]:
    """Retries of a request that a placement answered 502, 503 or 504; with `keys` (a Secret
    beside the policy whose every entry is one API key, as agentgateway v1.4.1 reads a
    `secretRef`: controller/pkg/agentgateway/plugins/traffic_plugin.go), a request without
    one of them (`Authorization: Bearer <key>`) is refused before it reaches any backend."""
    traffic: dict[str, Any] = {"retry": dict(RETRY)}
    if keys is not None:
        traffic["apiKeyAuthentication"] = {"mode": "Strict", "secretRef": {"name": keys}}
    return {
        "apiVersion": BACKEND_API,
        "kind": "AgentgatewayPolicy",
        "metadata": _meta(name, namespace, model),
        "spec": {
            "targetRefs": [
                {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route}
            ],
            "traffic": traffic,
        },
    }
