"""One function-kcl pipeline step: ``run(req) -> rsp``, reading the request (its input and the
params the program sees) and writing the response (requirements, conditions, events, context
and the desired state)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from crossplane.function import response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.function_kcl.common import (
    _READY_NAMES,
    _REQ_TYPE,
    _RSP_TYPE,
    _Fatal,
    _mergo,
    _parse_duration,
    _Stop,
    _str,
    _struct,
    _to_struct,
    _value,
)
from dot_inference.function_kcl.default import _process_default, _SideEffects
from dot_inference.function_kcl.program import execute_kcl

# function-kcl targets other than Default, which nothing of ours uses.
_NOT_EMULATED = ("PatchDesired", "PatchResources", "Resources", "XR")
_SYSTEM_CONDITION_TYPES = frozenset({"Ready", "Synced", "Healthy"})
_REMOTE_SOURCE = re.compile(r"^(oci|https?|git|s3|gcs|file)://|^git::|^(github\.com|gitlab\.com)/")


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
