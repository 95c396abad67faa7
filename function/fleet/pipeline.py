"""One model over several clusters (spec.parameters.placement): the fleet's pipeline.

    gather     every matching cluster as a candidate         function/cluster/place.py
    spread     the clusters, at most one per spread value    function/cluster/spread.py
    children   one LLMInference per placement                function/fleet/children.py
    route      the global route, weighted by serving         function/fleet/route.py
    status     status.placement, status.endpoint, conditions

Each placement is an LLMInference with `clusterRef` (its own GPU budget, router, autoscaling
and Usage of its cluster); this claim composes those, and on the global Gateway's cluster the
route, its backends and the spillover keys' copies, through that cluster's ProviderConfig.
"""

from __future__ import annotations

import base64
from typing import Any

from function import kube
from function.backends import resources
from function.backends.common import composed_ref, no_takeover
from function.claim.spec import LLMSpec, P, SpecError
from function.cluster import peers
from function.cluster import spread as spreading
from function.cluster.place import gather, selector_text
from function.cluster.placement import RULE, claim_hash
from function.cluster.target import Target
from function.fleet import children, route
from function.fleet.gateway import KEEP, Gateway, find_gateway
from function.hosts import url_host
from function.kube import dig
from function.outcome import Condition, Inputs, Outcome, condition_true
from function.policy import ownership
from function.policy.names import behind_router
from function.policy.secrets import fetch_copyable

ROUTE = "global-route"
POLICY = "global-policy"
GATEWAY_USAGE = "usage-global-endpoint-cluster"
BACKEND_PREFIX = "global-backend-"
SPILLOVER_PREFIX = "global-spillover-"
SECRET_PREFIX = "secret-spillover-"
GATEWAY_KEY = "global-client-key"
# The Secrets the global gateway may use (spillover keys, the client key): only those their
# owner marked.
GATEWAY_KEY_LABEL = "inference.devopstoolkit.ai/gateway-key"


