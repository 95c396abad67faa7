"""compose's stages one at a time (function/compose.py): which image the engine runs, and
which backend builds a claim (function/backends/registry.py), as table-driven cases."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import engine_image, simulator_image

from function.backends import multinode, production_stack, registry, simulator
from function.backends.llmd import backend as llmd
from function.claim.spec import parse
from function.compose import compose
from function.compose import engine_image as image_stage
from function.limits import GpuShape
from function.model import sizing
from function.outcome import Inputs, Outcome


def _xr(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": "a-team"},
        "spec": {"parameters": {"model": "Qwen/Qwen3-0.6B", **params}},
    }


MINE = "docker.io/me/vllm:2"
NO_ENGINE = (
    "the Composition passes no engine image (input engine.image) and "
    "spec.parameters.engine.image is not set; regenerate package/ or set "
    "spec.parameters.engine.image"
)
NO_SIMULATOR = (
    "the Composition passes no simulator image (input simulator.image); regenerate package/"
)

# (name, claim's params, Composition's engine image, simulator image, image, fatal)
IMAGE_CASES = [
    ("the Composition's pin", {}, "e:1", "s:1", "e:1", None),
    ("the claim's own image wins", {"engine": {"image": MINE}}, "e:1", "s:1", MINE, None),
    (
        "the claim's image without a pin",
        {"engine": {"image": MINE}},
        None,
        None,
        MINE,
        None,
    ),
    ("simulated: the simulator's pin", {"engine": {"simulate": True}}, "e:1", "s:1", "s:1", None),
    ("no engine image anywhere", {}, None, "s:1", None, NO_ENGINE),
    (
        "simulated, no simulator pin",
        {"engine": {"simulate": True}},
        "e:1",
        None,
        None,
        NO_SIMULATOR,
    ),
]


@pytest.mark.parametrize(
    ("params", "engine", "sim", "want", "fatal"),
    [c[1:] for c in IMAGE_CASES],
    ids=[c[0] for c in IMAGE_CASES],
)
def test_the_image_stage(params, engine, sim, want, fatal) -> None:
    out = Outcome()
    inputs = Inputs(xr=_xr(**params), engine_image=engine, simulator_image=sim)
    assert image_stage(parse(inputs.xr), inputs, out) == want
    assert out.fatal == fatal


def test_a_missing_image_is_fatal_and_composes_nothing() -> None:
    out = compose(Inputs(xr=_xr(), engine_image=None, simulator_image=simulator_image()))
    assert out.fatal == NO_ENGINE
    assert out.resources == {}


def _plan(nodes: int) -> sizing.Plan:
    one = sizing.plan_without_facts(1, GpuShape(80.0, 8, "h100", False))
    return dataclasses.replace(one, nodes=nodes)


# (name, claim's params, nodes of its plan, the backend that builds it)
BACKEND_CASES = [
    ("one node: the production stack", {}, 1, production_stack.BACKEND),
    ("over nodes: a LeaderWorkerSet", {}, 2, multinode.BACKEND),
    ("simulated", {"engine": {"simulate": True}}, 1, simulator.BACKEND),
    ("simulated wins over nodes", {"engine": {"simulate": True}}, 2, simulator.BACKEND),
    ("llm-d", {"backend": "llmd"}, 1, llmd.BACKEND),
    (
        "llm-d simulated is llm-d's",
        {"backend": "llmd", "engine": {"simulate": True}},
        1,
        llmd.BACKEND,
    ),
]


@pytest.mark.parametrize(
    ("params", "nodes", "want"), [c[1:] for c in BACKEND_CASES], ids=[c[0] for c in BACKEND_CASES]
)
def test_the_registry_picks_the_first_backend_that_serves(params, nodes, want) -> None:
    assert registry.backend_for(parse(_xr(**params)), _plan(nodes)) is want


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({}, "productionStack"),
        ({"engine": {"simulate": True}}, "productionStack"),
        ({"backend": "llmd"}, "llmd"),
    ],
)
def test_each_backend_names_itself_in_status(params: dict[str, Any], name: str) -> None:
    assert registry.backend_for(parse(_xr(**params)), _plan(1)).name == name


def test_a_claim_on_the_control_plane_reports_its_backend_and_engine() -> None:
    out = compose(Inputs(xr=_xr(), engine_image=engine_image(), simulator_image=simulator_image()))
    assert out.fatal is None
    assert out.status["plan"]["backend"] == "productionStack"
    assert out.status["plan"]["image"] == engine_image()


# (name, claim's params, the kind the Serving condition names)
ENGINE_KINDS = [
    ("the production stack serves from a VLLMRuntime", {}, "VLLMRuntime"),
    ("the simulator from a Deployment", {"engine": {"simulate": True}}, "Deployment"),
]


@pytest.mark.parametrize(
    ("params", "kind"), [c[1:] for c in ENGINE_KINDS], ids=[c[0] for c in ENGINE_KINDS]
)
def test_the_serving_condition_names_the_engine_each_backend_built(params, kind) -> None:
    out = compose(
        Inputs(xr=_xr(**params), engine_image=engine_image(), simulator_image=simulator_image())
    )
    [serving] = [c for c in out.conditions if c.type == "Serving"]
    assert f" {kind} a-team/m" in f" {serving.message}", serving.message
