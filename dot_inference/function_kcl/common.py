"""What every part of the function-kcl model shares: the input's and output's API names, the
error a run ends with, and the value helpers (protobuf Structs, mergo, Go durations)."""

from __future__ import annotations

import copy
import datetime
import math
import re
from typing import Any

from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format
from google.protobuf import struct_pb2 as structpb

INPUT_API_VERSION = "krm.kcl.dev/v1alpha1"
INPUT_KIND = "KCLInput"
META_API_VERSION = "meta.krm.kcl.dev/v1alpha1"
ANNOTATION_READY = "krm.kcl.dev/ready"
ANNOTATION_COMPOSITION_RESOURCE_NAME = "krm.kcl.dev/composition-resource-name"
# Upstream writes the inline source to <tmp>/prog.k; error positions name this file.
PROGRAM_FILENAME = "prog.k"

# %T of the Go response, part of upstream's error messages.
_RSP_TYPE = "*v1.RunFunctionResponse"
_REQ_TYPE = "*v1.RunFunctionRequest"

_READY = {
    "True": fnv1.READY_TRUE,
    "False": fnv1.READY_FALSE,
    "Unspecified": fnv1.READY_UNSPECIFIED,
}
_READY_NAMES = {v: k for k, v in _READY.items()}


class KCLFunctionError(Exception):
    """An error that ends the run with a fatal result carrying this message."""


_Fatal = KCLFunctionError


class _Stop(Exception):
    """A fatal result has already been added; return the response as it is."""


# --------------------------------------------------------------------------------------------
# Helpers


def _struct(s: structpb.Struct) -> dict[str, Any]:
    return _plain(json_format.MessageToDict(s))


def _plain(value: Any) -> Any:
    """Integral floats to ints: protojson prints 2.0 as 2, so KCL sees an int upstream."""
    if isinstance(value, float):
        if value.is_integer() and math.isfinite(value) and abs(value) < 2**63:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _to_struct(obj: dict[str, Any], what: str) -> structpb.Struct:
    try:
        return resource.dict_to_struct(obj)
    except (json_format.ParseError, TypeError, ValueError) as err:
        raise _Fatal(f"cannot convert {what} to a protobuf Struct: {err}") from None


def _value(v: Any) -> structpb.Value:
    out = structpb.Value()
    try:
        json_format.ParseDict(v, out)
    except (json_format.ParseError, TypeError, ValueError) as err:
        raise _Fatal(f"cannot convert value to structpb.Value: {err}") from None
    return out


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _is_list_of_dicts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, dict) for i in v)


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == 0 or v is False or v == {} or v == []


def _mergo(dst: dict[str, Any], src: dict[str, Any]) -> None:
    """mergo.Merge(&dst, src, mergo.WithOverride) on map[string]any, as upstream uses it.

    Maps merge recursively, lists and scalars (even empty ones) replace, null replaces; a map
    does not replace a non-empty non-map value.
    """
    for key, value in src.items():
        if isinstance(value, dict):
            current = dst.get(key)
            if isinstance(current, dict):
                _mergo(current, value)
                continue
            if key in dst and not _empty(current):
                continue
            dst[key] = copy.deepcopy(value)
        else:
            dst[key] = copy.deepcopy(value)


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def _parse_duration(text: str) -> datetime.timedelta:
    """Go time.ParseDuration (metav1.Duration); negative durations clamp to 0 as upstream."""
    s = text.strip()
    sign = -1 if s.startswith("-") else 1
    body = s.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    pos, seconds = 0, 0.0
    for m in _DURATION.finditer(body):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise _Fatal(
            f'cannot get Function input from {_REQ_TYPE}: spec.ttl: time: invalid duration "{text}"'
        )
    return datetime.timedelta(seconds=max(0.0, sign * seconds))