def compose_fleet(spec: LLMSpec, inputs: Inputs, out: Outcome) -> None:
    fleet = spec.fleet
    assert fleet is not None
    params = dig(inputs.xr, "spec", "parameters") or {}
    everyone = inputs.required.get(peers.REQUIREMENT) or []
    # Its own placements are those Crossplane observed it compose (never a label, which any
    # claim of the namespace could forge); a placement's name may not be another claim's.
    mine = children.observed_names(inputs.observed)
    foreign = {
        name
        for xr in everyone
        if isinstance(xr, dict) and (name := str(dig(xr, "metadata", "name"))) not in mine
    }

    def reach(as_ref: LLMSpec, target: Target) -> str | None:
        assert as_ref.cluster_ref is not None
        child = children.name(spec.name, as_ref.cluster_ref)
        if child in foreign:
            return (
                f"its placement would be LLMInference {spec.namespace}/{child}, which is another "
                "claim's name"
            )
        if fleet.gateway_cluster is None:
            return None
        url = placement_endpoint(as_ref, target)
        if url is None:
            return (
                "the global gateway reaches a placement through its cluster's router, and the "
                "model would not be behind it there (backend llmd, or an apiKeySecretRef, which "
                "the router cannot list models with)"
            )
        if url_host(url) is None and target.cluster != fleet.gateway_cluster:
            return (
                f"its endpoint {url} is in-cluster only, out of reach of the global Gateway on "
                f"{fleet.gateway_cluster}: set apps.vllm.endpoint.host on {target.cluster}"
            )
        return None

    gathered = gather(
        spec,
        inputs,
        out,
        fleet.spread_by,
        mine=lambda xr: dig(xr, "metadata", "name") in mine,
        reachable=reach,
        # A placement is judged on its cluster by its own creation time (a new one, by none:
        # after every model there), as its own function will judge it.
        created_on=lambda cluster: children.created(inputs.observed.get(children.key(cluster))),
    )
    if gathered is None:
        out.xr_ready = False
        return
    published = dig(inputs.xr, "status", "placement", "placements")
    current = children.current(inputs.observed, published)
    decision = spreading.spread(
        gathered.candidates, gathered.size, gathered.low, fleet.clusters, current
    )
    nowhere = not decision.placed and bool(current)
    if nowhere:
        # No cluster can take any placement now: what runs stays (as for one placement), and
        # the route keeps following what each reports.
        values = {c.name: c.spread_value for c in gathered.candidates}
        decision = spreading.Spread(
            tuple(spreading.Placed(c, values.get(c) or "", True, KEPT) for c in current),
            decision.asked,
            decision.missing,
        )
    by_name = {str(dig(c, "metadata", "name")): c for c in gathered.found}
    rows = []
    for p in decision.placed:
        key = children.key(p.cluster)
        out.resources[key] = children.manifest(spec.name, spec.namespace, params, p.cluster)
        observed = inputs.observed.get(key)
        out.ready[key] = condition_true(observed)
        serving, ready = children.serving(observed)
        url = children.endpoint(observed) or predicted(spec, p.cluster, by_name)
        rows.append(
            {
                "cluster": p.cluster,
                "spreadValue": p.spread_value,
                "name": children.name(spec.name, p.cluster),
                "reason": p.reason,
                "serving": serving,
                **({} if serving else {"why": children.why_not(observed)}),
                "readyReplicas": ready,
                "weight": route.placement_weight(serving, ready),
                **({"endpoint": url} if url else {}),
            }
        )
    explained = spreading.explain(
        decision, gathered.candidates, gathered.size, gathered.size.why_not, gathered.low
    )
    placement: dict[str, Any] = {
        "spreadBy": fleet.spread_by,
        "asked": fleet.clusters,
        "placed": len(rows),
        "summary": f"{len(rows)}/{fleet.clusters}",
        "rule": f"{RULE}; at most one per value of {fleet.spread_by}",
        "claimHash": claim_hash(params),
        "placements": rows,
        "candidates": [v.as_status() for v in explained],
    }
    if decision.missing:
        placement["missing"] = decision.missing
    out.placement = placement
    placement_condition(spec, decision, out, nowhere)
    serving_now = sum(1 for r in rows if r["serving"])
    out.conditions.append(
        Condition(
            "Serving",
            "True" if serving_now else "False",
            "Available" if serving_now else "NoPlacementServes",
            f"{serving_now} of {len(rows)} placement(s) serve"
            + (f": {', '.join(r['cluster'] for r in rows if r['serving'])}" if serving_now else "")
            + "".join(f"; {r['name']}: {r['why']}" for r in rows if not r["serving"]),
        )
    )
    endpoint = None
    route_ready = True
    where = Target(provider_config=None, namespace=spec.namespace)
    if fleet.gateway_cluster is not None:
        gateway = find_gateway(spec, inputs, out)
        if gateway is not None:
            endpoint, route_ready = global_route(spec, gateway, rows, inputs, out)
            where = Target(gateway.provider_config, gateway.namespace, cluster=gateway.cluster)
        else:
            # The gateway's cluster is being looked up or gone for now: what was routed
            # stays, as a model on a missing cluster stays, and says why. Taken away by the
            # platform (the app off, the namespace no longer allowed): it goes.
            why = next((c.reason for c in out.conditions if c.type == "GlobalEndpoint"), "")
            kept = why in KEEP and keep_route(inputs, out)
            route_ready = False
            endpoint = dig(inputs.xr, "status", "endpoint") if kept else None
    out.status = {
        "placement": placement,
        # Every placement's ready replicas: `kubectl get llm` shows them for the claim.
        "replicas": {"ready": sum(int(r["readyReplicas"]) for r in rows)},
        **({"endpoint": endpoint} if endpoint else {}),
    }
    out.xr_ready = serving_now > 0 and route_ready
    # Nothing it composes takes over an object that exists and is not its own: a placement's
    # LLMInference or a Usage on the control plane, anything on the gateway's cluster (its
    # Objects start observe-only until the provider has looked).
    no_takeover(spec, where, inputs, out)


KEPT = "no cluster can take a placement now; what runs stays"


def placement_condition(
    spec: LLMSpec, decision: spreading.Spread, out: Outcome, nowhere: bool = False
) -> None:
    selector = selector_text(spec)
    where = ", ".join(f"{p.cluster} ({p.spread_value})" for p in decision.placed)
    if not decision.placed or nowhere:
        kept = f"; what runs stays ({where})" if nowhere else ""
        out.conditions.append(
            Condition(
                "Placement",
                "False",
                "NoCluster",
                f"{spec.cluster_field} ({selector}): {decision.missing}{kept}; status.placement "
                "says why for each cluster",
            )
        )
    elif decision.missing:
        out.conditions.append(
            Condition(
                "Placement",
                "False",
                "TooFewClusters",
                f"{selector}: runs on {where}; {decision.missing} (status.placement.candidates "
                "says why for each cluster)",
            )
        )
    else:
        out.conditions.append(
            Condition("Placement", "True", "Placed", f"{selector}: runs on {where}")
        )


