"""Shared helpers: paths, the pinned engine image read from the generated Composition, and a
way to call the function the way Crossplane does."""

from __future__ import annotations

import asyncio
import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference import release

# tests/controlplane runs on the real control plane, with `./task test-control-plane` (which
# sets this); `./task test` leaves it out.
collect_ignore = [] if os.environ.get("DOT_INFERENCE_CONTROL_PLANE") else ["controlplane"]

# In-process CLI tests render one claim after another: forking a test process (xdist's own
# threads) is not safe. tests/unit/test_cli.py runs the parallel path in a subprocess.
os.environ.setdefault("DOT_INFERENCE_JOBS", "1")
# No test touches the network: the function's Hub client answers "offline" unless a test
# points it at the recorded Hub (tests/hub_server.py) with its own client.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.pop("HF_ENDPOINT", None)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "package"
EXAMPLES = ROOT / "examples"
# The name Crossplane gives this project's function, from the registry in pyproject.toml.
FUNCTION_NAME = release.release().function_name


# The tests' own YAML (fixtures, examples, what the code under test printed) read with
# libyaml's parser: PyYAML's pure-Python one made up a third of each worker's collection.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_LOADER)


def parse_yaml_all(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=_LOADER))


def load_yaml(path: Path) -> list[dict[str, Any]]:
    return [d for d in parse_yaml_all(path.read_text()) if d]


def composition_input(name: str = "llminference") -> dict[str, Any]:
    """The function's input as the generated Composition passes it (the pinned image)."""
    comp = load_yaml(PACKAGE / name / "composition.yaml")[0]
    for step in comp["spec"]["pipeline"]:
        if step["functionRef"]["name"] == FUNCTION_NAME:
            return step["input"]
    raise AssertionError("the Composition has no step for our function")


def engine_image() -> str:
    return composition_input()["engine"]["image"]


def simulator_image() -> str:
    return composition_input()["simulator"]["image"]


def llmd_images() -> dict[str, str]:
    """The llm-d backend's pinned images, as compose's Inputs take them."""
    step = composition_input()
    return {
        "llmd_engine_image": step["llmdEngine"]["image"],
        "picker_image": step["endpointPicker"]["image"],
        "sidecar_image": step["routingSidecar"]["image"],
    }


def weight_tools() -> dict[str, str]:
    """The pinned images that copy weights from spec.parameters.source, as Inputs take them."""
    step = composition_input()
    return {"s3_tool_image": step["s3Tool"]["image"], "copy_tool_image": step["copyTool"]["image"]}


def no_credentials(namespace: str = "a-team") -> dict[str, list[Any]]:
    """What Crossplane lists of a namespace's credential holders (InferenceClusters,
    ProviderConfigs; function/policy/credentials.py) when there are none: a test that hands
    the function a Secret to copy answers these requirements too."""
    from function.policy import credentials

    return {k: [] for k in credentials.requirements(namespace)}


def request(
    xr: dict[str, Any],
    *,
    observed: dict[str, dict[str, Any]] | None = None,
    required: dict[str, list[dict[str, Any]]] | None = None,
    fn_input: dict[str, Any] | None = None,
) -> fnv1.RunFunctionRequest:
    req = fnv1.RunFunctionRequest(
        observed=fnv1.State(composite=fnv1.Resource(resource=resource.dict_to_struct(xr)))
    )
    for name, obj in (observed or {}).items():
        req.observed.resources[name].resource.CopyFrom(resource.dict_to_struct(obj))
    for name, items in (required or {}).items():
        req.required_resources[name].CopyFrom(
            fnv1.Resources(
                items=[fnv1.Resource(resource=resource.dict_to_struct(i)) for i in items]
            )
        )
    req.input.CopyFrom(
        resource.dict_to_struct(fn_input if fn_input is not None else composition_input())
    )
    return req


def ready_object(manifest: dict[str, Any]) -> dict[str, Any]:
    """An observed provider-kubernetes Object, Ready, whose cluster reports `manifest`."""
    return {
        "status": {
            "atProvider": {"manifest": manifest},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }


def claim(model: str, name: str = "m", **params: Any) -> dict[str, Any]:
    """An LLMInference in namespace a-team for `model`, with spec.parameters `params`."""
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": "a-team"},
        "spec": {"parameters": {"model": model, **params}},
    }


