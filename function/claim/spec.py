"""The LLMInference spec as plain data, with the semantic checks a schema cannot make.

The XRD already rejects wrong types and shapes; this module (with the sections it hands to
function/claim/engine.py and function/claim/serving.py) still checks everything it reads,
because the function must answer clearly for any input (an XR applied before the XRD was
updated, a render of a hand-written file, a fuzzer). Every problem is a `SpecError`
(function/claim/fields.py) that names the field, the value and what would work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from function.claim.adapters import Adapter, parse_adapters
from function.claim.engine import EngineOverrides, parse_engine
from function.claim.fields import (
    DNS_SUBDOMAIN,
    LABEL_KEY,
    P,
    SecretRef,
    SpecError,
    optional_str,
    secret_ref,
    short,
)
from function.claim.fleet import Fleet, parse_fleet
from function.claim.kvcache import KvCacheSpec, parse_kv_cache
from function.claim.model import (
    parse_aliases,
    parse_expert_parallel,
    parse_gpu,
    parse_model,
)
from function.claim.serving import (
    Autoscaling,
    Disaggregation,
    parse_autoscaling,
    parse_backend,
    parse_replicas,
)
from function.claim.source import WeightSource, parse_source
from function.claim.storage import StorageSpec, parse_storage
from function.hosts import ip_literal
from function.limits import (
    BACKENDS,
)
from function.policy import llmd_profiles

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

DEFAULT_HF_TOKEN_SECRET = "hf-token"
DEFAULT_HF_TOKEN_KEY = "token"
DEFAULT_API_KEY_KEY = "api-key"


@dataclass(frozen=True)
class LLMSpec:
    name: str
    namespace: str
    model: str
    gpu: int | None = None
    ingress_host: str | None = None
    provider_config_name: str | None = None
    target_namespace: str | None = None
    cluster_ref: str | None = None  # named, or chosen by placement (cluster_selector)
    # spec.parameters.clusterSelector.matchLabels: the function places the model
    cluster_selector: dict[str, str] | None = None
    hf_token_secret: SecretRef | None = None  # only when given explicitly
    api_key_secret: SecretRef | None = None
    engine: EngineOverrides = field(default_factory=EngineOverrides)
    storage: StorageSpec = field(default_factory=StorageSpec)
    replicas: int | None = None  # fixed replicas, when given
    autoscaling: Autoscaling | None = None
    aliases: tuple[str, ...] = ()
    backend: str = BACKENDS[0]
    llmd_profile: str = llmd_profiles.DEFAULT_PROFILE
    disaggregation: Disaggregation | None = None
    # placement, globalEndpoint, spillover: the model over several clusters (None: one)
    fleet: Fleet | None = None
    # kvCache: LMCache KV offloading (function/claim/kvcache.py)
    kv_cache: KvCacheSpec = field(default_factory=KvCacheSpec)
    # spec.parameters.adapters: LoRA adapters served beside the model (function/claim/adapters.py)
    adapters: tuple[Adapter, ...] = ()
    # spec.parameters.parallelism.expert: expert parallelism for a mixture of experts (None:
    # the function chooses, function/model/expert_parallel.py)
    expert_parallel: bool | None = None
    # spec.parameters.source: the weights from S3, a claim or an image (None: the Hub)
    source: WeightSource | None = None

    @property
    def llmd(self) -> bool:
        """Whether llm-d serves the model (spec.parameters.backend: llmd)."""
        return self.backend == "llmd"

    @property
    def served_names(self) -> tuple[str, ...]:
        """Every name the engine answers to: the Hugging Face id first (vLLM labels its
        metrics with the first), then the aliases."""
        return (self.model, *self.aliases)

    @property
    def routed_names(self) -> tuple[str, ...]:
        """Every name a request's `model` may use: the served names, then the adapters'."""
        return (*self.served_names, *(a.name for a in self.adapters))

    @property
    def cluster_field(self) -> str:
        """The field that says where the model runs, for messages."""
        return (
            f"{P}.clusterSelector" if self.cluster_selector is not None else f"{P}.clusterRef.name"
        )

    @property
    def remote(self) -> bool:
        """True when resources go to another cluster through provider-kubernetes Objects."""
        return (
            self.provider_config_name is not None
            or self.cluster_ref is not None
            or self.cluster_selector is not None
        )


def _host(params: dict) -> str | None:
    """spec.parameters.ingressHost: a DNS name, never an IP literal (Kubernetes refuses an IP
    as an Ingress rule's host, Gateway API as a route's hostname)."""
    host = optional_str(params, "ingressHost", DNS_SUBDOMAIN, "a DNS name")
    if host is not None and ip_literal(host):
        raise SpecError(
            f"{P}.ingressHost",
            host,
            f"{P}.ingressHost: {host} is an IP address; an Ingress or a route needs a DNS name "
            "(e.g. a name under nip.io for a bare IP: qwen.<ip>.nip.io)",
        )
    return host


def parse(xr: dict[str, Any]) -> LLMSpec:
    """Read an observed LLMInference into an LLMSpec, or raise SpecError."""
    metadata = xr.get("metadata") if isinstance(xr.get("metadata"), dict) else {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise SpecError("metadata.name", name, "the LLMInference has no metadata.name")
    namespace = metadata.get("namespace")
    if not isinstance(namespace, str) or not namespace:
        namespace = "default"
    spec = xr.get("spec")
    params = spec.get("parameters") if isinstance(spec, dict) else None
    if not isinstance(params, dict):
        raise SpecError(
            P, params, f"{P} is required, with at least model (a Hugging Face model id)"
        )
    provider_config = optional_str(
        params, "providerConfigName", DNS_SUBDOMAIN, "a ProviderConfig name"
    )
    target_ns = optional_str(params, "targetNamespace", DNS_LABEL, "a namespace name")
    selector = _cluster_selector(params)
    if (
        target_ns is not None
        and provider_config is None
        and "clusterRef" not in params
        and selector is None
    ):
        raise SpecError(
            f"{P}.targetNamespace",
            target_ns,
            f"{P}.targetNamespace applies only with providerConfigName, clusterRef or "
            "clusterSelector; without them, resources are composed into the LLMInference's "
            "own namespace",
        )
    if selector is not None and (provider_config is not None or "clusterRef" in params):
        raise SpecError(
            f"{P}.clusterSelector",
            selector,
            f"{P}.clusterSelector, {P}.clusterRef and {P}.providerConfigName are exclusive: "
            "the selector lets the function choose the cluster, the others name one",
        )
    cluster_ref = None
    if params.get("clusterRef") is not None:
        ref = params["clusterRef"]
        cname = ref.get("name") if isinstance(ref, dict) else None
        if not isinstance(cname, str) or not DNS_SUBDOMAIN.match(cname):
            raise SpecError(
                f"{P}.clusterRef.name",
                cname,
                f"{P}.clusterRef.name: {short(cname)} is not the name of an InferenceCluster",
            )
        if provider_config is not None:
            raise SpecError(
                f"{P}.clusterRef",
                cname,
                f"{P}.clusterRef and {P}.providerConfigName are exclusive: clusterRef already "
                "names the cluster's ProviderConfig",
            )
        cluster_ref = cname
    engine = parse_engine(params)
    api_key = secret_ref(params, "apiKeySecretRef", DEFAULT_API_KEY_KEY)
    if engine.simulate and api_key is not None:
        raise SpecError(
            f"{P}.apiKeySecretRef",
            api_key.name,
            f"{P}.apiKeySecretRef: the inference simulator ({P}.engine.simulate) checks no API "
            "key, so the model would answer anyone; remove apiKeySecretRef to simulate, or "
            "run vLLM",
        )
    backend, profile, disaggregation = parse_backend(params, engine)
    adapters = parse_adapters(params)
    if adapters and backend == "llmd":
        raise SpecError(
            f"{P}.adapters",
            [a.name for a in adapters],
            f"{P}.adapters: not offered with {P}.backend llmd: its endpoint picker routes by "
            "the InferencePool's model names, which the function does not yet map to "
            "adapters; serve the adapters with backend productionStack",
        )
    if adapters and api_key is not None:
        raise SpecError(
            f"{P}.adapters",
            [a.name for a in adapters],
            f"{P}.adapters: with {P}.apiKeySecretRef the engine runs offline "
            "(HF_HUB_OFFLINE: its one Secret variable carries the API key, not a Hugging Face "
            "token), so vLLM could not download the adapters; remove apiKeySecretRef to "
            "serve adapters",
        )
    source = parse_source(params)
    if source is not None and engine.revision is not None:
        raise SpecError(
            f"{P}.engine.extraArgs",
            engine.revision,
            f"{P}.engine.extraArgs: --revision {engine.revision} names a revision of the "
            f"Hugging Face repository, but the weights come from {P}.source ({source.uri}), "
            "which has none; remove --revision, or point source at the revision's files",
        )
    return LLMSpec(
        name=name,
        namespace=namespace,
        model=parse_model(params),
        gpu=parse_gpu(params),
        ingress_host=_host(params),
        provider_config_name=provider_config,
        target_namespace=target_ns,
        cluster_ref=cluster_ref,
        cluster_selector=selector,
        hf_token_secret=secret_ref(params, "hfTokenSecretRef", DEFAULT_HF_TOKEN_KEY),
        api_key_secret=api_key,
        engine=engine,
        storage=parse_storage(params),
        replicas=parse_replicas(params),
        autoscaling=parse_autoscaling(params),
        aliases=parse_aliases(params),
        backend=backend,
        llmd_profile=profile,
        disaggregation=disaggregation,
        fleet=parse_fleet(params, selector is not None),
        kv_cache=parse_kv_cache(params),
        adapters=adapters,
        expert_parallel=parse_expert_parallel(params),
        source=source,
    )


# Label values as Kubernetes checks them (keys: spec_fields.LABEL_KEY).
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")


def _cluster_selector(params: dict) -> dict[str, str] | None:
    value = params.get("clusterSelector")
    if value is None:
        return None
    f = f"{P}.clusterSelector"
    labels = value.get("matchLabels") if isinstance(value, dict) else None
    if not isinstance(labels, dict) or not labels or len(labels) > 16:
        raise SpecError(
            f"{f}.matchLabels",
            labels,
            f"{f}.matchLabels must name 1 to 16 labels of the InferenceClusters to choose "
            "from, e.g. {gpu: h100, region: eu}",
        )
    for k, v in labels.items():
        if not isinstance(k, str) or not LABEL_KEY.match(k) or len(k) > 253:
            raise SpecError(
                f"{f}.matchLabels", k, f"{f}.matchLabels: {short(k)} is not a label key"
            )
        if not isinstance(v, str) or not _LABEL_VALUE.match(v):
            raise SpecError(
                f"{f}.matchLabels.{k}",
                v,
                f"{f}.matchLabels.{k}: {short(v)} is not a label value (at most 63 letters, "
                "digits, - _ . starting and ending with a letter or digit)",
            )
    return dict(labels)
