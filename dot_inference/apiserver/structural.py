"""Structural schemas read as the API server reads them: translated into a Draft 4 JSON
schema, defaults applied and nulls dropped, and the keywords jsonschema lacks
(``x-kubernetes-int-or-string``, ``-embedded-resource``, ``-list-type``, and the hook that
collects a node's ``x-kubernetes-validations`` CEL rules to run after the schema)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

from jsonschema import Draft4Validator, ValidationError
from jsonschema import validators as js_validators

from dot_inference.apiserver.meta import _OBJECT_META_SCHEMA, _object_meta_errors

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


_KEYWORDS = {
    "x-kubernetes-int-or-string": _kw_int_or_string,
    "x-kubernetes-embedded-resource": _kw_embedded_resource,
    "x-kubernetes-list-type": _kw_list_type,
    "x-kubernetes-validations": _kw_cel,
}

_StructuralValidator = js_validators.extend(Draft4Validator, _KEYWORDS)
