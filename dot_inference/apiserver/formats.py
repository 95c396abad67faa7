"""The OpenAPI formats the API server checks (kube-openapi strfmt); every other format is
ignored, as there."""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import re

from jsonschema import FormatChecker

# --------------------------------------------------------------------------------------------
# Formats the API server checks (kube-openapi strfmt); everything else is ignored as there.

_FORMATS = FormatChecker(formats=())
# kube-openapi strfmt accepts RFC 3339 and several ISO 8601 variants (no seconds, no zone,
# a space for the T, a zone without colon); accept the same family.
_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$"
)
_UUID = re.compile(
    r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$"
)


@_FORMATS.checks("date-time")
def _is_date_time(value: object) -> bool:
    return not isinstance(value, str) or bool(_RFC3339.match(value))


@_FORMATS.checks("date", raises=ValueError)
def _is_date(value: object) -> bool:
    if isinstance(value, str):
        datetime.date.fromisoformat(value)
    return True


@_FORMATS.checks("byte", raises=(binascii.Error, ValueError))
def _is_byte(value: object) -> bool:
    if isinstance(value, str):  # Go's base64 decoder skips newlines
        base64.b64decode(value.replace("\n", "").replace("\r", ""), validate=True)
    return True


@_FORMATS.checks("ipv4", raises=ValueError)
def _is_ipv4(value: object) -> bool:
    if isinstance(value, str):
        ipaddress.IPv4Address(value)
    return True


@_FORMATS.checks("ipv6", raises=ValueError)
def _is_ipv6(value: object) -> bool:
    if isinstance(value, str):
        ipaddress.IPv6Address(value)
    return True


# Go's net.ParseCIDR (what kube-openapi's `cidr` format calls): an address, `/`, and a
# decimal prefix no longer than the address; host bits may be set (ip_network strict=False),
# but no netmask form and no leading zeros in an IPv4 octet (Go 1.17 on, as Python's
# ipaddress).
_CIDR_PREFIX = re.compile(r"^[0-9]{1,3}$")


@_FORMATS.checks("cidr", raises=ValueError)
def _is_cidr(value: object) -> bool:
    if isinstance(value, str):
        address, _, prefix = value.partition("/")
        if not _CIDR_PREFIX.match(prefix) or "%" in address:
            raise ValueError(f"{value!r} is not a CIDR")
        ipaddress.ip_network(value, strict=False)
    return True


@_FORMATS.checks("uuid")
def _is_uuid(value: object) -> bool:
    return not isinstance(value, str) or bool(_UUID.match(value))
