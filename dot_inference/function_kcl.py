"""function-kcl (crossplane-contrib/function-kcl v0.12.2) semantics on kcl-lib.

A step runner for offline render (see docs/architecture.md): ``run(req) -> rsp``. It runs the
inline KCL program of a ``krm.kcl.dev/v1alpha1`` ``KCLInput`` in-process with kcl-lib (through
``kcl_service``, which frees each reply kcl-lib's binding would keep) and turns its ``items``
into a RunFunctionResponse the way function-kcl does (upstream ``fn.go``, ``render.go``,
``pkg/resource/*.go``; krm-kcl ``pkg/edit``):

* ``option("params")`` is the input's ``spec.params`` with ``oxr``, ``dxr``, ``ocds``, ``dcds``,
  ``ctx``, ``extraResources`` and ``requiredResources`` set on top (same map, so a user param of
  one of those names is overwritten). ``option("items")`` is ``[]`` and ``option("resource_list")``
  a ResourceList whose ``functionConfig`` is the input as a KCLRun.
* The program's output is unwrapped as krm-kcl does: its ``items`` list, or, when the output has
  no ``items``, the whole output as one resource.
* Target ``Default`` (the default): an item of the XR's apiVersion and kind contributes only its
  ``status`` (merged into the desired XR's status); ``meta.krm.kcl.dev/v1alpha1`` items are
  Context, Conditions, Events, ExtraResources, RequiredResources, CompositeConnectionDetails;
  everything else is a composed resource named by ``krm.kcl.dev/composition-resource-name``
  (else ``metadata.name``) with readiness from ``krm.kcl.dev/ready``; both annotations are
  removed. Only ``Default`` is emulated: it is the target this Configuration uses; the others
  (``Resources``, ``PatchDesired``, ``PatchResources``, ``XR``) get a fatal result saying so.
* Every error becomes a fatal result (target Composite) with upstream's message; ``run`` never
  raises.

Offline limits: only inline sources (no ``oci://``, git, http or local paths) and no
``spec.dependencies``; those give a fatal result saying so.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime
import hashlib
import json
import math
import re
from typing import Any

from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format
from google.protobuf import struct_pb2 as structpb

__all__ = [
    "ANNOTATION_COMPOSITION_RESOURCE_NAME",
    "ANNOTATION_READY",
    "INPUT_API_VERSION",
    "INPUT_KIND",
    "META_API_VERSION",
    "PROGRAM_FILENAME",
    "KCLFunctionError",
    "execute_kcl",
    "run",
]

INPUT_API_VERSION = "krm.kcl.dev/v1alpha1"
INPUT_KIND = "KCLInput"
META_API_VERSION = "meta.krm.kcl.dev/v1alpha1"
ANNOTATION_READY = "krm.kcl.dev/ready"
ANNOTATION_COMPOSITION_RESOURCE_NAME = "krm.kcl.dev/composition-resource-name"
# Upstream writes the inline source to <tmp>/prog.k; error positions name this file.
PROGRAM_FILENAME = "prog.k"

# %T of the Go response, part of upstream's error messages.
_RSP_TYPE = "*v1.RunFunctionResponse"
_REQ_TYPE = "*v1.RunFunctionRequest"

# function-kcl targets other than Default, which nothing of ours uses.
_NOT_EMULATED = ("PatchDesired", "PatchResources", "Resources", "XR")
_SYSTEM_CONDITION_TYPES = frozenset({"Ready", "Synced", "Healthy"})
_READY = {
    "True": fnv1.READY_TRUE,
    "False": fnv1.READY_FALSE,
    "Unspecified": fnv1.READY_UNSPECIFIED,
}
_READY_NAMES = {v: k for k, v in _READY.items()}
_REMOTE_SOURCE = re.compile(r"^(oci|https?|git|s3|gcs|file)://|^git::|^(github\.com|gitlab\.com)/")


class KCLFunctionError(Exception):
    """An error that ends the run with a fatal result carrying this message."""


_Fatal = KCLFunctionError


class _Stop(Exception):
    """A fatal result has already been added; return the response as it is."""


# --------------------------------------------------------------------------------------------
# Entry point


def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    """Run one function-kcl pipeline step. Never raises: errors become a fatal result."""
    rsp = response.to(req)
    # function-sdk-go's response.To copies the request's context pointer: no context in, none
    # out, and the same for desired state (the Python SDK's response.to always sets both;
    # upstream's SetConditions and DuplicateNameError cases).
    if not req.HasField("context"):
        rsp.ClearField("context")
    if not req.HasField("desired"):
        rsp.ClearField("desired")
    try:
        _run(req, rsp)
    except _Stop:
        pass
    except _Fatal as err:
        _fatal(rsp, str(err))
    except Exception as err:  # a bug here must not crash the caller's render
        _fatal(
            rsp,
            f"dot-inference function-kcl emulation: internal error: {type(err).__name__}: {err}",
        )
    return rsp


def _fatal(rsp: fnv1.RunFunctionResponse, message: str) -> None:
    # function-sdk-go's response.Fatal targets the composite.
    rsp.results.append(
        fnv1.Result(severity=fnv1.SEVERITY_FATAL, message=message, target=fnv1.TARGET_COMPOSITE)
    )


def _run(req: fnv1.RunFunctionRequest, rsp: fnv1.RunFunctionResponse) -> None:
    spec = _read_input(req)
    if "ttl" in spec:
        rsp.meta.ttl.FromTimedelta(_parse_duration(spec["ttl"]))

    source = spec.get("source") or ""
    target = spec.get("target") or "Default"
    if not source:
        raise _Fatal(
            "invalid function input: spec.source: Required value: kcl source cannot be empty"
        )
    if target in _NOT_EMULATED:
        raise _Fatal(
            f"dot-inference runs function-kcl's target Default offline, not {target}: this "
            "Configuration's Compositions use only Default (an unknown target is Default, as "
            "upstream)"
        )
    if _REMOTE_SOURCE.match(source.strip()) and "\n" not in source.strip():
        raise _Fatal(
            "failed to run kcl function pipelines: dot-inference runs only inline KCL sources "
            f"offline, not {source.strip()!r}"
        )
    if spec.get("dependencies"):
        raise _Fatal(
            "failed to run kcl function pipelines: dot-inference cannot fetch spec.dependencies "
            "offline; vendor the code into spec.source"
        )

    # Observed and desired state, as function-sdk-go presents them.
    oxr = _struct(req.observed.composite.resource) if req.observed.HasField("composite") else {}
    dxr = _struct(req.desired.composite.resource) if req.desired.HasField("composite") else {}
    dxr["apiVersion"] = _str(oxr.get("apiVersion"))
    dxr["kind"] = _str(oxr.get("kind"))
    dxr_details = dict(req.desired.composite.connection_details)
    desired: dict[str, dict[str, Any]] = {}
    ready: dict[str, int] = {}
    for name, r in req.desired.resources.items():
        desired[name] = _struct(r.resource)
        ready[name] = r.ready

    params = _build_params(req, spec, oxr, dxr, desired, ready)
    data = execute_kcl(source, params, spec=spec)

    extra: dict[str, fnv1.ResourceSelector] = {}
    required: dict[str, fnv1.ResourceSelector] = {}
    side = _SideEffects()
    try:
        _process_default(data, oxr, dxr, dxr_details, desired, ready, extra, required, side)
    except _Fatal as err:
        raise _Fatal(
            f"cannot process xr and state with the pipeline output in {_RSP_TYPE}: {err}"
        ) from None

    # The order of fn.go: requirements, conditions, events, context, desired state.
    if extra or required:
        for n, sel in extra.items():
            rsp.requirements.extra_resources[n].CopyFrom(sel)
        for n, sel in required.items():
            rsp.requirements.resources[n].CopyFrom(sel)
    if side.conditions:
        _set_conditions(rsp, side.conditions)
    if side.events:
        _set_events(rsp, side.events)
    if side.context:
        merged = _struct(req.context) if req.HasField("context") else {}
        _mergo(merged, side.context)
        for key, value in merged.items():
            rsp.context.fields[key].CopyFrom(_value(value))

    xr_struct = _to_struct(dxr, "desired composite resource")
    composed = {
        name: _to_struct(obj, f"desired composed resource {name!r}")
        for name, obj in desired.items()
    }
    composite_ready = rsp.desired.composite.ready
    rsp.desired.composite.Clear()
    rsp.desired.composite.resource.CopyFrom(xr_struct)
    rsp.desired.composite.ready = composite_ready
    for k, v in dxr_details.items():
        rsp.desired.composite.connection_details[k] = v
    for name, struct in composed.items():
        r = rsp.desired.resources[name]
        r.Clear()
        r.resource.CopyFrom(struct)
        r.ready = ready.get(name, fnv1.READY_UNSPECIFIED)


# --------------------------------------------------------------------------------------------
# Input and params


# Inputs already read, by their serialized bytes: every XR of a Composition sends the same one.
_READ_INPUTS: dict[bytes, dict[str, Any]] = {}


def _input_object(req: fnv1.RunFunctionRequest) -> dict[str, Any]:
    if not req.HasField("input"):
        return {}
    key = hashlib.sha256(req.input.SerializeToString(deterministic=True)).digest()
    obj = _READ_INPUTS.get(key)
    if obj is None:
        if len(_READ_INPUTS) >= 16:
            _READ_INPUTS.clear()
        obj = _READ_INPUTS[key] = _struct(req.input)
    return obj  # read only: _build_params copies what it adds to


def _read_input(req: fnv1.RunFunctionRequest) -> dict[str, Any]:
    obj = _input_object(req)
    spec = obj.get("spec", {})
    if spec is None:
        spec = {}
    problems: list[str] = []
    if not isinstance(spec, dict):
        problems.append("spec: expected an object")
        spec = {}
    for key, kind in (
        ("source", str),
        ("target", str),
        ("dependencies", str),
        ("params", dict),
        ("resources", list),
        ("config", dict),
        ("ttl", str),
    ):
        if spec.get(key) is not None and not isinstance(spec[key], kind):
            problems.append(f"spec.{key}: expected {kind.__name__}")
    if problems:
        raise _Fatal(
            f"cannot get Function input from {_REQ_TYPE}: cannot get Function input "
            f"*v1alpha1.KCLInput from {_REQ_TYPE}: {'; '.join(problems)}"
        )
    return spec


def _build_params(
    req: fnv1.RunFunctionRequest,
    spec: dict[str, Any],
    oxr: dict[str, Any],
    dxr: dict[str, Any],
    desired: dict[str, dict[str, Any]],
    ready: dict[str, int],
) -> dict[str, Any]:
    params: dict[str, Any] = dict(spec.get("params") or {})
    params["oxr"] = oxr
    params["dxr"] = dxr
    params["dcds"] = {
        name: {"Resource": obj, "Ready": _READY_NAMES.get(ready[name], "Unspecified")}
        for name, obj in desired.items()
    }
    params["ocds"] = {
        name: {
            "Resource": _struct(r.resource),
            # Go marshals a nil map[string][]byte as null and []byte as base64.
            "ConnectionDetails": {
                k: base64.b64encode(v).decode() for k, v in r.connection_details.items()
            }
            or None,
        }
        for name, r in req.observed.resources.items()
    }
    params["ctx"] = _struct(req.context) if req.HasField("context") else {}
    params["extraResources"] = {
        name: [{"Resource": _struct(i.resource)} for i in rs.items]
        for name, rs in req.extra_resources.items()
    }
    params["requiredResources"] = {
        name: [{"Resource": _struct(i.resource)} for i in rs.items]
        for name, rs in req.required_resources.items()
    }
    return params


# --------------------------------------------------------------------------------------------
# Running KCL


def execute_kcl(
    source: str, params: dict[str, Any], *, spec: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run ``source`` with ``option("params") = params``; return the unwrapped items.

    Raises ``KCLFunctionError`` with upstream's message (the KCL error verbatim) on any error.
    """
    import kcl_lib.api as kcl_api  # imported lazily: the native library is large

    from dot_inference import kcl_service

    spec = spec or {}
    config = spec.get("config") or {}
    function_config = {
        "apiVersion": INPUT_API_VERSION,
        "kind": "KCLRun",
        "metadata": {},
        "spec": {k: v for k, v in spec.items() if k != "params"} | {"params": params},
    }
    resource_list = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": [],
        "functionConfig": function_config,
    }
    args = [
        kcl_api.Argument(name="resource_list", value=json.dumps(resource_list)),
        kcl_api.Argument(name="items", value="[]"),
        kcl_api.Argument(name="params", value=json.dumps(params)),
        # The function container's environment is not ours: keep renders reproducible.
        kcl_api.Argument(name="PATH", value=""),
        kcl_api.Argument(name="env", value="{}"),
    ]
    for arg in config.get("arguments") or []:
        key, _, value = str(arg).partition("=")
        args.append(kcl_api.Argument(name=key, value=value))
    exec_args = kcl_api.ExecProgramArgs(
        k_filename_list=[PROGRAM_FILENAME],
        k_code_list=[source],
        args=args,
        overrides=[str(o) for o in config.get("overrides") or []],
        path_selector=[str(p) for p in config.get("pathSelectors") or []],
        disable_none=bool(config.get("disableNone")),
        sort_keys=bool(config.get("sortKeys")),
        show_hidden=bool(config.get("showHidden")),
        strict_range_check=bool(config.get("strictRangeCheck")),
        debug=1 if config.get("debug") else 0,
    )
    try:
        result = kcl_service.exec_program(exec_args)
        error = result.err_message
    except Exception as err:  # kcl-lib raises for parse/compile errors
        error = str(err)
        result = None
    if error or result is None:
        raise _Fatal(f"failed to run kcl function pipelines: {_clean_kcl_error(error)}")
    try:
        docs = _json_stream(result.json_result)
    except json.JSONDecodeError as err:
        raise _Fatal(
            f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: {err}"
        ) from None
    # A program whose value is a list prints one document per element (a YAML stream), which
    # krm-kcl reads as that many resources (upstream's ComposedSameNameAsXR case).
    if len(docs) > 1:
        return [item for doc in docs for item in _unwrap(doc)]
    return _unwrap(docs[0] if docs else {})


