"""What the function renders, held against what the pinned production-stack controller does
with it (dot_inference/production_stack_operator.py models that controller from its source).

- the Deployment the controller builds from every example is a valid Deployment;
- its update check never panics (node affinity always present);
- every change a user can make to a claim reaches the pods (arguments and variables are not
  compared by the controller: the config-hash pod annotation carries them);
- a model change keeps the pod selector (immutable) unchanged;
- every quantity is written in canonical form (else the controller updates forever);
- Ready follows exactly the status that controller writes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import EXAMPLES, by_base, engine_image, load_yaml, simulator_image, weight_tools

from dot_inference.apiserver import validate_objects
from dot_inference.production_stack_operator import (
    ControllerPanic,
    UpdateRejected,
    canonical_quantity,
    created,
    deployment_needs_update,
    reconcile,
    status_for,
)
from function.backends.resources import CONFIG_HASH_ANNOTATION
from function.compose import compose
from function.keys import RUNTIME
from function.outcome import Inputs

STATE = EXAMPLES / "state"


def _claims() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(EXAMPLES.glob("llm-*.yaml")):
        for doc in load_yaml(path):
            simulated = (doc.get("spec", {}).get("parameters", {}).get("engine") or {}).get(
                "simulate"
            )
            # A simulated model has no VLLMRuntime (function/policy/simulator_cli.py), nor does one
            # over several nodes (a LeaderWorkerSet: tests/unit/test_multinode.py), nor one
            # llm-d serves (StatefulSets: tests/unit/test_llmd.py).
            multinode = "multinode" in path.name
            llmd = doc.get("spec", {}).get("parameters", {}).get("backend") == "llmd"
            # One over several clusters composes its placements, each with its own VLLMRuntime
            # on its cluster (tests/unit/test_fleet.py).
            fleet = "placement" in doc.get("spec", {}).get("parameters", {})
            if (
                doc.get("kind") == "LLMInference"
                and not simulated
                and not multinode
                and not llmd
                and not fleet
            ):
                out.append((f"{path.name}:{doc['metadata']['name']}", doc))
    return out


CLAIMS = _claims()


def _example_of(claim: dict[str, Any]) -> str:
    """The example file a claim comes from (its state file has the same name)."""
    return next(
        path.name
        for path in sorted(EXAMPLES.glob("llm-*.yaml"))
        if any(d == claim for d in load_yaml(path))
    )


def _required(claim: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    params = claim["spec"]["parameters"]
    if params.get("clusterSelector"):
        # What Crossplane supplies for a selector: the example's state, by kind.
        state = load_yaml(STATE / f"{_example_of(claim)}")
        return {
            "inference-clusters": [d for d in state if d["kind"] == "InferenceCluster"],
            "llminferences": [d for d in state if d["kind"] == "LLMInference"],
        }
    ref = params.get("clusterRef")
    if not ref:
        return {}
    # The example's own state first (the cluster as that example has it, e.g. with
    # monitoring), then any state that has the cluster.
    own = STATE / _example_of(claim)
    paths = [own] if own.exists() else sorted(STATE.glob("*.yaml"))
    clusters = [
        d
        for p in paths
        for d in load_yaml(p)
        if d.get("kind") == "InferenceCluster" and d["metadata"]["name"] == ref["name"]
    ] or [
        d
        for p in sorted(STATE.glob("*.yaml"))
        for d in load_yaml(p)
        if d.get("kind") == "InferenceCluster" and d["metadata"]["name"] == ref["name"]
    ]
    return {"inference-cluster": clusters}


def runtime_of(claim: dict[str, Any], observed: dict[str, Any] | None = None) -> dict[str, Any]:
    """The VLLMRuntime manifest the function composes for `claim` (unwrapped from its Object)."""
    out = compose(
        Inputs(
            xr=claim,
            engine_image=engine_image(),
            simulator_image=simulator_image(),
            required=_required(claim),
            observed=observed or {},
            **weight_tools(),
        )
    )
    assert out.fatal is None, out.fatal
    obj = by_base(out.resources, RUNTIME)
    return obj["spec"]["forProvider"]["manifest"] if obj["kind"] == "Object" else obj


def _edit(claim: dict[str, Any], **params: Any) -> dict[str, Any]:
    out = copy.deepcopy(claim)
    for key, value in params.items():
        if key == "engine":
            out["spec"]["parameters"].setdefault("engine", {}).update(value)
        else:
            out["spec"]["parameters"][key] = value
    return out


@pytest.mark.parametrize(("name", "claim"), CLAIMS, ids=[n for n, _ in CLAIMS])
def test_the_controllers_deployment_is_valid(name: str, claim: dict[str, Any]) -> None:
    deployment = created(runtime_of(claim))
    deployment["metadata"]["namespace"] = "a-team"
    report = validate_objects([deployment])
    assert report.ok, report.summary()


@pytest.mark.parametrize(("name", "claim"), CLAIMS, ids=[n for n, _ in CLAIMS])
def test_the_update_check_never_panics(name: str, claim: dict[str, Any]) -> None:
    runtime = runtime_of(claim)
    assert runtime["spec"]["deploymentConfig"]["nodeSelectorTerms"], "node affinity is required"
    assert deployment_needs_update(created(runtime), runtime) is False, "stable when unchanged"


def test_the_model_controller_panics_without_node_affinity() -> None:
    """The trap the function avoids, shown on the model of the controller."""
    runtime = runtime_of(CLAIMS[0][1])
    del runtime["spec"]["deploymentConfig"]["nodeSelectorTerms"]
    with pytest.raises(ControllerPanic, match="nil pointer"):
        deployment_needs_update(created(runtime), runtime)


BASE = next(c for n, c in CLAIMS if n.startswith("llm-qwen.yaml"))

# (case, change to the claim) — each one must reach the pods.
CHANGES: list[tuple[str, dict[str, Any]]] = [
    ("extra argument", {"engine": {"extraArgs": ["--max-num-seqs", "64"]}}),
    ("environment variable", {"engine": {"env": [{"name": "VLLM_LOGGING_LEVEL", "value": "X"}]}}),
    ("context length", {"engine": {"maxModelLen": 8192}}),
    ("GPU count", {"gpu": 2}),
    ("model", {"model": "Qwen/Qwen2.5-7B-Instruct"}),
    ("image", {"engine": {"image": "docker.io/lmcache/vllm-openai:v9.9.9"}}),
]


@pytest.mark.parametrize(("case", "change"), CHANGES, ids=[c for c, _ in CHANGES])
def test_every_change_reaches_the_pods(case: str, change: dict[str, Any]) -> None:
    before = runtime_of(BASE)
    after = runtime_of(_edit(BASE, **change))
    running = created(before)
    rolled = reconcile(running, after)
    assert rolled == created(after), f"{case}: the controller kept the old pods"
    assert rolled["spec"]["selector"] == running["spec"]["selector"]


def test_the_controller_alone_would_not_roll_out_an_argument_change() -> None:
    """Why the config hash exists: without it, a changed argument never reaches the pods."""
    before = runtime_of(BASE)
    after = runtime_of(_edit(BASE, engine={"extraArgs": ["--max-num-seqs", "64"]}))
    for runtime in (before, after):
        del runtime["spec"]["deploymentConfig"]["podAnnotations"]
    assert not deployment_needs_update(created(before), after)


def test_a_label_change_would_break_the_deployment() -> None:
    """Why the labels never change: the selector is immutable."""
    before = runtime_of(BASE)
    after = copy.deepcopy(before)
    after["metadata"]["labels"]["extra"] = "x"
    after["spec"]["deploymentConfig"]["podAnnotations"] = {CONFIG_HASH_ANNOTATION: "other"}
    with pytest.raises(UpdateRejected, match="immutable"):
        reconcile(created(before), after)


def _quantities(runtime: dict[str, Any]) -> list[str]:
    dc = runtime["spec"]["deploymentConfig"]
    found = [v for k, v in dc["resources"].items() if k in ("cpu", "memory", "gpu")]
    found += [dc["shmSize"]] if dc.get("shmSize") else []
    storage = runtime["spec"].get("storageConfig") or {}
    found += [storage["size"]] if storage.get("size") else []
    return found


@pytest.mark.parametrize(("name", "claim"), CLAIMS, ids=[n for n, _ in CLAIMS])
def test_quantities_are_canonical(name: str, claim: dict[str, Any]) -> None:
    for quantity in _quantities(runtime_of(claim)):
        assert canonical_quantity(quantity) == quantity, (
            f"{quantity} is stored as {canonical_quantity(quantity)}: the controller would "
            "update the Deployment on every reconcile"
        )


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("4", "4"),
        ("4000m", "4"),
        ("0.5", "500m"),
        ("1500m", "1500m"),
        ("16Gi", "16Gi"),
        ("1024Gi", "1Ti"),
        ("1.5Gi", "1536Mi"),
        ("2000", "2k"),
        ("600Gi", "600Gi"),
    ],
)
def test_canonical_quantity_model(written: str, stored: str) -> None:
    assert canonical_quantity(written) == stored


# (case, status the controller writes, Ready?)
STATUSES: list[tuple[str, dict[str, Any] | None, bool]] = [
    ("no status yet", None, False),
    ("deployment starting", status_for(available=0, unavailable=1), False),
    ("one replica serving", status_for(available=1), True),
    ("rolling out, one replica serving", status_for(1, replicas=2, updated=1, unavailable=1), True),
    ("unknown: nothing available", status_for(available=0, replicas=1, updated=0), False),
]


def _runtime_key(claim: dict[str, Any]) -> str:
    out = compose(Inputs(xr=claim, engine_image=engine_image(), required=_required(claim)))
    return next(k for k in out.resources if k.startswith(RUNTIME))


def _observed_runtime(claim: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any]:
    out = compose(Inputs(xr=claim, engine_image=engine_image(), required=_required(claim)))
    obj = copy.deepcopy(by_base(out.resources, RUNTIME))
    if obj["kind"] == "Object":
        # provider-kubernetes copies the remote object into status.atProvider.manifest and
        # evaluates the Object's CEL readiness query on it.
        manifest = copy.deepcopy(obj["spec"]["forProvider"]["manifest"])
        if status is not None:
            manifest["status"] = status
        query = obj["spec"]["readiness"]["celQuery"]
        ready = _cel(query, manifest)
        obj["status"] = {
            "atProvider": {"manifest": manifest},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    elif status is not None:
        obj["status"] = status
    return obj


def _cel(query: str, obj: dict[str, Any]) -> bool:
    import celpy

    env = celpy.Environment()
    program = env.program(env.compile(query))
    return bool(program.evaluate({"object": celpy.json_to_cel(obj)}))


REMOTE = next(c for n, c in CLAIMS if n.startswith("llm-qwen-on-aws.yaml"))


@pytest.mark.parametrize("claim", [BASE, REMOTE], ids=["direct", "remote"])
@pytest.mark.parametrize(("case", "status", "ready"), STATUSES, ids=[c for c, _, _ in STATUSES])
def test_ready_exactly_when_the_controller_reports_an_available_replica(
    claim: dict[str, Any], case: str, status: dict[str, Any] | None, ready: bool
) -> None:
    key = _runtime_key(claim)
    observed = {key: _observed_runtime(claim, status)}
    out = compose(
        Inputs(xr=claim, engine_image=engine_image(), required=_required(claim), observed=observed)
    )
    assert out.ready[key] is ready, case
    serving = next(c for c in out.conditions if c.type == "Serving")
    assert (serving.status == "True") is ready, serving
