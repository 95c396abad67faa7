"""Validate rendered Kubernetes objects the way the API server would, offline.

Schemas come from

* every CustomResourceDefinition (``apiextensions.k8s.io/v1``) under the schema paths, per
  version ``openAPIV3Schema``;
* every Crossplane CompositeResourceDefinition (``apiextensions.crossplane.io/v1`` and ``v2``)
  under the schema paths, turned into the CRD schema Crossplane generates for it (the user's
  ``spec``/``status`` plus Crossplane's machinery: ``spec.crossplane`` for modern XRs, the
  legacy fields for v1 ``LegacyCluster`` XRs, ``status.conditions``; claims of v1 XRDs too);
* the core Kubernetes kinds of ``kubernetes-validate`` (its strict JSON schemas, so unknown
  fields are errors), at the release kcl/versions.k pins.

CRD schemas are structural OpenAPI schemas; they are read as the API server reads them:
defaults are applied and nulls of non-nullable fields dropped first; ``nullable``,
``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields`` (unknown fields
allowed at that level), ``x-kubernetes-embedded-resource`` (``apiVersion``/``kind`` required,
``metadata`` checked as ObjectMeta), ``x-kubernetes-list-type`` (``set``/``map`` uniqueness)
and the formats the API server checks (``date-time``, ``date``, ``byte``, ``ipv4``, ``ipv6``,
``cidr``, ``uuid``) are honoured. The API server prunes unknown fields silently (structural
pruning of custom resources; built-in kinds drop them too): every such field is reported as an
error that says it would be pruned, because a pruned field is a setting that silently does not
happen. The root ``metadata`` of every object is checked as ObjectMeta (string maps, label and
annotation key/value syntax, name rules of the kind). ``x-kubernetes-validations`` CEL rules
are evaluated with cel-python plus the Kubernetes string/list helpers, in the API server's
order and within its limits: only when the schema's errors do not block them (a value over
maxItems, maxLength or maxProperties, a wrong type, a missing field, a value not in an enum),
each rule within the per-call cost limit and all of them within the object's budget, with the
API server's words when a limit stops them (dot_inference/cel_cost.py counts the cost as cel-go
does); a rule that cannot be evaluated here is counted in ``report.cel_not_evaluated`` (never
passed silently); transition rules (``oldSelf``) are skipped as the API server skips them on
create and counted in ``report.cel_transition_rules_skipped``.

Not emulated: Go-coded validation of core kinds beyond their OpenAPI schema (port ranges and
the like) and admission webhooks.
"""

from __future__ import annotations

import base64
import binascii
import contextvars
import copy
import dataclasses
import datetime
import difflib
import functools
import hashlib
import ipaddress
import itertools
import json
import os
import pickle
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from jsonschema import Draft4Validator, Draft202012Validator, FormatChecker, ValidationError
from jsonschema import validators as js_validators

from dot_inference import cel_cost
from dot_inference.pins import pin

__all__ = [
    "ValidationReport",
    "defaulted",
    "load_yaml_stream",
    "object_id",
    "schema_dirs",
    "validate_objects",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PROVIDER_KUBERNETES_GROUPS = ("kubernetes.crossplane.io", "kubernetes.m.crossplane.io")
# What an unknown field means on a real cluster.
PRUNED = "not in the schema, so the API server would prune it"


# --------------------------------------------------------------------------------------------
# Report


@dataclass
class ValidationReport:
    """Outcome of ``validate_objects``; object ids are ``apiVersion/kind namespace/name``."""

    valid: list[str] = field(default_factory=list)
    invalid: list[tuple[str, list[str]]] = field(default_factory=list)
    no_schema: list[str] = field(default_factory=list)
    cel_evaluated: int = 0
    cel_not_evaluated: int = 0
    cel_transition_rules_skipped: int = 0
    # "<object id>: <path>: <rule> (<why>)" for every rule counted in cel_not_evaluated.
    cel_not_evaluated_rules: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No invalid object and no object without a schema."""
        return not self.invalid and not self.no_schema

    def summary(self) -> str:
        """A human-readable multi-line summary."""
        lines = [
            f"{len(self.valid)} valid, {len(self.invalid)} invalid, "
            f"{len(self.no_schema)} without schema; CEL rules: {self.cel_evaluated} evaluated, "
            f"{self.cel_not_evaluated} not evaluated, "
            f"{self.cel_transition_rules_skipped} transition rules skipped"
        ]
        for oid, errors in self.invalid:
            lines.append(f"INVALID {oid}")
            lines.extend(f"  - {e}" for e in errors)
        lines.extend(f"NO SCHEMA {oid}" for oid in self.no_schema)
        lines.extend(f"CEL NOT EVALUATED {r}" for r in self.cel_not_evaluated_rules)
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Public helpers


def schema_dirs() -> list[Path]:
    """Where schemas are looked for by default.

    ``$DOT_INFERENCE_SCHEMAS`` (``os.pathsep``-separated) if set, else the upstream schemas
    vendored in the repository's ``schemas/`` (each folder's SOURCE names its commit); then
    the repository's ``package/`` (our own XRDs).
    """
    repo = Path(__file__).resolve().parents[1]
    env = os.environ.get("DOT_INFERENCE_SCHEMAS")
    dirs = [Path(p) for p in env.split(os.pathsep) if p] if env else [repo / "schemas"]
    return [*dirs, repo / "package"]


def load_yaml_stream(path_or_text: str | Path) -> list[dict[str, Any]]:
    """Parse a YAML stream (a file path or the text itself); empty documents are skipped."""
    if isinstance(path_or_text, Path) or (
        "\n" not in path_or_text and len(path_or_text) < 4096 and Path(path_or_text).is_file()
    ):
        text = Path(path_or_text).read_text(encoding="utf-8")
    else:
        text = str(path_or_text)
    docs: list[dict[str, Any]] = []
    for i, doc in enumerate(yaml.load_all(text, Loader=_Loader)):
        if doc is None or doc == {}:
            continue
        if not isinstance(doc, dict):
            raise ValueError(f"YAML document {i} is a {type(doc).__name__}, not a mapping")
        docs.append(doc)
    return docs


def object_id(obj: Any) -> str:
    """``apiVersion/kind namespace/name`` (``generateName`` when there is no name)."""
    if not isinstance(obj, dict):
        return f"<{type(obj).__name__}>"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or meta.get("generateName") or "<unnamed>"
    ns = meta.get("namespace")
    where = f"{ns}/{name}" if ns else str(name)
    return f"{obj.get('apiVersion', '<no apiVersion>')}/{obj.get('kind', '<no kind>')} {where}"


def validate_objects(
    objs: list[dict[str, Any]],
    *,
    schema_paths: list[Path] | None = None,
    k8s_version: str | None = None,
) -> ValidationReport:
    """Validate every object; a provider-kubernetes Object's manifest is validated too. The
    core kinds' schemas are those of `k8s_version` (default: the release kcl/versions.k pins)."""
    if k8s_version is None:
        k8s_version = pin("kubernetes").lstrip("v")
    paths = tuple(
        Path(p).resolve() for p in (schema_paths if schema_paths is not None else schema_dirs())
    )
    index = _SchemaIndex.for_paths(paths)
    report = ValidationReport()
    for obj in objs:
        _validate_one(obj, object_id(obj), index, k8s_version, report)
    return report


