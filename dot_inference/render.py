"""Run a Composition's function pipeline offline, the way `crossplane render` does.

The semantics follow Crossplane's own offline renderer (crossplane/crossplane
`cmd/crank/render/render.go`, v2 line) and the pieces of the real composite reconciler it
leans on:

* the XR is defaulted from its XRD schema first (`--xrd`);
* every pipeline step gets the observed state (the XR plus the observed composed
  resources, keyed by their `crossplane.io/composition-resource-name` annotation), the
  desired state *returned by the previous step* (nothing is merged), the context, the
  step's `input` and no credentials;
* a step that asks for required resources is called again with them, until its
  requirements stop changing (at most 5 extra calls, `internal/xfn/required_resources.go`);
* a fatal result stops the pipeline;
* the printed XR is the desired XR (status) plus its identity and a `Ready` condition;
  composed resources get `generateName`, the composition-resource-name annotation, the
  `crossplane.io/composite` label, the namespace of a namespaced XR and a controller
  owner reference to the XR (`SetComposedResourceMetadata`).

`dump_stream` prints objects byte-for-byte the way Crossplane's Go YAML serializer does
(sorted keys in go-yaml order, go-yaml quoting, Go number formatting).

Nothing here prints; the CLI (`dot_inference.cli`) does.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import importlib
import inspect
import json
import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from function.cluster import dig as _get

StepRunner = Callable[[fnv1.RunFunctionRequest], Any]

ANNOTATION_RESOURCE_NAME = "crossplane.io/composition-resource-name"
LABEL_COMPOSITE = "crossplane.io/composite"
LABEL_CLAIM_NAME = "crossplane.io/claim-name"
LABEL_CLAIM_NAMESPACE = "crossplane.io/claim-namespace"

RENDER_API_VERSION = "render.crossplane.io/v1beta1"
# Crossplane's render stamps every condition with this time: a real one would be noise.
CONDITION_TIME = "2024-01-01T00:00:00Z"
# internal/xfn/required_resources.go: MaxRequirementsIterations.
MAX_REQUIREMENTS_ITERATIONS = 5
# crossplane-runtime resource.DefaultFirstN.
_FIRST_N = 3
# Condition types users may not set (crossplane-runtime IsSystemConditionType).
_SYSTEM_CONDITIONS = frozenset({"Ready", "Synced", "Healthy"})

_STATUS_NAMES = {
    fnv1.STATUS_CONDITION_TRUE: "True",
    fnv1.STATUS_CONDITION_FALSE: "False",
    fnv1.STATUS_CONDITION_UNKNOWN: "Unknown",
    fnv1.STATUS_CONDITION_UNSPECIFIED: "Unknown",
}

# The names Crossplane gives the Function packages this Configuration depends on
# (docs/architecture.md).
FN_KCL = "crossplane-contrib-function-kcl"
FN_AUTO_READY = "crossplane-contrib-function-auto-ready"
FN_DOT_INFERENCE = "devops-toolkit-function-dot-inference"


class RenderError(Exception):
    """The render could not run: bad input, no Composition, a step runner failed."""


@dataclass
class RenderResult:
    xr: dict
    composed: list[dict]
    results: list[dict]
    context: dict
    fatal: str | None = None
    fatal_step: str | None = None
    requirements: dict[str, dict] = field(default_factory=dict)

    def objects(
        self, *, include_function_results: bool = False, include_context: bool = False
    ) -> list[dict]:
        """The documents `crossplane render` prints, in its order."""
        out = [self.xr, *self.composed]
        if include_function_results:
            out.extend(self.results)
        if include_context:
            out.append(
                {"apiVersion": RENDER_API_VERSION, "kind": "Context", "fields": self.context}
            )
        return out


@dataclass
class Package:
    xrds: list[dict] = field(default_factory=list)
    compositions: list[dict] = field(default_factory=list)


# --------------------------------------------------------------------------- loading


# A claim expands to at most this many YAML nodes once its aliases are resolved: generous for
# any manifest (a Composition is a few thousand), far below what an alias bomb expands to.
MAX_EXPANDED_NODES = 200_000


class _Loader(yaml.SafeLoader):
    """Kubernetes reads YAML into JSON: timestamps stay strings. Stricter than PyYAML's safe
    loader where a typo or a hostile file would otherwise pass: a key given twice in one
    mapping is an error (Kubernetes' own decoder refuses it too), and a document whose
    aliases expand to more than MAX_EXPANDED_NODES nodes is refused before it is built."""

    def compose_document(self) -> yaml.Node | None:
        node = super().compose_document()
        if node is not None:
            expanded = _expanded_size(node, {})
            if expanded > MAX_EXPANDED_NODES:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"its anchors and aliases expand to more than {MAX_EXPANDED_NODES:,} nodes; "
                    "write the values out instead of nesting aliases",
                    node.start_mark,
                )
        return node

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


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_yaml_documents(text: str, source: str = "<input>") -> list[Any]:
    """All non-empty documents of a YAML stream. Raises RenderError on bad YAML, a key given
    twice, or aliases that expand beyond reason."""
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))  # a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise RenderError(f"{source}: invalid YAML{where}: {problem}") from e
    except RecursionError as e:
        raise RenderError(f"{source}: invalid YAML: nested too deeply") from e
    return [d for d in docs if d is not None]


# function-kcl reports a failed KCL check or assertion with the evaluator's frames
# ("---> File prog.k:475: Check failed on the condition: <message>"); a user needs the
# message, which names the claim's field, not a line of the generated program.
_KCL_FAILURE = "failed to run kcl function pipelines"
_KCL_FRAME = re.compile(r"^---> File [^:]+:\d+(?::\d+)?: (?:Check failed on the condition: )?")


def user_message(fatal: str) -> str:
    """A fatal result as a user reads it: a function's message as it is; of the KCL
    program's, the failed check's own message (it starts with the claim's field path)."""
    if not fatal.startswith(_KCL_FAILURE):
        return fatal
    lines = [ln for ln in fatal.strip().splitlines() if ln.strip()]
    frames = [ln for ln in lines if _KCL_FRAME.match(ln)]
    if not frames:
        return fatal
    message = _KCL_FRAME.sub("", frames[-1]).strip()
    return message or fatal


def yaml_files(path: Path) -> list[Path]:
    """`path` itself, or every *.yaml / *.yml below it (sorted)."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    return [path]


def load_objects(path: Path) -> list[dict]:
    """Kubernetes objects from a YAML file or a directory of YAML files."""
    if not path.exists():
        raise RenderError(f"{path}: no such file or directory")
    objs: list[dict] = []
    for p in yaml_files(path):
        try:
            text = p.read_text()
        except OSError as e:
            raise RenderError(f"{p}: cannot read: {e.strerror or e}") from e
        for doc in load_yaml_documents(text, str(p)):
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
    for obj in load_objects(package_dir):
        group = str(obj.get("apiVersion", "")).split("/")[0]
        if group != "apiextensions.crossplane.io":
            continue
        if obj.get("kind") == "CompositeResourceDefinition":
            pkg.xrds.append(obj)
        elif obj.get("kind") == "Composition":
            pkg.compositions.append(obj)
    return pkg


def _type_ref(composition: dict) -> tuple[str, str]:
    ref = _get(composition, "spec", "compositeTypeRef") or {}
    return str(ref.get("apiVersion", "")), str(ref.get("kind", ""))


def handles(composition: dict, obj: Any) -> bool:
    """Whether `composition` composes objects of `obj`'s apiVersion and kind."""
    if not isinstance(obj, dict):
        return False
    return _type_ref(composition) == (obj.get("apiVersion"), obj.get("kind"))


def is_handled_xr(pkg: Package, obj: Any) -> bool:
    return any(handles(c, obj) for c in pkg.compositions)


def _xr_ref(xr: dict, field_name: str) -> Any:
    # Crossplane v2 keeps its machinery under spec.crossplane; v1 (legacy) XRs under spec.
    found = _get(xr, "spec", "crossplane", field_name)
    return found if found is not None else _get(xr, "spec", field_name)


def _describe(obj: dict) -> str:
    return f"{obj.get('kind', '?')}/{_get(obj, 'metadata', 'name') or '?'}"


def find_xrd(pkg: Package, xr: dict) -> dict | None:
    """The XRD that defines `xr`'s apiVersion and kind, if the package has one."""
    group, _, version = str(xr.get("apiVersion", "")).rpartition("/")
    for xrd in pkg.xrds:
        spec = xrd.get("spec") or {}
        if spec.get("group") != group or _get(spec, "names", "kind") != xr.get("kind"):
            continue
        if any(v.get("name") == version for v in spec.get("versions") or []):
            return xrd
    return None


def select_composition(pkg: Package, xr: dict) -> dict:
    """The Composition Crossplane would use for `xr`.

    By `spec.crossplane.compositionRef.name`; else the Compositions for the XR's type
    filtered by `compositionSelector.matchLabels`; else the XRD's `defaultCompositionRef`;
    else the only Composition for the type.
    """
    candidates = [c for c in pkg.compositions if handles(c, xr)]
    what = f"{xr.get('apiVersion')} {xr.get('kind')}"
    ref = _xr_ref(xr, "compositionRef")
    if isinstance(ref, dict) and ref.get("name"):
        for c in pkg.compositions:
            if _get(c, "metadata", "name") == ref["name"]:
                if not handles(c, xr):
                    api, kind = _type_ref(c)
                    raise RenderError(
                        f"{_describe(xr)}: Composition {_q(ref['name'])} composes {api} {kind}, "
                        f"not {what}"
                    )
                return c
        raise RenderError(
            f"{_describe(xr)}: compositionRef names {_q(ref['name'])}, which the "
            "package does not have"
        )
    if not candidates:
        raise RenderError(f"{_describe(xr)}: no Composition in the package composes {what}")
    selector = _xr_ref(xr, "compositionSelector")
    match_labels = (selector or {}).get("matchLabels") if isinstance(selector, dict) else None
    if match_labels:
        candidates = [
            c
            for c in candidates
            if all(
                (_get(c, "metadata", "labels") or {}).get(k) == v for k, v in match_labels.items()
            )
        ]
        if not candidates:
            raise RenderError(
                f"{_describe(xr)}: no Composition for {what} has labels {match_labels}"
            )
    elif len(candidates) > 1:
        xrd = find_xrd(pkg, xr)
        default = _get(xrd, "spec", "defaultCompositionRef", "name") if xrd else None
        for c in candidates:
            if default and _get(c, "metadata", "name") == default:
                return c
    if len(candidates) > 1:
        names = ", ".join(sorted(str(_get(c, "metadata", "name")) for c in candidates))
        raise RenderError(
            f"{_describe(xr)}: several Compositions compose {what} ({names}); set "
            "spec.crossplane.compositionRef.name"
        )
    return candidates[0]


# --------------------------------------------------------------------------- defaults


def _default(value: Any, schema: Any) -> None:
    """Apply OpenAPI defaults like the API server's structural defaulting: a property that
    is absent (or null and not nullable) gets a copy of its default; recurse into
    properties, additionalProperties and items."""
    if not isinstance(schema, dict):
        return
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, prop in props.items():
            if not isinstance(prop, dict) or "default" not in prop:
                continue
            if key not in value or (value[key] is None and not prop.get("nullable")):
                value[key] = copy.deepcopy(prop["default"])
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            if key in props:
                _default(child, props[key])
            elif isinstance(extra, dict):
                _default(child, extra)
    elif isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for child in value:
                _default(child, items)


def apply_xrd_defaults(xr: dict, xrd: dict) -> dict:
    """A copy of `xr` with the defaults of the XRD version it uses filled in."""
    out = copy.deepcopy(xr)
    version = str(xr.get("apiVersion", "")).rpartition("/")[2]
    for v in _get(xrd, "spec", "versions") or []:
        if v.get("name") == version:
            _default(out, _get(v, "schema", "openAPIV3Schema"))
            break
    return out


# --------------------------------------------------------------------------- conversion


def _jsonable(value: Any) -> Any:
    """What a Kubernetes object looks like after a JSON round trip."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return value
    if isinstance(value, float):
        return _int_if_integral(value)
    return str(value)


def _int_if_integral(value: float) -> float | int:
    # encoding/json writes an integral float64 without a fraction and sigs.k8s.io/yaml
    # reads it back as an int: what Crossplane prints for `replicas: 1` from a Struct.
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def to_struct(obj: dict) -> Any:
    return resource.dict_to_struct(_jsonable(obj))


def from_struct(struct: Any) -> dict:
    return _jsonable(resource.struct_to_dict(struct))


# --------------------------------------------------------------------------- required resources


def _labels(obj: dict) -> dict:
    return _get(obj, "metadata", "labels") or {}


def fetch_required(selector: Any, required: Iterable[dict]) -> Any:
    """The resources matching a ResourceSelector, as a Resources message (empty when none
    match, so the function sees the requirement answered)."""
    out = fnv1.Resources()
    ns = selector.namespace if selector.HasField("namespace") and selector.namespace else None
    match = selector.WhichOneof("match")
    found = []
    for obj in required:
        if obj.get("apiVersion") != selector.api_version or obj.get("kind") != selector.kind:
            continue
        if ns is not None and _get(obj, "metadata", "namespace") != ns:
            continue
        name = _get(obj, "metadata", "name")
        if match == "match_name":
            if name == selector.match_name:
                found = [obj]
                break
        elif match == "match_labels":
            labels = _labels(obj)
            if all(labels.get(k) == v for k, v in selector.match_labels.labels.items()):
                found.append(obj)
        else:
            found.append(obj)
    found.sort(key=lambda o: str(_get(o, "metadata", "name") or ""))
    for obj in found:
        out.items.add().resource.CopyFrom(to_struct(obj))
    return out


def _requirement_selectors(step: dict) -> list[dict]:
    """A step's bootstrap `requirements.requiredResources` (Crossplane v2)."""
    reqs = step.get("requirements")
    return (reqs.get("requiredResources") or []) if isinstance(reqs, dict) else []


def _selector_from_step(sel: dict) -> Any:
    s = fnv1.ResourceSelector(
        api_version=str(sel.get("apiVersion", "")), kind=str(sel.get("kind", ""))
    )
    if sel.get("name"):
        s.match_name = str(sel["name"])
    elif isinstance(sel.get("matchLabels"), dict):
        s.match_labels.labels.update({str(k): str(v) for k, v in sel["matchLabels"].items()})
    if sel.get("namespace"):
        s.namespace = str(sel["namespace"])
    return s


# --------------------------------------------------------------------------- running steps


class _AsyncBridge:
    """Runs coroutines from step runners on one private event loop."""

    loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, awaitable: Any) -> Any:
        if cls.loop is None or cls.loop.is_closed():
            cls.loop = asyncio.new_event_loop()
        return cls.loop.run_until_complete(awaitable)


def _call(runner: StepRunner, req: Any) -> Any:
    rsp = runner(req)
    if inspect.isawaitable(rsp):
        rsp = _AsyncBridge.run(rsp)
    return rsp


def _q(s: str) -> str:
    """Go's %q for the strings we quote in messages."""
    return json.dumps(s, ensure_ascii=False)


def _run_step(runner: StepRunner, req: Any, step: str, required: list[dict]) -> Any:
    """Call a step, feeding it required resources until its requirements settle
    (internal/xfn/required_resources.go FetchingFunctionRunner)."""
    previous = None
    for _ in range(MAX_REQUIREMENTS_ITERATIONS + 1):
        try:
            rsp = _call(runner, req)
        except Exception as e:
            raise RenderError(
                f"cannot run pipeline step {_q(step)}: {type(e).__name__}: {e}"
            ) from e
        if not isinstance(rsp, fnv1.RunFunctionResponse):
            raise RenderError(
                f"cannot run pipeline step {_q(step)}: the runner returned "
                f"{type(rsp).__name__}, not a RunFunctionResponse"
            )
        if any(r.severity == fnv1.SEVERITY_FATAL for r in rsp.results):
            return rsp
        current = rsp.requirements if rsp.HasField("requirements") else None
        if current == previous:
            return rsp
        previous = None
        req.ClearField("required_resources")
        req.ClearField("extra_resources")
        if current is not None:
            previous = fnv1.Requirements()
            previous.CopyFrom(current)
            for name, selector in previous.resources.items():
                req.required_resources[name].CopyFrom(fetch_required(selector, required))
            for name, selector in previous.extra_resources.items():
                req.extra_resources[name].CopyFrom(fetch_required(selector, required))
        if rsp.HasField("context"):
            req.context.CopyFrom(rsp.context)
        else:
            req.ClearField("context")
    raise RenderError(
        f"pipeline step {_q(step)}: requirements didn't stabilize after the maximum number of "
        f"iterations ({MAX_REQUIREMENTS_ITERATIONS})"
    )


# --------------------------------------------------------------------------- output shaping


def _first_n_and_some_more(names: list[str], n: int = _FIRST_N) -> str:
    # crossplane-runtime resource.StableNAndSomeMore
    names = sorted(names)
    if len(names) > n:
        return f"{', '.join(names[:n])}, and {len(names) - n} more"
    if len(names) == n:
        return f"{', '.join(names[: n - 1])}, and {names[n - 1]}"
    return ", ".join(names)


def _condition(type_: str, status: str, reason: str, message: str = "") -> dict:
    c = {"type": type_, "status": status, "lastTransitionTime": CONDITION_TIME, "reason": reason}
    if message:
        c["message"] = message
    return c


def _same_condition(a: dict, b: dict) -> bool:
    keys = ("type", "status", "reason", "message", "observedGeneration")
    return all(a.get(k) == b.get(k) for k in keys)


def set_conditions(obj: dict, *conditions: dict) -> None:
    """crossplane-runtime ConditionedStatus.SetConditions on an unstructured object."""
    status = obj.setdefault("status", {})
    if not isinstance(status, dict):
        status = obj["status"] = {}
    existing = status.get("conditions")
    if not isinstance(existing, list):
        existing = status["conditions"] = []
    for new in conditions:
        for i, old in enumerate(existing):
            if isinstance(old, dict) and old.get("type") == new.get("type"):
                if not _same_condition(old, new):
                    existing[i] = new
                break
        else:
            existing.append(new)


def set_composed_metadata(cd: dict, xr: dict, name: str) -> None:
    """render.go SetComposedResourceMetadata: generateName, namespace, the
    composition-resource-name annotation, the composite label and the controller ref."""
    meta = cd.get("metadata")
    if not isinstance(meta, dict):
        meta = cd["metadata"] = {}
    xr_meta = xr.get("metadata") or {}
    xr_labels = xr_meta.get("labels") or {}
    prefix = xr_labels.get(LABEL_COMPOSITE) or xr_meta.get("name", "")
    if not meta.get("name") and not meta.get("generateName"):
        meta["generateName"] = f"{prefix}-"
    if xr_meta.get("namespace"):
        meta["namespace"] = xr_meta["namespace"]
    annotations = meta.get("annotations")
    meta["annotations"] = {
        **(annotations if isinstance(annotations, dict) else {}),
        ANNOTATION_RESOURCE_NAME: name,
    }
    labels = dict(meta["labels"]) if isinstance(meta.get("labels"), dict) else {}
    labels[LABEL_COMPOSITE] = prefix
    claim_ref = _get(xr, "spec", "claimRef")
    if xr_labels.get(LABEL_CLAIM_NAME) and xr_labels.get(LABEL_CLAIM_NAMESPACE):
        labels[LABEL_CLAIM_NAMESPACE] = xr_labels[LABEL_CLAIM_NAMESPACE]
        labels[LABEL_CLAIM_NAME] = xr_labels[LABEL_CLAIM_NAME]
    elif isinstance(claim_ref, dict) and claim_ref.get("name"):
        labels[LABEL_CLAIM_NAMESPACE] = claim_ref.get("namespace", "")
        labels[LABEL_CLAIM_NAME] = claim_ref["name"]
    meta["labels"] = labels

    uid = xr_meta.get("uid", "")
    owner = {
        "apiVersion": xr.get("apiVersion", ""),
        "kind": xr.get("kind", ""),
        "name": xr_meta.get("name", ""),
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, dict)]
    for r in refs:
        if r.get("controller") and r.get("uid", "") != uid:
            raise RenderError(
                f"composed resource {_q(name)} is already controlled by {r.get('kind')} "
                f"{r.get('name')} (UID {r.get('uid')})"
            )
    for i, r in enumerate(refs):
        if r.get("uid", "") == uid:
            refs[i] = owner
            break
    else:
        refs.append(owner)
    meta["ownerReferences"] = refs