def _json_stream(text: str) -> list[Any]:
    """Every JSON value in ``text``, one after another."""
    decoder, docs, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return docs
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)


def _clean_kcl_error(message: str) -> str:
    """kcl-lib colours its errors and repeats each parse error: strip the terminal colour codes
    (function-kcl runs without a terminal) and keep each distinct block once, in order."""
    message = re.sub(r"\x1b\[[0-9;]*m", "", message)
    blocks: list[str] = []
    for block in re.split(r"\n\s*\n", message.strip()):
        block = block.rstrip()
        if block and block not in blocks:
            blocks.append(block)
    return "\n".join(blocks) if blocks else "unknown KCL error"


def _unwrap(output: Any) -> list[dict[str, Any]]:
    """krm-kcl edit.UnwrapResources: ``items`` if present, else the output itself."""
    if not isinstance(output, dict):
        raise _Fatal(
            f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: "
            "the KCL output is not an object"
        )
    if "items" in output:
        items = output["items"]
        if not isinstance(items, list):
            raise _Fatal(
                "failed to run kcl function pipelines: wrong node kind: expected items to be a list"
            )
    elif output:
        items = [output]
    else:  # a program without output: nothing to do
        items = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Fatal(
                f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: "
                f"items[{i}] is not an object: {json.dumps(item)}"
            )
    return _plain(items)


