"""The suite on the real control plane (`./task test-control-plane`): Kubernetes, kwok's
nodes, Crossplane with its webhooks, the functions over mTLS, provider-kubernetes, as plain
processes (dot_inference/controlplane). It brings the plane up when none runs, and runs in
file order: the plane itself, every example (parity with the offline render, settling), Ready
or why not, deletion, then on the emptied plane GPUs (a replica over two nodes, the GPU
budget), and the hostile claims of tests/security."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from applied_examples import NS, XR_API, XR_KINDS, apply_examples, xrs  # noqa: F401  (re-exported)

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