def ledger_usage(xr: dict[str, Any]) -> dict[str, Any] | None:
    """The Usage of its cluster the LLMInference `xr` composed, as Crossplane holds it after
    the reconcile that published `xr`'s status: built by the function's own builder and
    entry writer (function/cluster/ledger.py), with the metadata Crossplane gives composed resources
    (its namespace, the `crossplane.io/composite` label, the controller reference). None for
    a model on no cluster or composed by its cluster (it composes no Usage); a model being
    deleted has its Usage being deleted too."""
    from dot_inference.crossplane import render
    from function import kube
    from function.backends import resources
    from function.backends.common import composed_by_cluster
    from function.cluster import ledger, peers
    from function.keys import CLUSTER_USAGE

    if not isinstance(xr, dict) or xr.get("kind") != peers.KIND:
        return None
    cluster = peers.cluster_of(xr)
    name = (xr.get("metadata") or {}).get("name")
    if cluster is None or not isinstance(name, str) or composed_by_cluster(xr, cluster):
        return None
    # `by` is the model's engine Object there (the ledger reads the entry, not `by`).
    engine = {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "resourceRef": {"name": kube.dns_label(f"{name}-runtime")},
    }
    usage = resources.cluster_usage(
        name=kube.dns_label(f"{name}-uses-{cluster}"), cluster=cluster, by=engine
    )
    ledger.stamp(usage, xr, xr.get("status"))
    render.set_composed_metadata(usage, xr, CLUSTER_USAGE)
    deleted = xr["metadata"].get("deletionTimestamp")
    if deleted:
        usage["metadata"]["deletionTimestamp"] = deleted
    return usage


