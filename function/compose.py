"""What an LLMInference composes, as plain data in and plain data out.

`compose(Inputs) -> Outcome` holds the whole decision: parse the spec, find the target,
resolve the model, plan, build resources, judge readiness, write status. `fn.py` only
translates between this and the gRPC messages, so everything here is testable and
benchmarkable without protobuf.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from function import (
    catalog,
    engine_args,
    ledger,
    llmd,
    model_config,
    ownership,
    peers,
    placement,
    resources,
    scaling,
    simulator,
    sizing,
    storage,
    tenancy,
    vllm_cli,
)
from function.cluster import (
    CLUSTER_API_VERSION,
    CLUSTER_KIND,
    REQUIREMENT,
    ClusterNotReady,
    Target,
    dig,
    from_cluster,
    without_cluster,
)
from function.hub import HubAnswer
from function.limits import MAX_GPUS, GpuShape
from function.spec import (
    DEFAULT_HF_TOKEN_KEY,
    DEFAULT_HF_TOKEN_SECRET,
    Disaggregation,
    LLMSpec,
    P,
    Role,
    SecretRef,
    SpecError,
    parse,
)

# Composition resource names.
RUNTIME = "vllm-runtime"
INGRESS = "ingress"
NAMESPACE = "namespace"
HF_TOKEN = "hf-token"
API_KEY = "api-key"
CACHE = "model-cache"
SHARED_CACHE = "shared-model-cache"
CLUSTER_USAGE = "usage-inference-cluster"
# A simulated engine (engine.simulate): its Deployment and Service; KEDA's ScaledObject.
SIMULATOR = "simulator"
SIMULATOR_SERVICE = "simulator-service"
SCALER = "scaled-object"
# A model over several nodes (apps.lws): its LeaderWorkerSet and its leaders' Service.
LWS = "leader-worker-set"
LWS_SERVICE = "leader-service"
KEDA_USAGE = "usage-keda"
# An llm-d model (backend llmd): its vLLM StatefulSets (this prefix, the role and the digest
# of the cache), their headless Service, the InferencePool, the endpoint picker (Deployment,
# Service, configuration), the identity of its router and the HTTPRoute.
LLMD_ENGINE = "llmd"
LLMD_ENGINES_SERVICE = "llmd-engines-service"
LLMD_POOL = "inference-pool"
LLMD_PICKER = "endpoint-picker"
LLMD_PICKER_SERVICE = "endpoint-picker-service"
LLMD_PICKER_CONFIG = "endpoint-picker-config"
LLMD_ROUTER_IDENTITY = ("router-serviceaccount", "router-role", "router-rolebinding")
LLMD_ROUTE = "http-route"
# The download Job's key: this prefix and the digest of its name (a new Job per model).
FETCH = "model-fetch"

# vLLM 0.17.1's flags for Mistral-format repositories (config/model.py tokenizer_mode and
# config_format "mistral"; config/load.py load_format "mistral").
MISTRAL_FORMAT_ARGS = [
    "--tokenizer-mode",
    "mistral",
    "--config-format",
    "mistral",
    "--load-format",
    "mistral",
]
# Items per prompt of each modality (vLLM's default is 999 of each: config/multimodal.py).
# A bound keeps the encoder cache, which vLLM sizes for the largest prompt, and the memory a
# hostile prompt can take small; raise it with engine.extraArgs --limit-mm-per-prompt.
MM_LIMITS = {"image": 4, "video": 1, "audio": 1}

# Flags the function sets itself that a user's engine.extraArgs may override (the last
# occurrence wins in vLLM's argument parser); the function says so. Flags a field owns are
# refused instead (engine_args.OWNED).
MANAGED_FLAGS = (
    "--trust-remote-code",
    "--reasoning-parser",
    "--runner",
    "--max-model-len",
    "--dtype",
    "--gpu-memory-utilization",
    "--tool-call-parser",
    "--limit-mm-per-prompt",
    "--tokenizer-mode",
    "--config-format",
    "--load-format",
)


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str = ""


@dataclass
class Outcome:
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    ready: dict[str, bool] = field(default_factory=dict)
    status: dict[str, Any] = field(default_factory=dict)
    conditions: list[Condition] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # name -> {"apiVersion", "kind", "matchName" or "matchLabels", "namespace"}
    requirements: dict[str, dict[str, Any]] = field(default_factory=dict)
    fatal: str | None = None
    # Readiness of the XR itself when the composed resources cannot say (nothing composed
    # yet because the cluster is missing or not ready): never Ready without a serving engine.
    xr_ready: bool | None = None
    # Plan fields decided while building (the model cache), merged into status.plan.
    status_extra: dict[str, Any] = field(default_factory=dict)
    # status.placement, for a claim placed by clusterSelector.
    placement: dict[str, Any] | None = None
    # status.llmd, for a model llm-d serves.
    llmd: dict[str, Any] | None = None


@dataclass(frozen=True)
class Inputs:
    xr: dict[str, Any]
    observed: dict[str, dict[str, Any]] = field(default_factory=dict)
    engine_image: str | None = None  # the Composition's input: the pinned engine image
    simulator_image: str | None = None  # ...and the pinned inference simulator image
    # The llm-d backend's pinned images: vLLM's own (with NIXL), the endpoint picker and the
    # routing sidecar.
    llmd_engine_image: str | None = None
    picker_image: str | None = None
    sidecar_image: str | None = None
    # requirement name -> resources Crossplane found; a name absent here was not asked yet.
    required: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # What the Hugging Face Hub said about a model the catalog lacks (fn.py asks, hub.py
    # answers); None: not asked (the catalog knows it, or the token Secret is being fetched).
    hub: HubAnswer | None = None


@dataclass(frozen=True)
class HubQuery:
    """What to ask the Hub: the model, the revision the claim pins, the token to use."""

    model: str
    revision: str | None
    token: str | None = field(default=None, repr=False)


# The requirement through which Crossplane fetches the claim's Hugging Face token Secret.
HF_TOKEN_REQUIREMENT = "secret-hf-token"


def _hf_token_ref_for_hub(spec: LLMSpec) -> SecretRef:
    """The Secret whose token the Hub is asked with: the claim's, else the default one."""
    return spec.hf_token_secret or SecretRef(DEFAULT_HF_TOKEN_SECRET, DEFAULT_HF_TOKEN_KEY)


def _secret_value(found: list[dict[str, Any]], key: str) -> str | None:
    """One key of a Secret Crossplane fetched (data is base64, stringData is not)."""
    if not found or not isinstance(found[0], dict):
        return None
    secret = found[0]
    plain = (secret.get("stringData") or {}).get(key)
    if isinstance(plain, str) and plain:
        return plain.strip()
    encoded = (secret.get("data") or {}).get(key)
    if not isinstance(encoded, str):
        return None
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8").strip() or None
    except (binascii.Error, UnicodeDecodeError):
        return None


def hub_query(inputs: Inputs) -> HubQuery | None:
    """What fn.py should ask the Hub before compose, or None: the claim is unreadable, the
    catalog knows the model, or Crossplane has not fetched the token Secret yet (it does on
    the next call of the same reconcile, asked for by `compose`)."""
    try:
        spec = parse(inputs.xr)
    except SpecError:
        return None
    if spec.engine.simulate:
        return None  # a simulated model is planned from the catalog or its name only
    if catalog.lookup(spec.model) is not None or HF_TOKEN_REQUIREMENT not in inputs.required:
        return None
    token = _secret_value(inputs.required[HF_TOKEN_REQUIREMENT], _hf_token_ref_for_hub(spec).key)
    return HubQuery(model=spec.model, revision=spec.engine.revision, token=token)


def _condition_true(obj: dict[str, Any] | None, typ: str = "Ready") -> bool:
    conditions = dig(obj, "status", "conditions")
    if not isinstance(conditions, list):
        return False
    return any(
        isinstance(c, dict) and c.get("type") == typ and c.get("status") == "True"
        for c in conditions
    )


def _keep_observed(inputs: Inputs, out: Outcome) -> None:
    """Keep what already runs: a missing cluster must not delete a serving model. Each object
    is returned as Crossplane must apply it (no status, no server-set metadata)."""
    for name, obj in inputs.observed.items():
        out.resources[name] = resources.desired_from_observed(obj)


POLICY_REQUIREMENT = "tenancy-policy"


def _admin_allowed(spec: LLMSpec, inputs: Inputs, out: Outcome) -> tuple[str, ...] | None:
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


