"""The LLMInference spec as plain data, with the semantic checks a schema cannot make.

The XRD already rejects wrong types and shapes; this module (with the sections it hands to
function/spec_engine.py and function/spec_serving.py) still checks everything it reads,
because the function must answer clearly for any input (an XR applied before the XRD was
updated, a render of a hand-written file, a fuzzer). Every problem is a `SpecError`
(function/spec_fields.py) that names the field, the value and what would work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from function.hosts import ip_literal
from function.limits import (
    ALIAS,
    ALIAS_MAX_ITEMS,
    ALIAS_MAX_LENGTH,
    BACKENDS,
    HF_MODEL_ID,
    HF_MODEL_ID_MAX_PART,
    MAX_GPUS_MULTI_NODE,
)
from function.plan.storage import ACCESS_MODES
from function.policy import llmd_profiles
from function.spec_adapters import Adapter, parse_adapters
from function.spec_engine import EngineOverrides, parse_engine
from function.spec_fields import (
    DNS_SUBDOMAIN,
    LABEL_KEY,
    P,
    SecretRef,
    SpecError,
    boolean,
    int_in,
    secret_ref,
    short,
)
from function.spec_fleet import Fleet, parse_fleet
from function.spec_kvcache import KvCacheSpec, parse_kv_cache
from function.spec_serving import (
    Autoscaling,
    Disaggregation,
    parse_autoscaling,
    parse_backend,
    parse_replicas,
)
from function.spec_source import WeightSource, parse_source

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

DEFAULT_HF_TOKEN_SECRET = "hf-token"
DEFAULT_HF_TOKEN_KEY = "token"
DEFAULT_API_KEY_KEY = "api-key"


@dataclass(frozen=True)
class StorageSpec:
    class_name: str | None = None
    size_gib: int | None = None
    # ReadWriteOnce or ReadWriteMany: what the named class provides (None: the cluster says).
    access_mode: str | None = None


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
    # kvCache: LMCache KV offloading (function/spec_kvcache.py)
    kv_cache: KvCacheSpec = field(default_factory=KvCacheSpec)
    # spec.parameters.adapters: LoRA adapters served beside the model (function/spec_adapters.py)
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


def _optional_str(
    params: dict, key: str, pattern: re.Pattern[str], what: str, where: str = P
) -> str | None:
    if key not in params or params[key] is None:
        return None
    value = params[key]
    if not isinstance(value, str) or not pattern.match(value) or len(value) > 253:
        raise SpecError(f"{where}.{key}", value, f"{where}.{key}: {short(value)} is not {what}")
    return value


def _host(params: dict) -> str | None:
    """spec.parameters.ingressHost: a DNS name, never an IP literal (Kubernetes refuses an IP
    as an Ingress rule's host, Gateway API as a route's hostname)."""
    host = _optional_str(params, "ingressHost", DNS_SUBDOMAIN, "a DNS name")
    if host is not None and ip_literal(host):
        raise SpecError(
            f"{P}.ingressHost",
            host,
            f"{P}.ingressHost: {host} is an IP address; an Ingress or a route needs a DNS name "
            "(e.g. a name under nip.io for a bare IP: qwen.<ip>.nip.io)",
        )
    return host


def _model(params: dict) -> str:
    value = params.get("model")
    if value is None or value == "":
        raise SpecError(
            f"{P}.model",
            value,
            f"{P}.model is required: a Hugging Face model id such as Qwen/Qwen2.5-1.5B-Instruct",
        )
    if (
        not isinstance(value, str)
        or not HF_MODEL_ID.match(value)
        or any(len(part) > HF_MODEL_ID_MAX_PART for part in value.split("/"))
    ):
        raise SpecError(
            f"{P}.model",
            value,
            f"{P}.model: {short(value)} is not a Hugging Face model id; write it as org/name, "
            "e.g. Qwen/Qwen2.5-1.5B-Instruct",
        )
    return value


def _gpu(params: dict) -> int | None:
    value = params.get("gpu")
    if value is None:
        return None
    number = int_in(value, 1, MAX_GPUS_MULTI_NODE)  # 2.0 is 2; 2.5 and bools are not
    if number is None:
        raise SpecError(
            f"{P}.gpu",
            value,
            f"{P}.gpu: {short(value)} is not a GPU count; use a whole number from 1 to "
            f"{MAX_GPUS_MULTI_NODE} (above a node's GPUs, whole nodes of a cluster with "
            "apps.lws), or omit it to let the function choose",
        )
    return number


STORAGE_SIZE = re.compile(r"^([1-9][0-9]{0,5})(Gi|Ti)$")


def _storage(params: dict) -> StorageSpec:
    storage = params.get("storage")
    if storage is None:
        return StorageSpec()
    f = f"{P}.storage"
    if not isinstance(storage, dict):
        raise SpecError(f, storage, f"{f} must be an object (className, size, accessMode)")
    class_name = _optional_str(storage, "className", DNS_SUBDOMAIN, "a StorageClass name", f)
    size = storage.get("size")
    size_gib = None
    if size is not None:
        m = STORAGE_SIZE.match(size) if isinstance(size, str) else None
        if not m:
            raise SpecError(
                f"{f}.size",
                size,
                f"{f}.size: {short(size)} is not a size; write whole Gi or Ti, e.g. 800Gi or 2Ti",
            )
        size_gib = int(m.group(1)) * (1024 if m.group(2) == "Ti" else 1)
    access_mode = storage.get("accessMode")
    if access_mode is not None and access_mode not in ACCESS_MODES:
        raise SpecError(
            f"{f}.accessMode",
            access_mode,
            f"{f}.accessMode: {short(access_mode)} is not one of {', '.join(ACCESS_MODES)}",
        )
    return StorageSpec(class_name=class_name, size_gib=size_gib, access_mode=access_mode)


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
    provider_config = _optional_str(
        params, "providerConfigName", DNS_SUBDOMAIN, "a ProviderConfig name"
    )
    target_ns = _optional_str(params, "targetNamespace", DNS_LABEL, "a namespace name")
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
        model=_model(params),
        gpu=_gpu(params),
        ingress_host=_host(params),
        provider_config_name=provider_config,
        target_namespace=target_ns,
        cluster_ref=cluster_ref,
        cluster_selector=selector,
        hf_token_secret=secret_ref(params, "hfTokenSecretRef", DEFAULT_HF_TOKEN_KEY),
        api_key_secret=api_key,
        engine=engine,
        storage=_storage(params),
        replicas=parse_replicas(params),
        autoscaling=parse_autoscaling(params),
        aliases=_aliases(params),
        backend=backend,
        llmd_profile=profile,
        disaggregation=disaggregation,
        fleet=parse_fleet(params, selector is not None),
        kv_cache=parse_kv_cache(params),
        adapters=adapters,
        expert_parallel=_expert_parallel(params),
        source=source,
    )


def _expert_parallel(params: dict) -> bool | None:
    """spec.parameters.parallelism.expert: True or False, None when not given."""
    section = params.get("parallelism")
    if section is None:
        return None
    f = f"{P}.parallelism"
    if not isinstance(section, dict):
        raise SpecError(f, section, f"{f} must be an object with `expert: true` or `false`")
    if section.get("expert") is None:
        return None
    return boolean(section, "expert", f"{f}.expert")


def _aliases(params: dict) -> tuple[str, ...]:
    value = params.get("aliases")
    if value is None:
        return ()
    f = f"{P}.aliases"
    if not isinstance(value, list) or len(value) > ALIAS_MAX_ITEMS:
        raise SpecError(f, value, f"{f} must be a list of at most {ALIAS_MAX_ITEMS} names")
    out: list[str] = []
    for i, alias in enumerate(value):
        if not isinstance(alias, str) or len(alias) > ALIAS_MAX_LENGTH or not ALIAS.match(alias):
            raise SpecError(
                f"{f}[{i}]",
                alias,
                f"{f}[{i}]: {short(alias)} is not a model name; use letters, digits and . _ : "
                f"/ -, starting and ending with a letter or digit, at most {ALIAS_MAX_LENGTH} "
                "characters (e.g. qwen-small)",
            )
        if alias == params.get("model") or alias in out:
            raise SpecError(
                f"{f}[{i}]",
                alias,
                f"{f}[{i}]: {alias} is already a name of this model; list each alias once, "
                f"and not {P}.model itself",
            )
        out.append(alias)
    return tuple(out)


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