def defaulted(obj: dict[str, Any], *, schema_paths: list[Path] | None = None) -> dict[str, Any]:
    """A copy of `obj` as the API server stores it: the defaults of its CRD (or XRD) applied
    and nulls of non-nullable fields dropped. Unchanged when no schema is known for it."""
    paths = tuple(
        Path(p).resolve() for p in (schema_paths if schema_paths is not None else schema_dirs())
    )
    group, _, version = str(obj.get("apiVersion", "")).rpartition("/")
    entry = _SchemaIndex.for_paths(paths).entries.get((group, version, str(obj.get("kind", ""))))
    out = copy.deepcopy(obj)
    if entry is not None:
        _default_and_drop_nulls(out, entry.schema)
    return out


# --------------------------------------------------------------------------------------------
# Validation of one object


@dataclass
class _CelStats:
    object_id: str
    evaluated: int = 0
    not_evaluated: list[str] = field(default_factory=list)
    transition_skipped: int = 0
    # What is left of the object's CEL budget (cel_cost.RUNTIME_COST_BUDGET); once a rule
    # overruns it or its own limit, no further rule runs (apiextensions-apiserver
    # pkg/apiserver/schema/cel/validation.go).
    budget: int = field(default_factory=lambda: cel_cost.RUNTIME_COST_BUDGET)
    stopped: bool = False


_CEL_STATS: contextvars.ContextVar[_CelStats | None] = contextvars.ContextVar(
    "dot_inference_cel_stats", default=None
)


def _validate_one(
    obj: Any, oid: str, index: _SchemaIndex, k8s_version: str, report: ValidationReport
) -> None:
    if (
        not isinstance(obj, dict)
        or not isinstance(obj.get("apiVersion"), str)
        or not isinstance(obj.get("kind"), str)
    ):
        report.invalid.append(
            (oid, ["not a Kubernetes object: apiVersion and kind must be strings"])
        )
        return
    api_version, kind = obj["apiVersion"], obj["kind"]
    compiled = index.validator(api_version, kind) or _core_validator(k8s_version, api_version, kind)
    if compiled is None:
        report.no_schema.append(oid)
    else:
        stats = _CelStats(oid)
        token = _CEL_STATS.set(stats)
        try:
            errors = compiled.errors(obj)
        except Exception as err:  # e.g. non-string map keys from YAML
            errors = [f"<root>: cannot be validated: {type(err).__name__}: {err}"]
        finally:
            _CEL_STATS.reset(token)
        report.cel_evaluated += stats.evaluated
        report.cel_not_evaluated += len(stats.not_evaluated)
        report.cel_not_evaluated_rules.extend(stats.not_evaluated)
        report.cel_transition_rules_skipped += stats.transition_skipped
        if errors:
            report.invalid.append((oid, errors))
        else:
            report.valid.append(oid)
    # provider-kubernetes Object: the manifest is an object of its own.
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    if kind == "Object" and group in PROVIDER_KUBERNETES_GROUPS:
        spec = obj.get("spec")
        fp = spec.get("forProvider") if isinstance(spec, dict) else None
        manifest = fp.get("manifest") if isinstance(fp, dict) else None
        if manifest is not None:
            _validate_one(
                manifest, f"{object_id(manifest)} (manifest of {oid})", index, k8s_version, report
            )


class _Compiled:
    """A compiled validator for one kind plus how to prepare objects for it."""

    def __init__(
        self,
        validator: jsonschema.protocols.Validator,
        *,
        structural: dict[str, Any] | None,
        name_rule: str,
        name_max_length: int | None = None,
    ) -> None:
        self.validator = validator
        self.structural = structural
        self.name_rule = name_rule
        self.name_max_length = name_max_length

    def errors(self, obj: dict[str, Any]) -> list[str]:
        """The API server's order (apiextensions-apiserver pkg/registry/customresource
        strategy.go Validate): ObjectMeta and the schema first; then, unless one of those
        errors blocks them (a missing field, a value not in an enum, a wrong type, or a value
        over maxLength, maxItems or maxProperties), the CEL rules, in the object's budget."""
        data = copy.deepcopy(obj)
        if self.structural is not None:
            _default_and_drop_nulls(data, self.structural)
        found = list(self.validator.iter_errors(data))
        rules = [e for e in found if isinstance(e, _PendingRules)]
        schema_errors = [e for e in found if not isinstance(e, _PendingRules)]
        out = [_format_error(e) for e in schema_errors]
        meta = data.get("metadata")
        if isinstance(meta, dict):
            out.extend(_object_meta_errors(meta, "metadata", self.name_rule, self.name_max_length))
        elif meta is not None:
            out.append("metadata: must be an object")
        if rules:
            blocked = any(e.validator in _BLOCKING for e in schema_errors) or any(
                _BLOCKING_META in m for m in out
            )
            if blocked:
                out.append(f"<root>: Invalid value: {CEL_BLOCKED}")
            else:
                out.extend(_run_rules(rules))
        return sorted(set(out))