ROUTED = ("global-", SECRET_PREFIX, GATEWAY_USAGE)


def keep_route(inputs: Inputs, out: Outcome) -> bool:
    """Keep the route's objects as Crossplane observed them; whether there were any."""
    kept = False
    for key, obj in inputs.observed.items():
        if key.startswith(ROUTED):
            out.resources[key] = kube.desired_from_observed(obj)
            out.ready[key] = False
            kept = True
    return kept


def placement_endpoint(spec: LLMSpec, target: Target) -> str | None:
    """The URL a placement will publish, as its own status.endpoint will say (function/
    status.py `endpoint_url`), where the gateway can use one: the model's Ingress host, or
    the cluster's router; an llm-d model's path on its cluster's Gateway is not one."""
    if spec.ingress_host:
        return f"http://{spec.ingress_host}"
    if spec.llmd:
        return None
    if behind_router(spec, target) and target.router_endpoint:
        return target.router_endpoint
    return None


def predicted(spec: LLMSpec, cluster: str, found: dict[str, dict[str, Any]]) -> str | None:
    """A placement's URL before it has published one."""
    if spec.ingress_host:
        return f"http://{spec.ingress_host}"
    url = dig(found.get(cluster), "status", "endpoint")
    return url if isinstance(url, str) and url and not spec.llmd else None


def global_route(
    spec: LLMSpec, gateway: Gateway, rows: list[dict[str, Any]], inputs: Inputs, out: Outcome
) -> tuple[str | None, bool]:
    """The route, its backends and policy, the keys' copies and a Usage of the gateway's
    cluster; the URL (None while there is no route) and whether everything is ready there.
    Every key ends with the gateway's suffix (its ProviderConfig and namespace): naming
    another gateway composes new objects there and deletes these through their own
    ProviderConfig, instead of re-pointing them and leaving the old route behind."""
    assert spec.fleet is not None
    target = Target(
        provider_config=gateway.provider_config,
        namespace=gateway.namespace,
        cluster=gateway.cluster,
        credential_secrets=gateway.credential_secrets,
    )
    sfx = target.suffix
    legs: list[route.Leg] = []
    for row in rows:
        url = row.get("endpoint")
        if not isinstance(url, str) or route.split_url(url) is None:
            continue
        name = kube.dns_label(f"{spec.name}-at-{row['cluster']}")
        place(
            spec,
            gateway,
            BACKEND_PREFIX + row["cluster"] + sfx,
            route.static_backend(name=name, namespace=gateway.namespace, model=spec.model, url=url),
            out,
        )
        legs.append(route.Leg(name, int(row["weight"]), cluster=row["cluster"], url=url))
    placed_total = sum(leg.weight for leg in legs)
    spill_rows = []
    weights = route.spillover_weights(spec.fleet.spillover, placed_total)
    for i, (spill, weight) in enumerate(zip(spec.fleet.spillover, weights, strict=True)):
        secret = spillover_key(spec, gateway, target, i, inputs, out)
        spill_rows.append({"url": spill.url, "model": spill.model, "weight": weight})
        if secret is None:
            continue
        name = kube.dns_label(f"{spec.name}-spillover-{i}")
        place(
            spec,
            gateway,
            f"{SPILLOVER_PREFIX}{i}{sfx}",
            route.spillover_backend(
                name=name, namespace=gateway.namespace, model=spec.model, spill=spill, secret=secret
            ),
            out,
        )
        legs.append(route.Leg(name, weight, url=spill.url))
    if spill_rows and out.placement is not None:
        out.placement["spillover"] = spill_rows
    route_name = kube.dns_label(spec.name)
    path = f"/{spec.namespace}/{spec.name}"
    guarded = guard(spec, gateway, target, route_name, inputs, out)
    if guarded is not None:
        place(
            spec,
            gateway,
            ROUTE + sfx,
            route.http_route(
                name=route_name,
                namespace=gateway.namespace,
                model=spec.model,
                gateway=gateway.gateway,
                path=path,
                legs=legs,
            ),
            out,
        )
    # The gateway's cluster stays while the claim has objects there: the route's policy (always
    # composed, or kept), else whatever else it has there.
    by = composed_ref(
        out, POLICY + sfx, ROUTE + sfx, *(k for k in out.resources if k.startswith("global-"))
    )
    if by is not None:
        out.resources[GATEWAY_USAGE] = resources.cluster_usage(
            name=kube.dns_label(f"{spec.name}-uses-{gateway.cluster}"),
            cluster=gateway.cluster,
            by=by,
        )
        out.ready[GATEWAY_USAGE] = True
    routed = [k for k in out.resources if k.startswith(("global-", SECRET_PREFIX))]
    for k in routed:
        out.ready[k] = condition_true(inputs.observed.get(k))
    ready = guarded is not None and all(out.ready[k] for k in routed)
    if guarded is None:
        return None, False  # guard() said why
    weights_text = ", ".join(f"{leg.cluster or leg.url}={leg.weight}" for leg in legs)
    out.conditions.append(
        Condition(
            "GlobalEndpoint",
            "True" if ready else "False",
            "Routed" if ready else "Creating",
            f"HTTPRoute {gateway.namespace}/{route_name} on {gateway.gateway[1]}/"
            f"{gateway.gateway[0]} (InferenceCluster {gateway.cluster}), weights "
            f"{weights_text or 'none'}"
            + (f", clients need {guarded}" if guarded else "")
            + ("" if ready else "; waiting for its objects there"),
        )
    )
    return gateway.endpoint + path, ready


