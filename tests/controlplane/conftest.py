"""The suite on the real control plane (`./task test-control-plane`): Kubernetes, kwok's
nodes, Crossplane with its webhooks, the functions over mTLS, provider-kubernetes, as plain
processes (dot_inference/controlplane). It brings the plane up when none runs, and runs in
file order: the plane itself, every example (parity with the offline render, settling), Ready
or why not, deletion, then on the emptied plane GPUs (a replica over two nodes, the GPU
budget), the hostile claims of tests/security, the chainsaw suites, the fleet, and what the
seeds ask of a model (the plain manifests, `kubectl scale`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from applied_examples import NS, XR_API, XR_KINDS, apply_examples, xrs  # noqa: F401  (re-exported)

from dot_inference.controlplane import build
from dot_inference.controlplane.kube import Kube, KubeError, wait
from dot_inference.controlplane.plane import Plane


def _root_conftest() -> Any:
    """tests/conftest.py under a name of its own: this file is `conftest` while these tests
    run, and what tests/security's harness imports from `conftest` is re-exported below."""
    spec = importlib.util.spec_from_file_location(
        "dot_inference_tests_conftest", Path(__file__).resolve().parents[1] / "conftest.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ROOT = _root_conftest()
globals().update(
    {
        k: v
        for k, v in vars(_ROOT).items()
        if not k.startswith("_")
        and k not in globals()
        and not hasattr(v, "_pytestfixturefunction")
        and k not in ("collect_ignore", "image")
    }
)


@pytest.fixture(scope="session")
def plane() -> Plane:
    p = Plane()
    if not p.running():
        p.up()
    return p


@pytest.fixture(scope="session")
def kube(plane: Plane) -> Kube:
    return plane.kube()


@pytest.fixture(scope="session")
def applied(plane: Plane, kube: Kube) -> list[dict[str, Any]]:
    """Every example applied and settled (tests/controlplane/examples.py)."""
    return apply_examples(plane, kube)


def binary(component: str, name: str) -> Path:
    """A program the plane built (kubectl, chainsaw), at its pin."""
    c = next(c for c in build.components() if c.name == component)
    path = c.binary(name)
    if not path.is_file():
        pytest.fail(f"{name} is not built ({path}): run ./task control-plane-up")
    return path


def until(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """The plane's `wait`, its timeout a test failure that names `what`."""
    try:
        return wait(check, timeout, what, interval)
    except TimeoutError as err:
        pytest.fail(str(err))


def gone(kube: Kube, obj: dict[str, Any]) -> bool:
    meta = obj["metadata"]
    try:
        return kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")) is None
    except KubeError as err:
        return err.status == 404


def remove(kube: Kube, objs: list[dict[str, Any]], timeout: float = 300) -> None:
    """Delete `objs` until every one is gone, as a user retries `kubectl delete`: what a Usage
    protects is refused (409, "in-use") until what uses it has gone (a model's Usage of its
    cluster is by the model's objects on the cluster, which provider-kubernetes removes after
    the model), so each round asks again for what is left. Namespaces stay."""
    left = [o for o in objs if o.get("kind") != "Namespace"]

    def ask() -> bool:
        nonlocal left
        for obj in left:
            meta = obj["metadata"]
            try:
                kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
            except KubeError as err:
                if err.status not in (404, 409):
                    raise
        left = [o for o in left if not gone(kube, o)]
        return not left

    what = ", ".join(f"{o['kind']} {o['metadata']['name']}" for o in left)
    until(ask, timeout, f"deleted: {what}", 0.5)
