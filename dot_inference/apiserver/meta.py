"""ObjectMeta as the API server checks it: its schema, the name rules of each kind, and the
syntax of label and annotation keys and values."""

from __future__ import annotations

import re
from typing import Any

# --------------------------------------------------------------------------------------------
# ObjectMeta


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Name validation of the core kinds that do not use DNS subdomains.
_CORE_NAME_RULES = {
    ("", "Namespace"): "dns-label",
    ("", "Service"): "dns1035-label",
    ("rbac.authorization.k8s.io", "Role"): "path-segment",
    ("rbac.authorization.k8s.io", "ClusterRole"): "path-segment",
    ("rbac.authorization.k8s.io", "RoleBinding"): "path-segment",
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): "path-segment",
}

_OBJECT_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        "annotations": {"type": ["object", "null"], "additionalProperties": {"type": "string"}},
        "finalizers": {"type": ["array", "null"], "items": {"type": "string"}},
        "ownerReferences": {
            "type": ["array", "null"],
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["apiVersion", "kind", "name", "uid"],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "name": {"type": "string"},
                    "uid": {"type": "string"},
                    "controller": {"type": "boolean"},
                    "blockOwnerDeletion": {"type": "boolean"},
                },
            },
        },
        "uid": {"type": "string"},
        "resourceVersion": {"type": "string"},
        "generation": {"type": "integer"},
        "creationTimestamp": {"type": ["string", "null"]},
        "deletionTimestamp": {"type": ["string", "null"]},
        "deletionGracePeriodSeconds": {"type": ["integer", "null"]},
        "selfLink": {"type": "string"},
        "managedFields": {"type": ["array", "null"], "items": {"type": "object"}},
    },
}


def _name_errors(value: str, rule: str, path: str, *, prefix: bool = False) -> list[str]:
    if prefix and value.endswith("-"):
        value = value[:-1] + "a"  # apimachinery maskTrailingDash
    if rule == "path-segment":
        if value in (".", ".."):
            return [f"{path}: Invalid value: \"{value}\": may not be '{value}'"]
        bad = [c for c in ("/", "%") if c in value]
        return [f"{path}: Invalid value: \"{value}\": may not contain '{c}'" for c in bad]
    if rule == "dns-label":
        ok, limit = _DNS1123_LABEL.match(value), 63
        what = (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character"
        )
    elif rule == "dns1035-label":
        ok, limit = _DNS1035_LABEL.match(value), 63
        what = (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
            "start with an alphabetic character, and end with an alphanumeric character"
        )
    else:
        ok, limit = _DNS1123_SUBDOMAIN.match(value), 253
        what = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    out = []
    if not ok:
        out.append(f'{path}: Invalid value: "{value}": {what}')
    if len(value) > limit:
        out.append(f'{path}: Invalid value: "{value}": must be no more than {limit} characters')
    return out


def _qualified_name_errors(key: str, path: str) -> list[str]:
    prefix, _, name = key.rpartition("/")
    out = []
    if "/" in prefix or (key.count("/") and not prefix):
        return [f'{path}: Invalid value: "{key}": a qualified name must be "[prefix/]name"']
    if prefix and (not _DNS1123_SUBDOMAIN.match(prefix) or len(prefix) > 253):
        out.append(f'{path}: Invalid value: "{key}": prefix part must be a DNS-1123 subdomain')
    if not name or len(name) > 63 or not _QUALIFIED_NAME_PART.match(name):
        out.append(
            f'{path}: Invalid value: "{key}": name part must consist of alphanumeric characters, '
            "'-', '_' or '.', must start and end with an alphanumeric character and be at most "
            "63 characters"
        )
    return out


def _object_meta_errors(
    meta: dict[str, Any], path: str, name_rule: str, name_max_length: int | None = None
) -> list[str]:
    out: list[str] = []
    name = meta.get("name")
    if isinstance(name, str) and name:
        out.extend(_name_errors(name, name_rule, f"{path}.name"))
        if name_max_length is not None and len(name) > name_max_length:
            out.append(
                f'{path}.name: Invalid value: "{name}": must be no more than '
                f"{name_max_length} characters"
            )
    gen = meta.get("generateName")
    if isinstance(gen, str) and gen:
        out.extend(_name_errors(gen, name_rule, f"{path}.generateName", prefix=True))
    if not name and not gen and "name" in meta:
        out.append(f"{path}.name: Required value: name or generateName is required")
    ns = meta.get("namespace")
    if isinstance(ns, str) and ns:
        out.extend(_name_errors(ns, "dns-label", f"{path}.namespace"))
    labels = meta.get("labels")
    if isinstance(labels, dict):
        for k, v in labels.items():
            out.extend(_qualified_name_errors(str(k), f"{path}.labels"))
            if isinstance(v, str) and (len(v) > 63 or not _LABEL_VALUE.match(v)):
                out.append(
                    f'{path}.labels: Invalid value: "{v}": a valid label value must be 63 '
                    "characters or less and must be empty or begin and end with an alphanumeric "
                    "character ([a-z0-9A-Z]) with dashes (-), underscores (_), dots (.), and "
                    "alphanumerics between"
                )
    annotations = meta.get("annotations")
    if isinstance(annotations, dict):
        size = 0
        for k, v in annotations.items():
            out.extend(_qualified_name_errors(str(k).lower(), f"{path}.annotations"))
            size += len(str(k)) + (len(v) if isinstance(v, str) else 0)
        if size > 256 * 1024:
            out.append(f"{path}.annotations: Too long: must have at most 262144 bytes")
    return out