# --------------------------------------------------------------------------- render


def _check_xr(xr: Any) -> None:
    if not isinstance(xr, dict):
        raise RenderError("the composite resource must be a Kubernetes object")
    for key in ("apiVersion", "kind"):
        if not xr.get(key) or not isinstance(xr.get(key), str):
            raise RenderError(f"the composite resource has no {key}")
    if not _get(xr, "metadata", "name"):
        raise RenderError(f"{xr['kind']}: the composite resource has no metadata.name")


def render(
    xr: dict,
    composition: dict,
    runners: Mapping[str, StepRunner],
    *,
    xrd: dict | None = None,
    observed: Iterable[dict] = (),
    required: Iterable[dict] = (),
    context: dict | None = None,
) -> RenderResult:
    """Run `composition`'s pipeline for `xr` and return what `crossplane render` prints.

    Raises RenderError when the render cannot run; a fatal result is not an error: it is
    returned in `RenderResult.fatal`.
    """
    _check_xr(xr)
    if not handles(composition, xr):
        api, kind = _type_ref(composition)
        raise RenderError(
            f"{_describe(xr)}: the Composition composes {api} {kind}, not "
            f"{xr['apiVersion']} {xr['kind']}"
        )
    mode = _get(composition, "spec", "mode") or "Pipeline"
    if mode != "Pipeline":
        raise RenderError(
            f"render only supports Composition Function pipelines: Composition "
            f"{_q(str(_get(composition, 'metadata', 'name')))} must use spec.mode: Pipeline"
        )
    xr = _jsonable(xr)
    if xrd is not None:
        xr = apply_xrd_defaults(xr, xrd)
    required = [_jsonable(r) for r in required]

    observed_by_name: dict[str, dict] = {}
    for o in observed:
        name = (_get(o, "metadata", "annotations") or {}).get(ANNOTATION_RESOURCE_NAME)
        if name:
            observed_by_name[str(name)] = _jsonable(o)

    o_state = fnv1.State(composite=fnv1.Resource(resource=to_struct(xr)))
    for name, obj in observed_by_name.items():
        o_state.resources[name].resource.CopyFrom(to_struct(obj))

    desired: Any = fnv1.State()
    fctx: Any = to_struct(context or {})
    results: list[dict] = []
    conditions: list[dict] = []
    requirements: dict[str, dict] = {}
    capabilities = [
        fnv1.CAPABILITY_CAPABILITIES,
        fnv1.CAPABILITY_REQUIRED_RESOURCES,
        fnv1.CAPABILITY_CREDENTIALS,
        fnv1.CAPABILITY_CONDITIONS,
    ]

    for step in _get(composition, "spec", "pipeline") or []:
        step_name = str(step.get("step", ""))
        fn_name = str(_get(step, "functionRef", "name") or "")
        runner = runners.get(fn_name)
        if runner is None:
            raise RenderError(
                f"pipeline step {_q(step_name)}: no step runner for Function {_q(fn_name)} "
                f"(known: {', '.join(sorted(runners)) or 'none'})"
            )
        req = fnv1.RunFunctionRequest(observed=o_state)
        if desired is not None:
            req.desired.CopyFrom(desired)
        if fctx is not None:
            req.context.CopyFrom(fctx)
        if isinstance(step.get("input"), dict):
            req.input.CopyFrom(to_struct(step["input"]))
        for sel in _requirement_selectors(step):
            name = str(sel.get("requirementName", ""))
            req.required_resources[name].CopyFrom(
                fetch_required(_selector_from_step(sel), required)
            )
        req.meta.capabilities.extend(capabilities)

        rsp = _run_step(runner, req, step_name, required)

        desired = rsp.desired if rsp.HasField("desired") else None
        fctx = rsp.context if rsp.HasField("context") else None
        for c in rsp.conditions:
            conditions.append(
                _condition(c.type, _STATUS_NAMES.get(c.status, "Unknown"), c.reason, c.message)
            )
        if rsp.HasField("requirements"):
            requirements[step_name] = _jsonable(_message_dict(rsp.requirements))
        for r in rsp.results:
            if r.severity == fnv1.SEVERITY_FATAL:
                return RenderResult(
                    xr=_identity(xr),
                    composed=[],
                    results=results,
                    context=from_struct(fctx) if fctx is not None else {},
                    fatal=r.message,
                    fatal_step=step_name,
                    requirements=requirements,
                )
            results.append(
                {
                    "apiVersion": RENDER_API_VERSION,
                    "kind": "Result",
                    "step": step_name,
                    "severity": fnv1.Severity.Name(r.severity),
                    "message": r.message,
                }
            )

    composed: list[dict] = []
    unready: list[str] = []
    desired_resources = desired.resources if desired is not None else {}
    for name in desired_resources:
        dr = desired_resources[name]
        if dr.ready != fnv1.READY_TRUE:
            unready.append(name)
        cd = from_struct(dr.resource)
        prior = observed_by_name.get(name)
        if prior is not None:
            # An existing composed resource keeps its name and namespace.
            meta = cd.setdefault("metadata", {})
            pm = prior.get("metadata") or {}
            for key in ("namespace", "name", "generateName"):
                if pm.get(key):
                    meta[key] = pm[key]
                else:
                    meta.pop(key, None)
        set_composed_metadata(cd, xr, name)
        composed.append(cd)
    composed.sort(key=lambda c: c["metadata"]["annotations"][ANNOTATION_RESOURCE_NAME])

    has_composite = desired is not None and desired.HasField("composite")
    out_xr = from_struct(desired.composite.resource) if has_composite else {}
    out_xr.update(_identity(xr))
    meta = out_xr.get("metadata") if isinstance(out_xr.get("metadata"), dict) else {}
    meta.update(_identity(xr)["metadata"])
    out_xr["metadata"] = meta
    composite_ready = desired.composite.ready if has_composite else fnv1.READY_UNSPECIFIED
    ready = _condition("Ready", "True", "Available")
    if composite_ready == fnv1.READY_FALSE:
        ready = _condition("Ready", "False", "Creating")
    elif composite_ready == fnv1.READY_UNSPECIFIED and unready:
        ready = _condition(
            "Ready", "False", "Creating", f"Unready resources: {_first_n_and_some_more(unready)}"
        )
    set_conditions(out_xr, ready)
    for c in conditions:
        if c["type"] not in _SYSTEM_CONDITIONS:
            set_conditions(out_xr, c)

    return RenderResult(
        xr=out_xr,
        composed=composed,
        results=results,
        context=from_struct(fctx) if fctx is not None else {},
        requirements=requirements,
    )