# --------------------------------------------------------------------------------------------
# Target Default


class _SideEffects:
    def __init__(self) -> None:
        self.conditions: list[Any] = []
        self.events: list[Any] = []
        self.context: dict[str, Any] = {}


def _process_default(
    data: list[dict[str, Any]],
    oxr: dict[str, Any],
    dxr: dict[str, Any],
    dxr_details: dict[str, bytes],
    desired: dict[str, dict[str, Any]],
    ready: dict[str, int],
    extra: dict[str, fnv1.ResourceSelector],
    required: dict[str, fnv1.ResourceSelector],
    side: _SideEffects,
) -> None:
    seen: dict[str, str] = {}
    xr_api, xr_kind = _str(oxr.get("apiVersion")), _str(oxr.get("kind"))
    for obj in data:
        api_version, kind = _str(obj.get("apiVersion")), _str(obj.get("kind"))
        if api_version == xr_api and kind == xr_kind:
            # Only the status of the XR item counts (res.go, Default target).
            dst = dxr.get("status", {})
            src = obj.get("status", {})
            if dst is None:
                dst = {}
            if src is None:
                src = {}
            if not isinstance(dst, dict):
                raise _Fatal("cannot get desired composite status: status is not an object")
            if not isinstance(src, dict):
                raise _Fatal("cannot get templated composite status: status is not an object")
            _mergo(dst, src)
            dxr["status"] = dst
            continue
        if api_version == META_API_VERSION:
            _process_meta(kind, obj, dxr_details, extra, required, side)
            continue
        annotations = _annotations(obj)
        ready_value = fnv1.READY_UNSPECIFIED
        if annotations is not None and ANNOTATION_READY in annotations:
            ready_value = _ready_value(annotations.pop(ANNOTATION_READY))
        name = _resource_name(obj)
        _check_duplicate(seen, name, obj)
        desired[name] = obj
        ready[name] = ready_value


