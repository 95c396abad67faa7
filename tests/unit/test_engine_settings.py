"""What seed 003's worker template lets a team set on the engine's pod, on every backend:
/dev/shm (engine.shm). Each example is rendered through the package with its cluster state,
and the size is read where the engine's pod gets it (the VLLMRuntime's shmSize, which the
operator mounts; the shm volume of the pods we write)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import EXAMPLES, PACKAGE, load_yaml

from dot_inference.crossplane import documents, render

PKG = documents.load_package(PACKAGE)


def _example(file: str, **engine: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    xr = copy.deepcopy(load_yaml(EXAMPLES / file)[0])
    xr["spec"]["parameters"].setdefault("engine", {}).update(engine)
    state = EXAMPLES / "state" / file
    return xr, load_yaml(state) if state.exists() else []


def _shm_sizes(composed: list[dict[str, Any]]) -> set[str]:
    """The /dev/shm of every engine pod the composed objects make (Objects unwrapped)."""
    sizes = set()
    for obj in composed:
        obj = (obj.get("spec") or {}).get("forProvider", {}).get("manifest", obj)
        spec = obj.get("spec") or {}
        if obj.get("kind") == "VLLMRuntime":
            sizes.add(spec["deploymentConfig"]["shmSize"])
        templates = [spec.get("template")] + [
            (spec.get("leaderWorkerTemplate") or {}).get(t)
            for t in ("leaderTemplate", "workerTemplate")
        ]
        for t in filter(None, templates):
            for v in (t.get("spec") or {}).get("volumes") or []:
                if v.get("name") == "shm":
                    sizes.add(v["emptyDir"]["sizeLimit"])
    return sizes


SHM = [
    # (name, example, engine.shm) -> the pods' /dev/shm, or what the refusal says
    ("one GPU, more than the plan's 2Gi", "llm-qwen.yaml", "4Gi", {"4Gi"}),
    ("in Mi", "llm-qwen.yaml", "3072Mi", {"3Gi"}),
    ("tensor parallel, less than the plan's", "llm-kimi.yaml", "8Gi", {"8Gi"}),
    ("a replica over two nodes: leader and worker", "llm-kimi-k2-multinode.yaml", "16Gi", {"16Gi"}),
    ("llm-d's pods", "llm-llmd.yaml", "4Gi", {"4Gi"}),
    ("llm-d, prefill and decode apart: both sides", "llm-disaggregated.yaml", "4Gi", {"4Gi"}),
    (
        "below NCCL's 1Gi",
        "llm-qwen.yaml",
        "512Mi",
        "spec.parameters.engine.shm: 512Mi is outside what the engine's pod can hold; use from "
        "1Gi to 4Gi (half of its 8Gi memory",
    ),
    (
        "above half the pod's memory",
        "llm-qwen.yaml",
        "6Gi",
        "spec.parameters.engine.shm: 6Gi is outside what the engine's pod can hold; use from "
        "1Gi to 4Gi",
    ),
    ("not a size", "llm-qwen.yaml", "4 GB", "spec.parameters.engine.shm: '4 GB' is not a size"),
]


@pytest.mark.parametrize(("file", "shm", "want"), [c[1:] for c in SHM], ids=[c[0] for c in SHM])
def test_the_engine_gets_the_shm_the_claim_asks_for(
    file: str, shm: str, want: set[str] | str
) -> None:
    xr, required = _example(file, shm=shm)
    result = render.render_in_package(PKG, xr, required=required)
    if isinstance(want, str):
        assert result.fatal is not None and want in result.fatal, result.fatal
        return
    assert result.fatal is None, result.fatal
    assert _shm_sizes(result.composed) == want
    assert result.xr["status"]["plan"]["shmSize"] == next(iter(want))


def test_shm_on_the_simulator_is_said_to_be_unused() -> None:
    xr, required = _example("llm-simulated.yaml", shm="4Gi")
    result = render.render_in_package(PKG, xr, required=required)
    assert result.fatal is None, result.fatal
    said = [r.get("message", "") for r in result.results]
    assert any("engine.shm: not used" in m for m in said), said


def _secret(name: str, type_: str, key: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "a-team"},
        "type": type_,
        "data": {key: "c2VjcmV0"},
    }


REGCRED = _secret("regcred", "kubernetes.io/dockerconfigjson", ".dockerconfigjson")
MINE = _secret("mine", "Opaque", "token")
PRIVATE = "registry.example.com/team/vllm-openai:v0.4.2"
FROM_MINE = {"name": "MY_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "token"}}}


def _unwrapped(composed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [(o.get("spec") or {}).get("forProvider", {}).get("manifest", o) for o in composed]


def _pods(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """kind/name[/template] -> pod spec of every pod template (Jobs, LWS, StatefulSets)."""
    out = {}
    for o in objs:
        spec = o.get("spec") or {}
        at = f"{o['kind']}/{o['metadata']['name']}"
        if "template" in spec:
            out[at] = spec["template"]["spec"]
        for t in ("leaderTemplate", "workerTemplate"):
            if t in (spec.get("leaderWorkerTemplate") or {}):
                out[f"{at}/{t}"] = spec["leaderWorkerTemplate"][t]["spec"]
    return out


PRIVATE_CASES = [
    # (name, example, engine, the Secrets the pods read: pull Secret names; env Secret names)
    ("production stack, one node", "llm-qwen.yaml", {}, "regcred", None),
    (
        "llm-d: copied to the cluster",
        "llm-llmd.yaml",
        {"env": [FROM_MINE]},
        "qwen3-32b-secret-pull-0",
        "qwen3-32b-secret-env-0",
    ),
    (
        "a replica over two nodes: copied to the cluster",
        "llm-kimi-k2-multinode.yaml",
        {"env": [FROM_MINE]},
        "kimi-k2-secret-pull-0",
        "kimi-k2-secret-env-0",
    ),
]


@pytest.mark.parametrize(
    ("file", "engine", "pull", "env_secret"),
    [c[1:] for c in PRIVATE_CASES],
    ids=[c[0] for c in PRIVATE_CASES],
)
def test_a_private_image_and_secret_variables_reach_every_pod_by_reference(
    file: str, engine: dict[str, Any], pull: str, env_secret: str | None
) -> None:
    xr, required = _example(file, image=PRIVATE, imagePullSecrets=[{"name": "regcred"}], **engine)
    result = render.render_in_package(PKG, xr, required=[*required, REGCRED, MINE])
    assert result.fatal is None, result.fatal
    objs = _unwrapped(result.composed)
    runtime = [o for o in objs if o["kind"] == "VLLMRuntime"]
    for r in runtime:  # the operator gives its pod the one pull Secret the CRD carries
        assert r["spec"]["deploymentConfig"]["image"]["pullSecretName"] == pull
    pods = _pods(objs)
    assert pods, "pods of our own: the download Job at least"
    for at, pod in pods.items():
        images = [c["image"] for c in pod.get("initContainers", []) + pod["containers"]]
        if PRIVATE in images:
            assert pod.get("imagePullSecrets") == [{"name": pull}], at
        for c in pod.get("initContainers", []) + pod["containers"]:
            env = {e["name"]: e for e in c.get("env") or []}
            if c["name"] == "vllm" and env_secret:
                got = env["MY_TOKEN"]["valueFrom"]["secretKeyRef"]
                assert got == {"name": env_secret, "key": "token"}, at
            else:  # the download reads the Hugging Face token only
                assert "MY_TOKEN" not in env, (at, c["name"])
    copies = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Secret"}
    for name, type_ in ((pull, REGCRED["type"]), (env_secret, "Opaque")):
        if name and name in ("regcred", "mine"):
            assert name not in copies, "read where it is, not copied"
        elif name:
            assert copies[name]["type"] == type_ and "data" not in copies[name], "by reference"


def test_the_simulator_says_it_reads_no_engine_secrets() -> None:
    xr, required = _example(
        "llm-simulated.yaml", imagePullSecrets=[{"name": "regcred"}], env=[FROM_MINE]
    )
    result = render.render_in_package(PKG, xr, required=[*required, REGCRED, MINE])
    assert result.fatal is None, result.fatal
    said = [r.get("message", "") for r in result.results]
    assert any(
        "engine.imagePullSecrets, spec.parameters.engine.env[0] (MY_TOKEN, from a Secret): not "
        "used with spec.parameters.engine.simulate" in m
        for m in said
    ), said
    assert "MY_TOKEN" not in str(result.composed)
