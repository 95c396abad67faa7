"""Objects as they look after the JSON round trip Crossplane puts them through."""

from __future__ import annotations

import math
from typing import Any

from crossplane.function import resource


def jsonable(value: Any) -> Any:
    """What a Kubernetes object looks like after a JSON round trip."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return int_if_integral(value)
    return str(value)


def int_if_integral(value: float) -> float | int:
    # encoding/json writes an integral float64 without a fraction and sigs.k8s.io/yaml
    # reads it back as an int: what Crossplane prints for `replicas: 1` from a Struct.
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def to_struct(obj: dict) -> Any:
    return resource.dict_to_struct(jsonable(obj))


def from_struct(struct: Any) -> dict:
    return jsonable(resource.struct_to_dict(struct))