def _process_meta(
    kind: str,
    obj: dict[str, Any],
    dxr_details: dict[str, bytes],
    extra: dict[str, fnv1.ResourceSelector],
    required: dict[str, fnv1.ResourceSelector],
    side: _SideEffects,
) -> None:
    if kind == "CompositeConnectionDetails":
        details = obj.get("data")
        if isinstance(details, dict) and all(isinstance(v, str) for v in details.values()):
            for k, v in details.items():
                try:
                    dxr_details[k] = base64.b64decode(v, validate=True)
                except (binascii.Error, ValueError):
                    dxr_details[k] = b""  # upstream ignores the decode error
    elif kind == "ExtraResources":
        for key, req in _requirements(obj, "extra resources").items():
            if key in extra:
                raise _Fatal(f'duplicate extra resource key "{key}"')
            extra[key] = _selector(req, name_key="matchName", namespace_key="matchNamespace")
    elif kind == "RequiredResources":
        for key, req in _requirements(obj, "required resources").items():
            if key in required:
                raise _Fatal(f'duplicate required resource key "{key}"')
            required[key] = _selector(req, name_key="name", namespace_key="namespace")
    elif kind == "Conditions":
        conditions = obj.get("conditions")
        if conditions is not None and not _is_list_of_dicts(conditions):
            raise _Fatal("cannot get condition resources: conditions must be a list of objects")
        side.conditions = list(conditions or [])  # json.Unmarshal into a slice replaces it
    elif kind == "Events":
        events = obj.get("events")
        if events is not None and not _is_list_of_dicts(events):
            raise _Fatal("cannot get event resources: events must be a list of objects")
        side.events = list(events or [])
    elif kind == "Context":
        ctx = obj.get("data")
        if ctx is not None and not isinstance(ctx, dict):
            raise _Fatal("cannot get context resource: data must be an object")
        side.context.update(ctx or {})  # json.Unmarshal into a map merges top-level keys
    else:
        raise _Fatal(
            f'invalid kind "{kind}" for apiVersion "{META_API_VERSION}" - must be '
            "CompositeConnectionDetails or ExtraResources"
        )


