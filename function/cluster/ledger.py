"""Each InferenceCluster's ledger: what every model on it holds, read without the namespace.

A model's reconcile needs the other models on its cluster (function/peers.py: the GPUs they
hold, the names and hosts they took, who came first). Asking Crossplane for every
LLMInference of the namespace made a reconcile grow with the namespace; instead each model
writes what the others read of it where Crossplane can select it by label:

* A model that runs on InferenceCluster `c` and is not one of `c`'s own models composes a
  Usage of `c` (compose.CLUSTER_USAGE) anyway. Its label `inference.devopstoolkit.ai/cluster:
  c` puts it in `c`'s ledger, and its annotation `inference.devopstoolkit.ai/peer` holds its
  entry: compact JSON of exactly the fields of its own LLMInference that `peers._peer` and
  `peers.cluster_of` read (name, creation time; model, aliases, GPUs, replicas, the
  disaggregated sides, namespace, simulation, host, cluster), with the status this very
  reconcile publishes (the plan's GPUs, the replicas allowed, the names served, the placed
  cluster). Nothing else: no secret, no engine argument, no label.
* The cluster's own models (its spec.parameters.models, composed by its program) compose no
  Usage; Crossplane labels them `crossplane.io/composite: <the cluster's own composite
  label>` (its name, unless something composes the cluster) and they are read whole.

A reader asks for both by label (two required resources), reads each entry as an
LLMInference that holds only those fields, with the same `peers` code as a whole one, so an
entry says what its LLMInference says, by construction. An entry is read defensively: a Usage
being deleted, one not controlled by the LLMInference it names, or an annotation that is not
an entry is skipped, never an error.

Crossplane writes a model's Usage in the same apply as its status, so an entry is the model
as its last successful reconcile left it, and a model is in no ledger before its first
reconcile is applied. The ledger therefore never shows more than the namespace: whatever a
reconcile decides on it is at least as permissive as what the whole namespace decides. So a
model whose reconcile on the ledger would hold more than its own entry says it holds (a new
model, more GPUs, a new name or host) or would be refused confirms on every model of the
namespace, as every reconcile did before the ledger (`to_confirm`, compose.compose): each gain
is decided as before, first come, first served, and a reconcile that gains nothing, every one
once a model runs, reads only its cluster's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from function.cluster import peers
from function.cluster.peers import positive_int, strings
from function.keys import CLUSTER_USAGE
from function.kube import dig
from function.outcome import Inputs, Outcome, keep_observed

CLUSTER_LABEL = "inference.devopstoolkit.ai/cluster"
ENTRY_ANNOTATION = "inference.devopstoolkit.ai/peer"
# Crossplane's label on every composed resource: the root composite's name
# (internal/controller/apiextensions/composite/composition_render.go).
COMPOSITE_LABEL = "crossplane.io/composite"
USAGE_API_VERSION = "protection.crossplane.io/v1beta1"
USAGE_KIND = "Usage"
# The required resources a model on a cluster asks for.
LEDGER_REQUIREMENT = "cluster-ledger"
CLUSTER_MODELS_REQUIREMENT = "cluster-models"
# What a reader needs of a ledger Usage: its metadata's (fn.py reads no more of it).
READ_METADATA = ("labels", "annotations", "ownerReferences", "deletionTimestamp")
# An entry is a few hundred bytes (the XRD bounds every field it holds); anything much longer
# is not one.
MAX_ENTRY_CHARS = 16384
# A label value (k8s.io/apimachinery validation.IsValidLabelValue).
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def labelable(value: Any) -> bool:
    """Whether `value` can be a label's value (at most 63 characters)."""
    return isinstance(value, str) and len(value) <= 63 and bool(_LABEL_VALUE.match(value))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _put(out: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value != () and value != {}:
        out[key] = list(value) if isinstance(value, tuple) else value


_FROM_XR: Any = object()


def minimal(xr: Any, status: Any = _FROM_XR) -> dict[str, Any]:
    """The LLMInference `xr` reduced to what `peers` reads of it, each value as `peers` reads
    it (a count as a positive integer, a name as a non-empty string; anything `peers` would
    ignore left out), with `status` as its status (default: its own). `peers._peer` and
    `peers.cluster_of` give the same answer for the result as for `xr`, and
    minimal(minimal(x)) == minimal(x)."""
    if status is _FROM_XR:
        status = dig(xr, "status")
    meta: dict[str, Any] = {}
    name = dig(xr, "metadata", "name")
    if isinstance(name, str):
        meta["name"] = name
    _put(meta, "creationTimestamp", _text(dig(xr, "metadata", "creationTimestamp")))
    params = dig(xr, "spec", "parameters")
    p: dict[str, Any] = {}
    if isinstance(params, dict):
        _put(p, "model", _text(params.get("model")))
        _put(p, "aliases", strings(params.get("aliases")))
        _put(p, "gpu", positive_int(params.get("gpu")))
        _put(p, "replicas", positive_int(params.get("replicas")))
        most = positive_int(dig(params, "autoscaling", "maxReplicas"))
        _put(p, "autoscaling", {"maxReplicas": most} if most else None)
        pd = params.get("disaggregation")
        if isinstance(pd, dict):
            sides: dict[str, Any] = {}
            for side in ("prefill", "decode"):
                s: dict[str, Any] = {}
                _put(s, "gpu", positive_int(dig(pd, side, "gpu")))
                _put(s, "replicas", positive_int(dig(pd, side, "replicas")))
                _put(sides, side, s)
            p["disaggregation"] = sides
        _put(p, "targetNamespace", _text(params.get("targetNamespace")))
        _put(p, "engine", {"simulate": True} if dig(params, "engine", "simulate") is True else None)
        _put(p, "ingressHost", _text(params.get("ingressHost")))
        ref = _text(dig(params, "clusterRef", "name"))
        _put(p, "clusterRef", {"name": ref} if ref else None)
        if params.get("clusterSelector") is not None:
            p["clusterSelector"] = {}  # only whether there is one: its cluster is in status
    st: dict[str, Any] = {}
    plan: dict[str, Any] = {}
    _put(plan, "gpus", positive_int(dig(status, "plan", "gpus")))
    pd_gpus = positive_int(dig(status, "plan", "disaggregation", "gpus"))
    _put(plan, "disaggregation", {"gpus": pd_gpus} if pd_gpus else None)
    _put(st, "plan", plan)
    most = positive_int(dig(status, "replicas", "max"))
    _put(st, "replicas", {"max": most} if most else None)
    _put(st, "servedModelNames", strings(dig(status, "servedModelNames")))
    placed = _text(dig(status, "placement", "cluster"))
    _put(st, "placement", {"cluster": placed} if placed else None)
    out: dict[str, Any] = {"metadata": meta, "spec": {"parameters": p}}
    if st:
        out["status"] = st
    return out


def entry(xr: dict[str, Any], status: Any) -> str:
    """The annotation's text for the LLMInference `xr` publishing `status`: its minimal form
    as compact JSON, keys sorted (the same model and status give the same bytes)."""
    return _dump(minimal(xr, status))


def _dump(xr: dict[str, Any]) -> str:
    return json.dumps(xr, separators=(",", ":"), sort_keys=True)


def read_entry(text: Any) -> dict[str, Any] | None:
    """The LLMInference an annotation holds, or None when it holds none (not JSON, not an
    object, too long, no name). Read as it is: `peers` reads only the fields an entry holds,
    each defensively, so whatever else a forged one holds is never read."""
    if not isinstance(text, str) or len(text) > MAX_ENTRY_CHARS:
        return None
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(found, dict) or not isinstance(dig(found, "metadata", "name"), str):
        return None
    return found


def stamp(usage: dict[str, Any] | None, xr: dict[str, Any], status: Any) -> None:
    """Make `usage` (this model's Usage of its cluster, as composed or kept) its ledger entry:
    the cluster label (the cluster the model counts on, as `peers.cluster_of` reads it; none
    when it counts on none, or its name can be no label's value) and the entry."""
    if not isinstance(usage, dict):
        return
    meta = usage.setdefault("metadata", {})
    if not isinstance(meta, dict):
        return
    mine = minimal(xr, status)
    labels = dict(meta["labels"]) if isinstance(meta.get("labels"), dict) else {}
    cluster = peers.cluster_of(mine)
    if labelable(cluster):
        labels[CLUSTER_LABEL] = cluster
    else:
        labels.pop(CLUSTER_LABEL, None)
    meta["labels"] = labels
    annotations = meta.get("annotations")
    annotations = dict(annotations) if isinstance(annotations, dict) else {}
    annotations[ENTRY_ANNOTATION] = _dump(mine)
    meta["annotations"] = annotations


def composite_of(cluster_xr: Any, cluster: str) -> str:
    """The `crossplane.io/composite` label of the cluster's own models: the cluster's own
    (Crossplane sets it to its name unless something composes the cluster)."""
    value = dig(cluster_xr, "metadata", "labels", COMPOSITE_LABEL)
    return value if isinstance(value, str) and value and labelable(value) else cluster


def requirements(namespace: str, cluster: str, cluster_xr: Any) -> dict[str, dict[str, Any]]:
    """What a model on `cluster` asks Crossplane for: the cluster's ledger (Usages labelled
    with it) and the LLMInferences composed with it (the cluster's own models)."""
    return {
        LEDGER_REQUIREMENT: {
            "apiVersion": USAGE_API_VERSION,
            "kind": USAGE_KIND,
            "matchLabels": {CLUSTER_LABEL: cluster},
            "namespace": namespace,
        },
        CLUSTER_MODELS_REQUIREMENT: {
            "apiVersion": peers.API_VERSION,
            "kind": peers.KIND,
            "matchLabels": {COMPOSITE_LABEL: composite_of(cluster_xr, cluster)},
            "namespace": namespace,
        },
    }


_GROUP = peers.API_VERSION.split("/")[0] + "/"


def _controlled_by(refs: Any, name: str) -> bool:
    """Whether the owner references `refs` make the LLMInference `name` the controller:
    Crossplane composed the Usage for it."""
    return isinstance(refs, list) and any(
        isinstance(r, dict)
        and r.get("controller") is True
        and r.get("kind") == peers.KIND
        and r.get("name") == name
        and str(r.get("apiVersion", "")).startswith(_GROUP)
        for r in refs
    )


def from_usage(usage: Any, cluster: str) -> dict[str, Any] | None:
    """The LLMInference a ledger Usage of `cluster` holds (only the fields its entry holds),
    or None: being deleted, not in that ledger, no entry, not controlled by the model it
    names."""
    meta = usage.get("metadata") if isinstance(usage, dict) else None
    if not isinstance(meta, dict) or meta.get("deletionTimestamp"):
        return None
    labels, annotations = meta.get("labels"), meta.get("annotations")
    if not isinstance(labels, dict) or labels.get(CLUSTER_LABEL) != cluster:
        return None
    if not isinstance(annotations, dict):
        return None
    xr = read_entry(annotations.get(ENTRY_ANNOTATION))
    if xr is None or not _controlled_by(meta.get("ownerReferences"), xr["metadata"]["name"]):
        return None
    return xr


def models(required: dict[str, list[dict[str, Any]]], cluster: str) -> list[dict[str, Any]]:
    """The LLMInferences the two requirements found for `cluster`: the cluster's own models
    whole, then one minimal LLMInference per ledger entry of a model not among them."""
    found = [x for x in required.get(CLUSTER_MODELS_REQUIREMENT) or [] if isinstance(x, dict)]
    names = {dig(x, "metadata", "name") for x in found}
    for usage in required.get(LEDGER_REQUIREMENT) or []:
        xr = from_usage(usage, cluster)
        if xr is not None and xr["metadata"]["name"] not in names:
            names.add(xr["metadata"]["name"])
            found.append(xr)
    return found


def to_confirm(observed_usage: Any, xr: dict[str, Any], status: Any, refused: bool) -> bool:
    """Whether what a reconcile decided on its cluster's ledger must be decided again on every
    model of the namespace: when it refuses the model, or lets it hold more than its own
    entry (`observed_usage`, its Usage as Crossplane observed it) says it holds: no entry yet
    (a new model, or one from before the ledger), another cluster, more GPUs, a name or a
    host it does not hold, another namespace behind the router.

    The ledger holds only models whose reconcile succeeded, so it never shows more than the
    namespace does, and every answer it gives is at least as permissive: one that gives the
    model no more than it holds is the answer the whole namespace gives (what the model holds
    was itself decided on the whole namespace, or within such a decision), and one that gives
    it more may owe it to a model the ledger does not show yet (created before it, its first
    reconcile still under way). So first come, first served holds: every gain is decided on
    the whole namespace, as before the ledger."""
    if refused:
        return True
    now = minimal(xr, status)
    before = read_entry(dig(observed_usage, "metadata", "annotations", ENTRY_ANNOTATION))
    if before is None or before["metadata"].get("name") != now["metadata"].get("name"):
        return True
    if peers.cluster_of(now) != peers.cluster_of(before):
        return True
    mine, held = peers._peer(now), peers._peer(before)
    if mine is None:
        return False  # no other model reads it (no model): it holds nothing
    if held is None:
        return True
    return (
        (mine.published_gpus or 0) > (held.published_gpus or 0)
        or not set(mine.published_names) <= set(held.published_names)
        or (mine.ingress_host is not None and mine.ingress_host != held.ingress_host)
        or mine.target_namespace != held.target_namespace
    )


def on_cluster(
    required: dict[str, list[dict[str, Any]]], cluster: str, me: str
) -> list[peers.Peer]:
    """The other models on `cluster`, from its ledger and its own models, read as
    `peers.on_cluster` reads LLMInferences (`me` and those being deleted left out, first
    come first)."""
    return peers.on_cluster(models(required, cluster), cluster, me)


def publish(inputs: Inputs, out: Outcome) -> None:
    """The ledger stage, after every other: the model's Usage of its cluster, as composed or
    kept, becomes its entry in the cluster's ledger (what this reconcile publishes); and a
    model that would gain (or be refused) on the ledger alone is decided again on every
    model of the namespace, which Crossplane fetches before it applies anything."""
    stamp(out.resources.get(CLUSTER_USAGE), inputs.xr, out.status)
    asked = out.requirements.get(LEDGER_REQUIREMENT)
    if (
        asked is None
        or LEDGER_REQUIREMENT not in inputs.required
        or peers.REQUIREMENT in out.requirements
        or not to_confirm(
            inputs.observed.get(CLUSTER_USAGE), inputs.xr, out.status, out.fatal is not None
        )
    ):
        return
    out.requirements[peers.REQUIREMENT] = {
        "apiVersion": peers.API_VERSION,
        "kind": peers.KIND,
        "namespace": asked["namespace"],
    }
    # Not fatal meanwhile: Crossplane stops at a fatal result, and applies nothing of a
    # response whose requirements changed.
    if out.fatal is not None:
        out.fatal = None
        keep_observed(inputs, out)