def _check_tenancy(spec: LLMSpec, target: Target, admin: tuple[str, ...] = ()) -> None:
    """A claim's objects go only where its namespace may deploy (function/tenancy.py): its
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


def _target(
    spec: LLMSpec, inputs: Inputs, out: Outcome, chosen: dict[str, Any] | None = None
) -> Target | None:
    target = _find_target(spec, inputs, out, chosen)
    if target is None:
        return None
    # A claim through a ProviderConfig: the platform's policy may let its namespace deploy
    # into more (asked for at once, by name). On an InferenceCluster the cluster's own
    # allowedNamespaces decide: its models' identity is bound there and nowhere else.
    admin = _admin_allowed(spec, inputs, out) if target.cluster is None else ()
    try:
        _check_tenancy(spec, target, admin or ())
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


def _find_target(
    spec: LLMSpec, inputs: Inputs, out: Outcome, chosen: dict[str, Any] | None = None
) -> Target | None:
    """The target: the control plane, a ProviderConfig's cluster, or an InferenceCluster
    (named in clusterRef and fetched, or `chosen` by placement among those fetched)."""
    if spec.cluster_ref is None:
        return without_cluster(spec)
    ref = f"InferenceCluster {spec.namespace}/{spec.cluster_ref}"
    if chosen is not None:
        return _cluster_target(spec, chosen, ref, inputs, out)
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
        _keep_observed(inputs, out)
        return None
    return _cluster_target(spec, found[0], ref, inputs, out)


def _cluster_target(
    spec: LLMSpec, cluster: dict[str, Any], ref: str, inputs: Inputs, out: Outcome
) -> Target | None:
    try:
        target = from_cluster(spec, cluster)
    except ClusterNotReady as e:
        out.conditions.append(Condition("Cluster", "False", "NotReady", str(e)))
        _keep_observed(inputs, out)
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


PLACEMENT_REQUIREMENT = "inference-clusters"


def _placed(spec: LLMSpec, inputs: Inputs, out: Outcome) -> tuple[LLMSpec, dict[str, Any]] | None:
    """For a clusterSelector: the InferenceClusters it matches (a required resource), the
    models on each (function/peers.py), and the cluster placement chooses
    (function/placement.py); the claim as if it named that cluster, or None when none can
    run it yet (status.placement says why, for every cluster)."""
    assert spec.cluster_selector is not None
    out.requirements[PLACEMENT_REQUIREMENT] = {
        "apiVersion": CLUSTER_API_VERSION,
        "kind": CLUSTER_KIND,
        "matchLabels": dict(spec.cluster_selector),
        "namespace": spec.namespace,
    }
    out.requirements[peers.REQUIREMENT] = {
        "apiVersion": peers.API_VERSION,
        "kind": peers.KIND,
        "namespace": spec.namespace,
    }
    if PLACEMENT_REQUIREMENT not in inputs.required:
        out.conditions.append(
            Condition("Placement", "Unknown", "Resolving", "listing the matching clusters")
        )
        return None
    found = [c for c in inputs.required[PLACEMENT_REQUIREMENT] if isinstance(c, dict)]
    everyone = inputs.required.get(peers.REQUIREMENT) or []
    created = _created(inputs)
    params = dig(inputs.xr, "spec", "parameters") or {}
    fingerprint = placement.claim_hash(params)
    before = dig(inputs.xr, "status", "placement") or {}
    current = before.get("cluster") if isinstance(before.get("cluster"), str) else None
    facts, _ = _facts(spec, inputs, Outcome())  # the plan's own call reports on the facts
    engine = _engine_settings(spec)
    candidates = []
    grouped = peers.by_cluster(everyone, spec.name)
    for cluster in sorted(found, key=lambda c: str(dig(c, "metadata", "name"))):
        name = str(dig(cluster, "metadata", "name"))
        as_ref = dataclasses.replace(spec, cluster_ref=name)
        problem, target = _candidate(as_ref, cluster)
        if target is None:
            candidates.append(placement.Candidate(name, problem=problem))
            continue
        others = grouped.get(name, [])
        try:
            # What would refuse the model there: where it may deploy, names taken behind
            # that cluster's router.
            _check_tenancy(as_ref, target)
            _check_kv_endpoints(as_ref, target)
            _check_served_names(as_ref, target, others, created, inputs.xr, Outcome())
            _check_host(as_ref, target, others, created)
        except SpecError as e:
            problem = e.problem if e.problem is not None else e.message
        held = sum(h.gpus for h in _holders(as_ref, target, others, created))
        g = target.gpu
        candidates.append(
            placement.Candidate(
                name,
                problem=problem,
                gpu_type=g.type,
                memory_gib=g.memory_gib,
                per_node=g.per_node,
                pool=g.per_node * target.max_nodes if target.max_nodes else None,
                held=held,
                span=target.span,
            )
        )
    if spec.disaggregation is not None:
        low = 1  # the sizer counts every prefill and decode pod at once
    else:
        low = spec.autoscaling.min_replicas if spec.autoscaling else (spec.replicas or 1)
    size = _sizer(spec, facts, engine)
    decision = placement.place(candidates, size, low, current)
    out.placement = {
        **({"cluster": decision.cluster} if decision.cluster else {}),
        "reason": decision.reason,
        "rule": placement.RULE,
        "claimHash": fingerprint,
        "candidates": [
            v.as_status() for v in placement.explain(decision, candidates, size, size.why_not)
        ],
    }
    selector = ", ".join(f"{k}={v}" for k, v in sorted(spec.cluster_selector.items()))
    if decision.cluster is None:
        out.conditions.append(
            Condition(
                "Placement",
                "False",
                "NoCluster",
                f"{spec.cluster_field} ({selector}): {decision.reason}; status.placement says "
                "why for each cluster",
            )
        )
        out.status = {"placement": out.placement}
        _keep_observed(inputs, out)
        return None
    out.conditions.append(
        Condition("Placement", "True", "Placed", f"{selector}: {decision.reason}")
    )
    cluster = next(c for c in found if dig(c, "metadata", "name") == decision.cluster)
    return dataclasses.replace(spec, cluster_ref=decision.cluster), cluster


def _candidate(spec: LLMSpec, cluster: dict[str, Any]) -> tuple[str | None, Target | None]:
    """Whether a matching cluster can take models at all: (why not, its Target)."""
    if dig(cluster, "metadata", "deletionTimestamp"):
        return "being deleted", None
    try:
        target = from_cluster(spec, cluster)
    except ClusterNotReady as e:
        return f"not ready: {e}", None
    except SpecError as e:
        # What the cluster lacks is the point here (from_cluster says it of the cluster).
        return (e.problem if e.problem is not None else e.message), None
    if not _condition_true(cluster):
        return "not Ready", target
    return None, target


class _Sizer:
    """GPUs per replica of the claim's model on a GPU shape, as the function will plan it
    there. One plan per GPU type on the largest node (8 GPUs) serves every node size: the
    function takes the smallest count that fits, so a node of p GPUs takes it exactly when
    that count is at most p. Only a model no node holds is planned over several nodes, and
    why one does not fit is planned when asked."""

    def __init__(
        self, spec: LLMSpec, facts: catalog.ModelFacts | None, engine: sizing.EngineSettings
    ) -> None:
        self.spec, self.facts, self.engine = spec, _as_run(spec, facts), engine
        self.widest: dict[tuple[str | None, float], int | None] = {}
        self.exact: dict[tuple[str | None, float, int, int], tuple[int | None, str]] = {}

    def __call__(
        self, gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1
    ) -> int | None:
        if self.spec.llmd:
            span = 1  # llm-d serves a replica from one pod
        if self.spec.disaggregation is not None:
            return self._exact(gpu_type, memory_gib, per_node, 1)[0]
        key = (gpu_type, memory_gib)
        if key not in self.widest:
            shape = GpuShape(memory_gib, max(per_node, MAX_GPUS), gpu_type, False)
            self.widest[key] = _size_on(self.spec, self.facts, self.engine, shape)[0]
        gpus = self.widest[key]
        if gpus is not None and gpus <= per_node:
            return gpus
        if span < 2 and (self.spec.gpu is None or self.spec.gpu <= per_node):
            return None
        return self._exact(gpu_type, memory_gib, per_node, span)[0]

    def why_not(self, gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1) -> str:
        if self.spec.llmd:
            span = 1
        return self._exact(gpu_type, memory_gib, per_node, span)[1]

    def _exact(
        self, gpu_type: str | None, memory_gib: float, per_node: int, span: int
    ) -> tuple[int | None, str]:
        key = (gpu_type, memory_gib, per_node, span)
        if key not in self.exact:
            shape = GpuShape(memory_gib, per_node, gpu_type, False)
            self.exact[key] = _size_on(self.spec, self.facts, self.engine, shape, span)
        return self.exact[key]


def _sizer(
    spec: LLMSpec, facts: catalog.ModelFacts | None, engine: sizing.EngineSettings
) -> _Sizer:
    return _Sizer(spec, facts, engine)


def _size_on(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    engine: sizing.EngineSettings,
    shape: GpuShape,
    span: int = 1,
) -> tuple[int | None, str]:
    if spec.engine.simulate:
        return 0, ""  # no GPU
    what = f"{shape.per_node} x {shape.type or 'GPU'} ({shape.memory_gib:g} GiB) per node"
    if spec.disaggregation is not None:
        # Every prefill and decode pod, as one "replica" placement counts once.
        try:
            roles = _pd_roles(spec, facts, Target(None, "", gpu=shape), engine)
        except SpecError as e:
            return None, f"{what}: {e.message}"
        return sum((r.replicas or 1) * r.plan.gpus for r in roles), ""
    if facts is None:
        if spec.gpu is not None and spec.gpu <= shape.per_node:
            return spec.gpu, ""
        return None, f"its size is not known and {P}.gpu does not fit {what}"
    try:
        plan = sizing.plan(facts, spec.gpu, shape, engine, span)
    except sizing.SizingError as e:
        return None, f"{what}: {e.render(one_pod=spec.llmd)}"
    if not plan.fits:
        return None, f"{what}: {plan.shortfall or 'the model does not fit'}"
    return plan.gpus, ""


def _hf_token(spec: LLMSpec, facts: catalog.ModelFacts | None) -> SecretRef | None:
    if spec.hf_token_secret is not None:
        return spec.hf_token_secret
    if facts is not None and facts.gated:
        return SecretRef(DEFAULT_HF_TOKEN_SECRET, DEFAULT_HF_TOKEN_KEY)
    return None


@dataclass(frozen=True)
class Secrets:
    """The Secrets the pods on the target read, as (name, key) there: the originals on the
    control plane, or each model's own copies on another cluster. None: none (or not yet
    copied)."""

    hf_token: tuple[str, str] | None
    api_key: tuple[str, str] | None


# Secret types that may be copied to another cluster: only plain (Opaque) ones, never a
# service account token, a registry credential or a Crossplane connection secret.
_COPYABLE_TYPES = (None, "", "Opaque")


def _secret_problem(
    ref: SecretRef, field: str, found: dict[str, Any], target: Target
) -> str | None:
    """Why the Secret `ref` may not be copied to another cluster, or None."""
    kind = found.get("type")
    where = f"Secret {found.get('metadata', {}).get('namespace', '')}/{ref.name}"
    if ref.name in target.credential_secrets:
        return (
            f"{field}: {where} holds the credentials of InferenceCluster {target.cluster}; "
            "it is never copied to a cluster. Put the token in a Secret of its own"
        )
    if kind not in _COPYABLE_TYPES:
        return (
            f"{field}: {where} is of type {kind}; only Opaque Secrets are copied to another "
            "cluster. Put the token in an Opaque Secret (kubectl create secret generic)"
        )
    data = {**(found.get("data") or {}), **(found.get("stringData") or {})}
    if ref.key not in data:
        return f"{field}: {where} has no key {ref.key!r}; set {field}.key to one it has"
    return None


def _secrets(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    target: Target,
    name: str,
    inputs: Inputs,
    out: Outcome,
) -> Secrets:
    """The Hugging Face token and the API key, by reference. On another cluster each is
    copied per model (one key, from an Opaque Secret that is not the cluster's own
    credentials) and owned by that model's Object; the copy waits until Crossplane has
    fetched the source to check it."""
    wanted = {HF_TOKEN: _hf_token(spec, facts), API_KEY: spec.api_key_secret}
    fields = {HF_TOKEN: f"{P}.hfTokenSecretRef", API_KEY: f"{P}.apiKeySecretRef"}
    if target.provider_config is None:
        return Secrets(
            *((ref.name, ref.key) if ref else None for ref in (wanted[HF_TOKEN], wanted[API_KEY]))
        )
    placed: dict[str, tuple[str, str] | None] = {}
    for kind, ref in wanted.items():
        placed[kind] = None
        if ref is None:
            continue
        requirement = f"secret-{kind}"
        out.requirements[requirement] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "matchName": ref.name,
            "namespace": spec.namespace,
        }
        if requirement not in inputs.required:
            continue  # Crossplane fetches it and calls again
        found = inputs.required[requirement]
        if not found:
            out.warnings.append(
                f"{fields[kind]}: Secret {spec.namespace}/{ref.name} does not exist; create it "
                f"with the key {ref.key!r} (the engine cannot start without it)"
            )
            continue
        problem = _secret_problem(ref, fields[kind], found[0], target)
        if problem:
            raise SpecError(fields[kind], ref.name, problem)
        copy_name = resources.dns_label(f"{spec.name}-{kind}")
        secret, refs = resources.copied_secret(
            name=copy_name,
            namespace=target.namespace,
            key=ref.key,
            source_name=ref.name,
            source_namespace=spec.namespace,
        )
        _place(spec, target, kind, secret, out, suffix=kind, references=refs)
        placed[kind] = (copy_name, ref.key)
    return Secrets(placed[HF_TOKEN], placed[API_KEY])


def _engine_args(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    out: Outcome,
    api_key_arg: bool = True,
) -> list[str]:
    # Every name the engine answers to, the Hugging Face id first: vLLM 0.17.1 takes a list
    # (config/model.py served_model_name), labels its metrics and answers with the first,
    # and lists one model card per name at /v1/models (entrypoints/openai/models/
    # serving.py), each of which the router registers for routing.
    args = ["--served-model-name", *spec.served_names]
    if spec.api_key_secret is not None and api_key_arg:
        # The controller's one variable from a Secret carries the key (see _build); the
        # kubelet expands $(HF_TOKEN) in the arguments, so the manifest holds no key.
        args += ["--api-key", f"$({resources.ENGINE_SECRET_ENV})"]
    if facts is not None:
        if facts.trust_remote_code:
            args.append("--trust-remote-code")
        if facts.reasoning_parser:
            args += ["--reasoning-parser", facts.reasoning_parser]
        if facts.mistral_format:
            # Mistral's own format (params.json, consolidated weights, tekken tokenizer):
            # vLLM detects it only by listing the repository, which an engine started offline
            # from the model cache cannot, so say it (vLLM's Mistral recipes do).
            args += MISTRAL_FORMAT_ARGS
        if facts.multimodal:
            limits = {m: MM_LIMITS.get(m, 1) for m in facts.multimodal}
            args += ["--limit-mm-per-prompt", json.dumps(limits, separators=(",", ":"))]
        args += list(facts.extra_args)
    if plan.runner:
        args += ["--runner", plan.runner]
    if plan.context_auto and spec.engine.context is None:
        # Nobody knows the model's context: vLLM takes the smaller of its own and what the
        # KV cache holds (vLLM 0.17.1 `--max-model-len auto`, kv_cache_utils.py
        # `_auto_fit_max_model_len`), instead of a guess it could refuse.
        args += ["--max-model-len", "auto"]
    overridden = sorted(
        {n for a in spec.engine.extra_args if (n := engine_args.flag_name(a)) in MANAGED_FLAGS}
    )
    if overridden:
        out.notes.append(
            f"{P}.engine.extraArgs overrides {', '.join(overridden)} set by the function "
            "(the last occurrence wins)"
        )
    return args + list(spec.engine.extra_args)


def _max_model_len(spec: LLMSpec, plan: sizing.Plan, out: Outcome) -> int | None:
    wanted = spec.engine.context
    if wanted is None:
        return plan.max_model_len or None
    where = (
        f"{P}.engine.maxModelLen"
        if spec.engine.max_model_len
        else f"{P}.engine.extraArgs --max-model-len"
    )
    if plan.fits and plan.max_model_len and wanted > plan.max_model_len:
        out.warnings.append(
            f"{where}: {wanted} tokens do not fit the KV cache of this plan "
            f"(about {plan.max_model_len} do); vLLM refuses to start when one sequence of "
            "max-model-len does not fit. Lower it or add GPUs."
        )
    return wanted


def _engine_settings(spec: LLMSpec) -> sizing.EngineSettings:
    e = spec.engine
    given = {
        "--gpu-memory-utilization": e.gpu_memory_utilization,
        "--kv-cache-dtype": e.kv_cache_dtype,
        "--max-num-batched-tokens": e.max_num_batched_tokens,
        "--max-num-seqs": e.max_num_seqs,
    }
    return sizing.EngineSettings(
        gpu_memory_utilization=e.gpu_memory_utilization or sizing.GPU_MEMORY_UTILIZATION,
        kv_cache_dtype=e.kv_cache_dtype or "auto",
        max_num_batched_tokens=e.max_num_batched_tokens,
        max_num_seqs=e.max_num_seqs,
        overridden=tuple(flag for flag, value in given.items() if value is not None),
    )


def _facts(spec: LLMSpec, inputs: Inputs, out: Outcome) -> tuple[catalog.ModelFacts | None, str]:
    """The model's facts and where they come from: the catalog, the Hub (config.json and
    safetensors metadata, read by function/model_config.py) or the id alone. A model the Hub
    says does not exist is refused, with the catalog id it is likely a typo of."""
    facts = catalog.lookup(spec.model)
    if facts is not None:
        return facts, "catalog"
    ref = _hf_token_ref_for_hub(spec)
    out.requirements[HF_TOKEN_REQUIREMENT] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "matchName": ref.name,
        "namespace": spec.namespace,
    }
    answer = inputs.hub
    near = catalog.near_id(spec.model)
    if answer is not None and answer.status == "found" and answer.model is not None:
        try:
            return model_config.facts(answer.model), "hub"
        except model_config.ConfigError as e:
            out.warnings.append(f"{P}.model: {e}; sized from its name instead")
    elif answer is not None and answer.status == "not_found":
        raise SpecError(
            f"{P}.model",
            spec.model,
            f"{P}.model: {answer.message}"
            + (f"; did you mean {near}?" if near else "")
            + (
                f" Check the id, or set {P}.hfTokenSecretRef to a token that can see it"
                if not near
                else ""
            ),
        )
    elif answer is not None and answer.status == "gated":
        out.warnings.append(
            f"{P}.hfTokenSecretRef: {answer.message}; put such a token in Secret "
            f"{spec.namespace}/{ref.name} (key {ref.key}) or name another in "
            f"{P}.hfTokenSecretRef. Until then the model is sized from its name"
        )
    elif answer is not None:
        out.notes.append(f"{answer.message}; {spec.model} is sized from its name until it answers")
    if near and (answer is None or answer.status != "found"):
        out.warnings.append(
            f"{P}.model: {spec.model} is not in the catalog, but {near} is: did you mean "
            f"it? As written, the model is sized from its name only"
        )
    estimate = catalog.estimate_from_name(spec.model)
    return estimate, "estimated" if estimate is not None else "unknown"


def _plan(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts | None, sizing.Plan, str]:
    facts, source = _facts(spec, inputs, out)
    if facts is None and spec.gpu is None:
        near = catalog.near_id(spec.model)
        raise SpecError(
            f"{P}.model",
            spec.model,
            f"{P}.model: {spec.model} is not in the model catalog, the Hugging Face Hub could "
            "not describe it, and its name carries no size (like 7B, 8x7B or 30B-A3B) to "
            "estimate from; set spec.parameters.gpu to the number of GPUs it needs"
            + (f", or did you mean {near}?" if near else ""),
        )
    engine = _engine_settings(spec)
    facts = _as_run(spec, facts)
    try:
        if facts is None:
            plan = sizing.plan_without_facts(spec.gpu, target.gpu)
        else:
            plan = sizing.plan(facts, spec.gpu, target.gpu, engine, target.span)
    except sizing.SizingError as e:
        message = e.render(one_pod=spec.llmd)
        if e.names_field:
            raise SpecError(e.field, e.value, message) from e
        # The GPU count was the function's choice: the model is what does not fit.
        field = e.field if spec.gpu is not None else f"{P}.model"
        raise SpecError(field, spec.model, f"{field}: {message}") from e
    if target.pod_cpu_millicores and target.pod_memory_mib:
        # Leave room for the model-cache Job, which may run beside the engine.
        plan = sizing.fit_to_node(
            plan,
            target.pod_cpu_millicores - storage.FETCH_CPU_MILLICORES,
            target.pod_memory_mib - storage.FETCH_MEMORY_MIB,
            f"one {target.instance_type or 'GPU node'} of {target.cluster or 'the cluster'}",
        )
    if facts is None:
        return None, plan, "unknown"
    if plan.shortfall and spec.gpu is not None and not target.gpu.assumed and not facts.estimated:
        # The cluster's GPU and the model's size are both known: the engine would fail to
        # start (out of memory, or no room for one sequence of its context).
        raise SpecError(
            f"{P}.gpu",
            spec.gpu,
            f"{P}.gpu: {spec.gpu} cannot hold {spec.model} on {target.cluster or 'this cluster'}: "
            f"{plan.shortfall}",
        )
    return facts, plan, source


def _as_run(spec: LLMSpec, facts: catalog.ModelFacts | None) -> catalog.ModelFacts | None:
    """The model's facts as the claim's vLLM will hold them: windowed layers sized as full
    when its arguments turn the hybrid KV cache manager off. The plan and placement both
    size with these."""
    if facts is not None and _hybrid_off(spec):
        return dataclasses.replace(facts, hybrid_kv=False)
    return facts


def _hybrid_off(spec: LLMSpec) -> bool:
    """Whether the claim's own arguments turn vLLM's hybrid KV cache manager off: explicitly,
    or with a KV connector and no stated preference (vLLM 0.17.1 config/vllm.py), so that
    windowed layers take full-length KV."""
    args = spec.engine.extra_args
    if engine_args.sets(args, "--no-disable-hybrid-kv-cache-manager"):
        return False
    return engine_args.sets(args, "--disable-hybrid-kv-cache-manager") or engine_args.sets(
        args, "--kv-transfer-config"
    )


def _behind_router(spec: LLMSpec, target: Target) -> bool:
    """Whether the cluster's router serves the model: it discovers engines in its own
    namespace, and learns a pod's models from its /v1/models, which vLLM's --api-key guards
    and the router asks without a key (vllm-stack 0.1.12 service_discovery.py). An llm-d
    model has its own router (its endpoint picker)."""
    return target.routed and spec.api_key_secret is None and not spec.llmd


def _plan_simulated(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts | None, sizing.Plan, str]:
    """The plan of a simulated model: the one vLLM would get, for status; what would stop
    vLLM (the model does not fit, its size is unknown) is a warning, since the simulator
    needs no GPU."""
    try:
        return _plan(spec, target, inputs, out)
    except SpecError as e:
        gpus = min(spec.gpu or 1, target.gpu.per_node)
        out.warnings.append(
            f"{P}.engine.simulate: the simulator serves it, but vLLM would not: {e.message}"
        )
        return None, sizing.plan_without_facts(gpus, target.gpu), "unknown"


def _endpoint(spec: LLMSpec, target: Target, service: str) -> str:
    """Where to send requests: the model's own Ingress host, else the cluster's endpoint when
    its router serves the model (requests then name it in `model`), else its Service."""
    if spec.ingress_host:
        return f"http://{spec.ingress_host}"
    if spec.llmd and target.llmd_endpoint:
        return target.llmd_endpoint + (_llmd_route(spec, target)[1] or "")
    if _behind_router(spec, target) and target.router_endpoint:
        return target.router_endpoint
    return f"http://{service}.{target.namespace}.svc.cluster.local"


def _available_replicas(runtime: dict[str, Any] | None, remote: bool) -> int | None:
    status = (
        dig(runtime, "status", "atProvider", "manifest", "status")
        if remote
        else dig(runtime, "status")
    )
    n = dig(status, "availableReplicas")
    if n is None:
        n = dig(status, "readyReplicas")  # a LeaderWorkerSet's groups
    return int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None


_ENGINE_KINDS = {
    SIMULATOR: "Deployment",
    RUNTIME: "VLLMRuntime",
    LWS: "LeaderWorkerSet",
    LLMD_ENGINE: "StatefulSet",
}


def _engine_kind(key: str) -> str:
    return next(kind for prefix, kind in _ENGINE_KINDS.items() if key.startswith(prefix))


def _serving(
    inputs: Inputs, target: Target, name: str, current: bool, out: Outcome, key: str
) -> bool:
    """Whether the engine serves; `current` is False while the runtime waits for the model
    download (none yet, or the previous model's kept)."""
    kind = _engine_kind(key)
    simulated = key == SIMULATOR
    observed = inputs.observed.get(key + target.suffix)
    remote = target.provider_config is not None
    available = _available_replicas(observed, remote)
    ready = _condition_true(observed) if remote else (available is not None and available >= 1)
    where = f"{kind} {target.namespace}/{name}" + (
        f" (Object {observed['metadata'].get('name')})"
        if remote and observed and isinstance(observed.get("metadata"), dict)
        else ""
    )
    if ready:
        out.conditions.append(
            Condition(
                "Serving", "True", "Available", f"{where}: {available or 1} replica(s) serving"
            )
        )
    elif not current:
        out.conditions.append(
            Condition(
                "Serving",
                "False",
                "Downloading",
                f"{where} starts once the model is in its cache (condition ModelCache)",
            )
        )
    elif observed is None:
        out.conditions.append(
            Condition("Serving", "False", "Creating", f"waiting for {where} to be created")
        )
    else:
        model_status = dig(observed, "status", "modelStatus") or dig(
            observed, "status", "atProvider", "manifest", "status", "modelStatus"
        )
        detail = f"{available or 0} replica(s) available" + (
            f", model status {model_status}" if model_status else ""
        )
        out.conditions.append(
            Condition(
                "Serving",
                "False",
                "WaitingForEngine",
                f"waiting for {where} to report an available replica ({detail})"
                + ("" if simulated else "; large models take minutes to download and load"),
            )
        )
    return ready


def _topology(plan: sizing.Plan) -> str:
    """One replica's shape: nodes x GPUs, and how vLLM splits the model over them."""
    gpu = plan.gpu.type or "GPU"
    nodes = "1 node" if plan.nodes == 1 else f"{plan.nodes} nodes"
    split = f"tensor parallel {plan.tensor_parallel_size}"
    if plan.nodes > 1:
        split += f" inside each node, pipeline parallel {plan.nodes} across nodes"
    return f"{nodes} x {plan.tensor_parallel_size} {gpu}: {split}"


def _status(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    source: str,
    engine: Engine,
    endpoint: str,
) -> dict[str, Any]:
    g = plan.gpu
    s: dict[str, Any] = {
        "model": spec.model,
        "modelSource": source,
        "gpus": plan.gpus,
        "tensorParallelSize": plan.tensor_parallel_size,
        "pipelineParallelSize": plan.pipeline_parallel_size,
        "nodes": plan.nodes,
        "topology": _topology(plan),
        "gpuType": g.type or "assumed 80 GiB-class",
        "gpuMemoryGiB": round(g.memory_gib, 2),
        "gpuAssumed": g.assumed,
        "gpuMemoryUtilization": plan.gpu_memory_utilization,
        "cpu": plan.cpu,
        "memory": plan.memory,
        "shmSize": plan.shm_size,
        **({"resourcesCapped": plan.host_capped} if plan.host_capped else {}),
        "image": engine.image,
        "engineArgs": engine.command,
        **({"simulated": True} if spec.engine.simulate else {}),
    }
    if facts is not None:
        s |= {
            "task": facts.task,
            "architecture": facts.architecture,
            "weightsGiB": round(plan.weights_gib, 1),
            "kvCacheGiB": round(plan.kv_cache_gib, 1),
            "requiredGiB": round(plan.required_gib, 1),
            "availableGiB": round(plan.available_gib, 1),
            "fits": plan.fits,
            # One GPU as vLLM divides it: what it reserves for the KV cache is
            # utilisation x memory - weights - activation peak - non-torch memory.
            "perGPU": {
                "weightsGiB": round(plan.weights_gib / plan.gpus, 2),
                "activationGiB": plan.activation_gib,
                "nonTorchGiB": plan.non_torch_gib,
                "kvCacheGiB": round(plan.kv_cache_gib / plan.gpus, 2),
                "kvSafetyGiB": plan.kv_safety_gib,
                "kvBytesPerToken": plan.kv_bytes_per_token,
            },
            "facts": _facts_status(facts, source),
        }
    if plan.engine is not None:
        e = plan.engine
        s["engine"] = {
            "kvCacheDtype": e.kv_cache_dtype,
            "maxNumBatchedTokens": e.max_num_batched_tokens,
            "maxNumSeqs": e.max_num_seqs,
            **({"overrides": list(e.overridden)} if e.overridden else {}),
        }
    if engine.max_model_len:
        s["maxModelLen"] = engine.max_model_len
    return {"plan": s, "endpoint": endpoint, "servedModelNames": list(spec.served_names)}


def _facts_status(facts: catalog.ModelFacts, source: str) -> dict[str, Any]:
    """Where the facts about the model came from (status.plan.facts)."""
    out: dict[str, Any] = {"source": source}
    if facts.provenance:
        out["origin"] = {name: where for name, where in facts.provenance}
    if source != "hub":
        out["sources"] = list(facts.sources[:3])
    return out


def _memory_condition(facts: catalog.ModelFacts | None, plan: sizing.Plan, out: Outcome) -> None:
    g = plan.gpu
    where = f"{plan.gpus} x {g.memory_gib:g} GiB" + (" (assumed)" if g.assumed else "")
    if facts is None:
        out.conditions.append(
            Condition(
                "GPUMemory",
                "Unknown",
                "NotEstimated",
                f"the model is not in the catalog; {where} as requested, not checked",
            )
        )
    elif plan.fits:
        out.conditions.append(
            Condition(
                "GPUMemory",
                "True",
                "Fits",
                f"needs about {plan.required_gib:.0f} GiB; {where} offer "
                f"{plan.available_gib:.0f} GiB at {plan.gpu_memory_utilization:g} utilisation",
            )
        )
    else:
        message = plan.shortfall or (
            f"needs about {plan.required_gib:.0f} GiB; {where} offer {plan.available_gib:.0f} GiB"
        )
        out.conditions.append(Condition("GPUMemory", "False", "InsufficientMemory", message))


@dataclass(frozen=True)
class Engine:
    """What serves the model: its name, composition key, command line and image (for
    status), its context, and whether it serves the claim's current model yet."""

    name: str
    key: str
    command: list[str]
    image: str
    max_model_len: int | str | None
    current: bool
    simulated: bool
    service: str | None = None  # its Service, when not named after it


@dataclass(frozen=True)
class Fetch:
    """The download Job for the current model: its name, composition key and progress."""

    job: str
    key: str
    done: bool
    failed: str | None  # the Job's failure message


def _observed_manifest(obj: dict[str, Any] | None, remote: bool) -> dict[str, Any] | None:
    """An observed object itself: for an Object, the live copy the provider reads back."""
    if not remote or obj is None:
        return obj
    live = dig(obj, "status", "atProvider", "manifest")
    return live if isinstance(live, dict) else dig(obj, "spec", "forProvider", "manifest")


def _fetch(
    spec: LLMSpec,
    target: Target,
    name: str,
    image: str,
    hf_token: tuple[str, str] | None,
    inputs: Inputs,
) -> Fetch:
    remote = target.provider_config is not None
    job = resources.fetch_job_name(name, spec.model, image, hf_token, spec.engine.revision)
    key = f"{FETCH}-{job.rsplit('-', 1)[-1]}{target.suffix}"
    status = dig(_observed_manifest(inputs.observed.get(key), remote), "status")
    succeeded = dig(status, "succeeded")
    failed = next(
        (
            str(c.get("message") or c.get("reason") or "failed")
            for c in dig(status, "conditions") or []
            if isinstance(c, dict) and c.get("type") == "Failed" and c.get("status") == "True"
        ),
        None,
    )
    done = isinstance(succeeded, int | float) and not isinstance(succeeded, bool) and succeeded >= 1
    return Fetch(job=job, key=key, done=done, failed=failed)


def _cache_plan(
    spec: LLMSpec,
    target: Target,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    inputs: Inputs,
    layout: storage.Layout | None = None,
    claim_key: str = CACHE,
) -> tuple[storage.CachePlan, int | None]:
    """The cache plan and the size the claim (composed as `claim_key`) has now (None before
    it exists); on a shared layout, timed at the shared class's read rate and at least its
    smallest volume."""
    shared = layout.shared if layout is not None else None
    claim = _observed_manifest(
        inputs.observed.get(claim_key + target.suffix), target.provider_config is not None
    )
    current = storage.parse_gib(dig(claim, "spec", "resources", "requests", "storage"))
    remote = target.provider_config is not None
    kept = [
        storage.parse_gib(dig(t, "spec", "resources", "requests", "storage"))
        for obj in inputs.observed.values()
        for t in _claim_templates(_observed_manifest(obj, remote))
    ]
    try:
        cache = storage.plan_cache(
            weights_gib=facts.checkpoint_gib if facts is not None else None,
            requested_gib=spec.storage.size_gib,
            observed_gib=current,
            load_rate_mib_s=shared.read_mib_s if shared else target.storage_read_mib_s,
            load_rate_mib_s_per_gib=shared.read_mib_s_per_gib
            if shared
            else target.storage_read_mib_s_per_gib,
            min_gib=shared.min_gib if shared else None,
            field=f"{P}.storage.size",
            max_gib=target.max_cache_gib,
            cap_field=f"spec.parameters.tenancy.maxModelCacheSize of InferenceCluster "
            f"{spec.namespace}/{target.cluster}",
            kept_gib=max((k for k in kept if k), default=None),
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e  # already says spec.parameters...
    return cache, current


def _where(spec: LLMSpec, target: Target) -> str:
    """The cluster a model runs on, as messages name it."""
    if target.cluster:
        return f"InferenceCluster {spec.namespace}/{target.cluster}"
    return (
        "the target cluster" if target.provider_config is not None else "the control-plane cluster"
    )


def _cache_layout(
    spec: LLMSpec, target: Target, count: scaling.Replicas, inputs: Inputs
) -> storage.Layout:
    """How the engine pods share the one model-cache claim (function/storage.py)."""
    remote = target.provider_config is not None
    claim = _observed_manifest(inputs.observed.get(CACHE + target.suffix), remote)
    modes = dig(claim, "spec", "accessModes")
    observed = modes[0] if isinstance(modes, list) and modes else None
    where = _where(spec, target)
    try:
        # What the claim asks for, not what the budget leaves now: the layout must not change
        # when other models come and go.
        return storage.one_claim_layout(
            pods=count.asked_high,
            nodes=target.max_nodes if target.cluster else None,
            where=where,
            count_field=f"{P}.autoscaling.maxReplicas" if count.autoscaled else f"{P}.replicas",
            block_class=target.storage_class,
            shared=target.shared_storage,
            asked_class=spec.storage.class_name,
            asked_mode=spec.storage.access_mode,
            observed_mode=observed if observed in storage.ACCESS_MODES else None,
            field=f"{P}.storage",
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e


def _per_pod_cache_status(
    caches: list[tuple[str, storage.Layout, storage.CachePlan]],
    class_name: str | None,
    note: str = "",
) -> dict[str, Any]:
    """status.plan.cache of pods with caches of their own (LeaderWorkerSet, llm-d): each
    side's pods at most, and what their volumes and downloads cost together."""
    claims = sum(layout.claims for _, layout, _ in caches)
    first = caches[0][2]
    return {
        "layout": "perPod",
        "accessMode": storage.READ_WRITE_ONCE,
        "claims": claims,
        "size": storage.quantity(first.size_gib),
        **({"storageClass": class_name} if class_name else {}),
        "disk": storage.quantity(sum(p.size_gib * layout.claims for _, layout, p in caches)),
        "downloads": sum(layout.downloads for _, layout, _ in caches),
        "reason": "; ".join(
            f"{role}: {layout.reason}" if len(caches) > 1 else layout.reason
            for role, layout, _ in caches
        )
        + note,
        "loadMiBps": first.load_rate_mib_s,
        "startSeconds": max(p.start_s for _, _, p in caches),
    }


def _place_cache(
    spec: LLMSpec,
    target: Target,
    key: str,
    suffix: str,
    claim: str,
    image: str,
    hf_token: tuple[str, str] | None,
    cache: storage.CachePlan,
    layout: storage.Layout,
    fetch: Fetch,
    out: Outcome,
    colocate: bool = False,
) -> None:
    """The model-cache claim `claim` and the Job that downloads the model into it."""
    _place(
        spec,
        target,
        key,
        resources.model_cache_claim(
            name=claim,
            namespace=target.namespace,
            model=spec.model,
            size=storage.quantity(cache.size_gib),
            class_name=layout.class_name,
            access_mode=layout.access_mode,
        ),
        out,
        suffix=suffix,
    )
    _place(
        spec,
        target,
        fetch.key.removesuffix(target.suffix),
        resources.model_fetch_job(
            name=claim,
            job_name=fetch.job,
            namespace=target.namespace,
            model=spec.model,
            image=image,
            hf_token=hf_token,
            node_selector=target.node_selector,
            tolerations=target.tolerations or None,
            deadline_seconds=cache.download_deadline_s,
            requests={
                "cpu": sizing.cpu_quantity(storage.FETCH_CPU_MILLICORES),
                "memory": sizing.memory_quantity(storage.FETCH_MEMORY_MIB),
            },
            memory_limit=sizing.memory_quantity(storage.FETCH_MEMORY_LIMIT_MIB),
            revision=spec.engine.revision,
            colocate=colocate,
        ),
        out,
        suffix=f"fetch-{fetch.job.rsplit('-', 1)[-1]}",
        readiness_cel=resources.JOB_DONE_CEL,
        watch=True,
    )


@dataclasses.dataclass(frozen=True)
class SharedCache:
    """The one ReadWriteMany cache of pods that would otherwise have one each (a multi-node
    replica's, llm-d's): its claim and whether its download has finished."""

    claim: str
    fetch: Fetch

    def holding(self, observed: Any, remote: bool) -> bool:
        """Whether the pods of `observed` run while a new download fills the cache: they are
        then kept as they are (a new revision downloads beside them)."""
        if self.fetch.done or observed is None:
            return False
        started = dig(_observed_manifest(observed, remote), "spec", "replicas")
        return isinstance(started, int) and not isinstance(started, bool) and started >= 1


def _many_pods_cache(
    spec: LLMSpec,
    target: Target,
    pods: int,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    image: str,
    hf_token: tuple[str, str] | None,
    inputs: Inputs,
    out: Outcome,
) -> tuple[storage.Layout, storage.CachePlan, SharedCache | None]:
    """The cache layout of `pods` pods that could each have their own (storage.py), its plan,
    and on a shared layout the claim and its download Job, placed."""
    where = _where(spec, target)
    try:
        layout = storage.many_pods_layout(
            pods=pods,
            shared=target.shared_storage,
            block_class=target.storage_class,
            asked_class=spec.storage.class_name,
            asked_mode=spec.storage.access_mode,
            field=f"{P}.storage",
            where=where,
        )
    except storage.StorageError as e:
        raise SpecError(e.field, e.value, e.message) from e
    key = SHARED_CACHE if layout.mode == "shared" else CACHE
    cache, _ = _cache_plan(spec, target, facts, plan, inputs, layout, key)
    if layout.mode != "shared":
        return layout, cache, None
    claim = resources.dns_label(f"{spec.name}-cache")
    fetch = _fetch(spec, target, claim, image, hf_token, inputs)
    _place_cache(
        spec,
        target,
        SHARED_CACHE,
        "shared-cache",
        claim,
        image,
        hf_token,
        cache,
        layout,
        fetch,
        out,
    )
    return layout, cache, SharedCache(claim, fetch)


def _shared_cache_status(
    spec: LLMSpec,
    target: Target,
    layout: storage.Layout,
    cache: storage.CachePlan,
    shared: SharedCache,
    out: Outcome,
) -> None:
    """status.plan.cache and the ModelCache condition of a shared cache."""
    claim = f"PersistentVolumeClaim {target.namespace}/{shared.claim}"
    job = f"Job {target.namespace}/{shared.fetch.job}"
    if shared.fetch.failed:
        condition = Condition(
            "ModelCache",
            "False",
            "DownloadFailed",
            f"{job} could not download {spec.model}: {shared.fetch.failed}. Fix the cause (a "
            f"gated model needs {P}.hfTokenSecretRef) and delete the Job to run it again",
        )
    elif shared.fetch.done:
        condition = Condition(
            "ModelCache", "True", "Cached", f"{spec.model} is in {claim}, which every pod reads"
        )
    else:
        condition = Condition(
            "ModelCache",
            "False",
            "Downloading",
            f"{job} is downloading {spec.model} into {claim} ({layout.class_name}, "
            f"{storage.quantity(cache.size_gib)}), deadline {cache.download_deadline_s} s; "
            "the pods start once it has",
        )
    out.conditions.append(condition)
    out.status_extra["cache"] = {
        "claim": shared.claim,
        "size": storage.quantity(cache.size_gib),
        **({"storageClass": layout.class_name} if layout.class_name else {}),
        **layout.status(cache.size_gib),
        "downloadJob": shared.fetch.job,
        "downloadDeadlineSeconds": cache.download_deadline_s,
        "loadMiBps": cache.load_rate_mib_s,
        "startSeconds": cache.start_s,
    }


def _claim_templates(value: Any) -> list[dict[str, Any]]:
    """Every PersistentVolumeClaim template (`volumeClaimTemplates`) in an observed object:
    the per-pod caches of StatefulSets and LeaderWorkerSets."""
    if isinstance(value, dict):
        found = [t for t in value.get("volumeClaimTemplates") or [] if isinstance(t, dict)]
        return found + [
            t for k, v in value.items() if k != "volumeClaimTemplates" for t in _claim_templates(v)
        ]
    if isinstance(value, list):
        return [t for v in value for t in _claim_templates(v)]
    return []


def _place(
    spec: LLMSpec, target: Target, key: str, manifest: dict[str, Any], out: Outcome, **wrap: Any
) -> None:
    """Compose `manifest` under `key` directly, or for another cluster in a provider-kubernetes
    Object named `<claim>-<suffix>` (wrap: suffix, and wrap_in_object's options); both carry
    the target's suffix."""
    if target.provider_config is None:
        out.resources[key] = manifest
        return
    suffix = wrap.pop("suffix")
    wrap["watch"] = wrap.get("watch", False) and target.watch
    out.resources[key + target.suffix] = resources.wrap_in_object(
        ownership.annotate(manifest, ownership.owner(spec.namespace, spec.name)),
        name=resources.dns_label(f"{spec.name}-{suffix}{target.suffix}"),
        provider_config=target.provider_config,
        **wrap,
    )


def _cache_condition(
    spec: LLMSpec,
    target: Target,
    name: str,
    cache: storage.CachePlan,
    class_name: str | None,
    fetch: Fetch,
    holding: bool,
    out: Outcome,
) -> None:
    claim = f"PersistentVolumeClaim {target.namespace}/{name} ({storage.quantity(cache.size_gib)}"
    claim += f", StorageClass {class_name})" if class_name else ", default StorageClass)"
    job = f"Job {target.namespace}/{fetch.job}"
    if fetch.failed:
        out.conditions.append(
            Condition(
                "ModelCache",
                "False",
                "DownloadFailed",
                f"{job} could not download {spec.model}: {fetch.failed}. Fix the cause (a gated "
                f"model needs {P}.hfTokenSecretRef; a full volume needs {P}.storage.size) and "
                f"delete the Job to run it again",
            )
        )
    elif fetch.done:
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "Cached",
                f"{spec.model} is in {claim}; the engine starts in about {cache.start_s} s "
                f"(reading at {cache.load_rate_mib_s:g} MiB/s), within the operator's "
                f"{cache.startup_budget_s} s startup probe"
                if cache.fits_startup_budget
                else f"{spec.model} is in {claim}",
            )
        )
    else:
        size = f"{cache.weights_gib:.0f} GiB" if cache.weights_gib else "size unknown"
        out.conditions.append(
            Condition(
                "ModelCache",
                "False",
                "Downloading",
                f"{job} is downloading {spec.model} ({size}) into {claim}, deadline "
                f"{cache.download_deadline_s} s"
                + ("; the model served until now keeps serving" if holding else ""),
            )
        )
    if not cache.fits_startup_budget:
        out.warnings.append(
            f"{spec.model}: the engine needs about {cache.start_s} s to read "
            f"{cache.weights_gib or cache.needed_gib:.0f} GiB at {cache.load_rate_mib_s:g} MiB/s "
            f"and start, more than the production-stack operator's fixed startup probe allows "
            f"({cache.startup_budget_s} s): the kubelet restarts it until the weights sit in "
            f"the node's page cache. Use a faster StorageClass ({P}.storage.className)"
        )
    if cache.weights_gib is None and spec.storage.size_gib is None:
        out.warnings.append(
            f"{spec.model}: its size is not known, so the model cache is "
            f"{storage.quantity(cache.size_gib)}; set {P}.storage.size if it needs more"
        )


def _own_namespace(spec: LLMSpec, target: Target, out: Outcome) -> None:
    """An InferenceCluster creates the namespaces its models may use; through a bare
    ProviderConfig the model creates its own (and never deletes it)."""
    if target.provider_config is not None and target.cluster is None:
        _place(
            spec,
            target,
            NAMESPACE,
            resources.namespace(target.namespace),
            out,
            suffix="namespace",
            management_policies=resources.NAMESPACE_POLICIES,
        )


def _build(
    spec: LLMSpec,
    target: Target,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    image: str,
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
) -> Engine:
    """Compose everything for vLLM; the Engine says whether the model is in the cache (until
    then the runtime has no replica, or the engine that serves now is kept while the new
    model downloads)."""
    name = resources.dns_label(spec.name)
    remote = target.provider_config is not None
    _own_namespace(spec, target, out)
    secrets = _secrets(spec, facts, target, name, inputs, out)
    layout = _cache_layout(spec, target, count, inputs)
    cache, claim_gib = _cache_plan(spec, target, facts, plan, inputs, layout)
    class_name = layout.class_name
    fetch = _fetch(spec, target, name, image, secrets.hf_token, inputs)
    observed_runtime = inputs.observed.get(RUNTIME + target.suffix)
    started = dig(
        _observed_manifest(observed_runtime, remote), "spec", "deploymentConfig", "replicas"
    )
    # An engine that already started keeps serving its model until the new one is cached.
    holding = not fetch.done and isinstance(started, int) and started >= 1
    env = list(plan.env) + list(spec.engine.env)
    if spec.api_key_secret is not None:
        # The engine's one Secret-sourced variable then holds the API key, not the Hugging
        # Face token: the weights are in the cache (the download Job used the token), so the
        # engine stays offline.
        env.append(("HF_HUB_OFFLINE", "1"))
    runtime = resources.vllm_runtime(
        name=name,
        namespace=target.namespace,
        model=spec.model,
        image=image,
        gpus=plan.gpus,
        cpu=plan.cpu,
        memory=plan.memory,
        shm_size=plan.shm_size,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        max_model_len=_max_model_len(spec, plan, out),
        tool_call_parser=facts.tool_call_parser if facts else None,
        enable_prefix_caching=plan.enable_prefix_caching,
        enable_chunked_prefill=plan.enable_chunked_prefill,
        extra_args=_engine_args(spec, facts, plan, out),
        env=env,
        engine_secret=secrets.api_key if spec.api_key_secret is not None else secrets.hf_token,
        node_selector=target.node_selector,
        tolerations=target.tolerations or None,
        # The claim's size as it is now: the controller rewrites a claim whose size differs.
        cache=(storage.quantity(claim_gib or cache.size_gib), class_name),
        cache_access_mode=layout.access_mode,
        # No pod until the weights are in the cache; then the fixed count, or none written
        # when KEDA owns it.
        replicas=0 if not fetch.done else (None if count.autoscaled else count.low),
        runtime_class=target.runtime_class,
    )
    _place_cache(
        spec,
        target,
        CACHE,
        "model-cache",
        name,
        image,
        secrets.hf_token,
        cache,
        layout,
        fetch,
        out,
        # A running engine holds a ReadWriteOnce claim on its node: the Job goes there.
        colocate=holding and layout.access_mode == storage.READ_WRITE_ONCE,
    )
    if holding:
        _keep(target, RUNTIME, observed_runtime, count.autoscaled, out)
    else:
        _place(
            spec,
            target,
            RUNTIME,
            runtime,
            out,
            suffix="runtime",
            readiness_cel=resources.RUNTIME_READY_CEL,
            watch=True,
        )
    observed_scaler = inputs.observed.get(SCALER + target.suffix)
    if count.autoscaled and fetch.done:
        # KEDA takes over once the model is cached (the runtime then has replicas to scale).
        _scaler(spec, target, name, count, RUNTIME_SCALE_TARGET | {"name": name}, out)
    elif count.autoscaled and holding and observed_scaler is not None:
        # The engine kept serving while the new model downloads stays under KEDA.
        out.resources[SCALER + target.suffix] = resources.desired_from_observed(observed_scaler)
    _ingress(spec, target, name, out)
    _cluster_usage(spec, target, inputs, out)
    _keda_usage(spec, target, count, inputs, out)
    _no_takeover(spec, target, inputs, out)
    _cache_condition(spec, target, name, cache, class_name, fetch, holding, out)
    out.status_extra["cache"] = {
        "claim": name,
        "size": storage.quantity(cache.size_gib),
        **({"storageClass": class_name} if class_name else {}),
        **layout.status(cache.size_gib),
        "downloadJob": fetch.job,
        "downloadDeadlineSeconds": cache.download_deadline_s,
        "loadMiBps": cache.load_rate_mib_s,
        "startSeconds": cache.start_s,
        "startupBudgetSeconds": cache.startup_budget_s,
    }
    given = engine_args.last_value(
        runtime["spec"]["vllmConfig"].get("extraArgs", []), engine_args.MAX_MODEL_LEN
    )
    return Engine(
        name=name,
        key=RUNTIME,
        command=resources.engine_command(runtime),
        image=image,
        max_model_len=runtime["spec"]["model"].get("maxModelLen")
        or ("auto" if given == "auto" else None),
        current=fetch.done,
        simulated=False,
    )


def _keep(target: Target, key: str, observed: Any, autoscaled: bool, out: Outcome) -> None:
    """Compose the observed engine under `key` as it is (its pods keep serving), without the
    replica count when KEDA owns it."""
    kept = resources.desired_from_observed(observed)
    remote = target.provider_config is not None
    out.resources[key + target.suffix] = _without_replicas(kept, remote) if autoscaled else kept


def _without_replicas(obj: dict[str, Any], remote: bool) -> dict[str, Any]:
    """A desired object (or its Object wrapper) without the replica count KEDA owns."""
    if not remote:
        return resources.omit_replicas(obj)
    out = json.loads(json.dumps(obj))
    manifest = dig(out, "spec", "forProvider", "manifest")
    if isinstance(manifest, dict):
        out["spec"]["forProvider"]["manifest"] = resources.omit_replicas(manifest)
    return out


def _ingress(
    spec: LLMSpec, target: Target, name: str, out: Outcome, service: str | None = None
) -> None:
    if spec.ingress_host:
        _place(
            spec,
            target,
            INGRESS,
            resources.ingress(
                name=name,
                namespace=target.namespace,
                host=spec.ingress_host,
                service=service or name,
                class_name=target.ingress_class,
                model=spec.model,
            ),
            out,
            suffix="ingress",
        )


def _cluster_usage(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome) -> None:
    if target.cluster and not _composed_by_cluster(inputs.xr, target.cluster):
        out.resources[CLUSTER_USAGE] = resources.cluster_usage(
            name=resources.dns_label(f"{spec.name}-uses-{target.cluster}"),
            cluster=target.cluster,
            model_claim=spec.name,
        )


# What KEDA scales: a VLLMRuntime through its scale subresource, or a Deployment.
RUNTIME_SCALE_TARGET = {"apiVersion": "production-stack.vllm.ai/v1alpha1", "kind": "VLLMRuntime"}
DEPLOYMENT_SCALE_TARGET = {"apiVersion": "apps/v1", "kind": "Deployment"}


def _scaler(
    spec: LLMSpec,
    target: Target,
    name: str,
    count: scaling.Replicas,
    scale_target: dict[str, str],
    out: Outcome,
    service: str | None = None,
) -> None:
    """KEDA's ScaledObject for the engine (spec.autoscaling), reading vLLM's gauge from every
    ready pod behind the engine's Service (function/scaling.py)."""
    assert spec.autoscaling is not None
    _place(
        spec,
        target,
        SCALER,
        resources.scaled_object(
            name=name,
            namespace=target.namespace,
            model=spec.model,
            target=scale_target,
            min_replicas=count.low,
            max_replicas=count.high,
            trigger=scaling.trigger(
                spec.autoscaling,
                service=service or name,
                namespace=target.namespace,
                port=resources.ENGINE_PORT,
                model=spec.model,
            ),
            polling_interval_s=scaling.POLLING_INTERVAL_S,
            scale_down_delay_s=spec.autoscaling.scale_down_delay_s,
            scale_down_policy=scaling.SCALE_DOWN_POLICY,
        ),
        out,
        suffix="scaledobject",
    )


def _keda_usage(
    spec: LLMSpec, target: Target, count: scaling.Replicas, inputs: Inputs, out: Outcome
) -> None:
    """A Usage that keeps the cluster's KEDA Release while this model autoscales: turning
    apps.keda off would otherwise uninstall KEDA under the model's ScaledObject, whose
    finalizer only KEDA removes."""
    # The cluster's own models (spec.parameters.models) need none: its program refuses
    # apps.keda off while one of them autoscales, and its deletion removes them first.
    if (
        count.autoscaled
        and target.cluster
        and target.keda_release
        and not _composed_by_cluster(inputs.xr, target.cluster)
    ):
        out.resources[KEDA_USAGE] = resources.usage(
            name=resources.dns_label(f"{spec.name}-uses-{target.keda_release}"),
            of={
                "apiVersion": "helm.m.crossplane.io/v1beta1",
                "kind": "Release",
                "resourceRef": {"name": target.keda_release},
            },
            model_claim=spec.name,
            replay_deletion=True,
        )


# --- Pods the function runs itself (a multi-node group, an llm-d model) -----------------


def _pod_secret_env(spec: LLMSpec, secrets: Secrets) -> list[tuple[str, tuple[str, str]]]:
    """The Secrets such a pod reads: the Hugging Face token (the download's) and the API key
    (vLLM's envs.VLLM_API_KEY). A key not copied yet is pointed at anyway, so the pods wait
    for the copy (fail closed) instead of serving without one."""
    api_key = secrets.api_key
    if spec.api_key_secret is not None and api_key is None:
        api_key = (resources.dns_label(f"{spec.name}-{API_KEY}"), spec.api_key_secret.key)
    out = [("HF_TOKEN", secrets.hf_token)] if secrets.hf_token else []
    if api_key:
        out.append(("VLLM_API_KEY", api_key))
    return out


def _pod_env(spec: LLMSpec, plan: sizing.Plan) -> list[tuple[str, str]]:
    """The plan's and the claim's variables; the weights come from the pod's cache, so vLLM
    stays offline."""
    return [*plan.env, *spec.engine.env, ("HF_HUB_OFFLINE", "1")]


def _pod_cache_fill(spec: LLMSpec, cache: storage.CachePlan) -> dict[str, Any]:
    """How such a pod's init container fills its model cache, and how long its vLLM may then
    take to start: twice the estimated start (weights read at the stated rate plus
    storage.ENGINE_INIT_S), since the init container has downloaded before the probes run."""
    return {
        "fetch_args": [spec.model, *([spec.engine.revision] if spec.engine.revision else [])],
        "fetch_requests": {
            "cpu": sizing.cpu_quantity(storage.FETCH_CPU_MILLICORES),
            "memory": sizing.memory_quantity(storage.FETCH_MEMORY_MIB),
        },
        "fetch_memory_limit": sizing.memory_quantity(storage.FETCH_MEMORY_LIMIT_MIB),
        "startup_budget_s": 2 * cache.start_s,
    }


def _serve_args(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    max_len: int | None,
    extra: list[str],
    port: int = resources.ENGINE_PORT,
) -> list[str]:
    """`vllm serve` for such a pod, from the plan."""
    return resources.vllm_serve_args(
        model=spec.model,
        tensor_parallel=plan.tensor_parallel_size,
        nodes=plan.nodes,
        max_model_len=max_len,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        enable_prefix_caching=plan.enable_prefix_caching,
        enable_chunked_prefill=plan.enable_chunked_prefill,
        tool_call_parser=facts.tool_call_parser if facts else None,
        extra_args=extra,
        port=port,
    )


def _build_multinode(
    spec: LLMSpec,
    target: Target,
    facts: catalog.ModelFacts | None,
    plan: sizing.Plan,
    image: str,
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
) -> Engine:
    """Compose a replica that spans `plan.nodes` nodes: a LeaderWorkerSet (resources.py) with
    the model cache per pod, the leaders' Service, and as for one node the Ingress, KEDA,
    the Usages, the copied Secrets."""
    name = resources.dns_label(spec.name)
    service = resources.dns_label(f"{spec.name}-leader")
    secrets = _secrets(spec, facts, target, name, inputs, out)
    remote = target.provider_config is not None
    layout, cache, shared = _many_pods_cache(
        spec,
        target,
        plan.nodes * count.asked_high,
        facts,
        plan,
        image,
        secrets.hf_token,
        inputs,
        out,
    )
    class_name = layout.class_name
    # The group's name: short (its pods' StatefulSets add suffixes and hash labels), never
    # the claim's (the operator's Service of a one-node runtime has that one), and new when
    # the model cache changes (a StatefulSet's volumeClaimTemplates cannot), so Crossplane
    # replaces the group instead of retrying an update the API server refuses.
    cache_size = storage.quantity(cache.size_gib)
    # Pods on a shared claim have no claim templates: its size is not theirs.
    layout_key = f"shared/{class_name}" if shared else f"{cache_size}/{class_name}"
    digest = hashlib.sha256(layout_key.encode()).hexdigest()[:6]
    group = f"{resources.dns_label(spec.name)[:36].rstrip('-')}-{digest}"
    key = f"{LWS}-{digest}"
    max_len = _max_model_len(spec, plan, out)
    args = _serve_args(
        spec, facts, plan, max_len, _engine_args(spec, facts, plan, out, api_key_arg=False)
    )
    observed = inputs.observed.get(key + target.suffix)
    holding = shared is not None and shared.holding(observed, remote)
    ready = shared is None or shared.fetch.done
    if holding:
        # The group serving now stays as it is while the new revision downloads.
        _keep(target, key, observed, count.autoscaled, out)
    else:
        _place(
            spec,
            target,
            key,
            resources.leader_worker_set(
                name=group,
                labels_of=name,
                namespace=target.namespace,
                model=spec.model,
                image=image,
                nodes=plan.nodes,
                args=args,
                env=_pod_env(spec, plan),
                secret_env=_pod_secret_env(spec, secrets),
                gpus_per_node=plan.tensor_parallel_size,
                cpu=plan.cpu,
                memory=plan.memory,
                shm_size=plan.shm_size,
                cache_size=cache_size,
                cache_class=class_name,
                node_selector=target.node_selector,
                tolerations=target.tolerations or None,
                runtime_class=target.runtime_class,
                # On a shared cache, no group before the weights are in it.
                replicas=(None if count.autoscaled else count.low) if ready else 0,
                shared_claim=shared.claim if shared else None,
                **_pod_cache_fill(spec, cache),
            ),
            out,
            suffix=f"lws-{digest}",
            readiness_cel=resources.LWS_READY_CEL,
            watch=True,
        )
    _place(
        spec,
        target,
        LWS_SERVICE,
        resources.leader_service(
            name=service, lws=group, namespace=target.namespace, model=spec.model
        ),
        out,
        suffix="leader-service",
    )
    if count.autoscaled and (ready or holding):
        lws_target = {"apiVersion": resources.LWS_API, "kind": "LeaderWorkerSet", "name": group}
        _scaler(spec, target, name, count, lws_target, out, service=service)
    _ingress(spec, target, name, out, service=service)
    _cluster_usage(spec, target, inputs, out)
    _keda_usage(spec, target, count, inputs, out)
    _no_takeover(spec, target, inputs, out)
    if shared is not None:
        _shared_cache_status(spec, target, layout, cache, shared, out)
    else:
        out.status_extra["cache"] = _per_pod_cache_status([("replica", layout, cache)], class_name)
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "PerPod",
                f"each of the {plan.nodes} pods of a replica downloads {spec.model} into its "
                f"own claim ({cache_size}) before vLLM starts on it",
            )
        )
    return Engine(
        name=group,
        key=key,
        command=["vllm", "serve", *args],
        image=image,
        max_model_len=max_len,
        current=ready or holding,
        simulated=False,
        service=service,
    )


