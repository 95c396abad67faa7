"""Validate rendered Kubernetes objects the way the API server would, offline.

Schemas come from

* every CustomResourceDefinition (``apiextensions.k8s.io/v1``) under the schema paths, per
  version ``openAPIV3Schema``;
* every Crossplane CompositeResourceDefinition (``apiextensions.crossplane.io/v1`` and ``v2``)
  under the schema paths, turned into the CRD schema Crossplane generates for it (the user's
  ``spec``/``status`` plus Crossplane's machinery: ``spec.crossplane`` for modern XRs, the
  legacy fields for v1 ``LegacyCluster`` XRs, ``status.conditions``; claims of v1 XRDs too);
* the core Kubernetes kinds of ``kubernetes-validate`` (its strict JSON schemas, so unknown
  fields are errors), at the release kcl/versions.k pins.

CRD schemas are structural OpenAPI schemas; they are read as the API server reads them:
defaults are applied and nulls of non-nullable fields dropped first; ``nullable``,
``x-kubernetes-int-or-string``, ``x-kubernetes-preserve-unknown-fields`` (unknown fields
allowed at that level), ``x-kubernetes-embedded-resource`` (``apiVersion``/``kind`` required,
``metadata`` checked as ObjectMeta), ``x-kubernetes-list-type`` (``set``/``map`` uniqueness)
and the formats the API server checks (``date-time``, ``date``, ``byte``, ``ipv4``, ``ipv6``,
``cidr``, ``uuid``) are honoured. The API server prunes unknown fields silently (structural
pruning of custom resources; built-in kinds drop them too): every such field is reported as an
error that says it would be pruned, because a pruned field is a setting that silently does not
happen. The root ``metadata`` of every object is checked as ObjectMeta (string maps, label and
annotation key/value syntax, name rules of the kind). ``x-kubernetes-validations`` CEL rules
are evaluated with cel-python plus the Kubernetes string/list helpers, in the API server's
order and within its limits: only when the schema's errors do not block them (a value over
maxItems, maxLength or maxProperties, a wrong type, a missing field, a value not in an enum),
each rule within the per-call cost limit and all of them within the object's budget, with the
API server's words when a limit stops them (dot_inference/cel_cost.py counts the cost as cel-go
does); a rule that cannot be evaluated here is counted in ``report.cel_not_evaluated`` (never
passed silently); transition rules (``oldSelf``) are skipped as the API server skips them on
create and counted in ``report.cel_transition_rules_skipped``.

Not emulated: Go-coded validation of core kinds beyond their OpenAPI schema (port ranges and
the like) and admission webhooks.

The package, lowest layer first (a module imports only modules named before it):
``formats`` (the OpenAPI formats), ``meta`` (ObjectMeta and name rules), ``xr`` (the
Crossplane XR/claim schema), ``cel`` (CEL evaluation and its cost budget), ``structural``
(structural schema -> JSON schema, defaulting, custom keywords), ``compiled`` (one kind's
validator and the API server's order of checks and error words), ``index`` (the schema
index and its disk cache), ``core`` (the core kinds), ``validate`` (the entry points).
"""

from __future__ import annotations

from dot_inference.apiserver.cel import CEL_BUDGET_EXCEEDED, cel_program, to_cel
from dot_inference.apiserver.cel import _read_part as _read_part  # tests/contract
from dot_inference.apiserver.cel import _self_paths as _self_paths  # tests/contract
from dot_inference.apiserver.compiled import CEL_BLOCKED, PRUNED
from dot_inference.apiserver.validate import (
    PROVIDER_KUBERNETES_GROUPS,
    ValidationReport,
    defaulted,
    load_yaml_stream,
    object_id,
    schema_dirs,
    validate_objects,
)

__all__ = [
    "CEL_BLOCKED",
    "CEL_BUDGET_EXCEEDED",
    "PROVIDER_KUBERNETES_GROUPS",
    "PRUNED",
    "ValidationReport",
    "cel_program",
    "defaulted",
    "load_yaml_stream",
    "object_id",
    "schema_dirs",
    "to_cel",
    "validate_objects",
]