def _identity(xr: dict) -> dict:
    meta = {"name": _get(xr, "metadata", "name")}
    if _get(xr, "metadata", "namespace"):
        meta["namespace"] = _get(xr, "metadata", "namespace")
    return {"apiVersion": xr["apiVersion"], "kind": xr["kind"], "metadata": meta}


def _message_dict(msg: Any) -> dict:
    from google.protobuf import json_format

    return json_format.MessageToDict(msg)


# --------------------------------------------------------------------------- runners


class _LazyRunner:
    """A step runner imported on first use, so a missing module fails only when used.

    With `cls`, the runner is `cls().<attr>`; a method that takes a gRPC context as its
    second argument (FunctionRunner.RunFunction) gets None.
    """

    def __init__(self, module: str, attr: str, cls: str | None = None) -> None:
        self.module, self.attr, self.cls = module, attr, cls
        self._fn: StepRunner | None = None

    def _resolve(self) -> StepRunner:
        if self._fn is None:
            mod = importlib.import_module(self.module)
            if self.cls is None:
                self._fn = getattr(mod, self.attr)
            else:
                method = getattr(getattr(mod, self.cls)(), self.attr)
                self._fn = (
                    functools.partial(_with_context, method) if _takes_context(method) else method
                )
        return self._fn

    def __call__(self, req: Any) -> Any:
        return self._resolve()(req)

    def __repr__(self) -> str:
        target = f"{self.cls}().{self.attr}" if self.cls else self.attr
        return f"<step runner {self.module}.{target}>"


