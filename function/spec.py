"""The LLMInference spec as plain data, with the semantic checks a schema cannot make.

The XRD already rejects wrong types and shapes; this module still checks everything it reads,
because the function must answer clearly for any input (an XR applied before the XRD was
updated, a render of a hand-written file, a fuzzer). Every problem is a `SpecError` that
names the field, the value and what would work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from function.errors import FieldError
from function.limits import (
    ALIAS,
    ALIAS_MAX_ITEMS,
    ALIAS_MAX_LENGTH,
    AUTOSCALING_METRICS,
    BACKENDS,
    HF_MODEL_ID,
    HF_MODEL_ID_MAX_PART,
    MAX_GPUS,
    MAX_GPUS_MULTI_NODE,
    MAX_REPLICAS,
    SCALE_DOWN_DELAY_DEFAULT,
    SCALE_DOWN_DELAY_MAX,
)
from function.plan.storage import ACCESS_MODES
from function.policy import engine_args, llmd_profiles, vllm_cli
from function.policy import simulator_cli as simulator

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# A Hugging Face revision: a branch, tag or commit (no spaces, no path tricks).
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# --kv-cache-dtype values vLLM 0.17.1 accepts on CUDA (vllm/config/cache.py CacheDType).
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")

DEFAULT_HF_TOKEN_SECRET = "hf-token"
DEFAULT_HF_TOKEN_KEY = "token"
DEFAULT_API_KEY_KEY = "api-key"
P = "spec.parameters"


class SpecError(FieldError):
    """A spec problem: which field, which value, and what would work."""


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str


@dataclass(frozen=True)
class EngineOverrides:
    image: str | None = None
    max_model_len: int | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # --max-model-len given in extra_args (a whole number of tokens), which vLLM then uses.
    extra_max_model_len: int | None = None
    # Settings the memory model depends on, when extra_args set them (vLLM reads the last).
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    revision: str | None = None
    # Run llm-d's inference simulator instead of vLLM (no GPU; extra_args go to it).
    simulate: bool = False

    @property
    def context(self) -> int | None:
        """The context length the claim asks for, by field or by argument."""
        return self.max_model_len or self.extra_max_model_len


@dataclass(frozen=True)
class StorageSpec:
    class_name: str | None = None
    size_gib: int | None = None
    # ReadWriteOnce or ReadWriteMany: what the named class provides (None: the cluster says).
    access_mode: str | None = None


@dataclass(frozen=True)
class Autoscaling:
    """spec.parameters.autoscaling: KEDA keeps the replicas between min and max, aiming at
    `target` of `metric` (waiting requests per replica, or KV-cache usage in percent)."""

    min_replicas: int
    max_replicas: int
    metric: str
    target: int
    scale_down_delay_s: int


@dataclass(frozen=True)
class Role:
    """One side of a disaggregated model: how many pods, and GPUs each (None: the function
    chooses)."""

    replicas: int
    gpu: int | None


@dataclass(frozen=True)
class Disaggregation:
    """spec.parameters.disaggregation (backend llmd): prefill and decode pods apart, the KV
    cache moving between them over NIXL."""

    prefill: Role
    decode: Role


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


def _short(value: object, limit: int = 80) -> str:
    """The value as the claim wrote it (65, not the 65.0 protobuf delivers), cut short."""
    text = repr(_whole(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _optional_str(
    params: dict, key: str, pattern: re.Pattern[str], what: str, where: str = P
) -> str | None:
    if key not in params or params[key] is None:
        return None
    value = params[key]
    if not isinstance(value, str) or not pattern.match(value) or len(value) > 253:
        raise SpecError(f"{where}.{key}", value, f"{where}.{key}: {_short(value)} is not {what}")
    return value


def _host(params: dict) -> str | None:
    """spec.parameters.ingressHost: a DNS name, never an IP literal (Kubernetes refuses an IP
    as an Ingress rule's host, Gateway API as a route's hostname)."""
    from function.policy.tenancy import ip_literal  # tenancy reads objects with cluster.dig

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
            f"{P}.model: {_short(value)} is not a Hugging Face model id; write it as org/name, "
            "e.g. Qwen/Qwen2.5-1.5B-Instruct",
        )
    return value


def _gpu(params: dict) -> int | None:
    value = params.get("gpu")
    if value is None:
        return None
    number = _int_in(value, 1, MAX_GPUS_MULTI_NODE)  # 2.0 is 2; 2.5 and bools are not
    if number is None:
        raise SpecError(
            f"{P}.gpu",
            value,
            f"{P}.gpu: {_short(value)} is not a GPU count; use a whole number from 1 to "
            f"{MAX_GPUS_MULTI_NODE} (above a node's GPUs, whole nodes of a cluster with "
            "apps.lws), or omit it to let the function choose",
        )
    return number


def _secret_ref(params: dict, field: str, default_key: str) -> SecretRef | None:
    ref = params.get(field)
    if ref is None:
        return None
    f = f"{P}.{field}"
    if not isinstance(ref, dict):
        raise SpecError(f, ref, f"{f} must be an object with name (and optionally key)")
    name = ref.get("name")
    if not isinstance(name, str) or not DNS_SUBDOMAIN.match(name):
        raise SpecError(f"{f}.name", name, f"{f}.name: {_short(name)} is not a Secret name")
    key = ref.get("key", default_key)
    if not isinstance(key, str) or not SECRET_KEY.match(key):
        raise SpecError(f"{f}.key", key, f"{f}.key: {_short(key)} is not a Secret key")
    return SecretRef(name=name, key=key)


def _engine(params: dict) -> EngineOverrides:
    engine = params.get("engine")
    if engine is None:
        return EngineOverrides()
    f = f"{P}.engine"
    if not isinstance(engine, dict):
        raise SpecError(
            f, engine, f"{f} must be an object (image, maxModelLen, extraArgs, env, simulate)"
        )
    image = engine.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip() or " " in image):
        raise SpecError(
            f"{f}.image", image, f"{f}.image: {_short(image)} is not an image reference"
        )
    if isinstance(image, str) and "/" not in image:
        raise SpecError(
            f"{f}.image",
            image,
            f"{f}.image: {image} needs a registry and repository, e.g. "
            "docker.io/lmcache/vllm-openai:<tag>",
        )
    max_len = engine.get("maxModelLen")
    if isinstance(max_len, float) and max_len.is_integer():
        max_len = int(max_len)
    if max_len is not None and (
        isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 128
    ):
        raise SpecError(
            f"{f}.maxModelLen",
            max_len,
            f"{f}.maxModelLen: {_short(max_len)} is not a context length; use a whole number "
            "of tokens, at least 128",
        )
    args = engine.get("extraArgs") or []
    if not isinstance(args, list) or not all(isinstance(a, str) and a for a in args):
        raise SpecError(f"{f}.extraArgs", args, f"{f}.extraArgs must be a list of strings")
    env_items = engine.get("env") or []
    env: list[tuple[str, str]] = []
    if not isinstance(env_items, list):
        raise SpecError(f"{f}.env", env_items, f"{f}.env must be a list of {{name, value}}")
    for i, item in enumerate(env_items):
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if isinstance(item, dict) and "valueFrom" in item:
            raise SpecError(
                f"{f}.env[{i}].valueFrom",
                item.get("valueFrom"),
                f"{f}.env[{i}].valueFrom: not offered; the pinned production-stack operator's "
                "VLLMRuntime takes literal variables only (vllmConfig.env is name and value). "
                f"Secrets reach the engine by reference: {P}.hfTokenSecretRef (Hugging Face), "
                f"{P}.apiKeySecretRef (vLLM's API key)",
            )
        if not isinstance(item, dict):
            raise SpecError(
                f"{f}.env[{i}]",
                item,
                f"{f}.env[{i}]: {_short(item)} must be {{name, value}}, e.g. "
                "{name: VLLM_LOGGING_LEVEL, value: DEBUG}",
            )
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise SpecError(
                f"{f}.env[{i}].name",
                name,
                f"{f}.env[{i}].name: {_short(name)} is not a variable name; use letters, digits "
                "and _ (not starting with a digit), e.g. VLLM_LOGGING_LEVEL",
            )
        if not isinstance(value, str):
            raise SpecError(
                f"{f}.env[{i}].value",
                value,
                f"{f}.env[{i}].value: {name} needs a string value (quote numbers and booleans)",
            )
        env.append((name, value))
    simulate = engine.get("simulate", False)
    if not isinstance(simulate, bool):
        raise SpecError(
            f"{f}.simulate",
            simulate,
            f"{f}.simulate: {_short(simulate)} is not true or false",
        )
    if simulate:
        # extraArgs go to the inference simulator; the variables are checked as for vLLM.
        found = simulator.problems(args) + engine_args.problems([], env, max_model_len_field=False)
        if image is not None:
            raise SpecError(
                f"{f}.image",
                image,
                f"{f}.image: applies to vLLM; with {f}.simulate the function runs the "
                "inference simulator it pins (kcl/versions.k)",
            )
    else:
        found = engine_args.problems(args, env, max_model_len_field=max_len is not None)
        if not found:
            # What vLLM's own parser would refuse at start (function/policy/vllm_cli.py).
            found = [
                engine_args.Problem(
                    f"{f}.extraArgs",
                    f"{f}.extraArgs: vLLM {vllm_cli.VERSION}'s parser would refuse them, so the "
                    f"engine would not start: {problem}",
                )
                for problem in vllm_cli.problems(args)
            ]
    if found:
        raise SpecError(found[0].field, None, "; ".join(p.message for p in found))
    given = engine_args.last_value(args, engine_args.MAX_MODEL_LEN)
    given_len = engine_args.human_int(given) if given is not None else None
    return EngineOverrides(
        image=image,
        max_model_len=max_len,
        extra_args=tuple(args),
        env=tuple(env),
        extra_max_model_len=given_len if given_len and given_len > 0 else None,
        simulate=simulate,
        **_memory_settings(args),
    )


def _memory_settings(args: list[str]) -> dict[str, Any]:
    """The extraArgs the memory model reads, checked the way vLLM's parser checks them."""
    where = f"{P}.engine.extraArgs"
    out: dict[str, Any] = {}
    util = engine_args.last_value(args, "--gpu-memory-utilization")
    if util is not None:
        try:
            value = float(util)
        except ValueError:
            value = -1.0
        if not 0 < value <= 1:
            raise SpecError(
                where,
                util,
                f"{where}: --gpu-memory-utilization {util!r} is not a fraction of the GPU's "
                "memory; use a number above 0 and at most 1, e.g. 0.95",
            )
        out["gpu_memory_utilization"] = value
    dtype = engine_args.last_value(args, "--kv-cache-dtype")
    if dtype is not None:
        if dtype not in KV_CACHE_DTYPES:
            raise SpecError(
                where,
                dtype,
                f"{where}: --kv-cache-dtype {dtype!r} is not one vLLM offers on NVIDIA GPUs; "
                f"use one of {', '.join(KV_CACHE_DTYPES)}",
            )
        out["kv_cache_dtype"] = dtype
    for flag, key in (
        ("--max-num-batched-tokens", "max_num_batched_tokens"),
        ("--max-num-seqs", "max_num_seqs"),
    ):
        given = engine_args.last_value(args, flag)
        if given is None:
            continue
        number = engine_args.human_int(given)
        if number is None or number < 1:
            raise SpecError(
                where, given, f"{where}: {flag} {given!r} is not a whole number above 0"
            )
        out[key] = number
    revision = engine_args.last_value(args, "--revision")
    if revision is not None:
        if not REVISION.match(revision):
            raise SpecError(
                where,
                revision,
                f"{where}: --revision {revision!r} is not a branch, tag or commit of the model "
                "repository",
            )
        out["revision"] = revision
    return out


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
                f"{f}.size: {_short(size)} is not a size; write whole Gi or Ti, e.g. 800Gi or 2Ti",
            )
        size_gib = int(m.group(1)) * (1024 if m.group(2) == "Ti" else 1)
    access_mode = storage.get("accessMode")
    if access_mode is not None and access_mode not in ACCESS_MODES:
        raise SpecError(
            f"{f}.accessMode",
            access_mode,
            f"{f}.accessMode: {_short(access_mode)} is not one of {', '.join(ACCESS_MODES)}",
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
                f"{P}.clusterRef.name: {_short(cname)} is not the name of an InferenceCluster",
            )
        if provider_config is not None:
            raise SpecError(
                f"{P}.clusterRef",
                cname,
                f"{P}.clusterRef and {P}.providerConfigName are exclusive: clusterRef already "
                "names the cluster's ProviderConfig",
            )
        cluster_ref = cname
    engine = _engine(params)
    api_key = _secret_ref(params, "apiKeySecretRef", DEFAULT_API_KEY_KEY)
    if engine.simulate and api_key is not None:
        raise SpecError(
            f"{P}.apiKeySecretRef",
            api_key.name,
            f"{P}.apiKeySecretRef: the inference simulator ({P}.engine.simulate) checks no API "
            "key, so the model would answer anyone; remove apiKeySecretRef to simulate, or "
            "run vLLM",
        )
    backend, profile, disaggregation = _backend(params, engine)
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
        hf_token_secret=_secret_ref(params, "hfTokenSecretRef", DEFAULT_HF_TOKEN_KEY),
        api_key_secret=api_key,
        engine=engine,
        storage=_storage(params),
        replicas=_replicas(params),
        autoscaling=_autoscaling(params),
        aliases=_aliases(params),
        backend=backend,
        llmd_profile=profile,
        disaggregation=disaggregation,
    )


