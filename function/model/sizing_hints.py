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
# A model larger than one node, on a cluster whose replicas may not span nodes: what would let
# them (said after the GPU size that would hold it on one node).
LWS = "{lws}"
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
    LWS: (
        "; or let one replica span nodes: an InferenceCluster with apps.lws (and gpu.maxNodes "
        "above 1)",
        "; llm-d serves a replica from one pod: to span nodes, use the productionStack backend "
        "on an InferenceCluster with apps.lws",
    ),
}


def fill(text: str, one_pod: bool = False) -> str:
    """`text` with the placeholders worded for a backend whose replicas are one pod each
    (`one_pod`: llm-d) or may span nodes."""
    for token, (spans, pod) in HINTS.items():
        text = text.replace(token, pod if one_pod else spans)
    return text


def span_hint(facts: ModelFacts, text: str, max_nodes: int) -> str:
    """The LWS placeholder when a generative model does not fit one node of a cluster whose
    replicas may not span nodes, and `text` does not already say more than one node."""
    if max_nodes < 2 and facts.task == "generate" and MULTINODE not in text:
        return LWS
    return ""


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
