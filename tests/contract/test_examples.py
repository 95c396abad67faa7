"""Every example renders through the real package, offline, and every rendered object
(Objects' manifests included) validates against its upstream schema: 0 invalid, 0 without a
schema. Remote variants of the LLM examples check the Object-wrapped path too."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.apiserver import validate_objects
from dot_inference.crossplane import documents, render

PKG = documents.load_package(PACKAGE)


def claims() -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(id, XR, required resources) for every XR in examples/; an example's cluster state,
    when it has one, is in examples/state/<example file name>."""
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        state = EXAMPLES / "state" / path.name
        required = load_yaml(state) if state.exists() else []
        for doc in load_yaml(path):
            if render.is_handled_xr(PKG, doc):
                out.append((path.name, doc, required))
    return out


def render_and_validate(xr: dict[str, Any], required: list[dict[str, Any]]) -> render.RenderResult:
    result = render.render_in_package(PKG, xr, required=required)
    assert result.fatal is None, result.fatal
    # render prints the XR as Crossplane does (no spec): validate the claim with its status.
    report = validate_objects([{**xr, "status": result.xr.get("status", {})}, *result.composed])
    assert report.invalid == [], report.invalid
    assert report.no_schema == [], report.no_schema
    assert report.cel_not_evaluated == 0, report.cel_not_evaluated_rules
    return result


CLAIMS = claims()


@pytest.mark.parametrize(("xr", "required"), [c[1:] for c in CLAIMS], ids=[c[0] for c in CLAIMS])
def test_example_renders_and_validates(xr: dict[str, Any], required: list[dict[str, Any]]) -> None:
    result = render_and_validate(xr, required)
    assert result.composed, "nothing was composed"
    # A composed Usage is kept until its `by` is gone, and blocks its owner's deletion: by
    # the XR that composes it, a foreground deletion of that XR would never end (found on
    # the control plane by chainsaw's cleanup).
    own = (xr["apiVersion"], xr["kind"], xr["metadata"]["name"])
    for usage in (o for o in result.composed if o["kind"] == "Usage"):
        by = usage["spec"].get("by") or {}
        ref = (by.get("apiVersion"), by.get("kind"), (by.get("resourceRef") or {}).get("name"))
        assert ref != own, f"Usage {usage['metadata']['name']} is by its own XR"


LLM = [c for c in CLAIMS if c[1]["kind"] == "LLMInference" and not c[2]]


@pytest.mark.parametrize("xr", [c[1] for c in LLM], ids=[c[0] for c in LLM])
def test_llm_example_on_another_cluster_validates(xr: dict[str, Any]) -> None:
    remote = copy.deepcopy(xr)
    remote["spec"]["parameters"] |= {
        "providerConfigName": "gpu-cluster",
        "hfTokenSecretRef": {"name": "hf-token"},
    }
    token = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf-token", "namespace": xr["metadata"]["namespace"]},
        "type": "Opaque",
        "data": {"token": "bm90LWEtdG9rZW4="},
    }
    result = render_and_validate(remote, [token])
    kinds = {o["kind"] for o in result.composed}
    assert kinds == {"Object"}
    manifests = {o["spec"]["forProvider"]["manifest"]["kind"] for o in result.composed}
    assert {"Namespace", "Secret", "VLLMRuntime"} <= manifests


def test_every_example_file_is_used() -> None:
    used = {c[0] for c in CLAIMS}
    for path in EXAMPLES.glob("*.yaml"):
        if path.name != "functions.yaml":
            assert path.name in used, f"{path.name} has no XR the package handles"


def test_every_example_can_be_applied_beside_the_others() -> None:
    """A user applies examples/ to one namespace at once (the control plane's suite does):
    no two XRs may share a kind and a name there, or the second overwrites the first.
    (llm-autoscaled.yaml's `qwen-7b` replaced llm-two-regions.yaml's on the real plane.)"""
    seen: dict[tuple[str, str, str], str] = {}
    for file, xr, _ in CLAIMS:
        key = (xr["kind"], xr["metadata"].get("namespace", ""), xr["metadata"]["name"])
        assert key not in seen, f"{file} and {seen[key]} both apply {key}"
        seen[key] = file


def test_state_files_belong_to_examples() -> None:
    for path in (EXAMPLES / "state").glob("*.yaml") if (EXAMPLES / "state").exists() else []:
        assert (EXAMPLES / path.name).exists(), f"{path} has no example {path.name}"


