"""One kind's compiled validator and the API server's order of checks: ObjectMeta and the
schema first, then the CEL rules unless a schema error blocks them, within the object's
budget; and the API server's words for each error."""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable
from typing import Any

import jsonschema
from jsonschema import ValidationError

from dot_inference.apiserver.cel import _CEL_STATS, _CelStats, _evaluate_rule
from dot_inference.apiserver.meta import _object_meta_errors
from dot_inference.apiserver.structural import _default_and_drop_nulls, _PendingRules

# What an unknown field means on a real cluster.
PRUNED = "not in the schema, so the API server would prune it"


# --------------------------------------------------------------------------------------------
# Validation of one object


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