def _with_context(method: Callable, req: Any) -> Any:
    return method(req, None)


def _takes_context(method: Callable) -> bool:
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2


def default_runners() -> dict[str, StepRunner]:
    """The step runners for the Functions this Configuration uses (docs/architecture.md).

    Modules are imported on first use; the Python function's async RunFunction is awaited
    on a private event loop.
    """
    return {
        FN_KCL: _LazyRunner("dot_inference.kcl_function", "run"),
        FN_AUTO_READY: _LazyRunner("dot_inference.autoready", "run"),
        FN_DOT_INFERENCE: _LazyRunner("function.fn", "RunFunction", cls="FunctionRunner"),
    }


# --------------------------------------------------------------------------- YAML output
#
# Crossplane prints with k8s.io/apimachinery's JSON serializer in YAML mode: encoding/json,
# then sigs.k8s.io/yaml.JSONToYAML (go-yaml v2). That means: keys sorted in go-yaml's
# "natural" order, strings quoted (double quotes) when they would read back as something
# else, multi-line strings as literal blocks, lines folded at 80 columns, sequences not
# indented under their key, floats in Go's shortest 'g' format.

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

_GO_MAP = {
    **dict.fromkeys(
        ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], _BOOL
    ),
    **dict.fromkeys(
        ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], _BOOL
    ),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], _NULL),
    **dict.fromkeys(
        [
            ".nan",
            ".NaN",
            ".NAN",
            ".inf",
            ".Inf",
            ".INF",
            "+.inf",
            "+.Inf",
            "+.INF",
            "-.inf",
            "-.Inf",
            "-.INF",
        ],
        _FLOAT,
    ),
    "<<": "tag:yaml.org,2002:merge",
}
_GO_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_GO_TIMESTAMPS = (
    re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$"),
    re.compile(
        r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?"
        r"(Z|[+-]\d{2}:\d{2})$"
    ),
    re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?$"),
)
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_GO_FLOAT_LITERAL = re.compile(
    r"^[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf|infinity|nan)$", re.I
)