# Schema errors that keep the CEL rules from running (apiextensions-apiserver
# pkg/registry/customresource/strategy.go hasBlockingErr: NotSupported, Required, TooLong,
# TooMany, TypeInvalid), by the keyword that raises each here; a value not of its format is
# TypeInvalid too (kube-openapi validate/values.go FormatOf), as ObjectMeta's "Too long".
_BLOCKING = frozenset(
    {"enum", "required", "maxLength", "maxItems", "maxProperties", "type", "format"}
)
_BLOCKING_META = ": Too long:"
CEL_BLOCKED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)


def _format_error(e: ValidationError) -> str:
    path = _path_str(e.absolute_path)
    where = path or "<root>"
    # The API server's words for a value over a bound (apimachinery field.TooMany, TooLong):
    # the count, never the value (a list over maxItems can be long).
    if e.validator in ("maxItems", "maxProperties") and isinstance(e.instance, list | dict):
        unit = "item" if e.validator_value == 1 else "items"
        return f"{where}: Too many: {len(e.instance)}: must have at most {e.validator_value} {unit}"
    if e.validator == "maxLength" and isinstance(e.instance, str):
        unit = "byte" if e.validator_value == 1 else "bytes"
        return f"{where}: Too long: may not be more than {e.validator_value} {unit}"
    if (
        e.validator == "additionalProperties"
        and e.validator_value is False
        and isinstance(e.instance, dict)
    ):
        known = set((e.schema or {}).get("properties", {}))
        patterns = list((e.schema or {}).get("patternProperties", {}))
        extra = sorted(
            k for k in e.instance if k not in known and not any(re.search(p, k) for p in patterns)
        )
        prefix = f"{path}." if path else ""
        return (
            "; ".join(f'{prefix}{k}: unknown field "{k}": {PRUNED}{_near(k, known)}' for k in extra)
            or f"{path or '<root>'}: {e.message}"
        )
    return f"{path or '<root>'}: {e.message}"


def _near(field: str, known: set[str]) -> str:
    """`; did you mean "x"?` for the known field nearest a misspelt one, else nothing."""
    by_lower = {k.lower(): k for k in known}
    # 0.75: one slip in a short name still matches ("modle" -> "model", "ingresHost" ->
    # "ingressHost"), two unrelated names of similar length do not (difflib's ratio).
    close = difflib.get_close_matches(field.lower(), list(by_lower), n=1, cutoff=0.75)
    return f'; did you mean "{by_lower[close[0]]}"?' if close else ""


