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

Beside it: which Composition and XRD an XR uses (composition.py), the resources a step
requires (required.py), and the metadata and conditions of what it prints (composed.py).

Nothing here prints; the CLI (`dot_inference.cli`) does.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.crossplane.composed import (
    ANNOTATION_RESOURCE_NAME,
    _condition,
    _first_n_and_some_more,
    set_composed_metadata,
    set_conditions,
)
from dot_inference.crossplane.composed import CONDITION_TIME as CONDITION_TIME
from dot_inference.crossplane.composed import LABEL_CLAIM_NAME as LABEL_CLAIM_NAME
from dot_inference.crossplane.composed import LABEL_CLAIM_NAMESPACE as LABEL_CLAIM_NAMESPACE
from dot_inference.crossplane.composed import LABEL_COMPOSITE as LABEL_COMPOSITE
from dot_inference.crossplane.composition import (
    _describe,
    _q,
    _type_ref,
    apply_xrd_defaults,
    find_xrd,
    handles,
    select_composition,
)
from dot_inference.crossplane.composition import is_handled_xr as is_handled_xr
from dot_inference.crossplane.convert import from_struct, jsonable, to_struct
from dot_inference.crossplane.documents import Package, RenderError
from dot_inference.crossplane.required import (
    _requirement_selectors,
    _selector_from_step,
    fetch_required,
)
from function.kube import dig as _get

StepRunner = Callable[[fnv1.RunFunctionRequest], Any]

RENDER_API_VERSION = "render.crossplane.io/v1beta1"
# internal/xfn/required_resources.go: MaxRequirementsIterations.
MAX_REQUIREMENTS_ITERATIONS = 5
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
