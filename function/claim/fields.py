"""What every check of an LLMInference spec shares: the path of its parameters (``P``), the
one error a spec problem raises (``SpecError``), and how a value reads in a message."""

from __future__ import annotations

import re
from dataclasses import dataclass

from function.errors import FieldError

P = "spec.parameters"

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# Label keys as Kubernetes checks them (an optional DNS prefix, a name of at most 63).
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


@dataclass(frozen=True)
class SecretRef:
    name: str
    key: str


class SpecError(FieldError):
    """A spec problem: which field, which value, and what would work."""


def short(value: object, limit: int = 80) -> str:
    """The value as the claim wrote it (65, not the 65.0 protobuf delivers), cut short."""
    text = repr(_whole(value))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _whole(value: object) -> object:
    """JSON numbers arrive as floats through protobuf Structs: 2.0 is 2."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def int_in(value: object, low: int, high: int) -> int | None:
    value = _whole(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def boolean(section: dict, key: str, field: str, default: bool = False) -> bool:
    """`section[key]` as a boolean (`default` when absent); SpecError naming `field` otherwise."""
    value = section.get(key, default)
    if not isinstance(value, bool):
        raise SpecError(field, value, f"{field}: {short(value)} is not true or false")
    return value


def secret_ref(params: dict, field: str, default_key: str, where: str = P) -> SecretRef | None:
    """`<where>.<field>`: a reference to one key of a Secret in the claim's namespace (None
    when absent; `key` defaults to `default_key`)."""
    ref = params.get(field)
    if ref is None:
        return None
    f = f"{where}.{field}"
    if not isinstance(ref, dict):
        raise SpecError(f, ref, f"{f} must be an object with name (and optionally key)")
    return SecretRef(
        name=secret_name(ref.get("name"), f"{f}.name"),
        key=secret_key(ref.get("key", default_key), f"{f}.key"),
    )


def secret_name(value: object, field: str) -> str:
    """`field` as the name of a Secret of the claim's namespace, or SpecError."""
    if not isinstance(value, str) or len(value) > 253 or not DNS_SUBDOMAIN.match(value):
        raise SpecError(field, value, f"{field}: {short(value)} is not a Secret name")
    return value


def secret_key(value: object, field: str) -> str:
    """`field` as a key of a Secret's data, or SpecError."""
    if not isinstance(value, str) or len(value) > 253 or not SECRET_KEY.match(value):
        raise SpecError(field, value, f"{field}: {short(value)} is not a Secret key")
    return value


def optional_str(
    params: dict, key: str, pattern: re.Pattern[str], what: str, where: str = P
) -> str | None:
    """`<where>.<key>`: a string of `pattern` (at most 253 characters) naming `what`, or None
    when absent."""
    if key not in params or params[key] is None:
        return None
    value = params[key]
    if not isinstance(value, str) or not pattern.match(value) or len(value) > 253:
        raise SpecError(f"{where}.{key}", value, f"{where}.{key}: {short(value)} is not {what}")
    return value