def _path_str(path: Iterable[Any]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out


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


# --------------------------------------------------------------------------------------------
# Structural schema -> JSON schema


def _to_jsonschema(node: Any, *, in_junctor: bool = False) -> Any:
    """Translate one structural-schema node into a Draft 4 schema with our keywords."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties":
            out[key] = {k: _to_jsonschema(v) for k, v in value.items()}
        elif key in ("additionalProperties", "items", "not"):
            out[key] = (
                _to_jsonschema(value, in_junctor=in_junctor or key == "not")
                if isinstance(value, dict)
                else value
            )
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_to_jsonschema(v, in_junctor=True) for v in value]
        elif key in ("description", "example", "externalDocs", "title"):
            continue
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    if node.get("nullable"):
        t = out.get("type")
        if isinstance(t, str):
            out["type"] = [t, "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if node.get("x-kubernetes-embedded-resource"):
        props = out.setdefault("properties", {})
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        props["metadata"] = _OBJECT_META_SCHEMA
    is_object = node.get("type") == "object" or "properties" in node
    if (
        is_object
        and not in_junctor
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _crd_root_schema(schema: dict[str, Any], name_max_length: int | None = None) -> dict[str, Any]:
    out = _to_jsonschema(schema)
    props = out.setdefault("properties", {})
    # The API server validates metadata as ObjectMeta, whatever the CRD says about it.
    props["metadata"] = _OBJECT_META_SCHEMA
    props.setdefault("apiVersion", {"type": "string"})
    props.setdefault("kind", {"type": "string"})
    return out


def _default_and_drop_nulls(data: Any, schema: dict[str, Any]) -> None:
    """API-server defaulting: drop nulls of non-nullable fields, then apply defaults."""
    if not isinstance(schema, dict):
        return
    if isinstance(data, dict):
        props = schema.get("properties") or {}
        addl = schema.get("additionalProperties")
        for key in list(data):
            sub = props.get(key) if key in props else (addl if isinstance(addl, dict) else None)
            if data[key] is None and sub is not None and not sub.get("nullable"):
                del data[key]
        for key, sub in props.items():
            if key not in data and isinstance(sub, dict) and "default" in sub:
                data[key] = copy.deepcopy(sub["default"])
        for key, value in data.items():
            sub = props.get(key) if key in props else (addl if isinstance(addl, dict) else None)
            if isinstance(sub, dict):
                _default_and_drop_nulls(value, sub)
    elif isinstance(data, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for i, value in enumerate(data):
                if value is None and not items.get("nullable"):
                    continue  # a null list item is an error, reported by the type check
                _default_and_drop_nulls(data[i], items)


# --------------------------------------------------------------------------------------------
# Custom keywords


def _kw_int_or_string(
    validator: Any, value: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if value and not (
        isinstance(instance, str)
        or (isinstance(instance, int) and not isinstance(instance, bool))
        or (instance is None and schema.get("nullable"))
    ):
        yield ValidationError(f"{json.dumps(instance)} is not an integer or a string")


def _kw_embedded_resource(
    validator: Any, value: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not value or not isinstance(instance, dict):
        return
    for key in ("apiVersion", "kind"):
        v = instance.get(key)
        if not isinstance(v, str) or not v:
            yield ValidationError(f"{key}: Required value: must not be empty")
    meta = instance.get("metadata")
    if isinstance(meta, dict):
        for err in _object_meta_errors(meta, "metadata", "dns-subdomain"):
            yield ValidationError(err)


def _kw_list_type(
    validator: Any, value: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if not isinstance(instance, list):
        return
    # One pass with a set of the items' JSON, as the API server's maps do
    # (structurallisttype): a long list is checked in linear time.
    if value == "set":
        seen: set[str] = set()
        for i, item in enumerate(instance):
            key = json.dumps(item, sort_keys=True)
            if key in seen:
                yield ValidationError(f"Duplicate value: {json.dumps(item)}", path=[i])
            seen.add(key)
    elif value == "map":
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen_keys: set[str] = set()
        for i, item in enumerate(instance):
            if not isinstance(item, dict):
                continue
            k = json.dumps([item.get(key) for key in keys], sort_keys=True)
            if k in seen_keys:
                # At the item, as the API server says it (structurallisttype: Duplicate at
                # the list's index).
                desc = ", ".join(f'"{key}": {json.dumps(item.get(key))}' for key in keys)
                yield ValidationError(f"Duplicate value: map[{desc}]", path=[i])
            seen_keys.add(k)


class _PendingRules(ValidationError):
    """A node's CEL rules, met while the schema is checked and run after it (the API server
    runs no rule when the schema's errors block them): jsonschema gives the marker the node's
    path as it gives an error."""

    def __init__(self, rules: list[Any], instance: Any, schema: dict[str, Any]) -> None:
        super().__init__("CEL rules to run")
        self.rules = rules
        self.rule_instance = instance
        self.rule_schema = schema


def _kw_cel(
    validator: Any, rules: Any, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    if isinstance(rules, list) and rules:
        yield _PendingRules(rules, instance, schema)


def _run_rules(pending: list[_PendingRules]) -> list[str]:
    """Every node's rules in the order the schema met them, within the object's budget."""
    stats = _CEL_STATS.get() or _CelStats("")
    out: list[str] = []
    for node in pending:
        for rule in node.rules:
            if stats.stopped:
                return out
            if not isinstance(rule, dict) or not isinstance(rule.get("rule"), str):
                continue
            for err in _evaluate_rule(rule, node.rule_instance, node.rule_schema, stats):
                path = _path_str([*node.absolute_path, *err.path])
                out.append(f"{path or '<root>'}: {err.message}")
    return out


_KEYWORDS = {
    "x-kubernetes-int-or-string": _kw_int_or_string,
    "x-kubernetes-embedded-resource": _kw_embedded_resource,
    "x-kubernetes-list-type": _kw_list_type,
    "x-kubernetes-validations": _kw_cel,
}

_StructuralValidator = js_validators.extend(Draft4Validator, _KEYWORDS)


# --------------------------------------------------------------------------------------------
# CEL


_OLD_SELF = re.compile(r"\boldSelf\b")


def _evaluate_rule(
    rule: dict[str, Any], instance: Any, schema: dict[str, Any], stats: _CelStats | None
) -> Iterator[ValidationError]:
    expr: str = rule["rule"]

    def not_evaluated(why: str) -> None:
        if stats is not None:
            stats.not_evaluated.append(f"{stats.object_id}: {expr} ({why})")

    if _OLD_SELF.search(expr):
        if rule.get("optionalOldSelf"):
            not_evaluated("optionalOldSelf transition rule")
        elif stats is not None:
            stats.transition_skipped += 1
        return
    program = cel_program(expr)
    if isinstance(program, str):
        not_evaluated(program)
        return
    outcome = _cel_run_memo(expr, program, instance, schema)
    if outcome.unsupported:
        not_evaluated(outcome.unsupported)
        return
    if stats is not None:
        stats.evaluated += 1
        # The API server charges the rule's cost to the object's budget first, then looks at
        # its own limit (apiextensions-apiserver pkg/apiserver/schema/cel/validation.go
        # validateExpressions); either stops every rule after it. Both errors are at the
        # rule's node, whatever its fieldPath.
        if outcome.cost > stats.budget:
            stats.stopped = True
            yield ValidationError(f"Invalid value: {CEL_BUDGET_EXCEEDED}")
            return
        stats.budget -= outcome.cost
        if outcome.cancelled:
            stats.stopped = True
            said = (rule.get("message") or expr).strip()
            yield ValidationError(
                f"Invalid value: '{cel_cost.CANCELLED}': no further validation rules will be "
                f"run due to call cost exceeds limit for rule: {said}"
            )
            return
    if outcome.error:
        yield _cel_error(rule, f"{outcome.error} (evaluating rule: {expr})")
        return
    if outcome.value is True:
        return
    message = rule.get("message") or f"failed rule: {expr}"
    if isinstance(rule.get("messageExpression"), str):
        mprog = cel_program(rule["messageExpression"])
        if not isinstance(mprog, str):
            m = _cel_run(mprog, instance, schema)
            if stats is not None:
                stats.budget -= m.cost
            if not m.unsupported and not m.error and isinstance(m.value, str) and m.value.strip():
                message = m.value
    yield _cel_error(rule, message)


def _cel_error(rule: dict[str, Any], message: str) -> ValidationError:
    err = ValidationError(f"Invalid value: {message}")
    fp = rule.get("fieldPath")
    if isinstance(fp, str) and fp:
        for part in re.findall(r"\.([A-Za-z0-9_\-]+)|\['([^']*)'\]|\[(\d+)\]", fp):
            name, quoted, idx = part
            err.path.append(int(idx) if idx else (name or quoted))
    return err


@dataclass
class _CelOutcome:
    value: Any = None
    error: str | None = None
    unsupported: str | None = None
    # What the evaluation cost (cel_cost), and whether it went past the per-call limit.
    cost: int = 0
    cancelled: bool = False


# What the API server says when an object's rules overrun RuntimeCELCostBudget.
CEL_BUDGET_EXCEEDED = (
    "validation failed due to running out of cost budget, no further validation rules will be run"
)


@functools.cache
def _cel_environment() -> Any:
    """One CEL environment: building one builds its parser (tens of milliseconds)."""
    import celpy

    return celpy.Environment()


@functools.lru_cache(maxsize=4096)
def cel_program(expr: str) -> Any:
    """A rule compiled to run with its cost counted (dot_inference/cel_cost.py), or why it
    cannot be compiled here (a string)."""
    env = _cel_environment()
    try:
        ast = env.compile(expr)
        return cel_cost.program(env, ast, _cel_functions())
    except Exception as err:
        return (
            f"cannot compile here: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        )


# A rule's outcome for a value: the same rules meet the same values many times in one run (a
# claim, then the XR rendered from it; the examples share most of their specs).
_CEL_MEMO: dict[tuple[str, str, int], tuple[dict[str, Any], _CelOutcome]] = {}


# `self` and the field names after it: self.a.b['c'] reads self.a.b (and what is under it),
# has(self.a.b) only whether a has b.
_SELF_CHAIN = re.compile(r"\bself((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HAS_OPEN = re.compile(r"\bhas\s*\(\s*$")

Path_ = tuple[str, ...]


@functools.lru_cache(maxsize=4096)
def _self_paths(expr: str) -> tuple[tuple[Path_, ...], tuple[Path_, ...]] | None:
    """The field paths under `self` a rule reads: those whose value it reads, and those it
    only tests with has(); None when it may read all of `self` (a bare `self`, a method
    called on `self`, or a comment, which could hide what follows it).

    A name followed by `(` is a method (self.labels.all(k, ...)): its receiver is read whole.
    A name Kubernetes escapes (__namespace__) is a property's escaped name or a map's literal
    key: both spellings are kept."""
    if "//" in expr:
        return None
    values: list[Path_] = []
    present: list[Path_] = []
    for m in _SELF_CHAIN.finditer(expr):
        names = tuple(_NAME.findall(m.group(1)))
        after = expr[m.end() :].lstrip()[:1]
        if after == "(":
            names = names[:-1]  # a method of what comes before it
        if not names:
            return None
        only_has = after == ")" and _HAS_OPEN.search(expr, 0, m.start()) is not None
        spellings = itertools.product(*(sorted({n, _unescape(n)}) for n in names))
        (present if only_has else values).extend(tuple(p) for p in spellings)
    return tuple(values), tuple(present)


# How Kubernetes names a property as a CEL field (apiserver pkg/cel/escaping.go, documented
# at kubernetes.io/docs/reference/using-api/cel/#escaping): a CEL keyword becomes __kw__, and
# "__", ".", "-", "/" become __underscores__, __dot__, __dash__, __slash__.
_CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_CEL_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_CEL_ESCAPE = re.compile(r"__|[./-]")
_CEL_UNESCAPE = re.compile(r"__(underscores|dot|dash|slash)__")
_CEL_UNESCAPES = {v[2:-2]: k for k, v in _CEL_ESCAPES.items()}


def _cel_escape(name: str) -> str:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    return _CEL_ESCAPE.sub(lambda m: _CEL_ESCAPES[m.group(0)], name)


def _unescape(name: str) -> str:
    inner = name[2:-2] if name.startswith("__") and name.endswith("__") else ""
    if inner in _CEL_RESERVED:
        return inner
    return _CEL_UNESCAPE.sub(lambda m: _CEL_UNESCAPES[m.group(1)], name)


def _read_part(instance: Any, values: tuple[Path_, ...], present: tuple[Path_, ...] = ()) -> Any:
    """The part of `instance` a rule reads: each of `values` with what is under it, and for
    each of `present` only that the field is there (as true). A missing field stays missing,
    and a value that is not an object where a path goes on is kept whole (a list, or a
    method call's receiver). A rule that reads only these evaluates the same over this part
    as over the whole instance."""
    if not isinstance(instance, dict):
        return instance
    part: dict[str, Any] = {}
    for paths, whole in ((values, True), (present, False)):
        for path in paths:
            src, dst = instance, part
            for i, name in enumerate(path):
                if name not in src:
                    break
                value = src[name]
                if i == len(path) - 1 and not whole:
                    dst.setdefault(name, True)  # has(): only that it is there
                    break
                if i == len(path) - 1 or not isinstance(value, dict):
                    dst[name] = value
                    break
                nxt = dst.get(name)
                if nxt is value:
                    break  # a shorter path keeps it whole
                if not isinstance(nxt, dict):
                    nxt = dst[name] = {}
                src, dst = value, nxt
    return part


def _cel_run_memo(expr: str, program: Any, instance: Any, schema: dict[str, Any]) -> _CelOutcome:
    paths = _self_paths(expr)
    read = instance if paths is None else _read_part(instance, *paths)
    try:
        key = (expr, json.dumps(read, sort_keys=True), id(schema))
    except (TypeError, ValueError):
        return _cel_run(program, instance, schema)
    hit = _CEL_MEMO.get(key)
    if hit is not None and hit[0] is schema:  # the same schema, not one at a reused id
        return hit[1]
    if len(_CEL_MEMO) > 65536:
        _CEL_MEMO.clear()
    outcome = _cel_run(program, instance, schema)
    _CEL_MEMO[key] = (schema, outcome)
    return outcome


def _cel_run(program: Any, instance: Any, schema: dict[str, Any]) -> _CelOutcome:
    import celpy

    try:
        result, cost = program.evaluate_costed(
            {"self": to_cel(instance, schema)}, cel_cost.PER_CALL_LIMIT
        )
    except cel_cost.CostLimitExceeded as over:
        return _CelOutcome(cost=over.cost, cancelled=True)
    except celpy.CELEvalError as err:
        return _classify_cel_error(err)
    except Exception as err:  # an emulation gap, not the object's fault
        return _CelOutcome(unsupported=f"evaluator error: {type(err).__name__}: {err}")
    if isinstance(result, celpy.CELEvalError):
        return dataclasses.replace(_classify_cel_error(result), cost=cost)
    return _CelOutcome(value=_from_cel(result), cost=cost)


def _classify_cel_error(err: Exception) -> _CelOutcome:
    args = getattr(err, "args", ())
    msg = str(args[0]) if args else str(err)
    cause = args[1] if len(args) > 1 else None
    if "undeclared reference" in msg or "unknown function" in msg:
        name = re.search(r"undeclared reference to '([^']+)'", msg)
        return _CelOutcome(unsupported=f"unsupported function {name.group(1) if name else '?'}")
    if cause is KeyError or "no such" in msg:
        return _CelOutcome(error=f"no such key: {msg}")
    # Overload and type errors: the API server type-checks rules against the schema, so at
    # run time these come from our emulation (for instance int/double), not from the object.
    return _CelOutcome(unsupported=f"evaluation gap: {msg[:120]}")


def to_cel(value: Any, schema: dict[str, Any] | None) -> Any:
    """JSON to CEL values, typed by the schema as the API server types them."""
    from celpy import celtypes

    s = schema if isinstance(schema, dict) else {}
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if s.get("type") == "number":
            return celtypes.DoubleType(float(value))
        return celtypes.IntType(value)
    if isinstance(value, float):
        if s.get("type") == "integer" and value.is_integer():
            return celtypes.IntType(int(value))
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = s.get("items") if isinstance(s.get("items"), dict) else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, dict):
        props = s.get("properties") or {}
        addl = (
            s.get("additionalProperties")
            if isinstance(s.get("additionalProperties"), dict)
            else None
        )
        # A declared property is a CEL field, under its escaped name (self.__namespace__);
        # a map's keys stay as they are (self['a-key']).
        return celtypes.MapType(
            {
                celtypes.StringType(_cel_escape(k) if k in props else k): to_cel(
                    v, props.get(k, addl)
                )
                for k, v in value.items()
            }
        )
    return value


def _from_cel(value: Any) -> Any:
    from celpy import celtypes

    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    return value


@functools.cache
def _cel_functions() -> dict[str, Any]:
    """Kubernetes CEL library functions cel-python lacks (strings, lists, regex)."""
    from celpy import celtypes

    s = celtypes.StringType

    def split(v: str, sep: str, n: int = -1) -> Any:
        parts = str(v).split(str(sep)) if int(n) < 0 else str(v).split(str(sep), max(int(n) - 1, 0))
        return celtypes.ListType([s(p) for p in parts][: None if int(n) < 0 else int(n)])

    def index_of(v: Any, x: Any, start: int = 0) -> Any:
        if isinstance(v, list):
            return celtypes.IntType(next((i for i, e in enumerate(v) if e == x), -1))
        return celtypes.IntType(str(v).find(str(x), int(start)))

    def last_index_of(v: Any, x: Any) -> Any:
        if isinstance(v, list):
            return celtypes.IntType(max((i for i, e in enumerate(v) if e == x), default=-1))
        return celtypes.IntType(str(v).rfind(str(x)))

    def substring(v: str, start: int, end: int | None = None) -> Any:
        return s(str(v)[int(start) : None if end is None else int(end)])

    def find(v: str, pattern: str) -> Any:
        import re2

        m = re2.search(str(pattern), str(v))
        return s(m.group(0) if m else "")

    def find_all(v: str, pattern: str, n: int = -1) -> Any:
        import re2

        found = [s(m.group(0)) for m in re2.finditer(str(pattern), str(v))]
        return celtypes.ListType(found if int(n) < 0 else found[: int(n)])

    return {
        "lowerAscii": lambda v: s(str(v).lower()),
        "upperAscii": lambda v: s(str(v).upper()),
        "trim": lambda v: s(str(v).strip()),
        "replace": lambda v, a, b, n=-1: s(str(v).replace(str(a), str(b), int(n))),
        "split": split,
        "join": lambda v, sep="": s(str(sep).join(str(x) for x in v)),
        "charAt": lambda v, i: s(str(v)[int(i) : int(i) + 1]),
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
        "substring": substring,
        "isSorted": lambda v: celtypes.BoolType(list(v) == sorted(v)),
        "sum": lambda v: sum(v[1:], v[0]) if len(v) else celtypes.IntType(0),
        "min": lambda v: min(v),
        "max": lambda v: max(v),
        "find": find,
        "findAll": find_all,
    }


# --------------------------------------------------------------------------------------------
# Schema index (CRDs and XRDs under the schema paths)


@dataclass
class _Entry:
    schema: dict[str, Any]  # structural openAPIV3Schema as the API server would hold it
    name_max_length: int | None
    source: str


class _SchemaIndex:
    _cache: dict[tuple[tuple[str, int, int], ...], _SchemaIndex] = {}  # noqa: RUF012

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self.entries: dict[tuple[str, str, str], _Entry] = {}
        self.validators: dict[tuple[str, str], _Compiled | None] = {}
        for path in paths:
            for file in _yaml_files(path):
                for doc in _parsed(file):
                    self._add(doc, str(file))

    @classmethod
    def for_paths(cls, paths: tuple[Path, ...]) -> _SchemaIndex:
        """The index of these paths, rebuilt when a schema file changed (e.g. regenerated)."""
        files = [f for p in paths for f in _yaml_files(p)]
        key = tuple((str(f), *_stat(f)) for f in files)
        index = cls._cache.get(key)
        if index is None:
            if len(cls._cache) > 16:
                cls._cache.clear()
            index = cls._cache[key] = cls(paths)
        return index

    def _add(self, doc: Any, source: str) -> None:
        if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
            return
        api, kind = doc.get("apiVersion"), doc.get("kind")
        if api == "apiextensions.k8s.io/v1" and kind == "CustomResourceDefinition":
            self._add_crd(doc, source)
        elif api in ("apiextensions.crossplane.io/v1", "apiextensions.crossplane.io/v2") and (
            kind == "CompositeResourceDefinition"
        ):
            self._add_xrd(doc, source)

    def _put(self, group: str, version: str, kind: str, entry: _Entry) -> None:
        self.entries.setdefault((group, version, kind), entry)

    def _add_crd(self, crd: dict[str, Any], source: str) -> None:
        spec = crd["spec"]
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
        for v in spec.get("versions") or []:
            schema = ((v.get("schema") or {}).get("openAPIV3Schema")) or {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            }
            self._put(group, v.get("name", ""), kind, _Entry(schema, None, source))

    def _add_xrd(self, xrd: dict[str, Any], source: str) -> None:
        spec = xrd["spec"]
        v2 = xrd["apiVersion"].endswith("/v2")
        scope = spec.get("scope") or ("Namespaced" if v2 else "LegacyCluster")
        policy = spec.get("defaultCompositionUpdatePolicy") or "Automatic"
        group = spec.get("group", "")
        names = spec.get("names") or {}
        claim_names = spec.get("claimNames") if not v2 else None
        for v in spec.get("versions") or []:
            user = ((v.get("schema") or {}).get("openAPIV3Schema")) or {}
            schema, max_len = _xr_schema(user, scope, policy, claim=False)
            self._put(
                group, v.get("name", ""), names.get("kind", ""), _Entry(schema, max_len, source)
            )
            if claim_names and scope == "LegacyCluster":
                cschema, cmax = _xr_schema(user, scope, policy, claim=True)
                self._put(
                    group,
                    v.get("name", ""),
                    claim_names.get("kind", ""),
                    _Entry(cschema, cmax, source),
                )

    def validator(self, api_version: str, kind: str) -> _Compiled | None:
        key = (api_version, kind)
        if key not in self.validators:
            group, _, version = api_version.rpartition("/")
            entry = self.entries.get((group, version, kind))
            compiled = None
            if entry is not None:
                compiled = _Compiled(
                    _StructuralValidator(_crd_root_schema(entry.schema), format_checker=_FORMATS),
                    structural=entry.schema,
                    name_rule="dns-subdomain",
                    name_max_length=entry.name_max_length,
                )
            self.validators[key] = compiled
        return self.validators[key]


def _yaml_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path] if path.suffix in (".yaml", ".yml") else []
    if not path.is_dir():
        return []
    return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


# Parsed schema files, kept between runs: schemas/ is 5 MB of YAML, half a second to
# parse on every `dot-inference render --validate`. Keyed by path, mtime and size, so an
# edited or regenerated file is parsed again. DOT_INFERENCE_CACHE names another folder.
_CACHE_DIR = Path(
    os.environ.get("DOT_INFERENCE_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dot-inference"
)


def _disk_cache(path: str, mtime_ns: int, size: int) -> Path:
    key = hashlib.sha256(f"{path}\0{mtime_ns}\0{size}".encode()).hexdigest()[:32]
    return _CACHE_DIR / "schemas" / f"{key}.pickle"


@functools.lru_cache(maxsize=1024)
def _parsed_cached(path: str, mtime_ns: int, size: int) -> tuple[Any, ...]:
    cached = _disk_cache(path, mtime_ns, size)
    try:
        with open(cached, "rb") as f:
            docs = pickle.load(f)  # written below, by this code, from the same file
        if isinstance(docs, tuple):
            return docs
    except (OSError, pickle.PickleError, EOFError, AttributeError, ValueError):
        pass
    try:
        with open(path, encoding="utf-8") as f:
            docs = tuple(d for d in yaml.load_all(f, Loader=_Loader) if isinstance(d, dict))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return ()
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            pickle.dump(docs, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cached)
    except OSError:
        pass  # a read-only home: parse every time
    return docs


def _stat(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _parsed(path: Path) -> tuple[Any, ...]:
    return _parsed_cached(str(path), *_stat(path))


# --------------------------------------------------------------------------------------------
# Crossplane XRD -> CRD schema (crossplane internal/xcrd: crd.go, schemas.go)


def _obj(props: dict[str, Any] | None = None, required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props or {}}
    if required:
        out["required"] = required
    return out


_STR = {"type": "string"}
_MATCH_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}


def _xr_spec_props(scope: str, policy: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "compositionRef": _obj({"name": _STR}, ["name"]),
        "compositionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionRevisionRef": _obj({"name": _STR}, ["name"]),
        "compositionRevisionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionUpdatePolicy": {
            "type": "string",
            "enum": ["Automatic", "Manual"],
            "default": policy,
        },
        "resourceRefs": {
            "type": "array",
            "x-kubernetes-list-type": "atomic",
            "items": _obj(
                {"apiVersion": _STR, "name": _STR, "kind": _STR}
                | ({} if scope == "Namespaced" else {"namespace": _STR}),
                ["apiVersion", "kind"],
            ),
        },
    }
    if scope == "LegacyCluster":
        props["claimRef"] = _obj(
            {"apiVersion": _STR, "kind": _STR, "namespace": _STR, "name": _STR},
            ["apiVersion", "kind", "namespace", "name"],
        )
        props["writeConnectionSecretToRef"] = _obj(
            {"name": _STR, "namespace": _STR}, ["name", "namespace"]
        )
        return props
    return {
        "crossplane": {
            "type": "object",
            "description": "Configures how Crossplane will reconcile this composite resource",
            "properties": props,
        }
    }


def _claim_spec_props() -> dict[str, Any]:
    return {
        "compositionRef": _obj({"name": _STR}, ["name"]),
        "compositionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionRevisionRef": _obj({"name": _STR}, ["name"]),
        "compositionRevisionSelector": _obj({"matchLabels": _MATCH_LABELS}, ["matchLabels"]),
        "compositionUpdatePolicy": {"type": "string", "enum": ["Automatic", "Manual"]},
        "compositeDeletePolicy": {"type": "string", "enum": ["Background", "Foreground"]},
        "resourceRef": _obj(
            {"apiVersion": _STR, "kind": _STR, "name": _STR}, ["apiVersion", "kind", "name"]
        ),
        "writeConnectionSecretToRef": _obj({"name": _STR}, ["name"]),
    }


def _xr_status_props(scope: str) -> dict[str, Any]:
    props: dict[str, Any] = {
        "conditions": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": _obj(
                {
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "message": _STR,
                    "reason": _STR,
                    "status": _STR,
                    "type": _STR,
                    "observedGeneration": {"type": "integer", "format": "int64"},
                },
                ["lastTransitionTime", "reason", "status", "type"],
            ),
        }
    }
    published = _obj({"lastPublishedTime": {"type": "string", "format": "date-time"}})
    if scope in ("Namespaced", "Cluster"):
        props["crossplane"] = _obj({"connectionDetails": published})
    else:
        props["connectionDetails"] = published
        props["claimConditionTypes"] = {
            "type": "array",
            "x-kubernetes-list-type": "set",
            "items": _STR,
        }
    return props


def _xr_schema(
    user: dict[str, Any], scope: str, policy: str, *, claim: bool
) -> tuple[dict[str, Any], int]:
    """The openAPIV3Schema of the CRD Crossplane generates for an XR (or a claim)."""
    user = copy.deepcopy(user)
    uprops = user.get("properties") or {}
    max_len = 63
    umeta_name = ((uprops.get("metadata") or {}).get("properties") or {}).get("name") or {}
    if isinstance(umeta_name.get("maxLength"), int) and umeta_name["maxLength"] < max_len:
        max_len = umeta_name["maxLength"]

    xspec = uprops.get("spec") or {}
    spec: dict[str, Any] = {"type": "object", "properties": {}}
    if xspec.get("required"):
        spec["required"] = list(xspec["required"])
    if xspec.get("x-kubernetes-preserve-unknown-fields"):
        spec["x-kubernetes-preserve-unknown-fields"] = True
    if xspec.get("x-kubernetes-validations"):
        spec["x-kubernetes-validations"] = list(xspec["x-kubernetes-validations"])
    if xspec.get("oneOf"):
        spec["oneOf"] = list(xspec["oneOf"])
    spec["properties"].update(xspec.get("properties") or {})
    spec["properties"].update(_claim_spec_props() if claim else _xr_spec_props(scope, policy))

    xstatus = uprops.get("status") or {}
    status: dict[str, Any] = {"type": "object", "properties": {}}
    for key in ("required", "x-kubernetes-validations", "oneOf"):
        if xstatus.get(key):
            status[key] = xstatus[key]
    status["properties"].update(xstatus.get("properties") or {})
    status["properties"].update(_xr_status_props("LegacyCluster" if claim else scope))

    schema = {
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": _STR,
            "kind": _STR,
            "metadata": _obj({"name": {"type": "string", "maxLength": max_len}}),
            "spec": spec,
            "status": status,
        },
    }
    return schema, max_len


# --------------------------------------------------------------------------------------------
# Core kinds (kubernetes-validate's strict JSON schemas)


@functools.lru_cache(maxsize=8)
def _core_schemas(k8s_version: str) -> tuple[str, Any]:
    """(schema directory, registry) for the newest bundled version not newer than requested."""
    from kubernetes_validate import utils as kv
    from referencing import Registry, Resource

    wanted = kv.major_minor(k8s_version.lstrip("v"))
    versions = [v for v in kv.all_versions() if _vkey(kv.major_minor(v)) <= _vkey(wanted)]
    if not versions:
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {k8s_version}")
    schema_dir = f"v{versions[-1]}-local-strict"
    defs = kv.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", k8s_version)
    registry: Any = Resource.from_contents(defs) @ Registry()
    return schema_dir, registry


def _vkey(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split(".") if x.isdigit())


_core_cache: dict[tuple[str, str, str], _Compiled | None] = {}


def _core_validator(k8s_version: str, api_version: str, kind: str) -> _Compiled | None:
    key = (k8s_version, api_version, kind)
    if key in _core_cache:
        return _core_cache[key]
    from kubernetes_validate import utils as kv

    compiled: _Compiled | None = None
    schema_dir, registry = _core_schemas(k8s_version)
    short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = kv.schema_contents(
            f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{short}.json", k8s_version
        )
    except (FileNotFoundError, kv.InvalidSchemaError, kv.VersionNotSupportedError):
        schema = None
    group, _, version = api_version.rpartition("/")
    if isinstance(schema, dict) and any(
        g.get("group", "") == group and g.get("version") == version and g.get("kind") == kind
        for g in schema.get("x-kubernetes-group-version-kind") or []
    ):
        validator_cls = js_validators.extend(Draft202012Validator, {})
        compiled = _Compiled(
            validator_cls(schema, registry=registry, format_checker=_FORMATS),
            structural=None,
            name_rule=_CORE_NAME_RULES.get((group, kind), "dns-subdomain"),
        )
    _core_cache[key] = compiled
    return compiled
