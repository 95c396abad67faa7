"""The gRPC adapter: RunFunctionRequest -> plain data -> compose -> RunFunctionResponse.

Nothing here decides anything; `function.compose` does. The adapter only performs the one
lookup compose asks for (`hub_query`: the Hugging Face Hub, for a model the catalog lacks).
Whatever happens, the function answers: an unexpected error becomes a fatal result, never a
crash.
"""

from __future__ import annotations

import dataclasses

import grpc
from crossplane.function import logging, request, resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

from function import hub
from function.compose import Inputs, Outcome, compose, hub_query

_STATUS = {
    "True": fnv1.STATUS_CONDITION_TRUE,
    "False": fnv1.STATUS_CONDITION_FALSE,
    "Unknown": fnv1.STATUS_CONDITION_UNKNOWN,
}


def inputs_from(req: fnv1.RunFunctionRequest) -> Inputs:
    """The plain data compose() needs, read from the request."""
    xr = resource.struct_to_dict(req.observed.composite.resource)
    observed = {
        name: resource.struct_to_dict(r.resource) for name, r in req.observed.resources.items()
    }
    fn_input = resource.struct_to_dict(req.input) if req.HasField("input") else {}
    image, simulator_image, llmd_image, picker, sidecar = (
        _image(fn_input, k)
        for k in ("engine", "simulator", "llmdEngine", "endpointPicker", "routingSidecar")
    )
    required = {name: request.get_required_resources(req, name) for name in req.required_resources}
    # Crossplane before v2 called them extra resources; honour both.
    for name in req.extra_resources:
        required.setdefault(
            name, [resource.struct_to_dict(i.resource) for i in req.extra_resources[name].items]
        )
    return Inputs(
        xr=xr,
        observed=observed,
        engine_image=image,
        simulator_image=simulator_image,
        llmd_engine_image=llmd_image,
        picker_image=picker,
        sidecar_image=sidecar,
        required=required,
    )


def _image(fn_input: dict, key: str) -> str | None:
    """The image the Composition's input pins under `key` (`engine`, `simulator`, and for
    the llm-d backend `llmdEngine`, `endpointPicker`, `routingSidecar`)."""
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
                # the catalog lacks (cached, bounded by a deadline; function/hub.py).
                answer = await hub.client().lookup_async(query.model, query.revision, query.token)
                inputs = dataclasses.replace(inputs, hub=answer)
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
