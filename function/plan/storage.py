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

import dataclasses
import math
from dataclasses import dataclass

from function.errors import FieldError
from function.model.catalog import GIB

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

# Hugging Face Hub download rate assumed for the Job's deadline (conservative; see docs/llminference.md, The model cache).
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
    min_gib: int | None = None,
) -> CachePlan:
    """Size the cache and time its filling and loading. StorageError when `requested_gib`
    cannot hold the weights, would shrink the existing claim, or asks more than
    CACHE_MAX_FACTOR x what the model needs; and when the cache would exceed `max_gib`, the
    platform's cap (`cap_field` says where it is set). A cache that exists keeps its size
    against both caps: `observed_gib` (a claim of its own) or `kept_gib` (one a StatefulSet or
    LeaderWorkerSet template declares, which a new size would replace, not resize).
    `min_gib`: the smallest volume the class provisions (a shared filesystem's), which the
    cache is raised to."""
    needed = needed_gib(weights_gib)
    existing = max(observed_gib or 0, kept_gib or 0)
    if requested_gib is not None:
        most = max(CACHE_MAX_FACTOR * needed, min_gib or 0)
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
    size = max(size, min_gib or 0)
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


# --- Who shares the cache: its layout ----------------------------------------------------
#
# A ReadWriteOnce volume (EBS, Persistent Disk, Azure Disk: every cloud's block storage)
# attaches to one node at a time; a second pod on another node waits in ContainerCreating
# with a Multi-Attach error. So a cache that several pods mount at once is either on one node,
# or on a ReadWriteMany class (a network filesystem the cluster publishes as
# status.storage.shared), or each pod has its own (volumeClaimTemplates).

READ_WRITE_ONCE = "ReadWriteOnce"
READ_WRITE_MANY = "ReadWriteMany"
ACCESS_MODES = (READ_WRITE_ONCE, READ_WRITE_MANY)


@dataclass(frozen=True)
class SharedClass:
    """A ReadWriteMany StorageClass the cluster provides (status.storage.shared)."""

    name: str
    read_mib_s: float | None = None
    read_mib_s_per_gib: float | None = None
    min_gib: int | None = None  # the smallest volume it provisions (Filestore: 1 TiB)


@dataclass(frozen=True)
class Layout:
    """How the pods of one model reach their weights (status.plan.cache.layout)."""

    mode: str  # "oneNode": one ReadWriteOnce claim; "shared": one ReadWriteMany; "perPod"
    access_mode: str
    class_name: str | None  # None: the cluster's default (or the block class)
    claims: int  # volumes of the cache's size it costs at most
    downloads: int  # downloads of the weights when every pod starts afresh
    reason: str
    shared: SharedClass | None = None

    def status(self, size_gib: int) -> dict[str, object]:
        return {
            "layout": self.mode,
            "accessMode": self.access_mode,
            "claims": self.claims,
            "disk": quantity(size_gib * self.claims),
            "downloads": self.downloads,
            "reason": self.reason,
        }