def guard(
    spec: LLMSpec, gateway: Gateway, target: Target, route_name: str, inputs: Inputs, out: Outcome
) -> str | None:
    """The route's policy (retries; with globalEndpoint.apiKeySecretRef, the client key), and
    whether the route may be composed: "" (no key asked), the key's description (the key and
    its policy are in place there), or None (not yet: the condition says why; a route that
    was composed before is dropped, its policy and key kept, so it is never open)."""
    assert spec.fleet is not None
    sfx = target.suffix
    policy = dict(name=route_name, namespace=gateway.namespace, model=spec.model, route=route_name)
    ref = spec.fleet.gateway_key
    if ref is None:
        place(spec, gateway, POLICY + sfx, route.route_policy(**policy), out)
        return ""
    keys = gateway_key(spec, gateway, target, inputs, out)
    field = f"{P}.globalEndpoint.apiKeySecretRef"
    if keys is None:
        for key in (POLICY + sfx, GATEWAY_KEY + sfx):
            if key in inputs.observed:
                out.resources[key] = kube.desired_from_observed(inputs.observed[key])
        why = (
            f"{field}: the route is composed once Secret {spec.namespace}/{ref.name} (key "
            f"{ref.key!r}) is copied to {gateway.cluster}; it is never open"
        )
        out.conditions.append(Condition("GlobalEndpoint", "False", "WaitingForKey", why))
        return None
    place(spec, gateway, POLICY + sfx, route.route_policy(**policy, keys=keys), out)
    if not (
        condition_true(inputs.observed.get(POLICY + sfx))
        and condition_true(inputs.observed.get(GATEWAY_KEY + sfx))
    ):
        out.conditions.append(
            Condition(
                "GlobalEndpoint",
                "False",
                "WaitingForKey",
                f"{field}: the route follows once its key and the policy that checks it are in "
                f"place on {gateway.cluster}; it is never open",
            )
        )
        return None
    return "the key of Secret " + f"{spec.namespace}/{ref.name}"