def _whole(value: object) -> object:
    """JSON numbers arrive as floats through protobuf Structs: 2.0 is 2."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _int_in(value: object, low: int, high: int) -> int | None:
    value = _whole(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def _replicas(params: dict) -> int | None:
    value = params.get("replicas")
    if value is None:
        return None
    number = _int_in(value, 1, MAX_REPLICAS)
    if number is None:
        raise SpecError(
            f"{P}.replicas",
            value,
            f"{P}.replicas: {_short(value)} is not a replica count; use a whole number from 1 "
            f"to {MAX_REPLICAS}, or {P}.autoscaling to let KEDA decide",
        )
    if params.get("autoscaling") is not None:
        raise SpecError(
            f"{P}.replicas",
            value,
            f"{P}.replicas and {P}.autoscaling are exclusive: replicas fixes the count, "
            "autoscaling lets KEDA move it between minReplicas and maxReplicas; keep one",
        )
    return number


def _autoscaling(params: dict) -> Autoscaling | None:
    value = params.get("autoscaling")
    if value is None:
        return None
    f = f"{P}.autoscaling"
    if not isinstance(value, dict):
        raise SpecError(
            f, value, f"{f} must be an object (minReplicas, maxReplicas, metric, target)"
        )
    metrics = ", ".join(AUTOSCALING_METRICS)
    metric = value.get("metric", next(iter(AUTOSCALING_METRICS)))
    if metric not in AUTOSCALING_METRICS:
        raise SpecError(
            f"{f}.metric", metric, f"{f}.metric: {_short(metric)} is not offered; use {metrics}"
        )
    default_target, max_target = AUTOSCALING_METRICS[metric]
    min_given = value.get("minReplicas", 1)
    low = _int_in(min_given, 1, MAX_REPLICAS)
    if low is None:
        raise SpecError(
            f"{f}.minReplicas",
            min_given,
            f"{f}.minReplicas: {_short(min_given)} is not a replica count from 1 to "
            f"{MAX_REPLICAS}. Scaling to zero is not offered: the production-stack router "
            "answers a request for a model with no ready replica at once (404 or 503) instead "
            "of holding it while one starts",
        )
    max_given = value.get("maxReplicas")
    high = _int_in(max_given, 1, MAX_REPLICAS)
    if high is None:
        raise SpecError(
            f"{f}.maxReplicas",
            max_given,
            f"{f}.maxReplicas: {_short(max_given)} is not a replica count; use a whole number "
            f"from 1 to {MAX_REPLICAS}",
        )
    if low > high:
        raise SpecError(
            f"{f}.minReplicas",
            low,
            f"{f}.minReplicas ({low}) must not exceed {f}.maxReplicas ({high})",
        )
    target_given = value.get("target", default_target)
    target = _int_in(target_given, 1, max_target)
    if target is None:
        what = "waiting requests per replica" if metric == "waitingRequests" else "percent"
        raise SpecError(
            f"{f}.target",
            target_given,
            f"{f}.target: {_short(target_given)} is not a target for {metric}; use a whole "
            f"number of {what} from 1 to {max_target} (default {default_target})",
        )
    delay_given = value.get("scaleDownDelaySeconds", SCALE_DOWN_DELAY_DEFAULT)
    delay = _int_in(delay_given, 0, SCALE_DOWN_DELAY_MAX)
    if delay is None:
        raise SpecError(
            f"{f}.scaleDownDelaySeconds",
            delay_given,
            f"{f}.scaleDownDelaySeconds: {_short(delay_given)} is not a delay; use whole "
            f"seconds from 0 to {SCALE_DOWN_DELAY_MAX}",
        )
    return Autoscaling(
        min_replicas=low,
        max_replicas=high,
        metric=metric,
        target=target,
        scale_down_delay_s=delay,
    )


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
                f"{f}[{i}]: {_short(alias)} is not a model name; use letters, digits and . _ : "
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


# Label keys and values as Kubernetes checks them (optional DNS prefix, name of at most 63).
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
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
        if not isinstance(k, str) or not _LABEL_KEY.match(k) or len(k) > 253:
            raise SpecError(
                f"{f}.matchLabels", k, f"{f}.matchLabels: {_short(k)} is not a label key"
            )
        if not isinstance(v, str) or not _LABEL_VALUE.match(v):
            raise SpecError(
                f"{f}.matchLabels.{k}",
                v,
                f"{f}.matchLabels.{k}: {_short(v)} is not a label value (at most 63 letters, "
                "digits, - _ . starting and ending with a letter or digit)",
            )
    return dict(labels)


def _backend(params: dict, engine: EngineOverrides) -> tuple[str, str, Disaggregation | None]:
    """spec.parameters.backend, llmd.profile and disaggregation, checked together."""
    backend = params.get("backend", BACKENDS[0])
    names = ", ".join(BACKENDS)
    if backend not in BACKENDS:
        raise SpecError(
            f"{P}.backend",
            backend,
            f"{P}.backend: {_short(backend)} is not a backend; use one of {names} "
            f"(default {BACKENDS[0]})",
        )
    section = params.get("llmd")
    profile = llmd_profiles.DEFAULT_PROFILE
    if section is not None:
        if not isinstance(section, dict):
            raise SpecError(f"{P}.llmd", section, f"{P}.llmd must be an object (profile)")
        if backend != "llmd":
            raise SpecError(
                f"{P}.llmd",
                section,
                f"{P}.llmd applies only with {P}.backend: llmd (the backend is {backend})",
            )
        profile = section.get("profile", profile)
        if profile not in llmd_profiles.profiles():
            raise SpecError(
                f"{P}.llmd.profile",
                profile,
                f"{P}.llmd.profile: {_short(profile)} is not a scheduling profile; use one of "
                f"{', '.join(llmd_profiles.profiles())} (default {llmd_profiles.DEFAULT_PROFILE})",
            )
    if backend == "llmd":
        _check_keep_alive(engine)
    return backend, profile, _disaggregation(params, backend, engine)


def _check_keep_alive(engine: EngineOverrides) -> None:
    """On llm-d, vLLM must keep idle connections longer than its clients do
    (function/policy/llmd_profiles.py)."""
    for i, (name, value) in enumerate(engine.env):
        if name != llmd_profiles.KEEP_ALIVE_ENV:
            continue
        idle = llmd_profiles.CLIENT_IDLE_S
        if not value.isdigit() or int(value) <= idle:
            raise SpecError(
                f"{P}.engine.env[{i}].value",
                value,
                f"{P}.engine.env[{i}].value: {name} {_short(value)} would close idle connections "
                f"before llm-d's gateway and routing sidecar do ({idle} s), which then reset "
                f"requests they send on them; use more than {idle} (the function sets "
                f"{llmd_profiles.KEEP_ALIVE_S}) or omit it",
            )


def _role(value: object, f: str) -> Role:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise SpecError(f, value, f"{f} must be an object (replicas, gpu)")
    given = value.get("replicas", 1)
    replicas = _int_in(given, 1, MAX_REPLICAS)
    if replicas is None:
        raise SpecError(
            f"{f}.replicas",
            given,
            f"{f}.replicas: {_short(given)} is not a pod count; use a whole number from 1 to "
            f"{MAX_REPLICAS}",
        )
    gpu = None
    if value.get("gpu") is not None:
        gpu = _int_in(value["gpu"], 1, MAX_GPUS)
        if gpu is None:
            raise SpecError(
                f"{f}.gpu",
                value["gpu"],
                f"{f}.gpu: {_short(value['gpu'])} is not a GPU count for one pod; use 1 to "
                f"{MAX_GPUS} (one node: disaggregated pods do not span nodes)",
            )
    return Role(replicas=replicas, gpu=gpu)


def _disaggregation(params: dict, backend: str, engine: EngineOverrides) -> Disaggregation | None:
    value = params.get("disaggregation")
    if value is None:
        return None
    f = f"{P}.disaggregation"
    if not isinstance(value, dict):
        raise SpecError(f, value, f"{f} must be an object (prefill, decode)")
    if backend != "llmd":
        raise SpecError(
            f,
            value,
            f"{f}: prefill/decode disaggregation runs on llm-d; set {P}.backend: llmd (the "
            f"backend is {backend})",
        )
    for other, why in (
        ("gpu", "each side's gpu is in disaggregation.prefill.gpu and disaggregation.decode.gpu"),
        ("replicas", "each side's count is disaggregation.prefill.replicas and .decode.replicas"),
        ("autoscaling", "disaggregated pods run at the counts given"),
    ):
        if params.get(other) is not None:
            raise SpecError(
                f"{P}.{other}",
                params[other],
                f"{P}.{other} and {f} are exclusive: {why}",
            )
    if engine.simulate:
        raise SpecError(
            f"{P}.engine.simulate",
            True,
            f"{P}.engine.simulate and {f} are exclusive: the simulator moves no KV cache; "
            "simulate the aggregated model, or run vLLM",
        )
    if engine_args.sets(engine.extra_args, "--kv-transfer-config"):
        raise SpecError(
            f"{P}.engine.extraArgs",
            "--kv-transfer-config",
            f"{P}.engine.extraArgs: --kv-transfer-config is {f}'s: the prefill and decode "
            "pods move the KV cache with vLLM's NixlConnector, which the function configures",
        )
    if engine_args.sets(engine.extra_args, "--no-disable-hybrid-kv-cache-manager"):
        raise SpecError(
            f"{P}.engine.extraArgs",
            "--no-disable-hybrid-kv-cache-manager",
            f"{P}.engine.extraArgs: --no-disable-hybrid-kv-cache-manager would stop vLLM "
            f"{vllm_cli.VERSION} from starting with {f}: its NIXL connector does not support "
            "the hybrid KV cache manager (kv_connector/factory.py); remove it",
        )
    owned_env = [k for k, _ in engine.env if k.startswith("VLLM_NIXL_")]
    if owned_env:
        raise SpecError(
            f"{P}.engine.env",
            owned_env[0],
            f"{P}.engine.env: {owned_env[0]} is {f}'s: each pod's NIXL side channel is its "
            "own address, which the function sets",
        )
    return Disaggregation(
        prefill=_role(value.get("prefill"), f"{f}.prefill"),
        decode=_role(value.get("decode"), f"{f}.decode"),
    )
