"""The gRPC adapter: RunFunctionRequest -> plain data -> compose -> RunFunctionResponse.

Nothing here decides anything; `function.compose` does. The adapter only performs the one
lookup compose asks for (`hub_query`: the Hugging Face Hub, for a model the catalog lacks).
Whatever happens, the function answers: an unexpected error becomes a fatal result, never a
crash.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import grpc
from crossplane.function import logging, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1
from google.protobuf import struct_pb2 as structpb

from function.cluster import ledger
from function.compose import compose
from function.model import hub
from function.model.facts import adapter_queries, hub_query
from function.outcome import Inputs, Outcome

_STATUS = {
    "True": fnv1.STATUS_CONDITION_TRUE,
    "False": fnv1.STATUS_CONDITION_FALSE,
    "Unknown": fnv1.STATUS_CONDITION_UNKNOWN,
}


def struct_to_dict(struct: structpb.Struct) -> dict[str, Any]:
    """A protobuf Struct as plain data, exactly as the SDK's `resource.struct_to_dict`
    (json_format.MessageToDict: numbers are floats, null is None, infinity and NaN refused)
    reads it, a few times faster: the function reads every model of the namespace on every
    call, and that conversion was most of a call's time (benchmarks/bench.py function-peers)."""
    return {key: _plain(value) for key, value in struct.fields.items()}


def _plain(value: structpb.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_plain(v) for v in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if math.isinf(number) or math.isnan(number):
            raise ValueError(f"Fail to serialize {number} for Value.number_value")
        return number
    if kind == "bool_value":
        return value.bool_value
    return None


def inputs_from(req: fnv1.RunFunctionRequest) -> Inputs:
    """The plain data compose() needs, read from the request."""
    xr = struct_to_dict(req.observed.composite.resource)
    observed = {name: struct_to_dict(r.resource) for name, r in req.observed.resources.items()}
    fn_input = struct_to_dict(req.input) if req.HasField("input") else {}
    image, simulator_image, llmd_image, picker, sidecar, s3_tool, copy_tool = (
        _image(fn_input, k)
        for k in (
            "engine",
            "simulator",
            "llmdEngine",
            "endpointPicker",
            "routingSidecar",
            "s3Tool",
            "copyTool",
        )
    )
    required = {
        name: [_required(name, i.resource) for i in req.required_resources[name].items]
        for name in req.required_resources
    }
    # Crossplane before v2 called them extra resources; honour both.
    for name in req.extra_resources:
        required.setdefault(
            name, [struct_to_dict(i.resource) for i in req.extra_resources[name].items]
        )
    return Inputs(
        xr=xr,
        observed=observed,
        engine_image=image,
        simulator_image=simulator_image,
        llmd_engine_image=llmd_image,
        picker_image=picker,
        sidecar_image=sidecar,
        s3_tool_image=s3_tool,
        copy_tool_image=copy_tool,
        required=required,
    )


def _required(name: str, struct: structpb.Struct) -> dict[str, Any]:
    """A required resource as plain data; of a Usage in a cluster's ledger only the metadata
    the function reads of it (function/cluster/ledger.py), not its spec or managedFields."""
    if name != ledger.LEDGER_REQUIREMENT:
        return struct_to_dict(struct)
    meta = struct.fields.get("metadata")
    if meta is None or meta.WhichOneof("kind") != "struct_value":
        return {}
    fields = meta.struct_value.fields
    return {"metadata": {k: _plain(fields[k]) for k in ledger.READ_METADATA if k in fields}}


def _image(fn_input: dict, key: str) -> str | None:
    """The image the Composition's input pins under `key` (`engine`, `simulator`, and for
    the llm-d backend `llmdEngine`, `endpointPicker`, `routingSidecar`; for weights from a
    source `s3Tool` and `copyTool`)."""
    section = fn_input.get(key) if isinstance(fn_input.get(key), dict) else {}
    image = section.get("image")
    return image if isinstance(image, str) and image else None


def write(out: Outcome, rsp: fnv1.RunFunctionResponse) -> None:
    """Copy an Outcome into the response (desired state was copied by response.to)."""
    for name, requirement in out.requirements.items():
        response.require_resources(
            rsp,
            name,
            requirement["apiVersion"],
            requirement["kind"],
            match_name=requirement.get("matchName"),
            match_labels=requirement.get("matchLabels"),
            namespace=requirement.get("namespace"),
        )
    for c in out.conditions:
        rsp.conditions.append(
            fnv1.Condition(
                type=c.type,
                status=_STATUS[c.status],
                reason=c.reason,
                message=c.message,
                target=fnv1.TARGET_COMPOSITE,
            )
        )
    for message in out.warnings:
        response.warning(rsp, message)
    for message in out.notes:
        response.normal(rsp, message)
    if out.ttl_seconds is not None:
        rsp.meta.ttl.FromSeconds(out.ttl_seconds)
    if out.fatal is not None:
        response.fatal(rsp, out.fatal)
        return
    for name, obj in out.resources.items():
        resource.update(rsp.desired.resources[name], obj)
        ready = out.ready.get(name)
        if ready is not None:
            rsp.desired.resources[name].ready = fnv1.READY_TRUE if ready else fnv1.READY_FALSE
    if out.status:
        resource.update(rsp.desired.composite, {"status": out.status})
    if out.xr_ready is not None:
        rsp.desired.composite.ready = fnv1.READY_TRUE if out.xr_ready else fnv1.READY_FALSE


class FunctionRunner(grpcv1.FunctionRunnerServiceServicer):
    """Serves the LLMInference composition function."""

    def __init__(self) -> None:
        self.log = logging.get_logger()

    async def RunFunction(
        self, req: fnv1.RunFunctionRequest, _: grpc.aio.ServicerContext | None = None
    ) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        try:
            inputs = inputs_from(req)
            query = hub_query(inputs)
            if query is not None:
                # The one lookup compose cannot make: what the Hugging Face Hub says of a model
                # the catalog lacks (cached, bounded by a deadline; function/model/hub.py).
                answer = await hub.client().lookup_async(query.model, query.revision, query.token)
                inputs = dataclasses.replace(inputs, hub=answer)
            repos, token = adapter_queries(inputs)
            if repos:
                # Each adapter's adapter_config.json (its rank, modules, base model), asked
                # the same way (function/model/adapters.py reads it).
                answers = {r: await hub.client().lookup_adapter_async(r, token) for r in repos}
                inputs = dataclasses.replace(inputs, adapter_hub=answers)
            write(compose(inputs), rsp)
        except Exception as e:  # the function must answer whatever happens
            self.log.exception("unexpected error", tag=req.meta.tag)
            del rsp.results[:]
            response.fatal(
                rsp,
                f"function-dot-inference hit an unexpected error ({type(e).__name__}: {e}); "
                "this is a bug, please report it with the LLMInference spec",
            )
        return rsp
