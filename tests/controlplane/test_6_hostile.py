"""The hostile claims of tests/security/catalogue.yaml against the real API server and the real
pipeline (Crossplane calling the function over mTLS gRPC), on the namespace the examples left
empty:

* the API server refuses exactly the claims the offline render's API-server model refuses,
  naming the same fields, and in the same words wherever the model writes the API server's
  own (CEL rules' messages, bounds);
* every claim the schema lets through and the function refuses is refused on the plane with
  the catalogue's message, in the XR's Synced condition, and composes nothing.

Each case's world (Secrets, clusters with their status, other teams' claims) is created first,
its XRs paused so that only its status speaks, and removed after."""

from __future__ import annotations

import copy
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import XR_API, XR_KINDS, remove, until

from dot_inference.apiserver import PRUNED
from dot_inference.controlplane import install
from dot_inference.controlplane.kube import Kube, KubeError, condition
from dot_inference.function_kcl import user_message

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "security"))
import harness
from conftest import parse_yaml

CASES: list[dict[str, Any]] = parse_yaml(harness.CATALOGUE.read_text())
REFUSED = [c for c in CASES if c["expect"] == "refused"]
BY_FUNCTION = [c for c in REFUSED if not c.get("schema")]
FATAL = "returned a fatal result: "
# The bad value the API server quotes after "Invalid value:": a JSON string, null, a number or
# a boolean (an object or a list it leaves out).
_QUOTED = re.compile(r'^Invalid value: ("(?:[^"\\]|\\.)*"|null|true|false|-?[0-9][0-9.e+-]*): ')
# The model's errors written in the API server's own words (CEL rules' messages, bounds).
_OWN_WORDS = re.compile(r"^[^:]+: (Invalid value: |Too many: |Too long: )")


def _real_errors(err: KubeError) -> list[str]:
    """The API server's causes as the model writes them: `<field>: <message>`, the bad value
    it quotes left out (`Invalid value: "x": m` is `Invalid value: m`), `<nil>` as `<root>`."""
    causes = (
        (err.body.get("details") or {}).get("causes") or [] if isinstance(err.body, dict) else []
    )
    out = []
    for c in causes:
        field = c.get("field", "") or "<root>"
        field = "<root>" if field == "<nil>" else field.lstrip(".")
        message = _QUOTED.sub("Invalid value: ", c.get("message", ""))
        out.append(f"{field}: {message}")
    return sorted(out)


def _field(error: str) -> str:
    """The field an error names; a missing property named in full (the API server's
    Required names the field, jsonschema its parent)."""
    field, _, message = error.partition(": ")
    missing = re.match(r"'([^']+)' is a required property", message)
    if missing:
        return f"{field}.{missing.group(1)}" if field != "<root>" else missing.group(1)
    unknown = re.match(r"([^:]+): unknown field", error)
    if unknown:
        return unknown.group(1)
    return field


def _prepare(kube: Kube, namespace: str) -> None:
    """The claim's namespace exists (the examples' deletion left a-team; a case may use
    another)."""
    install.namespace(kube, namespace)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_api_server_refuses_what_the_model_refuses(kube: Kube, case: dict[str, Any]) -> None:
    xr = harness.claim(case)
    _prepare(kube, xr["metadata"]["namespace"])
    want = sorted(case.get("schema") or [])
    try:
        # As `kubectl create` sends it (strict field validation: an unknown field is an
        # error, where the model says the API server would prune it).
        kube.request(
            "POST",
            kube.path(xr["apiVersion"], xr["kind"], xr["metadata"]["namespace"]),
            xr,
            query={"dryRun": "All", "fieldValidation": "Strict"},
        )
        got: list[str] = []
    except KubeError as err:
        if err.status == 400 and "strict decoding error" in err.message:
            # Strict field validation stops at the first step, decoding: the unknown fields
            # are all it says, and they are what the model says the API server would prune.
            unknown = sorted(set(re.findall(r'unknown field "([^"]+)"', err.message)))
            pruned = sorted({_field(e) for e in want if PRUNED in e})
            assert unknown == pruned, f"the API server says {err.message}; the model {want}"
            return
        if err.status != 422:
            raise
        got = _real_errors(err)
    assert bool(got) == bool(want), f"the API server says {got}; the model {want}"
    assert {_field(e) for e in got} == {_field(e) for e in want}
    for error in want:
        if _OWN_WORDS.match(error):
            assert error in got, f"{error!r} not in {got}"


