"""How a model is served, as the spec says it: fixed replicas or autoscaling, the backend
(and llm-d's scheduling profile), prefill/decode disaggregation."""

from __future__ import annotations

from dataclasses import dataclass

from function.claim.engine import EngineOverrides
from function.claim.fields import P, SpecError, int_in, short
from function.limits import (
    AUTOSCALING_METRICS,
    BACKENDS,
    LATENCY_DEFAULT_PERCENTILE,
    LATENCY_MAX_S,
    LATENCY_METRICS,
    LATENCY_MIN_S,
    LATENCY_PERCENTILES,
    MAX_GPUS,
    MAX_REPLICAS,
    SCALE_DOWN_DELAY_DEFAULT,
    SCALE_DOWN_DELAY_MAX,
)
from function.policy import engine_args, llmd_profiles, vllm_cli


@dataclass(frozen=True)
class Autoscaling:
    """spec.parameters.autoscaling: KEDA keeps the replicas between min and max, aiming at
    `target` of `metric` (waiting requests per replica, or KV-cache usage in percent)."""

    min_replicas: int
    max_replicas: int
    metric: str
    target: int
    scale_down_delay_s: int
    latency: Latency | None = None


@dataclass(frozen=True)
class Latency:
    """spec.parameters.autoscaling.latency: keep `percentile` of `metric` under `seconds`
    (only with the cluster's Prometheus)."""

    metric: str
    percentile: int
    seconds: float


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


def parse_replicas(params: dict) -> int | None:
    value = params.get("replicas")
    if value is None:
        return None
    number = int_in(value, 1, MAX_REPLICAS)
    if number is None:
        raise SpecError(
            f"{P}.replicas",
            value,
            f"{P}.replicas: {short(value)} is not a replica count; use a whole number from 1 "
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


def parse_autoscaling(params: dict) -> Autoscaling | None:
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
            f"{f}.metric", metric, f"{f}.metric: {short(metric)} is not offered; use {metrics}"
        )
    default_target, max_target = AUTOSCALING_METRICS[metric]
    min_given = value.get("minReplicas", 1)
    low = int_in(min_given, 1, MAX_REPLICAS)
    if low is None:
        raise SpecError(
            f"{f}.minReplicas",
            min_given,
            f"{f}.minReplicas: {short(min_given)} is not a replica count from 1 to "
            f"{MAX_REPLICAS}. Scaling to zero is not offered: the production-stack router "
            "answers a request for a model with no ready replica at once (404 or 503) instead "
            "of holding it while one starts",
        )
    max_given = value.get("maxReplicas")
    high = int_in(max_given, 1, MAX_REPLICAS)
    if high is None:
        raise SpecError(
            f"{f}.maxReplicas",
            max_given,
            f"{f}.maxReplicas: {short(max_given)} is not a replica count; use a whole number "
            f"from 1 to {MAX_REPLICAS}",
        )
    if low > high:
        raise SpecError(
            f"{f}.minReplicas",
            low,
            f"{f}.minReplicas ({low}) must not exceed {f}.maxReplicas ({high})",
        )
    target_given = value.get("target", default_target)
    target = int_in(target_given, 1, max_target)
    if target is None:
        what = "waiting requests per replica" if metric == "waitingRequests" else "percent"
        raise SpecError(
            f"{f}.target",
            target_given,
            f"{f}.target: {short(target_given)} is not a target for {metric}; use a whole "
            f"number of {what} from 1 to {max_target} (default {default_target})",
        )
    delay_given = value.get("scaleDownDelaySeconds", SCALE_DOWN_DELAY_DEFAULT)
    delay = int_in(delay_given, 0, SCALE_DOWN_DELAY_MAX)
    if delay is None:
        raise SpecError(
            f"{f}.scaleDownDelaySeconds",
            delay_given,
            f"{f}.scaleDownDelaySeconds: {short(delay_given)} is not a delay; use whole "
            f"seconds from 0 to {SCALE_DOWN_DELAY_MAX}",
        )
    return Autoscaling(
        min_replicas=low,
        max_replicas=high,
        metric=metric,
        target=target,
        scale_down_delay_s=delay,
        latency=parse_latency(value.get("latency"), f"{f}.latency"),
    )


def parse_latency(value: object, f: str) -> Latency | None:
    """autoscaling.latency, checked: only names and numbers the function knows, since the
    target becomes part of a PromQL query (function/monitoring/queries.py)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise SpecError(f, value, f"{f} must be an object (metric, percentile, seconds)")
    metric = value.get("metric")
    if metric not in LATENCY_METRICS:
        raise SpecError(
            f"{f}.metric",
            metric,
            f"{f}.metric: {short(metric)} is not offered; use {', '.join(LATENCY_METRICS)}",
        )
    given = value.get("percentile", LATENCY_DEFAULT_PERCENTILE)
    percentile = int_in(given, 1, 99)
    if percentile not in LATENCY_PERCENTILES:
        raise SpecError(
            f"{f}.percentile",
            given,
            f"{f}.percentile: {short(given)} is not offered; use one of "
            f"{', '.join(str(p) for p in LATENCY_PERCENTILES)} (default "
            f"{LATENCY_DEFAULT_PERCENTILE})",
        )
    seconds = value.get("seconds")
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not LATENCY_MIN_S <= seconds <= LATENCY_MAX_S
    ):
        raise SpecError(
            f"{f}.seconds",
            seconds,
            f"{f}.seconds: {short(seconds)} is not a latency target; use a number of seconds "
            f"from {LATENCY_MIN_S:g} to {LATENCY_MAX_S:g} (e.g. 0.5 for half a second)",
        )
    return Latency(metric=metric, percentile=percentile, seconds=float(seconds))


def parse_backend(params: dict, engine: EngineOverrides) -> tuple[str, str, Disaggregation | None]:
    """spec.parameters.backend, llmd.profile and disaggregation, checked together."""
    backend = params.get("backend", BACKENDS[0])
    names = ", ".join(BACKENDS)
    if backend not in BACKENDS:
        raise SpecError(
            f"{P}.backend",
            backend,
            f"{P}.backend: {short(backend)} is not a backend; use one of {names} "
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
                f"{P}.llmd.profile: {short(profile)} is not a scheduling profile; use one of "
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
                f"{P}.engine.env[{i}].value: {name} {short(value)} would close idle connections "
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
    replicas = int_in(given, 1, MAX_REPLICAS)
    if replicas is None:
        raise SpecError(
            f"{f}.replicas",
            given,
            f"{f}.replicas: {short(given)} is not a pod count; use a whole number from 1 to "
            f"{MAX_REPLICAS}",
        )
    gpu = None
    if value.get("gpu") is not None:
        gpu = int_in(value["gpu"], 1, MAX_GPUS)
        if gpu is None:
            raise SpecError(
                f"{f}.gpu",
                value["gpu"],
                f"{f}.gpu: {short(value['gpu'])} is not a GPU count for one pod; use 1 to "
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
