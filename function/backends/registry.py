"""Every backend, in the order they are asked whether they serve a claim: the first that does
builds it. A new backend is one module with a `BACKEND` and one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from function.backends import multinode, production_stack, simulator
from function.backends.base import Backend
from function.backends.llmd import backend as llmd

if TYPE_CHECKING:
    from function.claim.spec import LLMSpec
    from function.model import sizing

BACKENDS: tuple[Backend, ...] = (
    llmd.BACKEND,  # backend: llmd (simulated or not)
    simulator.BACKEND,  # engine.simulate on the production stack's side
    multinode.BACKEND,  # a replica larger than one node (apps.lws)
    production_stack.BACKEND,  # the rest: one VLLMRuntime
)


def backend_for(spec: LLMSpec, plan: sizing.Plan) -> Backend:
    return next(b for b in BACKENDS if b.serves(spec, plan))