def _build_simulated(
    spec: LLMSpec,
    target: Target,
    plan: sizing.Plan,
    image: str,
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
) -> Engine:
    """Compose llm-d's inference simulator in place of vLLM (function/simulator.py): a
    Deployment and a Service with the engine's labels, no GPU, no model download."""
    # Not the claim's own name: the operator's Deployment and Service of a VLLMRuntime carry
    # that one, and a model switched to the simulator must not meet them.
    name = resources.dns_label(f"{spec.name}-sim")
    _own_namespace(spec, target, out)
    ignored = [
        f
        for f, given in (
            (f"{P}.storage", spec.storage.class_name or spec.storage.size_gib),
            (f"{P}.hfTokenSecretRef", spec.hf_token_secret),
        )
        if given
    ]
    if ignored:
        out.warnings.append(
            f"{', '.join(ignored)}: not used with {P}.engine.simulate (nothing is downloaded)"
        )
    max_len = _max_model_len(spec, plan, out)
    command = _place_simulator(spec, target, name, plan, image, count, max_len, out)
    _place(
        spec,
        target,
        SIMULATOR_SERVICE,
        resources.engine_service(name=name, namespace=target.namespace, model=spec.model),
        out,
        suffix="service",
    )
    if count.autoscaled:
        _scaler(spec, target, name, count, DEPLOYMENT_SCALE_TARGET | {"name": name}, out)
    _ingress(spec, target, name, out)
    _cluster_usage(spec, target, inputs, out)
    _keda_usage(spec, target, count, inputs, out)
    _no_takeover(spec, target, inputs, out)
    out.conditions.append(
        Condition(
            "ModelCache",
            "True",
            "Simulated",
            f"{P}.engine.simulate: llm-d's inference simulator answers for {spec.model}; "
            "nothing is downloaded",
        )
    )
    return Engine(
        name=name,
        key=SIMULATOR,
        command=["llm-d-inference-sim", *command],
        image=image,
        max_model_len=max_len,
        current=True,
        simulated=True,
    )


