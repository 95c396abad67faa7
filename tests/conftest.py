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