def _go_timestamp(s: str) -> bool:
    for rx in _GO_TIMESTAMPS:
        m = rx.match(s)
        if not m:
            continue
        g = [int(x) for x in m.groups()[:6] if x is not None and x.isdigit()]
        month, day = g[1], g[2]
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return False
        return len(g) < 6 or (g[3] < 24 and g[4] < 60 and g[5] < 60)
    return False


def _go_resolve(s: str) -> str:
    """The tag go-yaml v2 would resolve a plain scalar to (yaml.v2 resolve.go)."""
    if s in _GO_MAP:
        return _GO_MAP[s]
    first = s[0]
    if first == ".":
        return _FLOAT if _GO_FLOAT_LITERAL.match(s) else _STR
    if first in "+-0123456789":
        if first.isdigit() and len(s) > 4 and s[4] == "-" and _go_timestamp(s):
            return _TIMESTAMP
        plain = s.replace("_", "")
        if _GO_INT.match(plain):
            return _INT
        if _GO_YAML_FLOAT.match(plain):
            return _FLOAT
    return _STR


def _needs_quotes(s: str) -> bool:
    return _go_resolve(s) != _STR or bool(_GO_BASE60.match(s))


def _go_float(f: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64) after a JSON round trip."""
    if math.isnan(f):
        return ".nan"
    if math.isinf(f):
        return ".inf" if f > 0 else "-.inf"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    digits, exp = _shortest_digits(f)
    sign = "-" if f < 0 else ""
    x = exp - 1  # exponent of the first digit
    if x < -4 or x >= 6:  # shortest formatting decides with precision 6
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if exp <= 0:
        return f"{sign}0.{'0' * -exp}{digits}"
    if exp >= len(digits):
        return f"{sign}{digits}{'0' * (exp - len(digits))}"
    return f"{sign}{digits[:exp]}.{digits[exp:]}"


def _shortest_digits(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of |f| and the decimal point position."""
    r = repr(abs(f))
    mant, _, e = r.partition("e")
    exp = int(e) if e else 0
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac).lstrip("0")
    point = len(int_part) + exp
    lead = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    point -= lead
    digits = digits.rstrip("0") or "0"
    return digits, point