def _place_simulator(
    spec: LLMSpec,
    target: Target,
    name: str,
    plan: sizing.Plan,
    image: str,
    count: scaling.Replicas,
    max_len: int | None,
    out: Outcome,
    pod_labels: dict[str, str] | None = None,
) -> list[str]:
    """The simulator's Deployment (function/simulator.py); its arguments."""
    command = simulator.command(
        model=spec.model,
        served_names=spec.served_names,
        max_model_len=max_len,
        max_num_seqs=None
        if spec.engine.max_num_seqs
        else (plan.engine.max_num_seqs if plan.engine else None),
        kv_cache=spec.autoscaling is not None and spec.autoscaling.metric == "kvCacheUsage",
        extra_args=spec.engine.extra_args,
    )
    _place(
        spec,
        target,
        SIMULATOR,
        resources.simulator_deployment(
            name=name,
            namespace=target.namespace,
            model=spec.model,
            image=image,
            args=command,
            env=spec.engine.env,
            replicas=None if count.autoscaled else count.low,
            requests=simulator.REQUESTS,
            limits=simulator.LIMITS,
            pod_labels=pod_labels,
        ),
        out,
        suffix="simulator",
        readiness_cel=resources.SIMULATOR_READY_CEL,
        watch=True,
    )
    return command


