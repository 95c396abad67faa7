"""Every example applied to the real plane and composed by real Crossplane: accepted by the API
server, composed as `dot-inference render` composes it offline from the same inputs (parity,
tests/controlplane/parity.py), and settled: no reconcile loop over a quiet minute.

The examples run where they can: an LLMInference without a cluster and the `local` clusters
on the plane itself, the `existing` clusters through a kubeconfig of the plane, the cloud
clusters composed but never created (no cloud provider runs here)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from applied_examples import DOCS
from conftest import NS, XR_API, xrs

from dot_inference.apiserver import defaulted
from dot_inference.controlplane.kube import Kube, condition
from dot_inference.crossplane import documents

ROOT = Path(__file__).resolve().parents[2]
PKG = documents.load_package(ROOT / "package")
QUIET = 60  # seconds the settled plane is watched for writes
SETTLE = 120  # seconds a late status may take: Crossplane polls every XR each minute
CROSSPLANE = "apiextensions.crossplane.io/composed/"


@pytest.mark.parametrize(
    "doc", [d for _, d in DOCS], ids=[f"{f}:{d['kind']}/{d['metadata']['name']}" for f, d in DOCS]
)
def test_the_api_server_accepts_every_example_and_defaults_it_as_the_render_does(
    applied: list[dict[str, Any]], kube: Kube, doc: dict
) -> None:
    """Accepted, and stored with the defaults the offline render's API-server model applies
    (dot_inference/apiserver/ `defaulted`, from the XRD's schema)."""
    meta = doc["metadata"]
    got = kube.get(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))
    assert got is not None
    want = defaulted(doc, schema_paths=[ROOT / "package"])
    assert got["spec"]["parameters"] == want["spec"]["parameters"]


def test_parity_with_the_offline_render(applied: list[dict[str, Any]], kube: Kube) -> None:
    """What real Crossplane composed for every XR on the plane (the examples', a cluster's
    models, a fleet's placements) is what the offline render composes from the same inputs:
    the same resources, and every field the render sets, with its value."""
    import parity

    def differences(of: list[dict[str, Any]]) -> dict[str, list[str]]:
        out = {}
        for xr in of:
            meta = xr["metadata"]
            got = parity.check(PKG, kube, XR_API, xr["kind"], meta["namespace"], meta["name"])
            if got.differences:
                out[meta["name"]] = [f"{got.xr}: {d}" for d in got.differences]
        return out

    # A status that Crossplane's watch circuit breaker holds back ("Too many watch events
    # ... Allowing events periodically") arrives at the next poll: a difference must outlast
    # that, or it is only late.
    found = differences(applied)
    deadline = time.monotonic() + SETTLE
    while found and time.monotonic() < deadline:
        time.sleep(5)
        found = differences([x for x in applied if x["metadata"]["name"] in found])
    assert not found, "\n".join(d for ds in found.values() for d in ds)


def test_every_xr_is_synced_or_refused_with_a_reason(
    applied: list[dict[str, Any]], kube: Kube
) -> None:
    for xr in xrs(kube):
        synced = condition(xr, "Synced") or {}
        name = f"{xr['kind']} {xr['metadata']['name']}"
        if synced.get("status") != "True":
            # A refusal (the GPU budget of a cluster two examples share, for one) says which
            # field: nothing else may stop a pipeline.
            assert "returned a fatal result: spec.parameters" in synced.get("message", ""), (
                f"{name}: {synced}"
            )


def _xr_state(xr: dict[str, Any]) -> str:
    """An XR's generation and status, less its `Responsive` condition: that one is Crossplane's
    watch circuit breaker, which opens and closes on other writers' events (a provider that
    retries, every minute, an object it cannot create here), and is no write of the pipeline's."""
    status = dict(xr.get("status") or {})
    status["conditions"] = [
        c for c in status.get("conditions") or [] if c.get("type") != "Responsive"
    ]
    return json.dumps([xr["metadata"].get("generation"), status], sort_keys=True)


def _crossplane_writes(kube: Kube) -> dict[str, str]:
    """When Crossplane last wrote each composed object (its field manager's time), and each
    XR's state (`_xr_state`)."""
    from parity import composed

    out = {}
    for xr in xrs(kube):
        key = f"{xr['kind']}/{xr['metadata']['name']}"
        out[key] = _xr_state(xr)
        for name, obj in composed(kube, xr).items():
            times = [
                m.get("time", "")
                for m in obj["metadata"].get("managedFields") or []
                if m.get("manager", "").startswith(CROSSPLANE)
            ]
            out[f"{key}/{name}"] = max(times, default="")
    return out


def test_every_xr_settles_with_no_reconcile_loop(applied: list[dict[str, Any]], kube: Kube) -> None:
    """Over a quiet minute, Crossplane writes no composed object and no XR's spec or status
    changes: no composition keeps rewriting what it composed. Providers' own writes to
    objects they cannot create here (provider-kubernetes retrying a PodMonitor whose
    namespace the monitoring chart would have made, every minute) are theirs, not a loop;
    they open Crossplane's watch circuit breaker now and then, which `_xr_state` leaves out."""
    before = _crossplane_writes(kube)
    time.sleep(QUIET)
    after = _crossplane_writes(kube)
    written = sorted(k for k in before if k in after and before[k] != after[k])
    assert not written, f"written during a quiet minute: {written}"


def test_the_plane_holds_no_pending_surprise(applied: list[dict[str, Any]], kube: Kube) -> None:
    """Every composed resource was accepted: none the XR names is missing from the plane."""
    missing = []
    for xr in applied:
        refs = ((xr.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
        for ref in refs:
            if (
                kube.get(ref["apiVersion"], ref["kind"], ref["name"], ref.get("namespace") or NS)
                is None
            ):
                missing.append(f"{xr['metadata']['name']}: {ref['kind']} {ref['name']}")
    assert not missing, missing