def gateway_key(
    spec: LLMSpec, gateway: Gateway, target: Target, inputs: Inputs, out: Outcome
) -> str | None:
    """The copy of the global endpoint's client key on the gateway's cluster, which the
    route's policy checks every request against; None until it can be copied."""
    assert spec.fleet is not None and spec.fleet.gateway_key is not None
    ref = spec.fleet.gateway_key
    field = f"{P}.globalEndpoint.apiKeySecretRef"
    copied = copy_to_gateway(
        spec,
        gateway,
        target,
        ref,
        field=field,
        requirement=GATEWAY_KEY,
        copy=kube.dns_label(f"{spec.name}-global-key"),
        use="the global gateway checks clients against it",
        without="the global route is left out until then: it is never open",
        inputs=inputs,
        out=out,
    )
    if copied is None:
        return None
    copy, found = copied
    raw = dig(found, "data", ref.key)
    value = ""
    if isinstance(raw, str):
        try:
            value = base64.b64decode(raw, validate=True).decode()
        except (ValueError, UnicodeDecodeError):
            value = "\0"
    if not value or value != value.strip() or value.startswith("{"):
        # agentgateway v1.4.1 compares the raw value (a trailing newline from `echo` or
        # --from-file never matches) and reads one starting with `{` as JSON
        # (controller/pkg/agentgateway/plugins/traffic_plugin.go).
        raise SpecError(
            field,
            ref.name,
            f"{field}: the key {ref.key!r} of Secret {spec.namespace}/{ref.name} is empty, "
            "starts or ends with whitespace (a newline from echo or --from-file) or starts "
            "with {, which the gateway would never match; recreate it with "
            "--from-literal=<key>=<value>",
        )
    return copy


def spillover_key(
    spec: LLMSpec, gateway: Gateway, target: Target, i: int, inputs: Inputs, out: Outcome
) -> str | None:
    """The copy of a spillover endpoint's key on the gateway's cluster; None until it can be
    copied (the endpoint is left out of the route meanwhile)."""
    assert spec.fleet is not None
    copied = copy_to_gateway(
        spec,
        gateway,
        target,
        spec.fleet.spillover[i].secret,
        field=f"{P}.spillover[{i}].apiKeySecretRef",
        requirement=f"{SECRET_PREFIX}{i}",
        copy=kube.dns_label(f"{spec.name}-spillover-{i}-key"),
        use=f"the gateway sends it to {spec.fleet.spillover[i].host} with every request",
        without="the spillover endpoint is left out of the route until then",
        inputs=inputs,
        out=out,
    )
    return copied[0] if copied is not None else None


def copy_to_gateway(
    spec: LLMSpec,
    gateway: Gateway,
    target: Target,
    ref: Any,
    *,
    field: str,
    requirement: str,
    copy: str,
    use: str,
    without: str,
    inputs: Inputs,
    out: Outcome,
) -> tuple[str, dict[str, Any]] | None:
    """One key of the Secret `ref` (in the claim's namespace) copied by reference to the
    gateway's cluster as `copy`: only an Opaque Secret its owner marked for the gateway, never
    a cluster's credentials, never one named like its copy. The copy's name and the Secret
    as fetched; None until Crossplane has fetched it (or while it is missing: a warning says
    what goes `without` it)."""
    found = fetch_copyable(ref, field, requirement, spec.namespace, target, inputs, out, without)
    if found is None:
        return None
    labels = dig(found, "metadata", "labels") or {}
    if not isinstance(labels, dict) or labels.get(GATEWAY_KEY_LABEL) != "true":
        raise SpecError(
            field,
            ref.name,
            f"{field}: Secret {spec.namespace}/{ref.name} is not labelled "
            f'{GATEWAY_KEY_LABEL}: "true"; {use}, so only a Secret its owner marked for the '
            f"gateway is used (kubectl label secret {ref.name} {GATEWAY_KEY_LABEL}=true)",
        )
    if copy == ref.name:
        raise SpecError(
            field,
            ref.name,
            f"{field}: Secret {spec.namespace}/{ref.name} has the name of the copy the claim "
            "makes of it on the gateway's cluster, which would be the Secret itself; rename "
            "the Secret",
        )
    secret, refs = resources.copied_secret(ref, spec.namespace, copy, gateway.namespace)
    place(spec, gateway, requirement + target.suffix, secret, out, references=refs)
    return copy, found


def place(
    spec: LLMSpec,
    gateway: Gateway,
    key: str,
    manifest: dict[str, Any],
    out: Outcome,
    **wrap: Any,
) -> None:
    """Compose `manifest` on the gateway's cluster, in a provider-kubernetes Object."""
    out.resources[key] = resources.wrap_in_object(
        ownership.annotate(manifest, ownership.owner(spec.namespace, spec.name)),
        name=kube.dns_label(f"{spec.name}-{key}"),
        provider_config=gateway.provider_config,
        **wrap,
    )