def _no_takeover(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome) -> None:
    """Compose nothing over an object that exists and is not this claim's
    (function/ownership.py): a new control-plane object only once Crossplane has shown it
    absent or ours; a new Object on another cluster observe-only until the provider has shown
    the same there."""
    claim_owner = ownership.owner(spec.namespace, spec.name)
    xr_uid = dig(inputs.xr, "metadata", "uid")
    where = (
        f"InferenceCluster {target.cluster}"
        if target.cluster
        else f"the cluster of ProviderConfig {target.provider_config}"
    )
    for key, desired in out.resources.items():
        kind = desired.get("kind", "")
        name = dig(desired, "metadata", "name")
        namespace = dig(desired, "metadata", "namespace") or spec.namespace
        observed = inputs.observed.get(key)
        if observed is None:
            requirement = f"existing-{key}"
            out.requirements[requirement] = {
                "apiVersion": desired.get("apiVersion", ""),
                "kind": kind,
                "matchName": name,
                "namespace": namespace,
            }
            found = inputs.required.get(requirement)
            why = ownership.foreign_on_control_plane(found[0], xr_uid) if found else None
            if why:
                raise SpecError(
                    "metadata.name",
                    spec.name,
                    f"metadata.name: {kind} {namespace}/{name} already exists and {why}; the "
                    "claim does not take it over. Give the claim another name, or delete or "
                    f"rename that {kind}",
                )
        manifest = dig(desired, "spec", "forProvider", "manifest")
        if kind != "Object" or not manifest or key == NAMESPACE + target.suffix:
            continue  # on the control plane; the namespace is created once, never taken
        state = ownership.remote(observed, claim_owner)
        if state.state == "probing":
            desired["spec"]["managementPolicies"] = list(ownership.PROBE_POLICIES)
        elif state.state == "foreign":
            found_owner = (
                f"it belongs to {state.found_owner}"
                if state.found_owner
                else f"it has no {ownership.OWNER_ANNOTATION} annotation"
            )
            what = f"{manifest.get('kind', '')} {dig(manifest, 'metadata', 'namespace')}/"
            what += str(dig(manifest, "metadata", "name"))
            raise SpecError(
                "metadata.name",
                spec.name,
                f"metadata.name: {what} already exists on {where} and {found_owner}; the "
                f"claim does not take it over. Give the claim another name (or another "
                f"{P}.targetNamespace), or remove that object there",
            )


