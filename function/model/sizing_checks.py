"""What sizing refuses, and the checks of its inputs: ``SizingError`` (the field to blame, the
value and what would work, worded for the backend), and the shapes of a GPU and of a model's
facts that can be sized at all."""

from __future__ import annotations

import math

from function.errors import FieldError
from function.limits import GpuShape
from function.model.catalog import ModelFacts
from function.model.sizing_hints import fill

GPU_FIELD = "spec.parameters.gpu"
EXPERT_FIELD = "spec.parameters.parallelism.expert"
MODEL_FIELD = "spec.parameters.model"
GPU_MEMORY_FIELD = "gpu.memory_gib"
GPU_PER_NODE_FIELD = "gpu.per_node"

MAX_GPU_MEMORY_GIB = 4096.0
MAX_GPUS_PER_NODE = 64


class SizingError(FieldError):
    """A request that cannot be sized: the field, the value, and the `problem` with what would
    work. `names_field`: the message leads with the field (the claim's own count, not one
    the function chose); `render` says it for another field or for one-pod replicas."""

    def __init__(
        self,
        field: str,
        value: object,
        problem: str,
        *,
        names_field: bool = False,
        lead: str = ": ",
    ) -> None:
        self.template = problem
        self.names_field = names_field
        self.lead = lead
        super().__init__(field, value, self._say(field), problem=self._say(field, bare=True))

    def render(self, *, field: str | None = None, one_pod: bool = False) -> str:
        """The message, naming `field` (default: its own) where it names one, with the hints
        of a backend whose replicas are one pod each (`one_pod`) or may span nodes."""
        return self._say(field or self.field, one_pod=one_pod)

    def _say(self, field: str, one_pod: bool = False, bare: bool = False) -> str:
        text = fill(self.template, one_pod)
        return f"{field}{self.lead}{text}" if self.names_field and not bare else text


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finite_positive(value: object) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def _check_gpu(gpu: GpuShape) -> None:
    memory = getattr(gpu, "memory_gib", None)
    if not _finite_positive(memory) or memory > MAX_GPU_MEMORY_GIB:
        raise SizingError(
            GPU_MEMORY_FIELD,
            memory,
            f"GPU memory must be a number of GiB between 1 and {MAX_GPU_MEMORY_GIB:g} "
            f"per GPU, got {memory!r}",
        )
    per_node = getattr(gpu, "per_node", None)
    if not _is_count(per_node) or not 1 <= per_node <= MAX_GPUS_PER_NODE:
        raise SizingError(
            GPU_PER_NODE_FIELD,
            per_node,
            f"GPUs per node must be a whole number from 1 to {MAX_GPUS_PER_NODE}, got {per_node!r}",
        )


def _check_facts(facts: ModelFacts) -> None:
    name = getattr(facts, "id", None)
    counts = ("layers", "attention_heads", "kv_heads", "context_length")
    bad = [c for c in counts if not _is_count(getattr(facts, c, None)) or getattr(facts, c) < 1]
    bad += [
        c
        for c in ("weights_gib", "total_params_b")
        if not _finite_positive(getattr(facts, c, None))
    ]
    kv = getattr(facts, "kv_bytes_per_token", None)
    if not _is_count(kv) or kv < 0:
        bad.append("kv_bytes_per_token")
    min_vram = getattr(facts, "min_vram_gib", None)
    if min_vram is not None and not _finite_positive(min_vram):
        bad.append("min_vram_gib")
    if getattr(facts, "task", None) not in ("generate", "embed", "score"):
        bad.append("task")
    if bad:
        raise SizingError(
            MODEL_FIELD,
            name,
            f"the facts known for model {name!r} cannot be sized (invalid {', '.join(bad)})",
        )
