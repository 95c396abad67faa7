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
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.crossplane.convert import from_struct, jsonable, to_struct
from dot_inference.crossplane.documents import Package, RenderError
from function.cluster.target import dig as _get

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
# (docs/architecture.md); this project's own follows the registry in pyproject.toml.
FN_KCL = "crossplane-contrib-function-kcl"
FN_AUTO_READY = "crossplane-contrib-function-auto-ready"


@functools.cache
def fn_dot_inference() -> str:
    """The name Crossplane gives this project's function (dot_inference/release.py)."""
    from dot_inference import release

    return release.release().function_name


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
    # Crossplane sorts by "<namespace>/<name>" as one string (stable when listing across
    # namespaces; "a-b/x" comes before "a/x").
    found.sort(
        key=lambda o: (
            f"{_get(o, 'metadata', 'namespace') or ''}/{_get(o, 'metadata', 'name') or ''}"
        )
    )
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


# A step's input as a protobuf Struct, kept per input object: the loaded package is shared by
# every render, and the InferenceCluster's input (its KCL program and the CRDs apps.llmd
# installs) is large enough that converting it for each claim would dominate.
_INPUTS: dict[int, tuple[dict[str, Any], Any]] = {}


def _input_struct(step_input: dict[str, Any]) -> Any:
    kept = _INPUTS.get(id(step_input))
    if kept is None or kept[0] is not step_input:
        kept = (step_input, to_struct(step_input))
        _INPUTS[id(step_input)] = kept
    return kept[1]


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
    xr = jsonable(xr)
    if xrd is not None:
        xr = apply_xrd_defaults(xr, xrd)
    required = [jsonable(r) for r in required]

    observed_by_name: dict[str, dict] = {}
    for o in observed:
        name = (_get(o, "metadata", "annotations") or {}).get(ANNOTATION_RESOURCE_NAME)
        if name:
            observed_by_name[str(name)] = jsonable(o)

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
            req.input.CopyFrom(_input_struct(step["input"]))
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
            requirements[step_name] = jsonable(_message_dict(rsp.requirements))
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
        FN_KCL: _LazyRunner("dot_inference.function_kcl", "run"),
        FN_AUTO_READY: _LazyRunner("dot_inference.function_auto_ready", "run"),
        fn_dot_inference(): _LazyRunner("function.fn", "RunFunction", cls="FunctionRunner"),
    }


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