def _composed_by_cluster(xr: dict[str, Any], cluster: str) -> bool:
    """Whether this LLMInference is one of `cluster`'s own models (spec.parameters.models):
    its controller is that InferenceCluster. Such a model must not block its cluster's
    deletion, which deletes it first."""
    owners = dig(xr, "metadata", "ownerReferences")
    return any(
        isinstance(o, dict)
        and o.get("controller") is True
        and o.get("kind") == CLUSTER_KIND
        and o.get("name") == cluster
        for o in owners or []
    )


def _readiness(
    inputs: Inputs, target: Target, engine_key: str, serving: bool, out: Outcome
) -> None:
    remote = target.provider_config is not None
    for key in out.resources:
        observed = inputs.observed.get(key)
        if key in (CLUSTER_USAGE, KEDA_USAGE):
            out.ready[key] = True  # a Usage reports no readiness of its own
        elif key == engine_key + target.suffix:
            out.ready[key] = serving
        elif key.startswith(FETCH):
            status = dig(_observed_manifest(observed, remote), "status", "succeeded")
            out.ready[key] = isinstance(status, int | float) and status >= 1
        elif remote:
            out.ready[key] = _condition_true(observed)
        else:
            out.ready[key] = observed is not None


def _peers(spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome) -> list[peers.Peer]:
    """The other models on the same InferenceCluster (first come first); none without a
    cluster. The first call of a reconcile asks Crossplane for them and composes as if the
    model were alone: Crossplane calls again with them before it applies anything."""
    if target.cluster is None:
        return []
    if peers.REQUIREMENT not in out.requirements and ledger.labelable(target.cluster):
        # The cluster's ledger and its own models, selected by label (function/ledger.py);
        # the whole namespace too when compose() asked for it to confirm a gain.
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


def _created(inputs: Inputs) -> str:
    created = dig(inputs.xr, "metadata", "creationTimestamp")
    return created if isinstance(created, str) else ""


def _check_served_names(
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
    if not _behind_router(spec, target):
        return
    mine = set(peers.published_names(inputs_xr))
    for peer in others:
        if (peer.target_namespace or target.router_namespace) != target.namespace:
            continue
        earlier = peer.before(created, spec.name)
        for i, served in enumerate(spec.served_names):
            # A name belongs to the model that came first, and to one that already serves
            # it (a running model keeps its names when an older claim is edited).
            taken = served in peer.served_names and earlier
            taken = taken or (served in peer.published_names and served not in mine)
            if not taken:
                continue
            field = f"{P}.model" if i == 0 else f"{P}.aliases[{i - 1}]"
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
                ),
            )


def _check_host(spec: LLMSpec, target: Target, others: list[peers.Peer], created: str) -> None:
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


def _check_shared_host(
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


def _check_kv_endpoints(spec: LLMSpec, target: Target) -> None:
    """The KV cache holds the prompts: a claim's own engine settings may send it only inside
    the pod or to an address the platform team listed (InferenceCluster
    spec.parameters.tenancy.kvTransferHosts). Disaggregated models are wired by the
    function, and their own settings are refused earlier (spec.py)."""
    where = (
        f"spec.parameters.tenancy.kvTransferHosts of InferenceCluster "
        f"{spec.namespace}/{target.cluster}"
        if target.cluster
        else "an InferenceCluster's spec.parameters.tenancy.kvTransferHosts (then name it in "
        f"{P}.clusterRef)"
    )
    for send in tenancy.kv_addresses(spec.engine.extra_args, spec.engine.env):
        env = send.where.split(".")[0] in tenancy.KV_ENV or send.where.startswith(
            tenancy.KV_ENV_PREFIXES
        )
        f = f"{P}.engine.env" if env else f"{P}.engine.extraArgs"
        if send.problem is not None:
            raise SpecError(
                f,
                send.address,
                problem=f"{send.where} {send.problem} ({send.address}), so the function cannot "
                "tell where it sends the KV cache, and with it the prompts; write the address "
                f"out, inside the pod (127.0.0.1) or one listed in {where}",
            )
        if send.address in tenancy.LOOPBACK or send.address in target.kv_transfer_hosts:
            continue
        what = (
            "the encoder cache (computed from the prompts' images)"
            if send.where.startswith("--ec-transfer-config")
            else "the KV cache's events (the prompts' token ids)"
            if send.where.startswith("--kv-events-config")
            else "the KV cache, and with it the prompts,"
        )
        raise SpecError(
            f,
            send.address,
            problem=f"{send.where} sends {what} to {send.address}, "
            f"which the platform team has not allowed; the engine may keep it in the pod "
            f"(127.0.0.1) or send it to an address listed in {where}",
        )


def _check_keda(spec: LLMSpec, target: Target) -> None:
    if spec.autoscaling is None or target.cluster is None or target.keda:
        return
    raise SpecError(
        f"{P}.autoscaling",
        None,
        f"{P}.autoscaling needs KEDA on the cluster, and InferenceCluster {target.cluster} does "
        f"not run it: set spec.parameters.apps.keda.enabled: true on InferenceCluster "
        f"{target.cluster}, or fix the count with {P}.replicas",
    )


def _replicas(
    spec: LLMSpec,
    target: Target,
    plan: sizing.Plan,
    others: list[peers.Peer],
    created: str,
    out: Outcome,
) -> scaling.Replicas:
    """The replicas the model may run, within the GPU pool the models before it leave."""
    budget = None
    if not spec.engine.simulate and target.cluster and target.max_nodes and not target.gpu.assumed:
        budget = scaling.Budget(
            cluster=target.cluster,
            max_nodes=target.max_nodes,
            per_node=target.gpu.per_node,
            holders=_holders(spec, target, others, created),
        )
    count = scaling.replicas(
        spec.replicas, spec.autoscaling, plan.gpus, budget, cluster_field=spec.cluster_field
    )
    held = f"up to {count.high} replica(s) x {plan.gpus} GPU(s) = {count.high * plan.gpus} GPUs"
    if spec.engine.simulate:
        out.conditions.append(
            Condition(
                "GPUBudget", "True", "Simulated", "simulated replicas run on CPUs and hold no GPU"
            )
        )
    elif budget is None:
        where = (
            f"InferenceCluster {target.cluster} has not published gpu.maxNodes"
            if target.cluster
            else "no InferenceCluster is referenced, so its GPU pool is not known"
        )
        out.conditions.append(Condition("GPUBudget", "Unknown", "NotChecked", f"{held}; {where}"))
    elif count.capped:
        field = f"{P}.autoscaling.maxReplicas"
        message = (
            f"{field} {count.asked_high} capped to {count.high}: {count.asked_high} x "
            f"{plan.gpus} GPU(s) would need {count.asked_high * plan.gpus} GPUs and "
            f"{budget.describe()}"
        )
        out.conditions.append(Condition("GPUBudget", "False", "Capped", message))
        out.warnings.append(message)
    else:
        out.conditions.append(
            Condition("GPUBudget", "True", "Fits", f"holds {held}; {budget.describe()}")
        )
    return count


def _holders(
    spec: LLMSpec, target: Target, others: list[peers.Peer], created: str
) -> tuple[scaling.Holder, ...]:
    """What the other models hold of the pool: those created before this one, at their most,
    and those already running with the most their function allowed them (so an edit of an
    older claim never takes GPUs a running model holds)."""
    out = []
    for p in others:
        if p.simulate:
            continue
        if p.before(created, spec.name):
            gpus = p.gpus if p.gpus_planned else _peer_gpus(p, target)
            out.append(scaling.Holder(p.name, gpus * p.max_replicas, planned=p.gpus_planned))
        elif p.published_gpus:
            out.append(scaling.Holder(p.name, p.published_gpus))
    return tuple(h for h in out if h.gpus)


def _peer_gpus(peer: peers.Peer, target: Target) -> int:
    """GPUs per replica of a model that has published no plan yet (created in the same
    moment, e.g. two entries of a cluster's models): planned here as its own function
    will plan it from the catalog or its name; none when that plan fails (its function
    refuses it, so it runs nothing), one when nothing here knows the model (the Hub may).
    A disaggregated model: every prefill and decode pod, the sides it leaves open chosen as
    its function will choose them."""
    if peer.disaggregated:
        return _planned_pd_gpus(peer.model, peer.pd_sides, target.gpu)
    return _planned_gpus(peer.model, target.gpu, target.span)


@functools.lru_cache(maxsize=1024)
def _planned_pd_gpus(model: str, sides: tuple[tuple[int, int | None], ...], gpu: GpuShape) -> int:
    asked = sum(replicas * (gpus or 1) for replicas, gpus in sides)
    facts = catalog.resolve(model)
    if facts is None or len(sides) != 2:
        return asked
    (p_replicas, p_gpu), (d_replicas, d_gpu) = sides
    spec = LLMSpec(
        name="",
        namespace="",
        model=model,
        backend="llmd",
        disaggregation=Disaggregation(Role(p_replicas, p_gpu), Role(d_replicas, d_gpu)),
    )
    try:
        roles = _pd_roles(spec, facts, Target(None, "", gpu=gpu), sizing.EngineSettings())
    except SpecError:
        return 0  # its function refuses it: it runs nothing
    return sum((r.replicas or 1) * r.plan.gpus for r in roles)


@functools.lru_cache(maxsize=4096)
def _planned_gpus(model: str, gpu: GpuShape, span: int) -> int:
    facts = catalog.resolve(model)
    if facts is None:
        return 1
    try:
        return sizing.plan(facts, None, gpu, sizing.EngineSettings(), span).gpus
    except sizing.SizingError:
        return 0


def _replicas_status(
    inputs: Inputs, target: Target, engine: Engine, count: scaling.Replicas
) -> dict[str, Any]:
    """status.replicas: what the engine's controller reports (current, ready), what it is
    asked to run now (desired: the fixed count, or KEDA's), and the bounds."""
    manifest = _observed_manifest(
        inputs.observed.get(engine.key + target.suffix), target.provider_config is not None
    )
    spec_ = dig(manifest, "spec")
    desired = (
        dig(spec_, "deploymentConfig", "replicas")
        if engine.key == RUNTIME
        else dig(spec_, "replicas")
    )
    status = dig(manifest, "status")
    out: dict[str, Any] = {
        "min": count.low,
        "max": count.high,
        "autoscaled": count.autoscaled,
        "current": _count(dig(status, "replicas")) or 0,
        "ready": _count(dig(status, "availableReplicas"))
        or _count(dig(status, "readyReplicas"))
        or 0,
    }
    wanted = _count(desired)
    if wanted is not None:
        out["desired"] = wanted
    elif not count.autoscaled:
        out["desired"] = count.low if engine.current else 0
    if count.capped:
        out["requestedMax"] = count.asked_high
    return out


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value)