def test_render_command_renders_and_validates_every_example() -> None:
    """What `./task render` runs: the CLI over examples/, with --validate."""
    from click.testing import CliRunner

    from dot_inference.cli import cli

    result = CliRunner().invoke(cli, ["render", str(EXAMPLES), "--validate"])
    assert result.exit_code == 0, result.output
    headers = {line[2:] for line in result.stdout.splitlines() if line.startswith("# ")}
    assert {f"{EXAMPLES}/{c[0]}" for c in CLAIMS} <= headers


def test_every_example_renders_as_its_golden_digest() -> None:
    """tests/golden/renders.yaml holds the sha256 of every example's render (status and
    composed resources): a change that alters any render must regenerate it, in review; a
    refactor that must change nothing is held to it byte for byte."""
    from dot_inference import generate

    root = EXAMPLES.parent
    states = {
        f"examples/state/{p.name}": p.read_text() for p in (EXAMPLES / "state").glob("*.yaml")
    }
    fresh = generate.golden_renders(root, states)
    golden = (root / "tests" / "golden" / "renders.yaml").read_text()
    assert fresh == {"tests/golden/renders.yaml": golden}, (
        "an example renders differently: run ./task generate and review what changed "
        "(dot-inference render examples/<file>)"
    )
    listed = set(load_yaml(root / "tests" / "golden" / "renders.yaml")[0]["renders"])
    assert {f"{c[0]}:{c[1]['kind']}/{c[1]['metadata']['name']}" for c in CLAIMS} <= listed


def _pod_templates(composed: list[dict[str, Any]]) -> list[tuple[str, dict[str, str]]]:
    """(what, labels) of every pod the composed objects make, unwrapped from their Objects;
    a VLLMRuntime's as the pinned operator's Deployment labels them."""
    from dot_inference import production_stack_operator as operator

    out = []
    for obj in composed:
        obj = (obj.get("spec") or {}).get("forProvider", {}).get("manifest", obj)
        kind, spec = obj.get("kind"), obj.get("spec") or {}
        if kind == "VLLMRuntime":
            out.append(("engine", operator.deployment_for(obj)["spec"]["template"]))
        elif kind == "LeaderWorkerSet":
            lwt = spec["leaderWorkerTemplate"]
            out.append(("engine", lwt.get("leaderTemplate") or lwt["workerTemplate"]))
            if "leaderTemplate" in lwt:
                out.append(("worker", lwt["workerTemplate"]))
        elif kind in ("Deployment", "StatefulSet", "Job"):
            labels = (spec["template"].get("metadata") or {}).get("labels") or {}
            component = labels.get("app.kubernetes.io/component")
            out.append(("engine" if component in ENGINE_PODS else kind, spec["template"]))
    return [(what, (t.get("metadata") or {}).get("labels") or {}) for what, t in out]


# The component label of the pods that run vLLM (or the simulator) one per replica.
ENGINE_PODS = ("engine", "llm-d-engine")


MODELS = [c for c in CLAIMS if c[1]["kind"] == "LLMInference"]


@pytest.mark.parametrize(("xr", "required"), [c[1:] for c in MODELS], ids=[c[0] for c in MODELS])
def test_the_scale_selector_selects_one_engine_pod_per_replica(
    xr: dict[str, Any], required: list[dict[str, Any]]
) -> None:
    """status.replicas.selector is what /scale gives an autoscaler (the XRD's
    labelSelectorPath): it selects the engine's pods, a multi-node replica's leader only, and
    nothing else the claim composes (its download Jobs, a picker, a replica's workers). Only
    a claim whose replicas are no pods of its own has none: a placed one (each placement has
    its own) and a disaggregated one (each side has its own)."""
    result = render.render_in_package(PKG, xr, required=required)
    assert result.fatal is None, result.fatal
    selector = ((result.xr.get("status") or {}).get("replicas") or {}).get("selector")
    if selector is None:
        params = xr["spec"]["parameters"]
        assert "placement" in params or "disaggregation" in params, "no selector"
        return
    wanted = dict(term.split("=", 1) for term in selector.split(","))
    pods = _pod_templates(result.composed)
    chosen = [what for what, labels in pods if wanted.items() <= labels.items()]
    assert chosen, f"{selector} selects none of {pods}"
    assert set(chosen) == {"engine"}, (selector, pods)