def _requirements(obj: dict[str, Any], what: str) -> dict[str, dict[str, Any]]:
    reqs = obj.get("requirements")
    if reqs is None:
        return {}
    if not isinstance(reqs, dict) or not all(isinstance(v, dict) for v in reqs.values()):
        raise _Fatal(f"cannot get {what} requirements: requirements must be a map of objects")
    for key, r in reqs.items():
        for field, value in r.items():
            if field == "matchLabels":
                ok = value is None or (
                    isinstance(value, dict) and all(isinstance(v, str) for v in value.values())
                )
            else:
                ok = value is None or isinstance(value, str)
            if not ok:
                raise _Fatal(
                    f"cannot get {what} requirements: {key}.{field}: unexpected value "
                    f"{json.dumps(value)}"
                )
    return reqs


def _selector(r: dict[str, Any], *, name_key: str, namespace_key: str) -> fnv1.ResourceSelector:
    sel = fnv1.ResourceSelector(api_version=r.get("apiVersion") or "", kind=r.get("kind") or "")
    if r.get(namespace_key):
        sel.namespace = r[namespace_key]
    if r.get(name_key):
        sel.match_name = r[name_key]
    else:
        sel.match_labels.SetInParent()
        for k, v in (r.get("matchLabels") or {}).items():
            sel.match_labels.labels[k] = v
    return sel