def control_plane(
    xr: dict[str, Any], others: list[Any] = (), cluster: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """What exists on the control plane when the LLMInference `xr` reconciles beside the
    LLMInferences `others` (each as its last reconcile left it) on `cluster`: the cluster
    and the models, each labelled `crossplane.io/composite` as Crossplane labels an XR (its
    own name; the cluster's own models, which it composes, its label), and the Usage each of
    the others composed (`ledger_usage`). `xr`'s own Usage is not there: Crossplane gives a
    model its own composed resources as observed ones."""
    from function.backends.common import composed_by_cluster
    from function.cluster import ledger

    out: list[dict[str, Any]] = []
    on = cluster.get("metadata", {}).get("name") if isinstance(cluster, dict) else None
    composite = on
    if isinstance(cluster, dict):
        cluster = copy.deepcopy(cluster)
        labels = cluster["metadata"].setdefault("labels", {})
        labels.setdefault(ledger.COMPOSITE_LABEL, on)
        out.append(cluster)
        composite = labels[ledger.COMPOSITE_LABEL]
    for model in [xr, *others]:
        if not isinstance(model, dict) or not isinstance(model.get("metadata"), dict):
            continue
        model = copy.deepcopy(model)
        labels = model["metadata"].setdefault("labels", {})
        if on is not None and composed_by_cluster(model, on):
            labels[ledger.COMPOSITE_LABEL] = composite
        else:
            labels.setdefault(ledger.COMPOSITE_LABEL, model["metadata"].get("name"))
        out.append(model)
        mine = model["metadata"].get("name") == (xr.get("metadata") or {}).get("name")
        usage = None if mine else ledger_usage(model)
        if usage is not None:
            out.append(usage)
    return out


def select(requirement: dict[str, Any], world: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Crossplane's fetcher returns for a requirement as compose writes it (v2.3.4
    internal/xfn/required_resources.go: one object by name, or a List in the namespace, all
    of them when it names none, with client.MatchingLabels; sorted by "<namespace>/<name>")."""

    def meta(o: dict[str, Any]) -> dict[str, Any]:
        m = o.get("metadata")
        return m if isinstance(m, dict) else {}

    found = [
        o
        for o in world
        if o.get("apiVersion") == requirement["apiVersion"]
        and o.get("kind") == requirement["kind"]
        and (
            not requirement.get("namespace") or meta(o).get("namespace") == requirement["namespace"]
        )
    ]
    if "matchName" in requirement:
        return [o for o in found if meta(o).get("name") == requirement["matchName"]][:1]
    labels = requirement.get("matchLabels") or {}
    found = [
        o
        for o in found
        if all(
            isinstance(meta(o).get("labels"), dict) and meta(o)["labels"].get(k) == v
            for k, v in labels.items()
        )
    ]
    return sorted(found, key=lambda o: f"{meta(o).get('namespace') or ''}/{meta(o).get('name')}")


def settle(inputs: Any, world: list[dict[str, Any]], *, steady: bool = True) -> Any:
    """compose() as Crossplane runs the function: first with no required resources, then with
    what each requirement selects from `world`, until the requirements stop changing (at
    most five calls more, as internal/xfn/required_resources.go allows; a fatal result ends
    it). With `steady`, the reconcile after it, once Crossplane applied what it composed (the
    model's Usage observed, its status published), must decide the same on the cluster's
    ledger alone."""
    import dataclasses

    from function import compose
    from function.cluster import peers
    from function.keys import CLUSTER_USAGE

    def loop(inputs: Any) -> Any:
        inputs = dataclasses.replace(inputs, required={})
        asked = None
        for _ in range(6):
            out = compose.compose(inputs)
            if out.fatal is not None or out.requirements == asked:
                return out
            asked = copy.deepcopy(out.requirements)
            required = {name: select(r, world) for name, r in asked.items()}
            inputs = dataclasses.replace(inputs, required=required)
        raise AssertionError("requirements did not settle after five calls more")

    out = loop(inputs)
    usage = out.resources.get(CLUSTER_USAGE)
    if steady and out.fatal is None and usage is not None and isinstance(inputs.xr, dict):
        from dot_inference.crossplane import render

        observed = copy.deepcopy(usage)
        render.set_composed_metadata(observed, inputs.xr, CLUSTER_USAGE)
        again = loop(
            dataclasses.replace(
                inputs,
                xr={**inputs.xr, "status": copy.deepcopy(out.status)},
                observed={**inputs.observed, CLUSTER_USAGE: observed},
            )
        )
        if ledger_read(again):
            assert peers.REQUIREMENT not in again.requirements, "steady, yet not on the ledger"
        assert _decided(again) == _decided(out), "the ledger decides otherwise"
    return out


def on_cluster(
    xr: dict[str, Any], cluster: dict[str, Any] | None, observed: dict[str, Any] | None = None
) -> Any:
    """compose() for `xr` alone on `cluster`, settled as Crossplane runs it, with every pinned
    image (vLLM, the simulator, llm-d's) and what was `observed` of its last reconcile."""
    from function.outcome import Inputs

    inputs = Inputs(
        xr=xr,
        engine_image=engine_image(),
        simulator_image=simulator_image(),
        observed=observed or {},
        **llmd_images(),
    )
    return settle(inputs, control_plane(xr, [], cluster))


def ledger_read(out: Any) -> bool:
    from function.cluster import ledger

    return ledger.LEDGER_REQUIREMENT in out.requirements


def _decided(out: Any) -> dict[str, Any]:
    return {
        "fatal": out.fatal,
        "status": out.status,
        "conditions": out.conditions,
        "warnings": out.warnings,
        "notes": out.notes,
        "resources": out.resources,
    }


def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    from function.fn import FunctionRunner

    return asyncio.run(FunctionRunner().RunFunction(req))


@pytest.fixture
def image() -> str:
    return engine_image()


def on_target(resources: dict[str, Any], provider_config: str, namespace: str) -> dict[str, Any]:
    """`resources` keyed as the function keys them on another cluster: each composition
    resource name carries the target's suffix (function/cluster/target.py Target.suffix)."""
    from function.cluster.target import Target

    suffix = Target(provider_config=provider_config, namespace=namespace).suffix
    return {f"{k}{suffix}": v for k, v in resources.items()}


def by_base(resources: dict[str, Any], base: str) -> Any:
    """The one resource whose composition resource name is `base` (plus a target suffix)."""
    import re

    found = [v for k, v in resources.items() if re.fullmatch(rf"{base}(-[0-9a-f]{{6}})?", k)]
    assert len(found) == 1, f"{base}: {sorted(resources)}"
    return found[0]


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what Chainsaw's `patch` sends for a partial object)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def as_kubelet(args: list[str], index: int) -> list[str]:
    """The arguments as the kubelet passes them: $(VAR) from the variables LWS sets."""
    env = {"LWS_WORKER_INDEX": str(index), "LWS_LEADER_ADDRESS": "k2-0.k2.a-team"}
    out = []
    for a in args:
        for k, v in env.items():
            a = a.replace(f"$({k})", v)
        out.append(a)
    return out


def fetched(out: Any) -> dict[str, Any]:
    """What a finished download looks like to the next reconcile of a model on another
    cluster: its Job succeeded and the cache claim it wrote to exists, as provider-kubernetes
    reads them back (observed, by composition key)."""
    from function.keys import CACHE, FETCH

    job = next(k for k in out.resources if k.startswith(FETCH))
    claim = next(k for k in out.resources if k.startswith(CACHE))
    made = out.resources[claim]["spec"]["forProvider"]["manifest"]
    return {
        job: {"status": {"atProvider": {"manifest": {"status": {"succeeded": 1}}}}},
        claim: {"status": {"atProvider": {"manifest": made}}},
    }
