"""Reading the YAML `crossplane composition render` reads: claims, observed and required
resources, and the Configuration package (XRDs, Compositions).

Kubernetes reads YAML into JSON (timestamps stay strings); a key given twice and alias bombs
are refused. The package we generate is read with libyaml's C parser (PyYAML's pure-Python
one is ten times slower); what a user gives us with the Python one (it stops at the
recursion limit where libyaml's composer overflows the C stack).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


class RenderError(Exception):
    """The render could not run: bad input, no Composition, a step runner failed."""


@dataclass
class Package:
    """The XRDs and Compositions of a Configuration package."""

    xrds: list[dict] = field(default_factory=list)
    compositions: list[dict] = field(default_factory=list)


# A claim expands to at most this many YAML nodes once its aliases are resolved: generous for
# any manifest (a Composition is a few thousand), far below what an alias bomb expands to.
MAX_EXPANDED_NODES = 200_000


class _Strict:
    """Kubernetes reads YAML into JSON: timestamps stay strings. Stricter than PyYAML's safe
    loader where a typo or a hostile file would otherwise pass: a key given twice in one
    mapping is an error (Kubernetes' own decoder refuses it too), and a document whose
    aliases expand to more than MAX_EXPANDED_NODES nodes is refused before it is built."""

    def construct_document(self, node: yaml.Node) -> Any:
        if node is not None:
            memo: dict[int, int] = {}
            expanded = _expanded_size(node, memo)
            if expanded > MAX_EXPANDED_NODES:
                # Big by itself, or by what its aliases repeat.
                why = (
                    f"it holds more than {MAX_EXPANDED_NODES:,} nodes; a claim has a few "
                    "hundred, and the API's lists are short: trim what it lists"
                    if len(memo) > MAX_EXPANDED_NODES
                    else f"its anchors and aliases expand to more than {MAX_EXPANDED_NODES:,} "
                    "nodes; write the values out instead of nesting aliases"
                )
                raise yaml.constructor.ConstructorError(None, None, why, node.start_mark)
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node: yaml.Node, memo: dict[int, int]) -> int:
    """Nodes in `node` with every alias expanded (a shared node counted each time)."""
    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = MAX_EXPANDED_NODES + 1  # an alias of its own ancestor never ends
    if isinstance(node, yaml.SequenceNode):
        size = 1 + sum(_expanded_size(child, memo) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        size = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    else:
        size = 1
    size = min(size, MAX_EXPANDED_NODES + 1)
    memo[id(node)] = size
    return size


_JSON_RESOLVERS = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


_CParser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Strict, _CParser):  # type: ignore[misc,valid-type]
    """libyaml's parser, ten times faster than PyYAML's own; what a user hands us is scanned
    first (`_scan`), because libyaml's composer recurses once per level and would overflow
    the stack on deeply nested input."""

    yaml_implicit_resolvers = _JSON_RESOLVERS


# How deep a user's YAML may nest: a claim is under 20 levels, a whole object with its status
# under 40.
MAX_DEPTH = 256
_OPEN = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
_NODES = (yaml.ScalarEvent, *_OPEN)


def _scan(text: str) -> None:
    """Refuse a stream nested deeper than MAX_DEPTH, or a document of more than
    MAX_EXPANDED_NODES nodes, from libyaml's events alone (no recursion, nothing built), so
    that no input costs more than reading it once."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_CParser):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise RecursionError
        elif isinstance(event, _CLOSE):
            depth -= 1
        elif isinstance(event, yaml.DocumentStartEvent):
            nodes = 0
        if isinstance(event, _NODES):
            nodes += 1
            if nodes > MAX_EXPANDED_NODES:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"it holds more than {MAX_EXPANDED_NODES:,} nodes; a claim has a few "
                    "hundred, and the API's lists are short: trim what it lists",
                    event.start_mark,
                )


def load_yaml_documents(text: str, source: str = "<input>", *, trusted: bool = False) -> list[Any]:
    """All non-empty documents of a YAML stream. Raises RenderError on bad YAML, a key given
    twice, nesting or aliases beyond reason. `trusted`: the package this repository
    generates, not scanned first."""
    try:
        if not trusted:
            _scan(text)
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise RenderError(f"{source}: invalid YAML{where}: {problem}") from e
    except RecursionError as e:
        raise RenderError(f"{source}: invalid YAML: nested too deeply") from e
    return [d for d in docs if d is not None]


def yaml_files(path: Path) -> list[Path]:
    """`path` itself, or every *.yaml / *.yml below it (sorted)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return [path]


def load_objects(path: Path, *, trusted: bool = False) -> list[dict]:
    """Kubernetes objects from a YAML file or a directory of YAML files."""
    if not path.exists():
        raise RenderError(f"{path}: no such file or directory")
    objs: list[dict] = []
    for p in yaml_files(path):
        try:
            text = p.read_text()
        except OSError as e:
            raise RenderError(f"{p}: cannot read: {e.strerror or e}") from e
        for doc in load_yaml_documents(text, str(p), trusted=trusted):
            if not isinstance(doc, dict):
                raise RenderError(f"{p}: expected Kubernetes objects, found a {type(doc).__name__}")
            objs.append(doc)
    return objs


def load_package(package_dir: Path) -> Package:
    """The XRDs and Compositions found in a Configuration package directory."""
    package_dir = Path(package_dir)
    if not package_dir.is_dir():
        raise RenderError(f"{package_dir}: package directory not found")
    pkg = Package()
    for obj in load_objects(package_dir, trusted=True):
        group = str(obj.get("apiVersion", "")).split("/")[0]
        if group != "apiextensions.crossplane.io":
            continue
        if obj.get("kind") == "CompositeResourceDefinition":
            pkg.xrds.append(obj)
        elif obj.get("kind") == "Composition":
            pkg.compositions.append(obj)
    return pkg
