"""How much KV cache LMCache keeps in the engine pod's RAM: a pure function of the GPU node's
allocatable memory, the pod's memory without it, and the model's KV bytes per token.

LMCache 0.4.2 allocates its CPU buffer as pinned host memory inside each vLLM worker process
(lmcache/v1/cache_engine.py: `MixedMemoryAllocator(int(max_local_cpu_size * 1024**3))`, one
per worker, i.e. per tensor-parallel rank), so the pod's memory request and limit grow by
buffer x GPUs, or the pod is OOM-killed when the buffer fills.

- node share: allocatable x GPUs / GPUs per node (other engine pods share the node);
- sized buffer per GPU: 80% of (share - pod memory - model-cache Job), whole GiB (the rest
  for LMCache's own allocations and the OS);
- cpuSize: refused when pod memory + buffer x GPUs > the node's allocatable (a request above
  it never schedules);
- no node memory published: cpuSize required (nothing to size from).
"""

from __future__ import annotations

from dataclasses import dataclass

from function.model.catalog import GIB
from function.plan.storage import FETCH_MEMORY_MIB

# What the buffer may take of the memory left beside the engine: a margin of our choosing, not
# a measured figure. The rest covers what the pod uses outside vLLM's own request (LMCache's
# Python objects and staging, the tokenizer, page cache); the buffer itself is exact (pinned
# `max_local_cpu_size` GiB per worker).
FREE_FRACTION = 0.8


class OffloadError(ValueError):
    """The node cannot hold the buffer; `message` says what would fit."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Offload:
    cpu_gib_per_gpu: int
    gpus: int
    pod_memory_mib: int  # the engine pod's memory request and limit, buffer included
    sized: bool  # True: from the node's memory; False: cpuSize

    @property
    def cpu_gib(self) -> int:
        """The whole pod's buffer (every worker's)."""
        return self.cpu_gib_per_gpu * self.gpus


def memory_mib(quantity: str) -> int:
    """`8Gi` or `7936Mi` (what function/model/sizing.py writes) in MiB."""
    for suffix, factor in (("Gi", 1024), ("Mi", 1)):
        if quantity.endswith(suffix) and quantity[: -len(suffix)].isdigit():
            return int(quantity[: -len(suffix)]) * factor
    raise ValueError(f"not a memory quantity in Gi or Mi: {quantity!r}")


def size_offload(
    *,
    explicit_gib: int | None,
    node_mib: int | None,
    per_node: int,
    gpus: int,
    pod_memory_mib: int,
) -> Offload:
    """The CPU buffer per GPU and the pod's memory with it; OffloadError when it cannot fit."""
    if explicit_gib is not None:
        total = pod_memory_mib + explicit_gib * gpus * 1024
        if node_mib is not None and total > node_mib:
            most = (node_mib - pod_memory_mib) // 1024 // gpus
            raise OffloadError(
                f"{explicit_gib}Gi per GPU x {gpus} GPU(s) plus the engine's "
                f"{pod_memory_mib} MiB is {total} MiB, more than the GPU node's {node_mib} MiB "
                "allocatable: "
                + (f"at most {most}Gi fits" if most >= 1 else "no buffer fits beside the engine")
            )
        return Offload(explicit_gib, gpus, total, sized=False)
    if node_mib is None:
        raise OffloadError(
            "the cluster publishes no GPU node memory (InferenceCluster "
            "status.gpu.allocatable.memoryMiB) to size the buffer from: set cpuSize"
        )
    share = node_mib * min(gpus, per_node) // max(per_node, 1)
    free = share - pod_memory_mib - FETCH_MEMORY_MIB
    per_gpu = int(free * FREE_FRACTION) // 1024 // gpus if free > 0 else 0
    if per_gpu < 1:
        raise OffloadError(
            f"this engine's share of the GPU node's memory ({share} MiB of {node_mib} MiB "
            f"allocatable for {gpus} of {per_node} GPUs) leaves no room beside its "
            f"{pod_memory_mib} MiB: a GPU node with more memory, or cpuSize up to "
            f"{max((node_mib - pod_memory_mib) // 1024 // gpus, 0)}Gi (the whole node's)"
        )
    return Offload(per_gpu, gpus, pod_memory_mib + per_gpu * gpus * 1024, sized=True)


def tokens(gib_per_gpu: float, bytes_per_token_per_gpu: int) -> int:
    """Tokens of KV cache `gib_per_gpu` GiB hold, at the bytes one token takes on one GPU."""
    if bytes_per_token_per_gpu <= 0:
        return 0
    return int(gib_per_gpu * GIB // bytes_per_token_per_gpu)
