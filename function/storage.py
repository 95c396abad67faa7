# ruff: noqa: E501 - the rules table in the docstring is markdown, whose rows cannot wrap.
"""The model cache: how big it is and how long filling and loading it may take. Pure functions.

Every LLMInference keeps its weights on a PersistentVolumeClaim (ReadWriteOnce, the access
mode every cloud's block storage binds), filled by a download Job before the engine starts,
so a restart reads the weights from the volume instead of the Hub, and the engine's startup
probe (fixed by the production-stack controller) only has to cover loading.

| value | rule | source |
|---|---|---|
| cache size | weights on disk x 1.10 + 10 GiB, rounded up to 10 GiB, at least 20 GiB; never less than the claim already has (a PVC cannot shrink); `spec.parameters.storage.size` when given (must hold the weights) | margin: tokenizer, configs and vLLM's compile cache (`VLLM_CACHE_ROOT`) share the volume |
| cache size, model of unknown size | 100 GiB, or `storage.size` | a warning says so |
| download deadline | weights / `DOWNLOAD_MIB_S` x 2 + 30 min (the Job's `activeDeadlineSeconds`) | stated rate below |
| engine start | weights / load rate + `ENGINE_INIT_S` | load rate: the storage class's stated read throughput (InferenceCluster `status.storage`: `readMiBps`, or `readMiBpsPerGiB` x the cache size up to it), else `DEFAULT_LOAD_MIB_S` |
| startup budget | 120 s + 100 x 20 s = 2120 s: the controller's fixed startup probe | operator/internal/controller/vllmruntime_controller.go at the pinned commit |
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from function.catalog import GIB
from function.errors import FieldError

MIB = 1024**2

CACHE_MARGIN = 0.10
CACHE_EXTRA_GIB = 10
CACHE_STEP_GIB = 10
CACHE_MIN_GIB = 20
CACHE_UNKNOWN_MODEL_GIB = 100
# The largest size storage.size accepts (the XRD pattern: six digits of Gi).
CACHE_MAX_GIB = 999_999
# A claim may ask for at most this many times the cache its model needs (for a model of
# unknown size, the CACHE_UNKNOWN_MODEL_GIB it is planned with): room to grow (a newer
# revision, a bigger compile cache), not a disk quota of the platform's to spend (a policy
# choice, the factor issue 23 proposes, not a measurement). A cache that
# already exists keeps its size. The platform team sets an absolute cap per cluster
# (InferenceCluster spec.parameters.tenancy.maxModelCacheSize).
CACHE_MAX_FACTOR = 4

# Hugging Face Hub download rate assumed for the Job's deadline (conservative; see README).
DOWNLOAD_MIB_S = 50.0
DOWNLOAD_SAFETY = 2.0
DOWNLOAD_FIXED_S = 1800
# Read rate assumed when the storage class states none (a gp3 volume's baseline, 125 MiB/s).
DEFAULT_LOAD_MIB_S = 125.0
# Engine work after the weights are read: CUDA graph capture, torch.compile, KV cache
# allocation. Stated, deliberately generous.
ENGINE_INIT_S = 600
# The controller's startup probe: initialDelaySeconds 120 + failureThreshold 100 x
# periodSeconds 20 (deploymentForVLLMRuntime at the pinned commit).
OPERATOR_STARTUP_BUDGET_S = 120 + 100 * 20


# What the download Job requests: the engine on the same node leaves room for it.
FETCH_CPU_MILLICORES = 500
FETCH_MEMORY_MIB = 1024
FETCH_MEMORY_LIMIT_MIB = 4096


class StorageError(FieldError):
    """A cache request that cannot work: names the field, the value and what would."""


@dataclass(frozen=True)
class CachePlan:
    size_gib: int
    needed_gib: int
    weights_gib: float | None  # None: the model's size is not known
    download_deadline_s: int
    load_rate_mib_s: float
    start_s: int  # weights read + engine init
    startup_budget_s: int = OPERATOR_STARTUP_BUDGET_S

    @property
    def fits_startup_budget(self) -> bool:
        return self.start_s <= self.startup_budget_s


def quantity(gib: int) -> str:
    """`gib` GiB as the API server writes it (canonical: 1024Gi is 1Ti). The controller
    compares sizes as strings against that form."""
    return f"{gib // 1024}Ti" if gib % 1024 == 0 else f"{gib}Gi"


def needed_gib(weights_gib: float | None) -> int:
    if weights_gib is None:
        return CACHE_UNKNOWN_MODEL_GIB
    raw = weights_gib * (1 + CACHE_MARGIN) + CACHE_EXTRA_GIB
    return max(CACHE_MIN_GIB, math.ceil(raw / CACHE_STEP_GIB) * CACHE_STEP_GIB)


def plan_cache(
    *,
    weights_gib: float | None,
    requested_gib: int | None,
    observed_gib: int | None,
    load_rate_mib_s: float | None,
    field: str,
    load_rate_mib_s_per_gib: float | None = None,
    max_gib: int | None = None,
    cap_field: str = "",
    kept_gib: int | None = None,
) -> CachePlan:
    """Size the cache and time its filling and loading. StorageError when `requested_gib`
    cannot hold the weights, would shrink the existing claim, or asks more than
    CACHE_MAX_FACTOR x what the model needs; and when the cache would exceed `max_gib`, the
    platform's cap (`cap_field` says where it is set). A cache that exists keeps its size
    against both caps: `observed_gib` (a claim of its own) or `kept_gib` (one a StatefulSet or
    LeaderWorkerSet template declares, which a new size would replace, not resize)."""
    needed = needed_gib(weights_gib)
    existing = max(observed_gib or 0, kept_gib or 0)
    if requested_gib is not None:
        most = CACHE_MAX_FACTOR * needed
        if requested_gib > most and requested_gib > existing:
            what = (
                f"the {quantity(needed)} cache the model's {_gib(weights_gib)} of weights need"
                if weights_gib is not None
                else f"the {quantity(needed)} cache a model of unknown size is planned with"
            )
            raise StorageError(
                field,
                quantity(requested_gib),
                f"{field}: {quantity(requested_gib)} is more than {CACHE_MAX_FACTOR} times "
                f"{what}; use at most {quantity(most)} (or omit it)",
            )
    if requested_gib is not None:
        if weights_gib is not None and requested_gib < math.ceil(weights_gib):
            raise StorageError(
                field,
                quantity(requested_gib),
                f"{field}: {quantity(requested_gib)} cannot hold the {weights_gib:.0f} GiB of "
                f"weights; use at least {quantity(needed)} (or omit it)",
            )
        if observed_gib is not None and requested_gib < observed_gib:
            raise StorageError(
                field,
                quantity(requested_gib),
                f"{field}: the model cache already has {quantity(observed_gib)} and a "
                f"PersistentVolumeClaim cannot shrink; use at least {quantity(observed_gib)}",
            )
        size = requested_gib
    else:
        size = max(needed, observed_gib or 0)
    if max_gib is not None and size > max_gib and size > existing:
        cap = f"the {quantity(max_gib)} the platform team allows one model's cache ({cap_field})"
        if needed > max_gib and weights_gib is not None:
            message = (
                f"{field}: the model's cache needs {quantity(needed)}, above {cap}; this model "
                "needs a cluster that allows more"
            )
        else:
            message = f"{field}: {quantity(size)} is above {cap}; use at most {quantity(max_gib)}"
        raise StorageError(field, quantity(size), message)
    weights_mib = (weights_gib or needed) * GIB / MIB
    rate = load_rate_mib_s if load_rate_mib_s and load_rate_mib_s > 0 else DEFAULT_LOAD_MIB_S
    if load_rate_mib_s_per_gib and load_rate_mib_s_per_gib > 0:
        # Storage whose throughput grows with the volume's size (GCP PD, Azure Premium SSD).
        rate = min(rate, round(load_rate_mib_s_per_gib * size, 1))
    return CachePlan(
        size_gib=size,
        needed_gib=needed,
        weights_gib=weights_gib,
        download_deadline_s=math.ceil(weights_mib / DOWNLOAD_MIB_S * DOWNLOAD_SAFETY)
        + DOWNLOAD_FIXED_S,
        load_rate_mib_s=rate,
        start_s=math.ceil(weights_mib / rate) + ENGINE_INIT_S,
    )


def _gib(value: float) -> str:
    return f"{value:.1f} GiB" if value < 10 else f"{value:.0f} GiB"


def parse_gib(text: object) -> int | None:
    """A claim size as the API server writes it (`600Gi`, `1Ti`) in GiB, or None for
    anything else (then the cache is sized afresh)."""
    if not isinstance(text, str):
        return None
    for suffix, factor in (("Ti", 1024), ("Gi", 1)):
        number = text.removesuffix(suffix)
        if number != text and number.isdigit() and int(number) > 0:
            return int(number) * factor
    return None
