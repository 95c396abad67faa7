"""The limits the APIs, the cluster program and the function share, loaded from
``limits.yaml`` (their one home; kcl/ reads the same file when it generates the XRDs)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from function import datafile

LIMITS_PATH = Path(__file__).with_name("limits.yaml")


@dataclass(frozen=True)
class GpuType:
    type: str
    memory_gib: float
    name: str
    compute_capability: tuple[int, int] = (0, 0)  # CUDA's (major, minor)


@dataclass(frozen=True)
class GpuShape:
    """The GPUs a model runs on: memory of one, how many a node has, and whether that is what
    a cluster published or an assumption (no cluster referenced)."""

    memory_gib: float
    per_node: int
    type: str | None
    assumed: bool


def _load(path: Path = LIMITS_PATH) -> dict:
    return datafile.load(path)


_DATA = _load()

HF_MODEL_ID = re.compile(_DATA["huggingFaceModelId"]["pattern"])
HF_MODEL_ID_MAX_PART = int(_DATA["huggingFaceModelId"]["maxPartLength"])
TENSOR_PARALLEL_CANDIDATES: tuple[int, ...] = tuple(_DATA["gpusPerReplica"]["candidates"])
MAX_GPUS: int = int(_DATA["gpusPerReplica"]["max"])
MAX_NODES_PER_REPLICA: int = int(_DATA["gpusPerReplica"]["maxNodes"])
# GPUs one replica may have over several nodes.
MAX_GPUS_MULTI_NODE: int = MAX_GPUS * MAX_NODES_PER_REPLICA
GPU_TYPES: dict[str, GpuType] = {
    t: GpuType(
        type=t,
        memory_gib=float(g["memoryGiB"]),
        name=str(g["name"]),
        compute_capability=tuple(int(p) for p in str(g["computeCapability"]).split(".")),  # type: ignore[arg-type]
    )
    for t, g in _DATA["gpus"].items()
}

# No cluster referenced: plan for an 80 GB-class GPU (an H100, as CUDA reports it) on an
# 8-GPU node, the commonest large shape.
ASSUMED_GPU = GpuShape(
    memory_gib=GPU_TYPES["h100"].memory_gib, per_node=MAX_GPUS, type=None, assumed=True
)

MAX_REPLICAS: int = int(_DATA["replicas"]["max"])
MAX_PLACEMENTS: int = int(_DATA["fleet"]["maxPlacements"])
MAX_SPILLOVER: int = int(_DATA["fleet"]["maxSpillover"])
ALIAS = re.compile(_DATA["servedModelAliases"]["pattern"])
ALIAS_MAX_LENGTH: int = int(_DATA["servedModelAliases"]["maxLength"])
ALIAS_MAX_ITEMS: int = int(_DATA["servedModelAliases"]["maxItems"])
# spec.parameters.adapters: how many, the LoRA ranks vLLM accepts, the URL form of a source.
ADAPTER_MAX_ITEMS: int = int(_DATA["adapters"]["maxItems"])
LORA_RANKS: tuple[int, ...] = tuple(int(r) for r in _DATA["adapters"]["ranks"])
# The Hub's own URL of a repository, built from the id's pattern (its one home).
HUB_URL_PREFIX = "https://huggingface.co/"
ADAPTER_URL = re.compile(
    "^" + re.escape(HUB_URL_PREFIX) + _DATA["huggingFaceModelId"]["pattern"][1:-1] + "/?$"
)
ADAPTER_SOURCE_MAX_LENGTH: int = int(_DATA["adapters"]["sourceMaxLength"])
# Autoscaling metric -> (default target, largest target), in the order the API lists them.
AUTOSCALING_METRICS: dict[str, tuple[int, int]] = {
    m: (int(v["defaultTarget"]), int(v["max"])) for m, v in _DATA["autoscaling"]["metrics"].items()
}
_LATENCY = _DATA["autoscaling"]["latency"]
LATENCY_METRICS: tuple[str, ...] = tuple(_LATENCY["metrics"])
LATENCY_PERCENTILES: tuple[int, ...] = tuple(int(p) for p in _LATENCY["percentiles"])
LATENCY_DEFAULT_PERCENTILE: int = int(_LATENCY["defaultPercentile"])
LATENCY_MIN_S: float = float(_LATENCY["minSeconds"])
LATENCY_MAX_S: float = float(_LATENCY["maxSeconds"])
SCALE_DOWN_DELAY_DEFAULT: int = int(_DATA["autoscaling"]["scaleDownDelaySeconds"]["default"])
SCALE_DOWN_DELAY_MAX: int = int(_DATA["autoscaling"]["scaleDownDelaySeconds"]["max"])

# Prefixes of the variables no claim's engine.env sets (the KV connectors' libraries').
RESERVED_ENV_PREFIXES: tuple[str, ...] = tuple(_DATA["engine"]["reservedEnvPrefixes"])
# How many extraArgs and env entries a claim's engine takes.
MAX_EXTRA_ARGS: int = int(_DATA["engine"]["maxExtraArgs"])
MAX_ENV: int = int(_DATA["engine"]["maxEnv"])
MAX_PULL_SECRETS: int = int(_DATA["engine"]["maxPullSecrets"])
# spec.parameters.backend, the default first.
BACKENDS: tuple[str, ...] = tuple(_DATA["backends"]["names"])

# An OCI image reference with a registry, a repository and a tag or digest.
IMAGE_REFERENCE = re.compile(_DATA["imageReference"]["pattern"])
# spec.parameters.source: the forms of its uri (s3://, pvc://; oci:// is IMAGE_REFERENCE after
# the scheme), its endpoint and region, and their lengths.
_SOURCE = _DATA["modelSource"]
SOURCE_S3 = re.compile(_SOURCE["s3Pattern"])
SOURCE_PVC = re.compile(_SOURCE["pvcPattern"])
SOURCE_MAX_LENGTH: int = int(_SOURCE["maxLength"])
SOURCE_ENDPOINT = re.compile(_SOURCE["endpointPattern"])
SOURCE_ENDPOINT_MAX_LENGTH: int = int(_SOURCE["endpointMaxLength"])
SOURCE_REGION = re.compile(_SOURCE["regionPattern"])
SOURCE_REGION_MAX_LENGTH: int = int(_SOURCE["regionMaxLength"])
