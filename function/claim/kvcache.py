"""spec.parameters.kvCache: LMCache KV offloading, as the spec says it.

`enabled` switches it on or off (one field); `shared` also stores it in the cluster's
CacheServer (InferenceCluster apps.vllm.cacheServer); `cpuSize` fixes the CPU buffer each GPU's vLLM
worker keeps (default: sized from what the GPU node can give, function/plan/offload.py).
Which backends and models may offload is decided later (function/backends/lmcache.py), when
the plan and the model's facts are known.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from function.claim.fields import P, SpecError, boolean, short

F = f"{P}.kvCache"
# Whole GiB per GPU; at most 1 TiB (a GPU node's RAM is a few TiB at most).
CPU_SIZE = re.compile(r"^([1-9][0-9]{0,3})Gi$")
MAX_CPU_GIB = 1024


@dataclass(frozen=True)
class KvCacheSpec:
    enabled: bool = False
    cpu_gib: int | None = None  # per GPU (one LMCache engine per vLLM worker); None: sized
    shared: bool = False  # also the cluster's CacheServer (lmCacheConfig.remoteUrl)


def parse_kv_cache(params: dict) -> KvCacheSpec:
    value = params.get("kvCache")
    if value is None:
        return KvCacheSpec()
    if not isinstance(value, dict):
        raise SpecError(F, value, f"{F} must be an object (enabled, cpuSize, shared)")
    unknown = sorted(set(value) - {"enabled", "cpuSize", "shared"})
    if unknown:
        raise SpecError(
            f"{F}.{unknown[0]}",
            value[unknown[0]],
            f"{F}.{unknown[0]} is not a field of {F}; it has enabled, cpuSize and shared",
        )
    enabled = boolean(value, "enabled", f"{F}.enabled")
    size = value.get("cpuSize")
    cpu_gib = None
    if size is not None:
        m = CPU_SIZE.match(size) if isinstance(size, str) else None
        if not m or int(m.group(1)) > MAX_CPU_GIB:
            raise SpecError(
                f"{F}.cpuSize",
                size,
                f"{F}.cpuSize: {short(size)} is not a buffer size; write whole Gi from 1Gi to "
                f"{MAX_CPU_GIB}Gi per GPU (e.g. 16Gi), or omit it to size it from the GPU "
                "node's memory",
            )
        cpu_gib = int(m.group(1))
    shared = boolean(value, "shared", f"{F}.shared")
    return KvCacheSpec(enabled=enabled, cpu_gib=cpu_gib, shared=shared)