def _pause(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    meta = out.setdefault("metadata", {})
    meta.setdefault("annotations", {})["crossplane.io/paused"] = "true"
    _bare(meta)
    return out


def _bare(meta: dict[str, Any]) -> None:
    """Without what the API server writes; owner references (whose uids the offline
    fixtures cannot know) too."""
    for key in (
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "generation",
        "managedFields",
        "ownerReferences",
    ):
        meta.pop(key, None)


def _create_world(
    kube: Kube, world: list[dict[str, Any]], kept: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Create the case's objects; an XR (and anything with a status) paused, its status
    patched in. Usages last: they need what they name. What existed before is added to `kept`
    as it was."""
    made: list[dict[str, Any]] = []
    for obj in sorted(world, key=lambda o: o.get("kind") == "Usage"):
        status = obj.get("status")
        body = _pause(obj) if obj.get("kind") in XR_KINDS or status else copy.deepcopy(obj)
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        _bare(body.setdefault("metadata", {}))
        if owners:
            body["metadata"]["ownerReferences"] = [_owner(kube, body, r, made) for r in owners]
        body.pop("status", None)
        ns = body["metadata"].get("namespace")
        if ns:
            _prepare(kube, ns)
        before = kube.get(body["apiVersion"], body["kind"], body["metadata"]["name"], ns)
        if before is not None:
            kept.append(before)
        live = kube.apply(body)
        _only_its_labels(kube, body, live)
        if status:
            kube.patch_status(body, _stamped(status))
        made.append(body)
    return made


def _only_its_labels(kube: Kube, body: dict[str, Any], live: dict[str, Any]) -> None:
    """The labels `body` gives the object and no others, in one merge patch. An object that
    outlives the earlier checks (agentgateway-system, kept when the cluster that made it is
    deleted) keeps the labels another writer set, and an apply that omits them leaves them: a
    case's unlabelled namespace would still name an owner."""
    meta = body["metadata"]
    wanted = meta.get("labels") or {}
    found = (live.get("metadata") or {}).get("labels") or {}
    patch = {k: None for k in found if k not in wanted and not k.startswith("kubernetes.io/")}
    patch |= {k: v for k, v in wanted.items() if found.get(k) != v}
    if patch:
        kube.patch(
            body["apiVersion"],
            body["kind"],
            meta["name"],
            meta.get("namespace"),
            {"metadata": {"labels": patch}},
        )


def _owner(
    kube: Kube, obj: dict[str, Any], ref: dict[str, Any], made: list[dict[str, Any]]
) -> dict[str, Any]:
    """An owner reference with its owner's real uid: the owner (an LLMInference another
    claim left, say) made paused when the world does not hold it, as the catalogue means."""
    ns = obj["metadata"].get("namespace")
    owner = kube.get(ref["apiVersion"], ref["kind"], ref["name"], ns)
    if owner is None:
        stub = _pause(
            {
                "apiVersion": ref["apiVersion"],
                "kind": ref["kind"],
                "metadata": {"name": ref["name"], "namespace": ns},
                "spec": {"parameters": {"model": harness._MODEL}},
            }
        )
        owner = kube.apply(stub)
        made.append(stub)
    return {**ref, "uid": owner["metadata"]["uid"]}


def _stamped(status: dict[str, Any]) -> dict[str, Any]:
    """A status as the API server takes it: every condition with its lastTransitionTime (the
    offline fixtures leave it out; Crossplane's condition schema requires it)."""
    out = copy.deepcopy(status)
    for c in out.get("conditions") or []:
        c.setdefault("lastTransitionTime", "2026-01-01T00:00:00Z")
    return out


def _fatal(synced: dict[str, Any]) -> str:
    message = synced.get("message", "")
    return user_message(message.split(FATAL, 1)[1]) if FATAL in message else message


@pytest.mark.parametrize("case", BY_FUNCTION, ids=[c["name"] for c in BY_FUNCTION])
def test_the_pipeline_refuses_with_the_catalogue_s_message(
    kube: Kube, case: dict[str, Any]
) -> None:
    xr = harness.claim(case)
    kind, meta = xr["kind"], xr["metadata"]
    _prepare(kube, meta["namespace"])
    world = harness.world(case)
    kept: list[dict[str, Any]] = []
    made = _create_world(kube, world, kept)
    if any((o.get("metadata") or {}).get("creationTimestamp") for o in world):
        # The case says that what it holds came first; the API server stamps creation in
        # whole seconds, so the claim comes a second later.
        time.sleep(1.1)
    try:
        kube.apply(xr)
        synced = until(
            lambda: condition(kube.get(XR_API, kind, meta["name"], meta["namespace"]), "Synced"),
            60,
            f"{kind} {meta['name']} through its pipeline",
        )
        got = kube.get(XR_API, kind, meta["name"], meta["namespace"])
        assert synced["status"] == "False", f"not refused: {synced}"
        assert _fatal(synced) == case["refusal"]
        refs = ((got.get("spec") or {}).get("crossplane") or {}).get("resourceRefs") or []
        assert not refs, f"a refused claim composes nothing: {refs}"
    finally:
        remove(kube, [xr, *made], 90)
        for before in kept:  # the labels it had (a namespace stays)
            meta = before["metadata"]
            live = kube.get(
                before["apiVersion"], before["kind"], meta["name"], meta.get("namespace")
            )
            if live is not None:
                _only_its_labels(kube, before, live)