def _go_key_less(a: str, b: str) -> bool:
    """go-yaml v2 sorter.go keyList.Less for string keys."""
    for i in range(min(len(a), len(b))):
        ca, cb = a[i], b[i]
        if ca == cb:
            continue
        al, bl = _is_letter(ca), _is_letter(cb)
        if al and bl:
            return ca < cb
        if al or bl:
            return bl
        an = bn = 0
        if ca == "0" or cb == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an = an * 10 + (ord(a[ai]) - 48)
            ai += 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn = bn * 10 + (ord(b[bi]) - 48)
            bi += 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return ca < cb
    return len(a) < len(b)


def _is_letter(c: str) -> bool:
    return unicodedata.category(c).startswith("L")


def _go_key_cmp(a: str, b: str) -> int:
    if _go_key_less(a, b):
        return -1
    if _go_key_less(b, a):
        return 1
    return 0


class _GoEmitter(yaml.emitter.Emitter):
    def choose_scalar_style(self) -> str:
        # libyaml's yaml_emitter_select_scalar_style, which go-yaml ports: a literal
        # block that is not allowed falls back to double quotes (PyYAML: single).
        if self.analysis is None:
            self.analysis = self.analyze_scalar(self.event.value)
        style = self.event.style
        a = self.analysis
        if style == '"' or self.canonical:
            return '"'
        if style and style in "|>":
            if not self.flow_level and not self.simple_key_context and a.allow_block:
                return style
            return '"'
        if self.simple_key_context and a.multiline:
            return '"'
        plain_ok = (self.flow_level and a.allow_flow_plain) or (
            not self.flow_level and a.allow_block_plain
        )
        if (
            self.event.implicit[0]
            and plain_ok
            and not (a.empty and (self.flow_level or self.simple_key_context))
        ):
            return ""
        if a.allow_single_quoted:
            return "'"
        return '"'


