"""The one interface every backend implements.

A backend turns a plan into objects. `compose` (function/compose.py) hands it a `Build`
(the claim, where it runs, the model's facts and plan, the replicas the budget allows, the
image) and an `Outcome` to compose into; the backend returns the `Engine` it built, which
the status stage reads back from what Crossplane observes (its kind, name, composition key).
Backends are chosen in order by `serves` (function/backends/registry.py): the first that
serves the claim and its plan builds it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from function.claim.spec import LLMSpec
    from function.cluster.target import Target
    from function.model import catalog, sizing
    from function.outcome import Inputs, Outcome
    from function.plan import scaling
    from function.plan.disaggregation import RolePlan


@dataclass(frozen=True)
class Build:
    """What a backend builds from: everything decided before it, nothing it decides."""

    spec: LLMSpec
    target: Target
    facts: catalog.ModelFacts | None
    plan: sizing.Plan
    image: str
    count: scaling.Replicas
    inputs: Inputs
    # llm-d's kinds of pods (prefill and decode when disaggregated); empty otherwise.
    roles: list[RolePlan] = field(default_factory=list)


@dataclass(frozen=True)
class Engine:
    """What serves the model: its kind, name, composition key, command line and image (for
    status), its context, and whether it serves the claim's current model yet."""

    kind: str  # the engine object's kind, as status names it (VLLMRuntime, StatefulSet, ...)
    name: str
    key: str
    command: list[str]
    image: str
    max_model_len: int | str | None
    current: bool
    simulated: bool
    service: str | None = None  # its Service, when not named after it
    # Labels that select one pod per replica (a multi-node replica's leader): the selector
    # the /scale subresource reports (status.replicas.selector); None when replicas do not
    # map to pods one to one (disaggregated prefill and decode).
    pods: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Fetch:
    """The download Job for the current model: its name, composition key and progress."""

    job: str
    key: str
    done: bool
    failed: str | None  # the Job's failure message


@dataclass(frozen=True)
class Backend:
    """A way of running the engine.

    - `name`: what status.plan.backend says (the claim's spec.parameters.backend value);
    - `serves(spec, plan)`: whether this backend builds the claim with that plan;
    - `build(job, out)`: compose its objects into `out`, return the Engine.
    """

    name: str
    serves: Callable[[LLMSpec, sizing.Plan], bool]
    build: Callable[[Build, Outcome], Engine]
