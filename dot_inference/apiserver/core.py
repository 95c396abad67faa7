"""The core Kubernetes kinds, validated against kubernetes-validate's strict JSON schemas
(unknown fields are errors) of the Kubernetes release asked for."""

from __future__ import annotations

import functools
import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema import validators as js_validators

from dot_inference.apiserver.compiled import _Compiled
from dot_inference.apiserver.formats import _FORMATS
from dot_inference.apiserver.meta import _CORE_NAME_RULES

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