class _GoRepresenter(yaml.representer.SafeRepresenter):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_str(self, data: str) -> Any:
        if "\n" in data:
            style = "|"
        elif _needs_quotes(data):
            style = '"'
        else:
            style = None
        return self.represent_scalar(_STR, data, style=style)

    def represent_float(self, data: float) -> Any:
        text = _go_float(data)
        return self.represent_scalar(_INT if re.fullmatch(r"-?\d+", text) else _FLOAT, text)

    def represent_dict(self, data: dict) -> Any:
        items = sorted(
            ((str(k), v) for k, v in data.items()),
            key=functools.cmp_to_key(lambda x, y: _go_key_cmp(x[0], y[0])),
        )
        return self.represent_mapping("tag:yaml.org,2002:map", items)


_GoRepresenter.add_representer(str, _GoRepresenter.represent_str)
_GoRepresenter.add_representer(float, _GoRepresenter.represent_float)
_GoRepresenter.add_representer(dict, _GoRepresenter.represent_dict)
_GoRepresenter.add_representer(tuple, yaml.representer.SafeRepresenter.represent_list)


class _GoResolver(yaml.resolver.BaseResolver):
    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _go_resolve(value) if implicit[0] else _STR
        if kind is yaml.SequenceNode:
            return self.DEFAULT_SEQUENCE_TAG
        return self.DEFAULT_MAPPING_TAG


