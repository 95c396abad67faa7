"""What the seeds ask of a model, on the plane: the Phase 1 plain manifests
(examples/manifests) serve after `kubectl apply` alone, with no Crossplane object involved,
and `kubectl scale` moves an LLMInference's engine through the XRD's /scale subresource,
which the API server refuses while KEDA owns the count."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from conftest import XR_API, binary, remove, until

from dot_inference.controlplane import install
from dot_inference.controlplane.kube import Kube, is_true
from dot_inference.controlplane.plane import Plane
from dot_inference.generate import PLAIN_MANIFESTS, ROOT

WITHIN = 240
RUNTIME_API = "production-stack.vllm.ai/v1alpha1"
SCALE_NS = "scale"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(plane: Plane) -> Kubectl:
    """The pinned kubectl against the plane, as a user runs it."""
    exe = binary("kubernetes", "kubectl")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), "--kubeconfig", str(plane.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=300,
        )

    return run


def _engine_pods(kube: Kube, ns: str, selector: str) -> list[dict[str, Any]]:
    return [
        p
        for p in kube.list("v1", "Pod", ns, selector=selector)
        if (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


@pytest.mark.parametrize("manifest", sorted(PLAIN_MANIFESTS))
def test_a_plain_manifest_serves_after_kubectl_apply_alone(
    manifest: str, kube: Kube, kubectl: Kubectl
) -> None:
    path = ROOT / manifest
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    runtime = next(d for d in docs if d["kind"] == "VLLMRuntime")
    name, ns = runtime["metadata"]["name"], runtime["metadata"]["namespace"]
    wanted = runtime["spec"]["deploymentConfig"]["replicas"]
    install.namespace(kube, ns)
    # What an earlier check composed of the same name is gone first.
    until(
        lambda: all(
            kube.get(d["apiVersion"], d["kind"], d["metadata"]["name"], ns) is None for d in docs
        ),
        WITHIN,
        f"nothing of {manifest}'s names left in {ns}",
        2,
    )
    applied = kubectl("apply", "-f", str(path))
    assert applied.returncode == 0, applied.stderr
    try:

        def serving() -> bool:
            status = (kube.get(RUNTIME_API, "VLLMRuntime", name, ns) or {}).get("status") or {}
            return status.get("modelStatus") == "Ready" and status.get(
                "availableReplicas", 0
            ) >= max(wanted, 1)

        until(serving, WITHIN, f"{manifest}: the VLLMRuntime serving {wanted} replica(s)", 2)
        selector = ",".join(f"{k}={v}" for k, v in sorted(runtime["metadata"]["labels"].items()))
        pods = _engine_pods(kube, ns, selector)
        assert len(pods) == wanted, [p["metadata"]["name"] for p in pods]
        claim = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
        for pod in pods:
            mounted = {
                (v.get("persistentVolumeClaim") or {}).get("claimName")
                for v in pod["spec"].get("volumes") or []
            }
            assert claim["metadata"]["name"] in mounted, "the engine reads its cache claim"
        pvc = kube.get("v1", "PersistentVolumeClaim", claim["metadata"]["name"], ns)
        assert pvc["status"]["phase"] == "Bound"
    finally:
        deleted = kubectl("delete", "-f", str(path), "--wait=true", "--timeout=180s")
        assert deleted.returncode == 0, deleted.stderr


def _simulated(name: str, **params: Any) -> dict[str, Any]:
    """A model the inference simulator answers for (no GPU, no download, no cache claim),
    so that its replicas may run on any node."""
    return {
        "apiVersion": XR_API,
        "kind": "LLMInference",
        "metadata": {"name": name, "namespace": SCALE_NS},
        "spec": {
            "parameters": {
                "model": "Qwen/Qwen2.5-1.5B-Instruct",
                "engine": {"simulate": True},
                **params,
            }
        },
    }


def _read_scale(kubectl: Kubectl, name: str) -> subprocess.CompletedProcess[str]:
    return kubectl(
        "get", "--raw", f"/apis/{XR_API}/namespaces/{SCALE_NS}/llminferences/{name}/scale"
    )


def _scale(kubectl: Kubectl, name: str) -> dict[str, Any]:
    got = _read_scale(kubectl, name)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def test_kubectl_scale_moves_the_engine(kube: Kube, kubectl: Kubectl) -> None:
    install.namespace(kube, SCALE_NS)
    claim = _simulated("scaled")
    kube.apply(claim)
    try:

        def ready(n: int) -> bool:
            xr = kube.get(XR_API, "LLMInference", "scaled", SCALE_NS) or {}
            return (
                is_true(xr, "Ready")
                and ((xr.get("status") or {}).get("replicas") or {}).get("ready") == n
            )

        until(lambda: ready(1), WITHIN, "the simulated model Ready with one replica", 2)
        # Before the claim sets spec.parameters.replicas, the API server cannot read its scale
        # (apiextensions-apiserver's ScaleREST.Get); a scale is a patch and needs none.
        unread = _read_scale(kubectl, "scaled")
        assert unread.returncode != 0
        assert '".spec.parameters.replicas" does not exist' in unread.stderr, unread.stderr
        scaled = kubectl("scale", "llminference/scaled", "-n", SCALE_NS, "--replicas", "3")
        assert scaled.returncode == 0, scaled.stderr
        xr = kube.get(XR_API, "LLMInference", "scaled", SCALE_NS)
        assert xr["spec"]["parameters"]["replicas"] == 3
        until(lambda: ready(3), WITHIN, "three replicas ready after `kubectl scale`", 2)
        scale = _scale(kubectl, "scaled")
        assert (scale["spec"]["replicas"], scale["status"]["replicas"]) == (3, 3)
        # The selector an autoscaler reads picks exactly the engine's pods.
        assert len(_engine_pods(kube, SCALE_NS, scale["status"]["selector"])) == 3
        down = kubectl("scale", "llminference/scaled", "-n", SCALE_NS, "--replicas", "1")
        assert down.returncode == 0, down.stderr
        until(
            lambda: len(_engine_pods(kube, SCALE_NS, scale["status"]["selector"])) == 1,
            WITHIN,
            "one engine pod after scaling down",
            2,
        )
    finally:
        remove(kube, [claim])


def test_kubectl_scale_is_refused_while_keda_owns_the_count(kube: Kube, kubectl: Kubectl) -> None:
    install.namespace(kube, SCALE_NS)
    claim = _simulated("autoscaled", autoscaling={"maxReplicas": 2})
    kube.apply(claim)
    try:
        refused = kubectl("scale", "llminference/autoscaled", "-n", SCALE_NS, "--replicas", "3")
        assert refused.returncode != 0
        assert "replicas and autoscaling are exclusive" in refused.stderr, refused.stderr
        xr = kube.get(XR_API, "LLMInference", "autoscaled", SCALE_NS)
        assert "replicas" not in xr["spec"]["parameters"]
    finally:
        remove(kube, [claim])