def compose(inputs: Inputs) -> Outcome:
    """Decide everything an LLMInference needs. Never raises for bad input: problems become
    `fatal`, warnings or conditions."""
    out = _compose(inputs)
    # The model's Usage of its cluster, as composed or kept, is its entry in the cluster's
    # ledger: what this reconcile publishes (function/ledger.py).
    ledger.stamp(out.resources.get(CLUSTER_USAGE), inputs.xr, out.status)
    asked = out.requirements.get(ledger.LEDGER_REQUIREMENT)
    if (
        asked is not None
        and ledger.LEDGER_REQUIREMENT in inputs.required
        and peers.REQUIREMENT not in out.requirements
        and ledger.to_confirm(
            inputs.observed.get(CLUSTER_USAGE), inputs.xr, out.status, out.fatal is not None
        )
    ):
        # Decided on the ledger, the model would gain (or be refused): decide again on every
        # model of the namespace, as _peers reads them once Crossplane calls with them. Not
        # fatal meanwhile: Crossplane stops at a fatal result, and applies nothing of a
        # response whose requirements changed.
        out.requirements[peers.REQUIREMENT] = {
            "apiVersion": peers.API_VERSION,
            "kind": peers.KIND,
            "namespace": asked["namespace"],
        }
        if out.fatal is not None:
            out.fatal = None
            _keep_observed(inputs, out)
    return out


def _compose(inputs: Inputs) -> Outcome:
    out = Outcome()
    try:
        spec = parse(inputs.xr)
        chosen = None
        if spec.cluster_selector is not None:
            placed = _placed(spec, inputs, out)
            if placed is None:
                out.xr_ready = False
                return out
            spec, chosen = placed
        target = _target(spec, inputs, out, chosen)
        if target is None:
            out.xr_ready = False
            return out
        others = _peers(spec, target, inputs, out)
        created = _created(inputs)
        _check_served_names(spec, target, others, created, inputs.xr, out)
        _check_host(spec, target, others, created)
        _check_shared_host(spec, target, inputs, out, created)
        _check_kv_endpoints(spec, target)
        _check_keda(spec, target)
        if spec.llmd and target.llmd_gateway is None:
            raise SpecError(
                f"{P}.backend",
                "llmd",
                f"{P}.backend: llmd attaches the model to an InferenceCluster's Gateway: name "
                f"one with apps.llmd in {P}.clusterRef (or let {P}.clusterSelector choose)",
            )
        roles: list[RolePlan] = []
        if spec.disaggregation is not None:
            facts, plan, source, roles = _plan_disaggregated(spec, target, inputs, out)
        elif spec.engine.simulate:
            facts, plan, source = _plan_simulated(spec, target, inputs, out)
        else:
            # llm-d serves a replica from one pod: plan it on one node.
            one = dataclasses.replace(target, lws=False) if spec.llmd else target
            facts, plan, source = _plan(spec, one, inputs, out)
        image = (
            inputs.simulator_image
            if spec.engine.simulate
            else spec.engine.image or inputs.engine_image
        )
        if not image:
            out.fatal = (
                "the Composition passes no simulator image (input simulator.image); regenerate "
                "package/"
                if spec.engine.simulate
                else "the Composition passes no engine image (input engine.image) and "
                f"{P}.engine.image is not set; regenerate package/ or set {P}.engine.image"
            )
            return out
        out.warnings.extend(plan.warnings)
        if plan.host_capped:
            out.notes.append(f"engine requests lowered: {plan.host_capped}")
        if facts is None and not spec.engine.simulate:
            out.warnings.append(
                f"{spec.model} is not in the catalog, the Hub could not describe it and its "
                f"name carries no size: deployed on the {plan.gpus} GPU(s) asked for, GPU "
                "memory not checked"
            )
        if roles:
            count = _pd_budget(spec, target, roles, others, created, out)
        else:
            count = _replicas(spec, target, plan, others, created, out)
        if spec.llmd:
            roles = roles or [RolePlan("aggregated", None if count.autoscaled else count.low, plan)]
            engine = _build_llmd(spec, target, facts, roles, count, inputs, out)
        elif spec.engine.simulate:
            engine = _build_simulated(spec, target, plan, image, count, inputs, out)
        elif plan.nodes > 1:
            engine = _build_multinode(spec, target, facts, plan, image, count, inputs, out)
        else:
            engine = _build(spec, target, facts, plan, image, count, inputs, out)
    except SpecError as e:
        out.fatal = e.message
        out.resources.clear()
        return out
    _memory_condition(facts, plan, out)
    serving = _serving(inputs, target, engine.name, engine.current, out, engine.key)
    _readiness(inputs, target, engine.key, serving, out)
    out.status = _status(
        spec, facts, plan, source, engine, _endpoint(spec, target, engine.service or engine.name)
    )
    out.status["plan"] |= {"backend": "llmd" if spec.llmd else "productionStack"}
    out.status["plan"] |= out.status_extra
    out.status["replicas"] = _replicas_status(inputs, target, engine, count)
    if out.llmd is not None:
        out.status["llmd"] = out.llmd
    out.warnings = list(dict.fromkeys(out.warnings))
    out.notes = list(dict.fromkeys(out.notes))
    if out.placement is not None:
        out.status["placement"] = out.placement
    if _behind_router(spec, target) and target.router_endpoint:
        out.status["clusterEndpoint"] = target.router_endpoint
    return out


# --- llm-d backend ----------------------------------------------------------------------


@dataclass(frozen=True)
class RolePlan:
    """One kind of vLLM pod of an llm-d model: its role, count and plan."""

    role: str  # aggregated | prefill | decode
    replicas: int | None  # None: KEDA owns the count
    plan: sizing.Plan


def _plan_one(
    spec: LLMSpec,
    facts: catalog.ModelFacts,
    gpus: int | None,
    target: Target,
    engine: sizing.EngineSettings,
    field_: str,
) -> sizing.Plan:
    """A plan on one node for one side of a disaggregated model, refused where vLLM would
    not start (the messages name the side's field)."""
    try:
        plan = sizing.plan(facts, gpus, target.gpu, engine, 1)
    except sizing.SizingError as e:
        # A side's pods are one pod each; the message names the side's own field.
        message = e.render(field=field_, one_pod=True)
        where = field_ if gpus is not None else f"{P}.model"
        if not (e.names_field and e.lead == ": " and where == field_):
            message = f"{where}: {message}"
        raise SpecError(where, gpus or spec.model, message) from e
    if target.pod_cpu_millicores and target.pod_memory_mib:
        plan = sizing.fit_to_node(
            plan,
            target.pod_cpu_millicores - storage.FETCH_CPU_MILLICORES,
            target.pod_memory_mib - storage.FETCH_MEMORY_MIB,
            f"one {target.instance_type or 'GPU node'} of {target.cluster or 'the cluster'}",
        )
    if plan.shortfall and not target.gpu.assumed and not facts.estimated:
        raise SpecError(
            field_,
            plan.gpus,
            f"{field_}: {plan.gpus} GPU(s) cannot hold {spec.model} on "
            f"{target.cluster or 'this cluster'}: {plan.shortfall}",
        )
    return plan


def _plan_disaggregated(
    spec: LLMSpec, target: Target, inputs: Inputs, out: Outcome
) -> tuple[catalog.ModelFacts, sizing.Plan, str, list[RolePlan]]:
    """The prefill and decode plans of a disaggregated model. Both run with vLLM's NIXL
    connector, and vLLM 0.17.1 turns its hybrid KV cache manager off whenever a
    `--kv-transfer-config` is set and the claim states no preference (config/vllm.py), so
    windowed layers are sized as full ones (and stating one is refused: NixlConnector
    cannot run with the manager, kv_connector/factory.py). Prefill favours compute: by default
    the fewest GPUs that hold the model, so more pods prefill side by side. Decode favours KV
    memory: by default twice that (llm-d's P/D guide runs prefill at TP 1 and decode at TP 4),
    more room for the requests it decodes together."""
    facts, source = _facts(spec, inputs, out)
    roles = _pd_roles(spec, facts, target, _engine_settings(spec))
    decode = next(r for r in roles if r.role == "decode")
    assert facts is not None  # _pd_roles refuses a model it does not know
    return facts, decode.plan, source, roles


def _pd_roles(
    spec: LLMSpec,
    facts: catalog.ModelFacts | None,
    target: Target,
    engine: sizing.EngineSettings,
) -> list[RolePlan]:
    """The prefill and decode pods of a disaggregated model on `target`'s GPU nodes, each on
    one node; refused (SpecError naming the field) where the model or the GPUs cannot
    support them. Pure: the plan and placement both call it."""
    d = spec.disaggregation
    assert d is not None
    f = f"{P}.disaggregation"
    if facts is None:
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} is not in the catalog and the Hugging Face Hub could not "
            "describe it, so its KV cache layout, which the prefill and decode pods must "
            "share, is not known; serve it aggregated (remove disaggregation)",
        )
    if facts.task != "generate":
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} is a {facts.task} model: it answers in one pass, with no decode "
            "phase to move to other pods; remove disaggregation",
        )
    if any(g.kind == "mamba" for g in facts.kv_layers):
        raise SpecError(
            f,
            spec.model,
            f"{f}: {spec.model} keeps mamba (linear attention) state beside its KV cache, "
            f"which vLLM {vllm_cli.VERSION} can hold only with its hybrid KV cache manager, and "
            "the NIXL connector turns that off (it does not support it); serve it aggregated",
        )
    pd_facts = dataclasses.replace(facts, hybrid_kv=False)
    one_node = dataclasses.replace(target, lws=False)
    prefill = _plan_one(spec, pd_facts, d.prefill.gpu, one_node, engine, f"{f}.prefill.gpu")
    decode_gpus = d.decode.gpu
    if decode_gpus is None:
        decode_gpus = prefill.gpus
        wider = prefill.gpus * 2
        if wider <= target.gpu.per_node and not _kv_transfer_problem(
            spec, facts, prefill.gpus, wider
        ):
            try:
                sizing.plan(pd_facts, wider, target.gpu, engine, 1)
                decode_gpus = wider
            except sizing.SizingError:
                pass  # the heads do not split that way: the same as prefill
    decode = _plan_one(spec, pd_facts, decode_gpus, one_node, engine, f"{f}.decode.gpu")
    _check_kv_transfer(spec, facts, prefill, decode)
    return [
        RolePlan("prefill", d.prefill.replicas, prefill),
        RolePlan("decode", d.decode.replicas, decode),
    ]


def _kv_transfer_problem(
    spec: LLMSpec, facts: catalog.ModelFacts, p: int, d: int
) -> tuple[str, int, str] | None:
    """Why vLLM 0.17.1's NIXL connector could not move the KV cache from prefill pods of `p`
    GPUs to decode pods of `d`: (field, value, message), or None.

    - one tensor parallel size must be a multiple of the other (kv_connector/utils.py
      `tp_ratio`);
    - a side replicates the KV heads when its size is at least their number
      (`is_kv_replicated`: tp // kv_heads >= 1); a wider prefill side may not replicate
      (nixl_connector.py `_validate_remote_agent_handshake`), and a wider decode side may
      replicate only if prefill does too (its block length must be prefill's divided by the
      ratio). MLA caches a latent vector, not heads: any ratio goes."""
    f = f"{P}.disaggregation"
    if max(p, d) % min(p, d):
        return (
            f"{f}.decode.gpu",
            d,
            f"{f}.decode.gpu: prefill on {p} GPU(s) and decode on {d}: NIXL moves the KV "
            "cache between tensor parallel sizes only when one is a multiple of the other; "
            f"use e.g. {f}.decode.gpu {p * 2 if p * 2 <= MAX_GPUS else p}",
        )
    kv = facts.kv_heads
    if not kv or any(g.kind == "mla" for g in facts.kv_layers):
        return None
    if p > d and p >= kv:
        return (
            f"{f}.prefill.gpu",
            p,
            f"{f}.prefill.gpu: prefill on {p} GPUs holds one of {spec.model}'s {kv} KV heads "
            f"per GPU or fewer (replicated), and NIXL cannot send a replicated cache to a "
            f"narrower decode side ({d} GPUs); use {f}.prefill.gpu {max(1, kv // 2)} or "
            f"fewer, or {f}.decode.gpu {p}",
        )
    if d > p and d > kv and p < kv:
        return (
            f"{f}.decode.gpu",
            d,
            f"{f}.decode.gpu: decode on {d} GPUs replicates {spec.model}'s {kv} KV heads "
            f"while prefill on {p} splits them, and NIXL cannot fit the one layout into the "
            f"other; use {f}.decode.gpu {kv} or fewer, or {f}.prefill.gpu {kv} or more",
        )
    return None


