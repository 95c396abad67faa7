"""Every example of examples/ applied to the plane, as a user would apply them all to one
namespace: the Secrets the `existing` clusters name (each a kubeconfig of the plane), the
clusters, then the models; done when every XR has been through its pipeline and nothing has
moved for a while."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

from dot_inference.controlplane import install
from dot_inference.controlplane.kube import Kube, condition, is_true, wait
from dot_inference.controlplane.plane import Plane
from function.claim.source import ACCESS_KEY_ID, SECRET_ACCESS_KEY

ROOT = Path(__file__).resolve().parents[2]
NS = "a-team"
XR_KINDS = ("InferenceCluster", "LLMInference")
XR_API = "inference.devopstoolkit.ai/v1alpha1"
FILES = sorted(p for p in (ROOT / "examples").glob("*.yaml") if p.name != "functions.yaml")
DOCS = [(f.name, d) for f in FILES for d in install.load([f]) if d.get("kind") in XR_KINDS]
# Clusters first: models name them.
ORDER = sorted(DOCS, key=lambda fd: fd[1]["kind"] != "InferenceCluster")


def examples_table() -> dict[str, tuple[bool, str]]:
    """`Kind/name` -> (Ready here, why not), from docs/control-plane.md's table."""
    text = (ROOT / "docs" / "control-plane.md").read_text()
    section = text.split("## Every example on the plane", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and "/" in cells[1] and cells[2] in ("yes", "no"):
            out[cells[1]] = (cells[2] == "yes", cells[3])
    return out


def xrs(kube: Kube, ns: str | None = None) -> list[dict[str, Any]]:
    return [x for kind in XR_KINDS for x in kube.list(XR_API, kind, ns)]


def existing_secrets(plane: Plane) -> list[dict[str, Any]]:
    """The Secrets the `existing` examples name, each a kubeconfig of the plane (its
    administrator's: docs/control-plane.md)."""
    kubeconfig = base64.b64encode(
        plane.pki.embedded_kubeconfig("crossplane", plane.server).encode()
    ).decode()
    names = {
        ref["name"]
        for _, d in DOCS
        if d["kind"] == "InferenceCluster" and d["spec"]["parameters"].get("provider") == "existing"
        for key in ("kubeconfigSecretRef", "modelsKubeconfigSecretRef")
        if (ref := d["spec"]["parameters"].get(key))
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": n, "namespace": NS},
            "data": {"kubeconfig": kubeconfig},
        }
        for n in sorted(names)
    ]


def existing(kube: Kube, objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Which of `objs` exist now, as they are (`<kind>/<name>` -> object): one list per kind
    and namespace, not one request per object."""
    groups: dict[tuple[str, str, str | None], set[str]] = {}
    for o in objs:
        meta = o.get("metadata") or o
        groups.setdefault((o["apiVersion"], o["kind"], meta.get("namespace")), set()).add(
            meta["name"]
        )
    out = {}
    for (api, kind, ns), names in groups.items():
        for found in kube.list(api, kind, ns):
            if found["metadata"]["name"] in names:
                out[f"{kind}/{found['metadata']['name']}"] = found
    return out


def composed_refs(xr: dict[str, Any]) -> list[dict[str, Any]]:
    """The XR's resourceRefs as objects `existing` takes."""
    ns = xr["metadata"].get("namespace")
    refs = ((xr.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
    return [
        {
            "apiVersion": r["apiVersion"],
            "kind": r["kind"],
            "metadata": {"name": r["name"], "namespace": r.get("namespace") or ns},
        }
        for r in refs
    ]


def snapshot(kube: Kube) -> dict[str, str]:
    """resourceVersion of every XR and of every object they compose."""
    everything = xrs(kube)
    out = {
        f"{x['kind']}/{x['metadata']['name']}": x["metadata"]["resourceVersion"] for x in everything
    }
    found = existing(kube, [r for x in everything for r in composed_refs(x)])
    out |= {k: o["metadata"]["resourceVersion"] for k, o in found.items()}
    return out


def engine_secrets() -> list[dict[str, Any]]:
    """The Secrets the examples' comments have a user create for the engine: each registry
    credential engine.imagePullSecrets names, each key engine.env reads (placeholders: kwok
    pulls no image and runs no container)."""
    pull: set[str] = set()
    keys: dict[str, set[str]] = {}
    for _, d in DOCS:
        engine = (d["spec"].get("parameters") or {}).get("engine") or {}
        pull |= {p["name"] for p in engine.get("imagePullSecrets") or []}
        for e in engine.get("env") or []:
            if ref := (e.get("valueFrom") or {}).get("secretKeyRef"):
                keys.setdefault(ref["name"], set()).add(ref["key"])
    placeholder = base64.b64encode(b"placeholder").decode()
    registry = base64.b64encode(b'{"auths":{}}').decode()
    return [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/dockerconfigjson",
            "metadata": {"name": n, "namespace": NS},
            "data": {".dockerconfigjson": registry},
        }
        for n in sorted(pull)
    ] + [
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "metadata": {"name": n, "namespace": NS},
            "data": dict.fromkeys(sorted(k), placeholder),
        }
        for n, k in sorted(keys.items())
    ]


def source_objects() -> list[dict[str, Any]]:
    """What the examples' comments have a user make for spec.parameters.source: the S3 access
    key's Secret, and the PersistentVolumeClaim the weights were staged on (placeholders:
    kwok runs no container, so the copy only has to be scheduled and complete)."""
    out: list[dict[str, Any]] = []
    placeholder = base64.b64encode(b"placeholder").decode()
    for _, d in DOCS:
        source = (d["spec"].get("parameters") or {}).get("source") or {}
        uri = source.get("uri", "")
        if ref := source.get("credentialsSecretRef"):
            keys = (
                ref.get("accessKeyIdKey", ACCESS_KEY_ID),
                ref.get("secretAccessKeyKey", SECRET_ACCESS_KEY),
            )
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "type": "Opaque",
                    "metadata": {"name": ref["name"], "namespace": NS},
                    "data": dict.fromkeys(keys, placeholder),
                }
            )
        if uri.startswith("pvc://"):
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "metadata": {"name": uri.removeprefix("pvc://").split("/")[0], "namespace": NS},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "20Gi"}},
                    },
                }
            )
    return out


def apply_examples(plane: Plane, kube: Kube) -> list[dict[str, Any]]:
    install.namespace(kube, NS)
    for obj in existing_secrets(plane) + engine_secrets() + source_objects():
        kube.apply(obj)
    for _, doc in ORDER:
        kube.apply(doc)
    # Every XR (the examples' and those they compose: a cluster's models, a fleet's
    # placements) has been through its pipeline ...
    wait(
        lambda: (all_ := xrs(kube)) and all(condition(x, "Synced") for x in all_),
        240,
        "every XR through its pipeline",
        interval=1,
    )
    # ... every example that can serve here does (the engines' controllers make pods Ready
    # after the pipelines ran; an Object's status reaches its XR at provider-kubernetes' next
    # poll) ...
    ready = [row.split("/") for row, (yes, _) in examples_table().items() if yes]
    wait(
        lambda: all(is_true(kube.get(XR_API, kind, name, NS), "Ready") for kind, name in ready),
        300,
        "every example that can serve here Ready",
        interval=2,
    )
    # ... and nothing moves for three looks in a row.
    stable, last = 0, None
    deadline = time.monotonic() + 300
    while stable < 3 and time.monotonic() < deadline:
        now = snapshot(kube)
        stable = stable + 1 if now == last else 0
        last = now
        time.sleep(3)
    return xrs(kube)