class _GoDumper(_GoEmitter, yaml.serializer.Serializer, _GoRepresenter, _GoResolver):
    def __init__(self, stream: Any, **kw: Any) -> None:
        _GoEmitter.__init__(
            self,
            stream,
            canonical=False,
            indent=2,
            width=80,
            allow_unicode=True,
            line_break="\n",
        )
        yaml.serializer.Serializer.__init__(self, explicit_start=False, explicit_end=False)
        _GoRepresenter.__init__(self, default_style=None, default_flow_style=False, sort_keys=False)
        _GoResolver.__init__(self)


def dump_yaml(obj: Any) -> str:
    """One object as Crossplane's YAML serializer writes it (no leading `---`)."""
    return yaml.dump(_jsonable(obj), Dumper=_GoDumper)


def dump_stream(objs: Iterable[Any]) -> str:
    """Objects as `crossplane render` prints them: each preceded by a `---` line."""
    return "".join(f"---\n{dump_yaml(o)}" for o in objs)


def render_in_package(
    pkg: Package,
    xr: dict,
    *,
    observed: Iterable[dict] = (),
    required: Iterable[dict] = (),
    context: dict | None = None,
) -> RenderResult:
    """Render `xr` with the package's Composition and XRD and the default step runners:
    what `dot-inference render` does for one XR."""
    return render(
        xr,
        select_composition(pkg, xr),
        default_runners(),
        xrd=find_xrd(pkg, xr),
        observed=observed,
        required=required,
        context=context,
    )
