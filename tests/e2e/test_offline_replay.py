"""What can be checked of the Chainsaw end-to-end suites (tests/e2e/) without a cluster.

* Every ``chainsaw-test.yaml`` and the root ``.chainsaw.yaml`` validate against Chainsaw's own
  JSON schemas (the release devbox.json pins, vendored in ``schemas/chainsaw``), and every
  file or script a step names exists.
* Every claim a suite applies renders offline through the real package
  (``dot_inference.crossplane.render``)
  without a fatal result, and the render validates against the upstream schemas.
* Each suite is replayed step by step against an offline stand-in for the cluster: ``apply``,
  ``patch`` and ``delete`` change the set of claims, the claims are rendered, and every
  ``assert`` and ``error`` document is matched against the rendered objects the way Chainsaw
  matches (same apiVersion/kind, name and namespace when given, maps partial, lists element by
  element with equal lengths). Objects wrapped in provider-kubernetes ``Object``s whose
  ProviderConfig uses ``InjectedIdentity`` (this same cluster) count as created, as
  provider-kubernetes would create them.

How the offline cluster renders (``OfflineCluster.view``), as Crossplane would reconcile:

* Every XR is rendered with every other XR as a required resource, carrying the status its
  own render published (a model's ``clusterRef``, a ``clusterSelector``'s ``matchLabels`` over
  the InferenceClusters' labels, a fleet's ``globalEndpoint`` cluster, the namespace's
  LLMInferences and the clusters' ledger Usages), again and again until no render's inputs
  change (at most ``MAX_ROUNDS``).
* What an XR composed is what it observes on its next render (``as_observed``), as Crossplane
  observes what it applied: a claim whose model cache claim exists mounts it (the
  production-stack runtime's storage waits for it), and a provider-kubernetes ``Object``
  carries the status its provider writes, on a target that holds nothing of ours at first.
* An XR an XR composes (a fleet's placements: one LLMInference per cluster) is an XR too: it
  is rendered in the same state, its composed objects are the cluster's, and it is what its
  parent observes of it (with that status) on the parent's next render. A new state (after a
  ``patch``) starts from the last one's: the placements that existed are observed until their
  parent drops them.
* An XR's ``Ready`` that a ``*-ready.yaml`` step asserted holds from then on (Chainsaw waited
  for it live; offline nothing is observed, so no XR would ever be Ready): a fleet's candidate
  clusters must be Ready, and so must its global Gateway's cluster.

Not evaluated offline, and never counted as passing: keys or values that are JMESPath
expressions ``(...)`` (other than the plain bindings ``($namespace)``, which stands for the
test's namespace, ``($values.<key>)``, read from tests/e2e/values.yaml as ``--values`` passes
it, ``join('', [...])`` of those and string literals, and, on our XRs outside readiness
files, ``(conditions[?type == 'X'])`` for a condition the function sets, such as Placement or
Cluster); fields only a live cluster sets (``status`` of anything but our XRs, XR
``status.conditions`` otherwise, Crossplane's own XR conditions Ready and Synced,
``spec.crossplane``, server-set metadata); and, in ``*-ready.yaml`` files (state only running
providers reach), every field but the identity (apiVersion, kind, name, namespace) and any
object the offline render does not have. Live only, therefore: whether a model serves (its
Serving condition, ready replicas, so a fleet's route weights above 0 and its placements'
``serving``), what a Gateway or route reports, anything on a cluster that is not this one
(the objects provider-kubernetes would create through an ``existing`` cluster's kubeconfig),
and every script: the HTTP calls through an endpoint, Secrets a script writes, load.
Scripts, sleeps and waits are not simulated. ``test_unevaluated_summary`` prints what was
not evaluated, with file and path, and emits it as a warning.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import merge_patch, parse_yaml, parse_yaml_all

from dot_inference.crossplane import documents, render
from dot_inference.generate import OFFLINE_CA, TOKEN_SECRET
from function.policy import ownership

ROOT = Path(__file__).resolve().parents[2]
E2E = ROOT / "tests" / "e2e"
PACKAGE = ROOT / "package"
EXAMPLES = ROOT / "examples"
SCHEMAS = ROOT / "schemas" / "chainsaw"
VALUES_FILE = E2E / "values.yaml"
CHAINSAW_CONFIG = ROOT / ".chainsaw.yaml"

# Stands for the random namespace Chainsaw creates for each test.
OFFLINE_NAMESPACE = "chainsaw-offline"
SUITES = sorted(p.parent.name for p in E2E.glob("*/chainsaw-test.yaml"))

# Operations that load resources from `file`.
FILE_OPERATIONS = ("apply", "create", "update", "patch", "delete", "assert", "error")
# Blocks of a step, in the order Chainsaw runs them on success.
BLOCKS = ("try", "catch", "finally", "cleanup")
# Kinds of applied objects that are not namespaced (the others get the test's namespace).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "ClusterProviderConfig",
        "ClusterUsage",
        "CompositeResourceDefinition",
        "Composition",
        "Provider",
        "Function",
        "Configuration",
        "DeploymentRuntimeConfig",
    }
)
# metadata the API server writes.
SERVER_METADATA = frozenset(
    {
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "finalizers",
        "selfLink",
    }
)
PROVIDER_KUBERNETES = "kubernetes.m.crossplane.io"
# Renders of every XR against the others' statuses until none changes (each settles in 2-3).
MAX_ROUNDS = 6
# The reason of a condition an earlier `*-ready.yaml` step asserted (OfflineCluster.assume).
ASSUMED_REASON = "AssertedByAnEarlierStep"
# `(conditions[?type == 'Ready'])`: the form readiness files assert a condition in.
_CONDITION_KEY = re.compile(r"^\(conditions\[\?type ?== ?'([A-Za-z]+)'\]\)$")
_BINDING = re.compile(r"^\(\$(namespace|values(?:\.[A-Za-z0-9_-]+)+)\)$")
# `(join('', ['http://', $namespace, '/x']))`: string literals and the plain bindings, joined.
_JOIN = re.compile(r"^\(join\('', \[(.+)\]\)\)$")
_JOIN_ITEM = re.compile(
    r"\s*(?:'([^',]*)'|(\$(?:namespace|values(?:\.[A-Za-z0-9_-]+)+)))\s*(?:,|$)"
)
# Conditions Crossplane itself sets on an XR (its offline `Ready` is the render's, not a live
# reconcile's); the others are the function's, decided by the render.
CROSSPLANE_CONDITIONS = frozenset({"Ready", "Synced", "Healthy", "Responsive"})


# --------------------------------------------------------------------------- loading


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in parse_yaml_all(path.read_text()) if isinstance(d, dict)]


def load_test(suite: str) -> dict[str, Any]:
    docs = load_docs(E2E / suite / "chainsaw-test.yaml")
    assert len(docs) == 1, f"{suite}/chainsaw-test.yaml must hold exactly one Test"
    return docs[0]


def values() -> dict[str, Any]:
    data = parse_yaml(VALUES_FILE.read_text()) if VALUES_FILE.is_file() else None
    return data if isinstance(data, dict) else {}


@dataclass(frozen=True)
class Operation:
    suite: str
    step: str
    block: str
    kind: str
    spec: dict[str, Any]

    @property
    def where(self) -> str:
        return f"{self.suite}: step {self.step!r} {self.block} {self.kind}"

    @property
    def file(self) -> str | None:
        f = self.spec.get("file") if isinstance(self.spec, dict) else None
        return f if isinstance(f, str) else None


def operations(suite: str, blocks: tuple[str, ...] = BLOCKS) -> Iterator[Operation]:
    test = load_test(suite)
    for i, step in enumerate(test["spec"].get("steps") or []):
        name = str(step.get("name") or f"#{i + 1}")
        for block in blocks:
            for op in step.get(block) or []:
                for kind, spec in op.items():
                    if kind in ("description", "continueOnError", "compiler"):
                        continue
                    yield Operation(suite, name, block, kind, spec or {})


def op_files(op: Operation) -> list[Path]:
    """The files an operation loads (`file` may be a glob, relative to the test)."""
    if op.file is None:
        return []
    base = E2E / op.suite
    if any(c in op.file for c in "*?["):
        return sorted(p for p in base.glob(op.file) if p.is_file())
    return [base / op.file]


# --------------------------------------------------------------------------- bindings


class NotOffline(Exception):
    """A templated value Chainsaw would compute with JMESPath: not reproducible here."""


def binding_value(expr: str) -> tuple[bool, Any]:
    """(True, value) for `($namespace)`, `($values.a.b)` and `join('', [...])` of string
    literals and those two; (False, None) otherwise."""
    joined = _JOIN.match(expr)
    if joined:
        parts = []
        for item in _JOIN_ITEM.finditer(joined.group(1)):
            literal, name = item.groups()
            parts.append(literal if name is None else str(binding_value(f"({name})")[1]))
        if _JOIN_ITEM.sub("", joined.group(1)).strip():
            return False, None  # something else than literals and bindings
        return True, "".join(parts)
    m = _BINDING.match(expr)
    if not m:
        return False, None
    if m.group(1) == "namespace":
        return True, OFFLINE_NAMESPACE
    value: Any = values()
    for key in m.group(1).split(".")[1:]:
        if not isinstance(value, dict) or key not in value:
            raise NotOffline(f"{expr}: tests/e2e/values.yaml has no {m.group(1)[7:]}")
        value = value[key]
    return True, value


def is_expression(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("(") and value.endswith(")")


def is_expression_key(key: Any) -> bool:
    # `(expr)`, `(expr)->binding` and the foreach form `~name.(expr)`.
    return isinstance(key, str) and (key.startswith("(") or key.startswith("~"))


def template(value: Any, where: str) -> Any:
    """Chainsaw's templating of a resource it applies, for the two plain bindings."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if is_expression_key(k):
                raise NotOffline(f"{where}: templated key {k!r}")
            out[k] = template(v, f"{where}.{k}")
        return out
    if isinstance(value, list):
        return [template(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if is_expression(value):
        ok, bound = binding_value(value)
        if not ok:
            raise NotOffline(f"{where}: templated value {value!r}")
        return bound
    return value


# --------------------------------------------------------------------------- offline cluster


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


Key = tuple[str, str, str, str]  # apiVersion, kind, namespace, name


def identity(obj: dict[str, Any]) -> Key:
    m = _meta(obj)
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(m.get("namespace") or ""),
        str(m.get("name") or ""),
    )


_PACKAGE: list[documents.Package] = []


def package() -> documents.Package:
    if not _PACKAGE:
        _PACKAGE.append(documents.load_package(PACKAGE))
    return _PACKAGE[0]


def xr_kinds() -> set[tuple[str, str]]:
    out = set()
    for xrd in package().xrds:
        spec = xrd.get("spec") or {}
        for v in spec.get("versions") or []:
            out.add((f"{spec.get('group')}/{v.get('name')}", (spec.get("names") or {}).get("kind")))
    return out


def is_xr(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in xr_kinds()


class MissingComposition(Exception):
    """The package has no Composition for a claim the suite applies (yet)."""


class RenderFailed(Exception):
    """A claim's render returned a fatal result."""


@dataclass
class View:
    """What the cluster would hold: applied objects, XRs with their rendered status, composed
    objects, and manifests provider-kubernetes creates on this same cluster."""

    objects: list[dict[str, Any]]
    xrs: set[Key]


def _ledger_entries(result: render.RenderResult) -> list[dict[str, Any]]:
    """The Usages a render composed that are entries of a cluster's ledger."""
    from function.cluster import ledger

    return [
        r
        for r in result.composed
        if r.get("kind") == ledger.USAGE_KIND
        and ledger.CLUSTER_LABEL in ((r.get("metadata") or {}).get("labels") or {})
    ]


def _digest(xr: dict[str, Any], required: list[Any], observed: list[Any]) -> str:
    """What a render depends on, as one string (renders are deterministic)."""
    return hashlib.sha256(
        json.dumps([xr, required, observed], sort_keys=True, default=str).encode()
    ).hexdigest()


def as_observed(composed: dict[str, Any]) -> dict[str, Any]:
    """What Crossplane observes, on the next reconcile, of a resource it composed: the resource
    as applied; a provider-kubernetes Object with the status the provider writes, its target
    holding nothing of ours at first (an observe-only Object finds its manifest absent; one
    that manages it has created it)."""
    out = copy.deepcopy(composed)
    if out.get("kind") == "Secret" and out.get("type") == TOKEN_SECRET:
        out["data"] = {"ca.crt": OFFLINE_CA}  # Kubernetes' token controller fills it
    if not (
        str(out.get("apiVersion", "")).startswith(f"{PROVIDER_KUBERNETES}/")
        and out.get("kind") == "Object"
    ):
        return out
    spec = out.get("spec") or {}
    if spec.get("managementPolicies") == ownership.PROBE_POLICIES:
        out["status"] = {
            "conditions": [
                {"type": "Synced", "status": "False", "message": ownership.ABSENT_MESSAGE}
            ]
        }
    else:
        manifest = (spec.get("forProvider") or {}).get("manifest")
        out["status"] = {"atProvider": {"manifest": copy.deepcopy(manifest)}}
        # Ready once created, under the default readiness policy (provider-kubernetes v1.2.1,
        # internal/controller/namespaced/object/object.go: SuccessfulCreate -> Available).
        if (spec.get("readiness") or {}).get("policy", "SuccessfulCreate") == "SuccessfulCreate":
            out["status"]["conditions"] = [
                {"type": "Ready", "status": "True", "reason": "Available"}
            ]
    return out


class OfflineCluster:
    def __init__(self) -> None:
        self.applied: dict[Key, dict[str, Any]] = {}
        # Conditions `*-ready.yaml` steps asserted of XRs, by XR (see `assume`).
        self.assumed: dict[Key, dict[str, str]] = {}
        self._view: View | None = None
        # The last view's renders, and the XRs they composed (child -> (parent, manifest)).
        self._results: dict[Key, render.RenderResult] = {}
        self._composed: dict[Key, tuple[Key, dict[str, Any]]] = {}
        # Renders by their inputs (the XR, what it requires and observes).
        self._renders: dict[str, render.RenderResult] = {}

    @staticmethod
    def _place(doc: dict[str, Any]) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        if not meta.get("namespace") and doc.get("kind") not in CLUSTER_SCOPED:
            meta["namespace"] = OFFLINE_NAMESPACE
        return doc

    def apply(self, docs: list[dict[str, Any]]) -> None:
        """apply/create/update of whole manifests: the object is what the file says."""
        for doc in docs:
            doc = self._place(doc)
            self.applied[identity(doc)] = doc
        self._view = None

    def patch(self, docs: list[dict[str, Any]]) -> list[str]:
        problems = []
        for doc in docs:
            doc = self._place(doc)
            key = identity(doc)
            if key not in self.applied:
                problems.append(f"patch of {key[1]} {key[3]}: no such object was applied")
                continue
            self.applied[key] = merge_patch(self.applied[key], doc)
        self._view = None
        return problems

    def delete(self, docs: list[dict[str, Any]]) -> None:
        for doc in docs:
            key = identity(self._place(doc))
            self.applied.pop(key, None)
            self.assumed.pop(key, None)
        self._view = None

    def assume(self, key: Key, condition: str, status: str) -> None:
        """A condition an earlier `*-ready.yaml` step asserted of an XR (Chainsaw waited for
        it live): the XR carries it from then on, as others read it, until it is deleted."""
        self.assumed.setdefault(key, {})[condition] = status
        self._view = None

    def _render(
        self,
        xr: dict[str, Any],
        required: list[dict[str, Any]],
        observed: list[dict[str, Any]],
        digest: str,
    ) -> render.RenderResult:
        pkg = package()
        try:
            composition = render.select_composition(pkg, xr)
        except documents.RenderError as e:
            raise MissingComposition(str(e)) from e
        if digest not in self._renders:
            self._renders[digest] = render.render(
                xr,
                composition,
                render.default_runners(),
                xrd=render.find_xrd(pkg, xr),
                required=required,
                observed=observed,
            )
        return self._renders[digest]

    def view(self) -> View:
        """Every XR rendered against the others until nothing changes: a claim may require
        another XR (clusterRef, clusterSelector, globalEndpoint) and read its status, which
        Crossplane writes from that XR's render, and the other models' entries in their
        cluster's ledger (function/cluster/ledger.py: the Usage each composed with that
        status). XRs an XR composes (a fleet's placements, each an LLMInference) are rendered
        too, in the same state, and are what that XR observes of them on its next render; the
        first render of a state observes the placements the previous state had (they exist
        until their claim drops them)."""
        if self._view is not None:
            return self._view
        pkg = package()
        others = [o for o in self.applied.values() if not is_xr(o)]
        stored = {
            k: render.apply_xrd_defaults(o, render.find_xrd(pkg, o) or {})
            for k, o in self.applied.items()
            if is_xr(o)
        }
        composed = {c: (p, xr) for c, (p, xr) in self._composed.items() if p in stored}
        # The statuses the cluster holds when this state begins: the last view's.
        results = {k: r for k, r in self._results.items() if k in stored or k in composed}
        inputs: dict[Key, str] = {}
        for _ in range(MAX_ROUNDS):
            xrs = {**stored, **{c: self._defaulted(xr) for c, (_, xr) in composed.items()}}
            live = {k: self._live_xr(k, xr, results.get(k)) for k, xr in xrs.items()}
            entries = {k: _ledger_entries(r) for k, r in results.items() if k in xrs}
            now: dict[Key, str] = {}
            fresh: dict[Key, render.RenderResult] = {}
            for k, xr in xrs.items():
                theirs = [u for o, us in entries.items() if o != k for u in us]
                observed = [live[c] for c, (parent, _) in composed.items() if parent == k]
                observed += [
                    as_observed(c)
                    for c in (results[k].composed if k in results else [])
                    if not is_xr(c)
                ]
                required = others + list(live.values()) + theirs
                now[k] = _digest(xr, required, observed)
                fresh[k] = self._render(xr, required, observed, now[k])
            composed = {
                identity(c): (k, c) for k, r in fresh.items() for c in r.composed if is_xr(c)
            }
            settled = now == inputs
            results, inputs = fresh, now
            if settled:
                break
        else:
            raise RenderFailed(f"the XRs did not settle in {MAX_ROUNDS} renders each")
        objects = list(others)
        for k, result in results.items():
            if result.fatal:
                raise RenderFailed(f"{k[1]} {k[3]}: the render failed: {result.fatal}")
            xr = stored[k] if k in stored else self._defaulted(composed[k][1])
            objects.append(self._live_xr(k, xr, result))
            objects.extend(c for c in result.composed if not is_xr(c))
        objects.extend(self._created_by_provider_kubernetes(objects))
        self._composed, self._results = composed, results
        self._view = View(objects=objects, xrs=set(results))
        return self._view

    @staticmethod
    def _defaulted(xr: dict[str, Any]) -> dict[str, Any]:
        return render.apply_xrd_defaults(xr, render.find_xrd(package(), xr) or {})

    def _live_xr(
        self, key: Key, stored: dict[str, Any], result: render.RenderResult | None
    ) -> dict[str, Any]:
        live = copy.deepcopy(stored)
        if result is not None:
            live["status"] = copy.deepcopy(result.xr.get("status") or {})
        for condition, status in self.assumed.get(key, {}).items():
            status_ = live.setdefault("status", {})
            kept = [c for c in status_.get("conditions") or [] if c.get("type") != condition]
            status_["conditions"] = [
                *kept,
                {
                    "type": condition,
                    "status": status,
                    "reason": ASSUMED_REASON,
                    "message": "asserted by an earlier *-ready.yaml step (live only)",
                    "lastTransitionTime": render.CONDITION_TIME,
                },
            ]
        return live

    @staticmethod
    def _created_by_provider_kubernetes(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Manifests of Objects whose ProviderConfig is this cluster: InjectedIdentity, or a
        kubeconfig Secret (composed alongside) whose server is this cluster's in-cluster
        address (the scoped identity of a `local` InferenceCluster)."""
        in_cluster = {
            (_meta(o).get("namespace") or "", _meta(o).get("name"))
            for o in objects
            if o.get("kind") == "Secret"
            and "server: https://kubernetes.default.svc"
            in str((o.get("stringData") or {}).get("kubeconfig", ""))
        }

        def here(pc: dict[str, Any]) -> bool:
            creds = (pc.get("spec") or {}).get("credentials") or {}
            ref = creds.get("secretRef") or {}
            return creds.get("source") == "InjectedIdentity" or (
                creds.get("source") == "Secret"
                and (ref.get("namespace") or "", ref.get("name")) in in_cluster
            )

        local = {
            (o.get("kind"), _meta(o).get("namespace") or "", _meta(o).get("name"))
            for o in objects
            if str(o.get("apiVersion", "")).startswith(f"{PROVIDER_KUBERNETES}/")
            and o.get("kind") in ("ProviderConfig", "ClusterProviderConfig")
            and here(o)
        }
        out = []
        for o in objects:
            if not str(o.get("apiVersion", "")).startswith(f"{PROVIDER_KUBERNETES}/"):
                continue
            if o.get("kind") != "Object":
                continue
            spec = o.get("spec") or {}
            ref = spec.get("providerConfigRef") or {}
            kind = ref.get("kind", "ClusterProviderConfig")
            ns = (_meta(o).get("namespace") or "") if kind == "ProviderConfig" else ""
            manifest = (spec.get("forProvider") or {}).get("manifest")
            if (kind, ns, ref.get("name")) in local and isinstance(manifest, dict):
                out.append(copy.deepcopy(manifest))
        return out


# --------------------------------------------------------------------------- matching


@dataclass
class Outcome:
    checked: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    unevaluated: list[tuple[str, str]] = field(default_factory=list)

    def add(self, other: Outcome) -> None:
        self.checked += other.checked
        self.failures += other.failures
        self.unevaluated += other.unevaluated


def _path(path: tuple[Any, ...]) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


IDENTITY_PATHS = {
    ("apiVersion",),
    ("kind",),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
}


def live_only(path: tuple[Any, ...], xr: bool, live_file: bool) -> str | None:
    """Why the field at `path` cannot be evaluated offline, or None."""
    if live_file and path not in IDENTITY_PATHS:
        return "readiness only a live cluster reaches (*-ready.yaml)"
    if path[:1] == ("status",) and not xr:
        return "status: written by the resource's controller on a live cluster"
    if xr and path[:2] == ("status", "conditions"):
        return "XR conditions: set by a live reconcile"
    if xr and path[:2] == ("spec", "crossplane"):
        return "spec.crossplane: set by Crossplane"
    if len(path) == 2 and path[0] == "metadata" and path[1] in SERVER_METADATA:
        return "metadata set by the API server"
    if path[:2] == ("metadata", "ownerReferences") and path[-1:] == ("uid",):
        return "owner UID: set by the API server"
    return None


def function_conditions(
    key: str, path: tuple[Any, ...], actual: Any, *, xr: bool, live_file: bool
) -> list[Any] | None:
    """What `status: {(conditions[?type == 'X']): ...}` selects of an XR when X is one of the
    function's conditions (Placement, Cluster, ...): the render decides those. None for
    anything else (Crossplane's own conditions, other objects, readiness files)."""
    m = _CONDITION_KEY.match(key)
    if not (m and xr and not live_file and path == ("status",) and isinstance(actual, dict)):
        return None
    if m.group(1) in CROSSPLANE_CONDITIONS:
        return None
    conditions = actual.get("conditions")
    return [c for c in conditions or [] if isinstance(c, dict) and c.get("type") == m.group(1)]


def _scalar_equal(expected: Any, actual: Any) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is type(actual) and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return float(expected) == float(actual)
    return bool(expected == actual)


def match(
    expected: Any, actual: Any, path: tuple[Any, ...], *, xr: bool, live_file: bool
) -> Outcome:
    """Chainsaw's (kyverno-json's) assertion tree, for what can be evaluated offline."""
    out = Outcome()
    where = _path(path)
    if path:
        why = live_only(path, xr, live_file)
        if why:
            out.unevaluated.append((where, why))
            return out
    if isinstance(expected, dict):
        if not expected:
            out.checked.append(where)
            if actual is None:
                out.failures.append(f"{where}: must not be null")
            return out
        for key, sub in expected.items():
            child = (*path, key)
            if is_expression_key(key):
                chosen = function_conditions(key, path, actual, xr=xr, live_file=live_file)
                if chosen is None:
                    out.unevaluated.append((_path(child), "JMESPath key"))
                else:
                    out.add(match(sub, chosen, child, xr=xr, live_file=live_file))
                continue
            why = live_only(child, xr, live_file)
            if why:
                out.unevaluated.append((_path(child), why))
                continue
            if not isinstance(actual, dict):
                out.failures.append(f"{where}: expected a map, found {type(actual).__name__}")
                return out
            if key not in actual:
                out.failures.append(f"{_path(child)}: field not found")
                continue
            out.add(match(sub, actual[key], child, xr=xr, live_file=live_file))
        return out
    if isinstance(expected, list):
        out.checked.append(where)
        if not isinstance(actual, list):
            out.failures.append(f"{where}: expected a list, found {type(actual).__name__}")
        elif len(actual) != len(expected):
            out.failures.append(
                f"{where}: lengths of lists differ ({len(expected)} expected, {len(actual)} found)"
            )
        else:
            for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
                out.add(match(e, a, (*path, i), xr=xr, live_file=live_file))
        return out
    if is_expression(expected):
        ok, bound = binding_value(expected)
        if not ok:
            out.unevaluated.append((where, f"JMESPath value {expected}"))
            return out
        expected = bound
    out.checked.append(where)
    if not _scalar_equal(expected, actual):
        out.failures.append(f"{where}: expected {expected!r}, found {actual!r}")
    return out


@dataclass
class DocResult:
    file: str
    doc: str
    verdict: str  # "pass", "fail", "inconclusive"
    checked: list[str]
    unevaluated: list[tuple[str, str]]
    message: str = ""
    # An `error` document that no earlier state of the suite had: it cannot fail, so it
    # proves nothing (a misspelt name, a removed resource).
    vacuous: bool = False


def _doc_label(doc: dict[str, Any]) -> str:
    m = _meta(doc)
    name = m.get("name") or ",".join(f"{k}={v}" for k, v in (m.get("labels") or {}).items())
    return f"{doc.get('kind')} {name or '<any>'}"


def candidates(doc: dict[str, Any], view: View) -> list[dict[str, Any]]:
    meta = _meta(doc)
    name, namespace = meta.get("name"), meta.get("namespace")
    if is_expression(name):
        ok, name = binding_value(name)
        name = name if ok else None
    if is_expression(namespace):
        ok, namespace = binding_value(namespace)
        namespace = namespace if ok else None
    namespace = namespace or OFFLINE_NAMESPACE
    out = []
    for obj in view.objects:
        if (obj.get("apiVersion"), obj.get("kind")) != (doc.get("apiVersion"), doc.get("kind")):
            continue
        om = _meta(obj)
        if name is not None and om.get("name") != name:
            continue
        if om.get("namespace") and om.get("namespace") != namespace:
            continue
        out.append(obj)
    return out


def evaluate(doc: dict[str, Any], view: View, file: str, *, expect_absent: bool) -> DocResult:
    live_file = file.endswith("-ready.yaml")
    label = _doc_label(doc)
    found = candidates(doc, view)
    outcomes = [
        match(doc, obj, (), xr=identity(obj) in view.xrs, live_file=live_file) for obj in found
    ]
    matching = [o for o in outcomes if not o.failures]
    if expect_absent:
        if not matching:
            why = "none in the render" if not found else "none matches"
            return DocResult(file, label, "pass", [f"<absent: {why}>"], [])
        full = [o for o in matching if not o.unevaluated]
        if full:
            return DocResult(file, label, "fail", [], [], "exists, but must not")
        return DocResult(
            file,
            label,
            "inconclusive",
            matching[0].checked,
            [
                (p, f"error step: the plain fields match; decided by this ({why})")
                for p, why in matching[0].unevaluated
            ],
        )
    if matching:
        best = matching[0]
        return DocResult(file, label, "pass", best.checked, best.unevaluated)
    if not found and live_file:
        why = "an object a live cluster creates (not in the offline render)"
        return DocResult(file, label, "inconclusive", [], [("<object>", why)])
    if not found:
        return DocResult(file, label, "fail", [], [], "no such object in the offline render")
    closest = min(outcomes, key=lambda o: len(o.failures))
    return DocResult(file, label, "fail", [], [], "; ".join(closest.failures))


# --------------------------------------------------------------------------- replaying a suite


@dataclass
class SuiteRun:
    suite: str
    results: list[DocResult] = field(default_factory=list)
    not_simulated: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    skipped: str | None = None
    # Conditions of XRs readiness steps asserted, held from then on (OfflineCluster.assume).
    assumed: list[str] = field(default_factory=list)
    # The offline cluster right after each apply/create/update, by file (relative to E2E).
    after_apply: dict[str, View] = field(default_factory=dict)


def asserted_conditions(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The conditions a readiness document asserts in the form
    `status: {(conditions[?type == 'X']): [{status: "True"}]}`."""
    status = doc.get("status")
    out = []
    for key, value in status.items() if isinstance(status, dict) else []:
        m = _CONDITION_KEY.match(str(key))
        only = value[0] if isinstance(value, list) and len(value) == 1 else None
        if m and isinstance(only, dict) and isinstance(only.get("status"), str):
            out.append((m.group(1), only["status"]))
    return out


def assume_asserted(
    cluster: OfflineCluster, view: View, doc: dict[str, Any], run: SuiteRun
) -> None:
    """An XR's Ready a `*-ready.yaml` step asserted holds for the rest of the suite (the live
    step waits for it): the XRs that read this one see it (a fleet's candidates must be Ready,
    a global Gateway's cluster too). Other asserted conditions are not carried over."""
    m = _meta(doc)
    key = (
        str(doc.get("apiVersion", "")),
        str(doc.get("kind", "")),
        str(m.get("namespace") or OFFLINE_NAMESPACE),
        str(m.get("name") or ""),
    )
    if key not in view.xrs:
        return
    for condition, status in asserted_conditions(doc):
        if condition == "Ready":
            cluster.assume(key, condition, status)
            run.assumed.append(f"{key[1]} {key[3]}: {condition}={status}")


def replay(suite: str) -> SuiteRun:
    run = SuiteRun(suite)
    cluster = OfflineCluster()
    views: list[View] = []
    try:
        for op in operations(suite, blocks=("try",)):
            files = op_files(op)
            rel = [str(p.relative_to(E2E)) for p in files]
            if op.kind in ("apply", "create", "update", "patch", "delete"):
                docs = [template(d, str(p)) for p in files for d in load_docs(p)]
                if op.kind == "patch":
                    run.problems += cluster.patch(docs)
                elif op.kind == "delete":
                    cluster.delete(docs)
                else:
                    cluster.apply(docs)
                    view = cluster.view()
                    run.after_apply.update(dict.fromkeys(rel, view))
            elif op.kind in ("assert", "error"):
                view = cluster.view()
                for p, name in zip(files, rel, strict=True):
                    for doc in load_docs(p):
                        result = evaluate(doc, view, name, expect_absent=op.kind == "error")
                        if op.kind == "error" and result.verdict == "pass":
                            result.vacuous = not any(
                                evaluate(doc, seen, name, expect_absent=False).verdict == "pass"
                                for seen in views
                            )
                        run.results.append(result)
                        if op.kind == "assert" and name.endswith("-ready.yaml"):
                            assume_asserted(cluster, view, doc, run)
                views.append(view)
            else:
                run.not_simulated.append(f"{op.where}")
    except MissingComposition as e:
        run.skipped = str(e)
    except RenderFailed as e:
        run.problems.append(str(e))
    except NotOffline as e:
        run.problems.append(f"cannot template offline: {e}")
    return run


_RUNS: dict[str, SuiteRun] = {}


def suite_run(suite: str) -> SuiteRun:
    if suite not in _RUNS:
        _RUNS[suite] = replay(suite)
    return _RUNS[suite]


# --------------------------------------------------------------------------- tests: schemas


def _schema(name: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / name).read_text())
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize(
    ("path", "schema", "kind"),
    [
        (CHAINSAW_CONFIG, "configuration-chainsaw-v1alpha2.json", "Configuration"),
        *[(E2E / s / "chainsaw-test.yaml", "test-chainsaw-v1alpha1.json", "Test") for s in SUITES],
    ],
    ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else None,
)
def test_chainsaw_files_match_the_schema(path: Path, schema: str, kind: str) -> None:
    docs = load_docs(path)
    assert len(docs) == 1
    doc = docs[0]
    assert doc.get("kind") == kind
    version = "v1alpha2" if kind == "Configuration" else "v1alpha1"
    assert doc.get("apiVersion") == f"chainsaw.kyverno.io/{version}"
    errors = [
        f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
        for e in _schema(schema).iter_errors(doc)
    ]
    assert not errors, "\n".join(errors)


def test_there_are_suites() -> None:
    assert {"llm-local", "aws", "azure", "google", "local", "llmd-local", "fleet-local"} <= set(
        SUITES
    )


_SCRIPT_PATH = re.compile(r"(?:\.\./|\./)[\w./-]+\.(?:sh|py)\b")


@pytest.mark.parametrize("suite", SUITES)
def test_every_referenced_file_exists(suite: str) -> None:
    missing = []
    for op in operations(suite):
        if op.kind in FILE_OPERATIONS and op.file is not None and not op_files(op):
            missing.append(f"{op.where}: {op.file}")
        if op.kind == "script":
            for ref in _SCRIPT_PATH.findall(str(op.spec.get("content", ""))):
                if not (E2E / suite / ref).is_file():
                    missing.append(f"{op.where}: {ref}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("suite", SUITES)
def test_every_file_in_a_suite_is_used(suite: str) -> None:
    used = {p.resolve() for op in operations(suite) for p in op_files(op)}
    unused = [
        p.name
        for p in sorted((E2E / suite).glob("*.yaml"))
        if p.name != "chainsaw-test.yaml" and p.resolve() not in used
    ]
    assert not unused, f"{suite}: files no step uses: {unused}"


# --------------------------------------------------------------------------- tests: renders


def _apply_files() -> list[tuple[str, Path]]:
    out = []
    for suite in SUITES:
        for op in operations(suite, blocks=("try",)):
            if op.kind in ("apply", "create", "update"):
                out.extend((suite, p) for p in op_files(op))
    return out


APPLY_FILES = _apply_files()


@pytest.mark.parametrize(
    ("suite", "path"), APPLY_FILES, ids=[str(p.relative_to(E2E)) for _, p in APPLY_FILES]
)
def test_applied_claims_render_and_validate(suite: str, path: Path) -> None:
    """The cluster as it is after the file is applied (in the suite's order, so a claim sees
    the XRs it requires) renders without a fatal result and validates."""
    if not any(is_xr(d) for d in load_docs(path)):
        pytest.skip(f"{path.name} applies no claim")
    run = suite_run(suite)
    if run.skipped:
        pytest.skip(f"package/ has no Composition for this claim yet: {run.skipped}")
    rel = str(path.relative_to(E2E))
    assert rel in run.after_apply, "\n".join(run.problems) or f"{rel} was never applied"
    validate = pytest.importorskip("dot_inference.apiserver").validate_objects
    report = validate(run.after_apply[rel].objects)
    assert report.ok, report.summary()


def _example_claims() -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for p in EXAMPLES.glob("*.yaml"):
        for d in load_docs(p):
            if d.get("kind") in ("LLMInference", "InferenceCluster"):
                out[(d["kind"], _meta(d).get("name"))] = d
    return out


EXAMPLE_CLAIMS = _example_claims()
MIRRORS = [
    (suite, path)
    for suite, path in APPLY_FILES
    if any((d.get("kind"), _meta(d).get("name")) in EXAMPLE_CLAIMS for d in load_docs(path))
]


@pytest.mark.parametrize(
    ("suite", "path"), MIRRORS, ids=[str(p.relative_to(E2E)) for _, p in MIRRORS]
)
def test_applied_claims_mirror_the_examples(suite: str, path: Path) -> None:
    """A claim named like an example is that example: same spec (bindings substituted),
    no namespace (Chainsaw applies it in the test's own)."""
    for doc in load_docs(path):
        key = (doc.get("kind"), _meta(doc).get("name"))
        if key not in EXAMPLE_CLAIMS:
            continue
        assert template(doc, str(path)).get("spec") == EXAMPLE_CLAIMS[key].get("spec"), (
            f"{path.relative_to(E2E)}: {key[0]} {key[1]} differs from the example"
        )
        assert "namespace" not in _meta(doc), f"{key[0]} {key[1]}: drop metadata.namespace"


# --------------------------------------------------------------------------- tests: asserts


@pytest.mark.parametrize("suite", SUITES)
def test_asserts_hold_offline(suite: str) -> None:
    run = suite_run(suite)
    if run.skipped:
        pytest.skip(f"{suite}: {run.skipped}")
    assert not run.problems, "\n".join(run.problems)
    failures = [f"{r.file}: {r.doc}: {r.message}" for r in run.results if r.verdict == "fail"]
    assert not failures, "\n".join(failures)
    # Every file checks something plain, except readiness files (identity only).
    by_file: dict[str, int] = {}
    for r in run.results:
        by_file[r.file] = by_file.get(r.file, 0) + len(r.checked)
    assert all(n > 0 for n in by_file.values()), by_file
    assert sum(by_file.values()) > 0


@pytest.mark.parametrize("suite", SUITES)
def test_error_steps_are_decided_offline_where_possible(suite: str) -> None:
    """`error` documents of files that are not about readiness are decided offline, and each
    names something an earlier step had (else it would pass whatever happens)."""
    run = suite_run(suite)
    if run.skipped:
        pytest.skip(f"{suite}: {run.skipped}")
    undecided = [
        f"{r.file}: {r.doc}"
        for r in run.results
        if r.verdict == "inconclusive" and not r.file.endswith("-ready.yaml")
    ]
    assert not undecided, "\n".join(undecided)
    vacuous = [f"{r.file}: {r.doc}" for r in run.results if r.vacuous]
    assert not vacuous, "error documents that no earlier step had (they cannot fail):\n" + (
        "\n".join(vacuous)
    )


def test_unevaluated_summary() -> None:
    """Prints (and warns) what the offline replay could not evaluate: never a pass."""
    lines, checked, skipped, assumed = [], 0, [], []
    for suite in SUITES:
        run = suite_run(suite)
        if run.skipped:
            skipped.append(f"{suite}: {run.skipped}")
            continue
        checked += sum(len(r.checked) for r in run.results)
        assumed.extend(f"  {suite}: {a}" for a in run.assumed)
        lines.extend(f"  {n}: not simulated" for n in run.not_simulated)
        for r in run.results:
            for path, why in r.unevaluated:
                lines.append(f"  {r.file}: {r.doc}: {path}: {why}")
            if r.verdict == "inconclusive":
                lines.append(f"  {r.file}: {r.doc}: error step not decided offline")
    summary = (
        f"e2e offline replay: {checked} plain fields checked; "
        f"{len(lines)} asserts or operations NOT evaluated (a live cluster decides them):\n"
        + "\n".join(lines)
        + ("\nsuites skipped:\n  " + "\n  ".join(skipped) if skipped else "")
        + (
            "\nheld offline after a readiness step asserted it (live only):\n" + "\n".join(assumed)
            if assumed
            else ""
        )
    )
    print(summary)
    warnings.warn(summary, UserWarning, stacklevel=1)
    assert checked > 0 or len(skipped) == len(SUITES)


# --------------------------------------------------------------------------- tests: the harness


def test_matcher_follows_chainsaw() -> None:
    """Partial maps, exact-length lists, numbers by value, expressions never passing."""
    actual = {"spec": {"a": 1, "b": [1, 2], "c": {"d": "x", "e": True}}, "status": {"x": 1}}
    assert not match(
        {"spec": {"a": 1.0, "c": {"d": "x"}}}, actual, (), xr=False, live_file=False
    ).failures
    assert match({"spec": {"b": [1]}}, actual, (), xr=False, live_file=False).failures
    assert match({"spec": {"c": {"e": 1}}}, actual, (), xr=False, live_file=False).failures
    assert match({"spec": {"z": 1}}, actual, (), xr=False, live_file=False).failures
    out = match(
        {"spec": {"(length(b))": 2}, "status": {"x": 2}}, actual, (), xr=False, live_file=False
    )
    assert not out.failures and not out.checked
    assert {p for p, _ in out.unevaluated} == {"spec.(length(b))", "status"}
    ns = match(
        {"metadata": {"namespace": "($namespace)"}},
        {"metadata": {"namespace": OFFLINE_NAMESPACE}},
        (),
        xr=False,
        live_file=False,
    )
    assert ns.checked == ["metadata.namespace"] and not ns.failures


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("($namespace)", (True, OFFLINE_NAMESPACE)),
        ("($values.gcpProjectId)", (True, values().get("gcpProjectId"))),
        (
            "(join('', ['http://a.', $namespace, '.svc']))",
            (True, f"http://a.{OFFLINE_NAMESPACE}.svc"),
        ),
        ("(join('', [$values.secondCluster, '-x']))", (True, f"{values()['secondCluster']}-x")),
        ("(join('', ['a', b]))", (False, None)),  # `b` is a field of the object: JMESPath
        ("(join(',', ['a', 'b']))", (False, None)),
        ("(length(x))", (False, None)),
        ("plain", (False, None)),
    ],
)
def test_bindings_evaluated_offline(expr: str, expected: tuple[bool, Any]) -> None:
    assert binding_value(expr) == expected


_CONDITIONS = {
    "conditions": [
        {"type": "Ready", "status": "False", "reason": "Creating"},
        {"type": "Placement", "status": "False", "reason": "TooFewClusters"},
    ]
}


@pytest.mark.parametrize(
    ("key", "path", "actual", "xr", "live_file", "expected"),
    [
        # The function's condition of an XR: decided by the render.
        (
            "(conditions[?type == 'Placement'])",
            ("status",),
            _CONDITIONS,
            True,
            False,
            [_CONDITIONS["conditions"][1]],
        ),
        ("(conditions[?type == 'Cluster'])", ("status",), _CONDITIONS, True, False, []),
        # Crossplane's own, another object's, a readiness file's, another form: live only.
        ("(conditions[?type == 'Ready'])", ("status",), _CONDITIONS, True, False, None),
        ("(conditions[?type == 'Placement'])", ("status",), _CONDITIONS, False, False, None),
        ("(conditions[?type == 'Placement'])", ("status",), _CONDITIONS, True, True, None),
        ("(conditions[?type == 'Placement'])", ("spec",), _CONDITIONS, True, False, None),
        ("(conditions[?status == 'True'])", ("status",), _CONDITIONS, True, False, None),
    ],
)
def test_function_conditions_are_evaluated_offline(
    key: str,
    path: tuple[str, ...],
    actual: dict[str, Any],
    xr: bool,
    live_file: bool,
    expected: list[Any] | None,
) -> None:
    assert function_conditions(key, path, actual, xr=xr, live_file=live_file) == expected


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"status": {"(conditions[?type == 'Ready'])": [{"status": "True"}]}}, [("Ready", "True")]),
        (
            {"status": {"(conditions[?type=='Serving'])": [{"status": "True", "reason": "x"}]}},
            [("Serving", "True")],
        ),
        ({"status": {"(conditions[?type == 'Ready'])": [{"reason": "x"}]}}, []),
        ({"status": {"(conditions[?type == 'Ready'])": [{"status": "True"}, {}]}}, []),
        ({"status": {"ready": True}}, []),
        ({"spec": {}}, []),
    ],
)
def test_asserted_conditions(doc: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert asserted_conditions(doc) == expected


def test_composed_xrs_are_rendered_and_observed() -> None:
    """fleet-local: the fleet's placements are XRs of the offline cluster (rendered, their
    status evaluated), on the Ready the readiness step asserted; after the second cluster
    leaves the fleet, its placement is gone and the other, observed from the state before,
    stayed where it was."""
    run = suite_run("fleet-local")
    assert not run.problems and not run.skipped
    view = run.after_apply["fleet-local/03-install-model.yaml"]
    key = ("inference.devopstoolkit.ai/v1alpha1", "LLMInference", OFFLINE_NAMESPACE)
    assert {(*key, "small-kind-a"), (*key, "small-kind-b")} <= view.xrs
    assert [a.split(":")[0] for a in run.assumed[:2]] == [
        "InferenceCluster kind-a",
        "InferenceCluster kind-b",
    ]
    kept = [
        r
        for r in run.results
        if r.file == "fleet-local/07-assert.yaml" and r.doc == "LLMInference small"
    ]
    assert kept and kept[0].verdict == "pass"
    assert "status.placement.placements[0].reason" in kept[0].checked
    assert "status.(conditions[?type == 'Placement'])[0].reason" in kept[0].checked


def test_setup_packages_match_the_package() -> None:
    """setup/manifests.py installs every Function the Compositions call, by the name they
    use, at the version package/crossplane.yaml pins, and the output validates."""
    script = E2E / "setup" / "manifests.py"
    out = subprocess.run(
        [sys.executable, str(script), "packages", "--clouds", "aws,azure,google"],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [d for d in parse_yaml_all(out.stdout) if d]
    functions = {d["metadata"]["name"] for d in docs if d["kind"] == "Function"}
    called = {
        step["functionRef"]["name"]
        for c in package().compositions
        for step in c["spec"]["pipeline"]
    }
    assert called <= functions
    meta = load_docs(PACKAGE / "crossplane.yaml")[0]
    pinned = {
        d["package"]: d["version"].split(",")[0].removeprefix(">=").strip()
        for d in meta["spec"]["dependsOn"]
    }
    for d in docs:
        package_ref, _, tag = d["spec"]["package"].rpartition(":")
        assert pinned[package_ref] == tag
    assert len(docs) == len(pinned)
    validate = pytest.importorskip("dot_inference.apiserver").validate_objects
    runtime = load_docs(E2E / "setup" / "runtime.yaml")
    report = validate(docs + runtime)
    assert report.ok, report.summary()


def test_setup_providerconfigs_validate() -> None:
    script = E2E / "setup" / "manifests.py"
    out = subprocess.run(
        [sys.executable, str(script), "providerconfigs", "--clouds", "aws,azure,google"],
        capture_output=True,
        text=True,
        check=True,
    )
    docs = [d for d in parse_yaml_all(out.stdout) if d]
    assert {(d["kind"], d["metadata"]["name"]) for d in docs} == {
        ("ClusterProviderConfig", "local"),
        ("ClusterProviderConfig", "default"),
    }
    validate = pytest.importorskip("dot_inference.apiserver").validate_objects
    report = validate(docs)
    assert report.ok, report.summary()


def test_vllmruntime_crd_comes_from_the_pinned_commit() -> None:
    """The llm-local suite applies the VLLMRuntime CRD the InferenceCluster installs: the
    upstream CRD of the commit kcl/versions.k pins (schemas/production-stack)."""
    sys.path.insert(0, str(E2E / "scripts"))
    try:
        import production_stack
    finally:
        sys.path.pop(0)
    [crd] = production_stack.crds(["vllmruntimes.production-stack.vllm.ai"])
    upstream = SCHEMAS.parent / "production-stack" / "production-stack.vllm.ai_vllmruntimes.yaml"
    assert crd["spec"] == parse_yaml(upstream.read_text())["spec"]
    with pytest.raises(production_stack.ProductionStackError, match="no CRD nope"):
        production_stack.crds(["nope"])


_STUB_KUBECTL = """#!/usr/bin/env bash
# Records what install.sh applies; `get secret aws-creds` succeeds (AWS credentials exist).
echo "$*" >> "$STUB_LOG.calls"
case "$*" in
  *"get secret aws-creds"*) exit 0 ;;
  *" get secret "*) exit 1 ;;
  "apply --filename -") { cat; echo "---"; } >> "$STUB_LOG" ;;
  "apply --filename "*) { cat "$3"; echo "---"; } >> "$STUB_LOG" ;;
esac
exit 0
"""


def test_install_script_applies_everything_in_order(tmp_path: Path) -> None:
    """setup/install.sh against a stub kubectl: the AWS credentials Secret exists, so the
    AWS providers and their ClusterProviderConfig are installed, no other cloud's."""
    stub = tmp_path / "kubectl"
    stub.write_text(_STUB_KUBECTL)
    stub.chmod(0o755)
    log = tmp_path / "applied.yaml"
    env = {
        "PATH": f"{tmp_path}:/usr/bin:/bin",
        "STUB_LOG": str(log),
        "PYTHON": sys.executable,
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        ["bash", str(E2E / "setup" / "install.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    applied = [d for d in parse_yaml_all(log.read_text()) if d]
    kinds = [(d["kind"], d["metadata"]["name"]) for d in applied]
    order = [k for k, _ in kinds]
    # Runtime configs before the Providers that use them; XRDs before Compositions; the
    # ProviderConfigs last.
    assert order.index("DeploymentRuntimeConfig") < order.index("Provider")
    assert order.index("CompositeResourceDefinition") < order.index("Composition")
    assert order[-1] == "ClusterProviderConfig"
    providers = {n for k, n in kinds if k == "Provider"}
    assert "crossplane-contrib-provider-aws-eks" in providers
    assert not {p for p in providers if "azure" in p or "gcp" in p}
    pcs = {
        (d["apiVersion"].split("/")[0], d["metadata"]["name"])
        for d in applied
        if d["kind"] == "ClusterProviderConfig"
    }
    assert ("aws.m.upbound.io", "default") in pcs
    assert {g for g, _ in pcs} == {
        "aws.m.upbound.io",
        "kubernetes.m.crossplane.io",
        "helm.m.crossplane.io",
    }
    assert len([k for k in kinds if k[0] == "Composition"]) == len(package().compositions)
