"""The words of a sizing refusal: where a replica may span nodes (placeholders that
``SizingError.render`` fills for the backend), what the GPUs offer, and the GPU size that
would hold the model."""

from __future__ import annotations

import math

from function.limits import GPU_TYPES, GpuShape
from function.model import vllm_memory
from function.model.catalog import ModelFacts
from function.model.vllm_memory import EngineSettings

# Where a replica may span nodes, as refusals say it: placeholders in a SizingError's problem,
# which `render` fills for the backend (an llm-d pod never spans nodes).
SPAN = "{span}"
MULTINODE = "{multinode}"
HINTS = {
    SPAN: (
        " (an InferenceCluster with apps.lws spans nodes)",
        " (llm-d serves a replica from one pod)",
    ),
    MULTINODE: (
        ", an InferenceCluster with apps.lws",
        "; llm-d serves a replica from one pod: use the productionStack backend on an "
        "InferenceCluster with apps.lws",
    ),
}

# GPU sizes named in hints when nothing fits, smallest first (function/limits.yaml).
KNOWN_GPU_SIZES: tuple[tuple[float, str], ...] = tuple(
    sorted((g.memory_gib, g.name) for g in GPU_TYPES.values())
)


def offer(gpu: GpuShape, gpus: int, engine: EngineSettings) -> str:
    verb = "offers" if gpus == 1 else "offer"
    util = engine.gpu_memory_utilization
    return (
        f"{gpus} x {gpu.memory_gib:g} GiB {_gpus_word(gpus)} at {util:g} "
        f"utilisation {verb} {gpus * gpu.memory_gib * util:.0f} GiB"
    )


def _gpus_word(gpus: int) -> str:
    return "GPU" if gpus == 1 else "GPUs"


def bigger_gpu_hint(facts: ModelFacts, gpus: int, engine: EngineSettings) -> str:
    known = None
    for size, label in KNOWN_GPU_SIZES:
        shape = GpuShape(memory_gib=size, per_node=gpus, type=None, assumed=True)
        if vllm_memory.fits(facts, gpus, shape, engine):
            known = label
            break
    example = (
        f" (e.g. {known})"
        if known
        else f" (larger than an H200: the model needs more than one node{MULTINODE})"
    )
    need, _ = vllm_memory.required_gib(
        facts, gpus, GpuShape(memory_gib=1e6, per_node=gpus, type=None, assumed=True), engine
    )
    per_gpu = need / engine.gpu_memory_utilization
    return (
        f"{gpus} {_gpus_word(gpus)} with at least {math.ceil(per_gpu)} GiB each would do{example}"
    )
