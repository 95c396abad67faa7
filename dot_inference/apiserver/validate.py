"""The entry points: ``validate_objects`` and its ``ValidationReport``, ``defaulted``, and
the helpers around them (``schema_dirs``, ``load_yaml_stream``, ``object_id``); each object
is validated by its kind's compiled validator, a provider-kubernetes manifest too."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from dot_inference.apiserver.cel import _CEL_STATS, _CelStats
from dot_inference.apiserver.core import _core_validator
from dot_inference.apiserver.index import _Loader, _SchemaIndex
from dot_inference.apiserver.structural import _default_and_drop_nulls
from dot_inference.pins import pin

PROVIDER_KUBERNETES_GROUPS = ("kubernetes.crossplane.io", "kubernetes.m.crossplane.io")


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
    repo = Path(__file__).resolve().parents[2]
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
