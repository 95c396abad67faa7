"""What the package manager would install, done by hand (no registry can be reached here):

* Crossplane's CRDs (from its module at the pinned tag) and its one webhook configuration,
  `crossplane-no-usages`, pointed at core's webhook server on loopback;
* the providers' CRDs: provider-kubernetes' from its module (every kind the provider's
  controllers watch), provider-helm's and the cloud providers' kinds the compositions compose
  from `schemas/` (unmodified, at their pins); and the CRDs of the apps an InferenceCluster
  installs on its cluster (production stack, KEDA, LeaderWorkerSet, Gateway API, the Inference
  Extension, llm-d's router, agentgateway, the Prometheus operator's monitors), so that a model
  composed straight onto the control plane is accepted, as on a cluster with those apps;
* each function as Crossplane finds one: a Function and an active FunctionRevision, both
  paused (their package reconcilers return before any fetch), the revision's status giving
  the endpoint and the `composition` capability;
* the Configuration's XRDs and Compositions (package/), and install/.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from dot_inference.controlplane.kube import Kube, KubeError, is_true, wait

PAUSED = {"crossplane.io/paused": "true"}
# The directories of schemas/ whose CRDs the control plane installs besides Crossplane's and
# provider-kubernetes' (which come from their modules).
VENDORED_CRDS = (
    "provider-helm",
    "provider-upjet-aws",
    "provider-upjet-azure",
    "provider-upjet-gcp",
    "production-stack",
    "keda",
    "lws",
    "gateway-api",
    "gateway-api-inference-extension",
    "llm-d-router",
    "agentgateway",
    "prometheus-operator",
)


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in paths:
        files = sorted(path.rglob("*.yaml")) if path.is_dir() else [path]
        for f in files:
            out.extend(
                d for d in yaml.load_all(f.read_text(), Loader=_Loader) if isinstance(d, dict)
            )
    return out


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def crds(paths: Iterable[Path]) -> list[dict[str, Any]]:
    return [d for d in load(paths) if d.get("kind") == "CustomResourceDefinition"]


def apply_all(kube: Kube, objs: Iterable[dict[str, Any]]) -> None:
    for obj in objs:
        kube.apply(obj)


def install_crds(kube: Kube, objs: list[dict[str, Any]], timeout: float = 60) -> None:
    apply_all(kube, objs)
    for crd in objs:
        name = crd["metadata"]["name"]
        wait(
            lambda n=name: is_true(
                kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", n), "Established"
            ),
            timeout,
            f"CRD {name} established",
        )
    kube.forget()


def webhook_url(crd: dict[str, Any], url: str, ca: bytes) -> dict[str, Any]:
    """`crd` with its conversion webhook (if any) pointed at `url` on loopback."""
    out = copy.deepcopy(crd)
    conversion = (out.get("spec") or {}).get("conversion") or {}
    if conversion.get("strategy") == "Webhook":
        import base64

        conversion["webhook"]["clientConfig"] = {
            "url": url,
            "caBundle": base64.b64encode(ca).decode(),
        }
    return out


def no_usages_webhook(module: Path, url: str, ca: bytes) -> dict[str, Any]:
    """Crossplane's `crossplane-no-usages` configuration (cluster/webhookconfigurations at
    the tag), pointed at core's webhook server instead of its in-cluster Service."""
    import base64

    (config,) = load([module / "cluster" / "webhookconfigurations" / "usage.yaml"])
    for hook in config["webhooks"]:
        path = hook["clientConfig"]["service"].get("path", "")
        hook["clientConfig"] = {"url": url + path, "caBundle": base64.b64encode(ca).decode()}
    return config


def register_function(kube: Kube, name: str, image: str, endpoint: str) -> None:
    """A function as core finds one (internal/xfn/function_runner.go): the active revision
    labelled with its package's name, its status holding the endpoint and the capability
    the pipeline needs (capabilities.go); both objects paused, so that the package manager
    never tries to fetch them."""
    kube.apply(
        {
            "apiVersion": "pkg.crossplane.io/v1",
            "kind": "Function",
            "metadata": {"name": name, "annotations": PAUSED},
            "spec": {"package": image},
        }
    )
    revision = {
        "apiVersion": "pkg.crossplane.io/v1",
        "kind": "FunctionRevision",
        "metadata": {
            "name": f"{name}-local",
            "annotations": PAUSED,
            "labels": {"pkg.crossplane.io/package": name},
        },
        "spec": {"desiredState": "Active", "revision": 1, "image": image},
    }
    kube.apply(revision)
    kube.patch_status(revision, {"endpoint": endpoint, "capabilities": ["composition"]})


def wait_established(kube: Kube, xrds: list[dict[str, Any]], timeout: float = 90) -> None:
    """Every XRD's CRD established and its controller watching it (Established; a v2 XR has
    no claim, so no Offered)."""
    for xrd in xrds:
        name = xrd["metadata"]["name"]

        def ready(n: str = name) -> bool:
            got = kube.get("apiextensions.crossplane.io/v2", "CompositeResourceDefinition", n)
            return is_true(got, "Established")

        try:
            wait(ready, timeout, f"XRD {name} established")
        except TimeoutError:
            got = kube.get("apiextensions.crossplane.io/v2", "CompositeResourceDefinition", name)
            raise TimeoutError(f"XRD {name}: {(got or {}).get('status')}") from None
    kube.forget()


def valid_pipelines(kube: Kube, compositions: list[dict[str, Any]], timeout: float = 60) -> None:
    """Each Composition's newest revision has ValidPipeline=True: its functions are found and
    offer the `composition` capability."""
    for comp in compositions:
        name = comp["metadata"]["name"]

        def valid(n: str = name) -> bool:
            revs = kube.list(
                "apiextensions.crossplane.io/v1",
                "CompositionRevision",
                selector=f"crossplane.io/composition-name={n}",
            )
            return any(is_true(r, "ValidPipeline") for r in revs)

        wait(valid, timeout, f"Composition {name}: a revision with ValidPipeline")


def namespace(kube: Kube, name: str) -> None:
    try:
        kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    except KubeError as err:
        if err.status != 409:
            raise


def wait_serviceaccount(kube: Kube, ns: str, timeout: float = 60) -> None:
    """The `default` ServiceAccount (kube-controller-manager's) exists: pods of the namespace
    cannot be created before it."""
    wait(lambda: kube.get("v1", "ServiceAccount", "default", ns), timeout, f"{ns}/default")


def settle(seconds: float) -> None:
    time.sleep(seconds)