def _check_kv_transfer(
    spec: LLMSpec, facts: catalog.ModelFacts, prefill: sizing.Plan, decode: sizing.Plan
) -> None:
    """What NIXL needs of the two sides (`_kv_transfer_problem`), and the same KV cache dtype
    on both (its compatibility hash)."""
    f = f"{P}.disaggregation"
    problem = _kv_transfer_problem(
        spec, facts, prefill.tensor_parallel_size, decode.tensor_parallel_size
    )
    if problem:
        raise SpecError(*problem)
    kinds = {r.engine.kv_cache_dtype for r in (prefill, decode) if r.engine is not None}
    if len(kinds) > 1:
        raise SpecError(
            f,
            sorted(kinds),
            f"{f}: the prefill and decode pods would store the KV cache as "
            f"{' and '.join(sorted(kinds))}; NIXL refuses to pair them (set --kv-cache-dtype "
            "in engine.extraArgs)",
        )


def _pd_budget(
    spec: LLMSpec,
    target: Target,
    roles: list[RolePlan],
    others: list[peers.Peer],
    created: str,
    out: Outcome,
) -> scaling.Replicas:
    """The GPUs every prefill and decode pod holds, checked against what the models before
    this one leave of the cluster's pool; the replica counts are the decode pods'."""
    total = sum((r.replicas or 1) * r.plan.gpus for r in roles)
    what = " + ".join(f"{r.replicas} {r.role} x {r.plan.gpus}" for r in roles)
    held = f"{what} = {total} GPUs"
    decode = next(r for r in roles if r.role == "decode")
    count = scaling.Replicas(
        low=decode.replicas or 1,
        high=decode.replicas or 1,
        autoscaled=False,
        asked_high=decode.replicas or 1,
    )
    if not (target.cluster and target.max_nodes and not target.gpu.assumed):
        out.conditions.append(
            Condition("GPUBudget", "Unknown", "NotChecked", f"{held}; the pool is not known")
        )
        return count
    budget = scaling.Budget(
        cluster=target.cluster,
        max_nodes=target.max_nodes,
        per_node=target.gpu.per_node,
        holders=_holders(spec, target, others, created),
    )
    if total > budget.free:
        raise SpecError(
            f"{P}.disaggregation",
            total,
            f"{P}.disaggregation: {held} do not fit: {budget.describe()}; use fewer pods or "
            f"GPUs, or raise gpu.maxNodes on InferenceCluster {budget.cluster}",
        )
    out.conditions.append(
        Condition("GPUBudget", "True", "Fits", f"holds {held}; {budget.describe()}")
    )
    return count


def _llmd_route(spec: LLMSpec, target: Target) -> tuple[str | None, str | None]:
    """(host, path prefix) of the model's HTTPRoute: its ingressHost, else its own path of
    the cluster's Gateway."""
    if spec.ingress_host:
        return spec.ingress_host, None
    return None, f"/{target.namespace}/{resources.dns_label(spec.name)}"


def _build_llmd(
    spec: LLMSpec,
    target: Target,
    facts: catalog.ModelFacts | None,
    roles: list[RolePlan],
    count: scaling.Replicas,
    inputs: Inputs,
    out: Outcome,
) -> Engine:
    """Compose an llm-d model (function/llmd.py): its vLLM StatefulSets, their Service, the
    InferencePool, the endpoint picker and its identity, the HTTPRoute on the cluster's
    Gateway; and as for the other backends the copied Secrets, KEDA, the Usages."""
    assert target.llmd_gateway is not None
    simulate = spec.engine.simulate
    image = inputs.simulator_image if simulate else (spec.engine.image or inputs.llmd_engine_image)
    missing = [
        what
        for what, given in (
            ("simulator.image" if simulate else "llmd.engine.image", image),
            ("llmd.endpointPicker.image", inputs.picker_image),
            ("llmd.routingSidecar.image", inputs.sidecar_image),
        )
        if not given
    ]
    if missing:
        raise SpecError(
            f"{P}.backend",
            "llmd",
            f"{P}.backend: the Composition passes no {', '.join(missing)} (its input); "
            "regenerate package/",
        )
    assert image and inputs.picker_image
    disaggregated = spec.disaggregation is not None
    name = resources.dns_label(spec.name)
    picker = resources.dns_label(f"{spec.name}-epp")
    router = resources.dns_label(f"{spec.name}-llm-d")
    engines = resources.dns_label(f"{spec.name}-engines")
    meta = {"namespace": target.namespace, "model": spec.model, "labels_of": name}
    secrets = _secrets(spec, facts, target, name, inputs, out)
    class_name = spec.storage.class_name or target.storage_class
    secret_env = _pod_secret_env(spec, secrets)
    # Both sides of a disaggregated model take the requests either may get: the shorter
    # context of the two.
    contexts = [_max_model_len(spec, r.plan, out) for r in roles]
    max_len = min((c for c in contexts if c), default=None)
    if disaggregated and max_len and len(set(contexts)) > 1:
        short = roles[contexts.index(max_len)]
        out.notes.append(
            f"{P}.disaggregation: both sides serve a context of {max_len} tokens, what one "
            f"{short.role} pod's KV cache holds ({short.plan.gpus} GPU(s)); more GPUs there "
            f"({P}.disaggregation.{short.role}.gpu) serve longer prompts"
        )
    main: tuple[str, str, list[str]] | None = None
    budgets = []
    caches: list[tuple[str, storage.Layout, storage.CachePlan]] = []
    if simulate:
        # The simulator in place of vLLM, labelled as the pool's pods (no cache: nothing is
        # downloaded).
        sim = resources.dns_label(f"{spec.name}-sim")
        args = _place_simulator(
            spec,
            target,
            sim,
            roles[0].plan,
            image,
            count,
            max_len,
            out,
            pod_labels=llmd.role_labels(name, "aggregated"),
        )
        main = (sim, SIMULATOR, ["llm-d-inference-sim", *args])
        roles = []
    remote = target.provider_config is not None
    shared: SharedCache | None = None
    held = False
    if roles:
        # Every role reads the same weights: one shared claim for all of them, or one each.
        pods = sum(r.replicas if r.replicas is not None else count.asked_high for r in roles)
        layout, _, shared = _many_pods_cache(
            spec, target, pods, facts, roles[0].plan, image, secrets.hf_token, inputs, out
        )
        class_name = layout.class_name
    ready = shared is None or shared.fetch.done
    for r in roles:
        cache, _ = _cache_plan(
            spec, target, facts, r.plan, inputs, layout, SHARED_CACHE if shared else CACHE
        )
        cache_size = storage.quantity(cache.size_gib)
        group = llmd.group_name(name, r.role, cache_size, class_name, shared=shared is not None)
        key = f"{LLMD_ENGINE}-{r.role}-{group.rsplit('-', 1)[-1]}"
        extra = _engine_args(spec, facts, r.plan, out, api_key_arg=False)
        if disaggregated:
            extra = ["--kv-transfer-config", llmd.kv_transfer_config(r.role), *extra]
        port = llmd.DECODE_VLLM_PORT if r.role == "decode" else resources.ENGINE_PORT
        args = _serve_args(spec, facts, r.plan, max_len, extra, port=port)
        if r.role in ("aggregated", "decode"):
            main = (group, key, ["vllm", "serve", *args])
        observed = inputs.observed.get(key + target.suffix)
        if shared is not None and shared.holding(observed, remote):
            # Pods serving now stay as they are while a new revision downloads.
            _keep(target, key, observed, r.replicas is None, out)
            held = True
            continue
        _place(
            spec,
            target,
            key,
            llmd.engine_statefulset(
                name=group,
                role=r.role,
                image=image,
                sidecar_image=inputs.sidecar_image,
                service=engines,
                pool=name,
                service_account=router if r.role == "decode" else None,
                # On a shared cache, no pod before the weights are in it.
                replicas=r.replicas if ready else 0,
                shared_claim=shared.claim if shared else None,
                args=args,
                env=_pod_env(spec, r.plan),
                secret_env=secret_env,
                gpus=r.plan.tensor_parallel_size,
                cpu=r.plan.cpu,
                memory=r.plan.memory,
                shm_size=r.plan.shm_size,
                cache_size=cache_size,
                cache_class=class_name,
                node_selector=target.node_selector,
                tolerations=target.tolerations or None,
                runtime_class=target.runtime_class,
                rdma_resource=target.rdma_resource,
                **_pod_cache_fill(spec, cache),
                **meta,
            ),
            out,
            suffix=f"{r.role}-{group.rsplit('-', 1)[-1]}",
            readiness_cel=llmd.ENGINE_READY_CEL,
            watch=True,
        )
        budgets.append(f"{r.replicas or 'KEDA'} x {r.role} ({cache_size} each)")
        pods = r.replicas if r.replicas is not None else count.high
        caches.append((r.role, storage.per_pod_layout(pods, class_name), cache))
    assert main is not None
    if shared is not None:
        plan_ = _cache_plan(spec, target, facts, roles[0].plan, inputs, layout, SHARED_CACHE)[0]
        _shared_cache_status(spec, target, layout, plan_, shared, out)
    elif caches:
        note = "" if target.shared_storage else " (the cluster publishes no shared class)"
        out.status_extra["cache"] = _per_pod_cache_status(caches, class_name, note)
    _place(
        spec,
        target,
        LLMD_ENGINES_SERVICE,
        llmd.engines_service(name=engines, **meta),
        out,
        suffix="engines",
    )
    for key, manifest in zip(
        LLMD_ROUTER_IDENTITY, llmd.router_identity(name=router, **meta), strict=True
    ):
        _place(spec, target, key, manifest, out, suffix=key)
    config = llmd.epp_config_text(spec.llmd_profile, disaggregated)
    _place(
        spec,
        target,
        LLMD_PICKER_CONFIG,
        llmd.epp_config_map(name=picker, text=config, **meta),
        out,
        suffix="epp-config",
    )
    _place(
        spec,
        target,
        LLMD_PICKER,
        llmd.epp_deployment(
            name=picker,
            image=inputs.picker_image,
            pool=name,
            service_account=router,
            config_map=picker,
            config=config,
            **meta,
        ),
        out,
        suffix="epp",
        readiness_cel=llmd.EPP_READY_CEL,
    )
    _place(
        spec,
        target,
        LLMD_PICKER_SERVICE,
        llmd.epp_service(name=picker, **meta),
        out,
        suffix="epp-service",
    )
    _place(
        spec,
        target,
        LLMD_POOL,
        llmd.inference_pool(name=name, picker=picker, **meta),
        out,
        suffix="pool",
    )
    host, prefix = _llmd_route(spec, target)
    _place(
        spec,
        target,
        LLMD_ROUTE,
        llmd.http_route(
            name=name,
            pool=name,
            gateway=target.llmd_gateway,
            host=host,
            path_prefix=prefix,
            **meta,
        ),
        out,
        suffix="route",
        readiness_cel=llmd.ROUTE_READY_CEL,
    )
    group, key, command = main
    if count.autoscaled and (ready or held):
        kind = "Deployment" if simulate else "StatefulSet"
        scaled = {"apiVersion": "apps/v1", "kind": kind, "name": group}
        _scaler(spec, target, name, count, scaled, out, service=engines)
    _cluster_usage(spec, target, inputs, out)
    _keda_usage(spec, target, count, inputs, out)
    _no_takeover(spec, target, inputs, out)
    if shared is None:
        out.conditions.append(
            Condition(
                "ModelCache",
                "True",
                "Simulated" if simulate else "PerPod",
                f"{P}.engine.simulate: llm-d's inference simulator answers for {spec.model}; "
                "nothing is downloaded"
                if simulate
                else f"each vLLM pod downloads {spec.model} into its own claim before vLLM starts "
                f"({', '.join(budgets)})",
            )
        )
    gw_ns, gw_name = target.llmd_gateway
    out.status_extra["backend"] = "llmd"
    out.llmd = {
        "profile": spec.llmd_profile,
        "scorers": dict(llmd.data()["profiles"][spec.llmd_profile]["scorers"]),
        "inferencePool": name,
        "endpointPicker": picker,
        "httpRoute": name,
        "gateway": f"{gw_ns}/{gw_name}",
        **({"host": host} if host else {"path": prefix}),
    }
    if disaggregated:
        out.status_extra["disaggregation"] = _pd_status(roles, target, max_len)
    return Engine(
        name=group,
        key=key,
        command=command,
        image=image,
        max_model_len=max_len,
        current=ready or held,
        simulated=simulate,
    )


def _pd_status(roles: list[RolePlan], target: Target, max_len: int | None) -> dict[str, Any]:
    """status.plan.disaggregation: each side's pods, GPUs and KV cache, and the transfer."""
    out: dict[str, Any] = {
        "gpus": sum((r.replicas or 1) * r.plan.gpus for r in roles),
        "kvTransfer": f"{llmd.KV_CONNECTOR} (NIXL) over RDMA"
        + (f" ({target.rdma_resource})" if target.rdma_resource else ""),
    }
    for r in roles:
        out[r.role] = {
            "replicas": r.replicas,
            "gpus": r.plan.gpus,
            "kvCacheGiB": round(r.plan.kv_cache_gib, 1),
            **({"maxModelLen": max_len} if max_len else {}),
        }
    return out
