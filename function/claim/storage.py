"""``spec.parameters.storage`` -> StorageSpec: the model cache's class, size and access mode."""

from __future__ import annotations

import re
from dataclasses import dataclass

from function.claim.fields import DNS_SUBDOMAIN, P, SpecError, optional_str, short
from function.plan.storage import ACCESS_MODES


@dataclass(frozen=True)
class StorageSpec:
    class_name: str | None = None
    size_gib: int | None = None
    # ReadWriteOnce or ReadWriteMany: what the named class provides (None: the cluster says).
    access_mode: str | None = None


STORAGE_SIZE = re.compile(r"^([1-9][0-9]{0,5})(Gi|Ti)$")


def parse_storage(params: dict) -> StorageSpec:
    storage = params.get("storage")
    if storage is None:
        return StorageSpec()
    f = f"{P}.storage"
    if not isinstance(storage, dict):
        raise SpecError(f, storage, f"{f} must be an object (className, size, accessMode)")
    class_name = optional_str(storage, "className", DNS_SUBDOMAIN, "a StorageClass name", f)
    size = storage.get("size")
    size_gib = None
    if size is not None:
        m = STORAGE_SIZE.match(size) if isinstance(size, str) else None
        if not m:
            raise SpecError(
                f"{f}.size",
                size,
                f"{f}.size: {short(size)} is not a size; write whole Gi or Ti, e.g. 800Gi or 2Ti",
            )
        size_gib = int(m.group(1)) * (1024 if m.group(2) == "Ti" else 1)
    access_mode = storage.get("accessMode")
    if access_mode is not None and access_mode not in ACCESS_MODES:
        raise SpecError(
            f"{f}.accessMode",
            access_mode,
            f"{f}.accessMode: {short(access_mode)} is not one of {', '.join(ACCESS_MODES)}",
        )
    return StorageSpec(class_name=class_name, size_gib=size_gib, access_mode=access_mode)