# --------------------------------------------------------------------------------------------
# Conditions and events (pkg/resource/conditions.go, events.go)


def _target(value: Any) -> int:
    return (
        fnv1.TARGET_COMPOSITE_AND_CLAIM if value == "CompositeAndClaim" else fnv1.TARGET_COMPOSITE
    )


def _set_conditions(rsp: fnv1.RunFunctionResponse, conditions: list[dict[str, Any]]) -> None:
    set_types: set[str] = set()
    for cs in conditions:
        cond = cs.get("condition") or {}
        typ = _str(cond.get("type"))
        if typ in _SYSTEM_CONDITION_TYPES:
            _fatal(rsp, f"cannot set ClaimCondition type: {typ} is a reserved Crossplane Condition")
            raise _Stop
        if typ in set_types and not cs.get("force"):
            continue  # already set and this setter is not forceful
        c = fnv1.Condition(
            type=typ,
            reason=_str(cond.get("reason")),
            target=_target(cs.get("target")),
            status={
                "True": fnv1.STATUS_CONDITION_TRUE,
                "False": fnv1.STATUS_CONDITION_FALSE,
            }.get(_str(cond.get("status")), fnv1.STATUS_CONDITION_UNKNOWN),
        )
        if cond.get("message") is not None:
            c.message = _str(cond.get("message"))
        rsp.conditions.append(c)
        set_types.add(typ)


def _set_events(rsp: fnv1.RunFunctionResponse, events: list[dict[str, Any]]) -> None:
    for ev in events:
        event = ev.get("event") or {}
        typ = event.get("type")
        severity = {None: fnv1.SEVERITY_NORMAL, "Normal": fnv1.SEVERITY_NORMAL}.get(typ)
        if typ == "Warning":
            severity = fnv1.SEVERITY_WARNING
        if severity is None:
            _fatal(rsp, f"invalid type {typ}, must be one of [Normal, Warning]")
            raise _Stop
        result = fnv1.Result(
            severity=severity, message=_str(event.get("message")), target=_target(ev.get("target"))
        )
        if event.get("reason") is not None:
            result.reason = _str(event.get("reason"))
        rsp.results.append(result)


# --------------------------------------------------------------------------------------------
# Helpers


def _struct(s: structpb.Struct) -> dict[str, Any]:
    return _plain(json_format.MessageToDict(s))


