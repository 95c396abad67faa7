"""The index of the CRD and XRD schemas under the schema paths: the YAML files found there,
parsed once and kept in a disk cache between runs, and a compiled validator per kind."""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dot_inference.apiserver.compiled import _Compiled
from dot_inference.apiserver.formats import _FORMATS
from dot_inference.apiserver.structural import _crd_root_schema, _StructuralValidator
from dot_inference.apiserver.xr import _xr_schema

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