def one_claim_layout(
    *,
    pods: int,
    nodes: int | None,
    where: str,
    count_field: str,
    block_class: str | None,
    shared: SharedClass | None,
    asked_class: str | None,
    asked_mode: str | None,
    observed_mode: str | None,
    field: str,
) -> Layout:
    """The layout of a cache that every engine pod mounts (the production stack's one claim).

    `pods`: engine pods that may run at once (the fixed count, or the autoscaling maximum);
    `nodes`: GPU nodes the cluster may have (None: not known). StorageError when the pods may
    land on several nodes and no ReadWriteMany class is there to share, naming `count_field`.
    A claim that exists keeps its access mode (Kubernetes never changes it)."""
    spread = pods if nodes is None else min(pods, nodes)
    shared_class = asked_class or (shared.name if shared else None)
    if observed_mode == READ_WRITE_ONCE and asked_mode == READ_WRITE_MANY:
        raise StorageError(
            f"{field}.accessMode",
            READ_WRITE_MANY,
            f"{field}.accessMode: this model's cache claim exists as ReadWriteOnce, an access "
            "mode Kubernetes never changes: remove accessMode, or delete this LLMInference and "
            "create it again with it (its cache is then made ReadWriteMany and filled again)",
        )
    if observed_mode == READ_WRITE_MANY or asked_mode == READ_WRITE_MANY:
        if shared_class is None:
            raise StorageError(
                f"{field}.accessMode",
                READ_WRITE_MANY,
                f"{field}.accessMode: ReadWriteMany needs a class that provides it, and {where} "
                f"publishes none (status.storage.shared): name one in {field}.className",
            )
        return Layout(
            "shared",
            READ_WRITE_MANY,
            shared_class,
            1,
            1,
            f"one ReadWriteMany claim ({shared_class}) that every engine pod mounts, on any "
            "node; downloaded once",
            shared if shared and shared.name == shared_class else None,
        )
    own = asked_class or block_class
    if spread <= 1:
        return Layout(
            "oneNode",
            READ_WRITE_ONCE,
            own,
            1,
            1,
            "one engine pod at a time, so one ReadWriteOnce claim"
            if pods <= 1
            else f"{where} has one GPU node, where all {pods} engine pods run: one "
            "ReadWriteOnce claim",
        )
    block = (
        f"{pods} engine pods may run on up to {spread} nodes of {where}, and a ReadWriteOnce "
        "model cache attaches to one node at a time (a pod on another node would wait in "
        "ContainerCreating with a Multi-Attach error)"
    )
    if observed_mode == READ_WRITE_ONCE:
        raise StorageError(
            count_field,
            pods,
            f"{count_field}: {block}, and this model's cache claim exists as ReadWriteOnce, an "
            f"access mode Kubernetes never changes: keep {count_field} at 1, or delete this "
            "LLMInference and create it again with this count (its cache is then made "
            "ReadWriteMany and filled again)",
        )
    if asked_mode == READ_WRITE_ONCE or asked_class not in (None, shared.name if shared else None):
        what = f"{field}.accessMode: ReadWriteOnce" if asked_mode else f"{field}.className"
        instead = (
            f"omit {field}.className to use {where}'s shared class {shared.name}"
            if shared
            else f"set {field}.accessMode: ReadWriteMany if {asked_class} provides it"
        )
        raise StorageError(
            count_field,
            pods,
            f"{count_field}: {block}, and {what} asks for a ReadWriteOnce cache: {instead}, "
            f"or use {count_field}: 1",
        )
    if shared is None:
        raise StorageError(
            count_field,
            pods,
            f"{count_field}: {block}. {where} publishes no shared (ReadWriteMany) class: use "
            f"{count_field}: 1, a cluster that has one (InferenceCluster status.storage.shared; "
            "spec.parameters.storage.sharedClassName on an existing or local cluster), or name "
            f"a ReadWriteMany class in {field}.className with {field}.accessMode: ReadWriteMany",
        )
    return Layout(
        "shared",
        READ_WRITE_MANY,
        shared.name,
        1,
        1,
        f"{pods} engine pods may run on up to {spread} nodes: one ReadWriteMany claim "
        f"({shared.name}) they all mount; downloaded once",
        shared,
    )


def per_pod_layout(pods: int, class_name: str | None) -> Layout:
    """Each pod has a cache of its own (a StatefulSet's or LeaderWorkerSet's
    volumeClaimTemplates): never shared, at the cost of one volume and one download each."""
    return Layout(
        "perPod",
        READ_WRITE_ONCE,
        class_name,
        pods,
        pods,
        f"each of the {pods} pod{'s' if pods != 1 else ''} has a ReadWriteOnce cache of its "
        "own and downloads the weights into it",
    )


def many_pods_layout(
    *,
    pods: int,
    shared: SharedClass | None,
    block_class: str | None,
    asked_class: str | None,
    asked_mode: str | None,
    field: str,
    where: str,
) -> Layout:
    """The layout of pods that could each have a cache of their own (a multi-node replica's,
    llm-d's): one ReadWriteMany claim, downloaded once and kept when the pods are recreated,
    where the cluster (or `storage.accessMode`) offers one and more than one pod reads it;
    else a cache per pod."""
    if asked_mode == READ_WRITE_MANY:
        name = asked_class or (shared.name if shared else None)
        if name is None:
            raise StorageError(
                f"{field}.accessMode",
                READ_WRITE_MANY,
                f"{field}.accessMode: ReadWriteMany needs a class that provides it, and {where} "
                f"publishes none (status.storage.shared): name one in {field}.className",
            )
        return _shared(pods, name, shared if shared and shared.name == name else None)
    usable = shared is not None and asked_mode is None and asked_class in (None, shared.name)
    if usable and pods > 1:
        assert shared is not None
        return _shared(pods, shared.name, shared)
    layout = per_pod_layout(pods, asked_class or block_class)
    if shared is None and pods > 1:
        why = f"{layout.reason}: {where} publishes no shared (ReadWriteMany) class"
        layout = dataclasses.replace(layout, reason=why)
    return layout


def _shared(pods: int, name: str, shared: SharedClass | None) -> Layout:
    return Layout(
        "shared",
        READ_WRITE_MANY,
        name,
        1,
        1,
        f"{pods} pods on any nodes read one ReadWriteMany claim ({name}), downloaded once by a "
        "Job before they start and kept when they are recreated",
        shared,
    )