def _plain(value: Any) -> Any:
    """Integral floats to ints: protojson prints 2.0 as 2, so KCL sees an int upstream."""
    if isinstance(value, float):
        if value.is_integer() and math.isfinite(value) and abs(value) < 2**63:
            return int(value)
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _to_struct(obj: dict[str, Any], what: str) -> structpb.Struct:
    try:
        return resource.dict_to_struct(obj)
    except (json_format.ParseError, TypeError, ValueError) as err:
        raise _Fatal(f"cannot convert {what} to a protobuf Struct: {err}") from None


def _value(v: Any) -> structpb.Value:
    out = structpb.Value()
    try:
        json_format.ParseDict(v, out)
    except (json_format.ParseError, TypeError, ValueError) as err:
        raise _Fatal(f"cannot convert value to structpb.Value: {err}") from None
    return out


def _str(v: Any) -> str:
    return v if isinstance(v, str) else ""


def _is_list_of_dicts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, dict) for i in v)


def _annotations(obj: dict[str, Any]) -> dict[str, str] | None:
    """unstructured GetAnnotations: None unless a string map."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return None
    ann = meta.get("annotations")
    if not isinstance(ann, dict) or not all(isinstance(v, str) for v in ann.values()):
        return None
    return ann


def _resource_name(obj: dict[str, Any]) -> str:
    """GetResourceName: the annotation (removed) or metadata.name."""
    annotations = _annotations(obj)
    if annotations is not None and ANNOTATION_COMPOSITION_RESOURCE_NAME in annotations:
        return annotations.pop(ANNOTATION_COMPOSITION_RESOURCE_NAME)
    meta = obj.get("metadata")
    return _str(meta.get("name")) if isinstance(meta, dict) else ""


def _ready_value(value: str) -> int:
    if value not in _READY:
        raise _Fatal(
            f'invalid function input: invalid "{ANNOTATION_READY}" annotation value "{value}": '
            "must be True, False, or Unspecified"
        )
    return _READY[value]


def _check_duplicate(seen: dict[str, str], name: str, obj: dict[str, Any]) -> None:
    meta = obj.get("metadata")
    kind_and_name = (
        f"{_str(obj.get('kind'))}/{_str(meta.get('name')) if isinstance(meta, dict) else ''}"
    )
    if name in seen:
        raise _Fatal(
            f'multiple composed resources with name "{name}" returned: {seen[name]} and '
            f"{kind_and_name}. Set different metadata.name or "
            f'metadata.annotations."{ANNOTATION_COMPOSITION_RESOURCE_NAME}" to distinguish them.'
        )
    seen[name] = kind_and_name


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == 0 or v is False or v == {} or v == []


def _mergo(dst: dict[str, Any], src: dict[str, Any]) -> None:
    """mergo.Merge(&dst, src, mergo.WithOverride) on map[string]any, as upstream uses it.

    Maps merge recursively, lists and scalars (even empty ones) replace, null replaces; a map
    does not replace a non-empty non-map value.
    """
    for key, value in src.items():
        if isinstance(value, dict):
            current = dst.get(key)
            if isinstance(current, dict):
                _mergo(current, value)
                continue
            if key in dst and not _empty(current):
                continue
            dst[key] = copy.deepcopy(value)
        else:
            dst[key] = copy.deepcopy(value)


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def _parse_duration(text: str) -> datetime.timedelta:
    """Go time.ParseDuration (metav1.Duration); negative durations clamp to 0 as upstream."""
    s = text.strip()
    sign = -1 if s.startswith("-") else 1
    body = s.lstrip("+-")
    if body == "0":
        return datetime.timedelta(0)
    pos, seconds = 0, 0.0
    for m in _DURATION.finditer(body):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    if pos != len(body) or not body:
        raise _Fatal(
            f'cannot get Function input from {_REQ_TYPE}: spec.ttl: time: invalid duration "{text}"'
        )
    return datetime.timedelta(seconds=max(0.0, sign * seconds))


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
