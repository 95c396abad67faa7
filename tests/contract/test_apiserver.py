"""Tests of dot_inference.apiserver: one valid and one invalid object per schema source."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from dot_inference.apiserver import (
    ValidationReport,
    _read_part,
    _self_paths,
    load_yaml_stream,
    object_id,
    schema_dirs,
    validate_objects,
)

TESTDATA = Path(__file__).parent / "testdata" / "validate"
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
PATHS = [SCHEMAS, TESTDATA]


def release(**spec_overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "forProvider": {
            "chart": {
                "name": "gpu-operator",
                "repository": "https://helm.ngc.nvidia.com/nvidia",
                "version": "v26.7.0",
            },
            "namespace": "gpu-operator",
            "values": {"driver": {"enabled": False}},
        },
        "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "default"},
    }
    spec.update(spec_overrides)
    return {
        "apiVersion": "helm.m.crossplane.io/v1beta1",
        "kind": "Release",
        "metadata": {"name": "gpu-operator", "namespace": "team-a"},
        "spec": spec,
    }


def vllm_runtime(replicas: Any = 1, **deployment: Any) -> dict[str, Any]:
    return {
        "apiVersion": "production-stack.vllm.ai/v1alpha1",
        "kind": "VLLMRuntime",
        "metadata": {"name": "qwen", "namespace": "team-a", "labels": {"app": "qwen"}},
        "spec": {
            "model": {"modelURL": "Qwen/Qwen2.5-1.5B-Instruct", "maxModelLen": 4096},
            "vllmConfig": {"port": 8000, "gpuMemoryUtilization": "0.9", "extraArgs": []},
            "deploymentConfig": {
                "replicas": replicas,
                "resources": {"cpu": "4", "memory": "16Gi", "gpu": "1"},
                "image": {"registry": "docker.io", "name": "lmcache/vllm-openai:latest"},
                **deployment,
            },
        },
    }


def ingress(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": spec
        or {
            "ingressClassName": "nginx",
            "rules": [
                {
                    "host": "qwen.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "qwen", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }


def widget(status: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "test.dot-inference.io/v1alpha1",
        "kind": "XWidget",
        "metadata": {"name": "w", "namespace": "team-a"},
        "spec": {
            "parameters": {"model": "qwen", **params},
            "crossplane": {"compositionRef": {"name": "xwidgets"}},
        },
    }
    if status is not None:
        obj["status"] = status
    return obj


def k8s_object(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubernetes.m.crossplane.io/v1alpha1",
        "kind": "Object",
        "metadata": {"name": "remote-ns", "namespace": "team-a"},
        "spec": {
            "forProvider": {"manifest": manifest},
            "providerConfigRef": {"kind": "ClusterProviderConfig", "name": "gpu-cluster"},
        },
    }


CONDITION = {
    "type": "Ready",
    "status": "True",
    "reason": "Available",
    "lastTransitionTime": "2024-01-01T00:00:00Z",
}


def with_metadata(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].update(meta)
    return out


def drop(obj: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    node = out
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out


# (case id, object, expected outcome, substring expected in one of the errors)
CASES: list[tuple[str, dict[str, Any], str, str]] = [
    # upstream CRD: provider-helm namespaced Release
    ("release valid", release(), "valid", ""),
    (
        "release missing providerConfigRef.kind",
        release(providerConfigRef={"name": "default"}),
        "invalid",
        "spec.providerConfigRef: 'kind' is a required property",
    ),
    (
        "release unknown field",
        release(forProviderr={}),
        "invalid",
        'spec.forProviderr: unknown field "forProviderr"',
    ),
    ("release preserve-unknown values", release(), "valid", ""),
    # upstream CRD: production-stack VLLMRuntime
    ("vllmruntime valid", vllm_runtime(), "valid", ""),
    (
        "vllmruntime wrong type",
        vllm_runtime(replicas="one"),
        "invalid",
        "spec.deploymentConfig.replicas: 'one' is not of type 'integer'",
    ),
    (
        # The stale release manifest had no nodeSelectorTerms; the pinned CRD has no nodeSelector.
        "vllmruntime field the pinned CRD would prune",
        vllm_runtime(nodeSelector={"gpu": "l4"}),
        "invalid",
        'spec.deploymentConfig.nodeSelector: unknown field "nodeSelector": not in the schema, '
        "so the API server would prune it",
    ),
    (
        "vllmruntime missing required",
        drop(vllm_runtime(), "spec", "model"),
        "invalid",
        "spec: 'model' is a required property",
    ),
    # core kind through kubernetes-validate
    ("ingress valid", ingress(), "valid", ""),
    ("ingress unknown field", ingress(rulez=[]), "invalid", 'spec.rulez: unknown field "rulez"'),
    (
        "ingress int-or-string port name accepted",
        ingress(defaultBackend={"service": {"name": "qwen", "port": {"name": "http"}}}),
        "valid",
        "",
    ),
    (
        "ingress bad name",
        with_metadata(ingress(), name="Qwen_1"),
        "invalid",
        'metadata.name: Invalid value: "Qwen_1"',
    ),
    (
        "namespace name must be a DNS label",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}},
        "invalid",
        "RFC 1123 label",
    ),
    (
        "clusterrole names may contain colons",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "crossplane:aggregate-to-crossplane:vllm"},
            "rules": [{"apiGroups": ["x"], "resources": ["y"], "verbs": ["get"]}],
        },
        "valid",
        "",
    ),
    (
        "secret data must be base64",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "team-a"},
            "data": {"token": "not base64!"},
        },
        "invalid",
        "data.token",
    ),
    # XR of a test XRD: user schema plus Crossplane machinery
    ("xr valid", widget(), "valid", ""),
    (
        "xr with status conditions and our status",
        widget(status={"conditions": [CONDITION], "endpoint": "http://w"}),
        "valid",
        "",
    ),
    (
        "xr status unknown field",
        widget(status={"endpointt": "x"}),
        "invalid",
        'status.endpointt: unknown field "endpointt"',
    ),
    (
        "xr condition date-time format",
        widget(status={"conditions": [{**CONDITION, "lastTransitionTime": "yesterday"}]}),
        "invalid",
        "status.conditions[0].lastTransitionTime",
    ),
    (
        "xr duplicate condition types (list-type map)",
        widget(status={"conditions": [CONDITION, CONDITION]}),
        "invalid",
        "Duplicate value",
    ),
    (
        "xr missing required parameter",
        drop(widget(), "spec", "parameters", "model"),
        "invalid",
        "'model' is a required property",
    ),
    ("xr missing spec", drop(widget(), "spec"), "invalid", "'spec' is a required property"),
    (
        "xr unknown parameter",
        widget(modell="x"),
        "invalid",
        'spec.parameters.modell: unknown field "modell"',
    ),
    (
        "xr unknown crossplane field",
        {**widget(), "spec": {**widget()["spec"], "crossplane": {"compositionReff": {}}}},
        "invalid",
        'unknown field "compositionReff"',
    ),
    ("xr int-or-string int", widget(port=8080), "valid", ""),
    ("xr int-or-string string", widget(port="http"), "valid", ""),
    ("xr int-or-string rejects bool", widget(port=True), "invalid", "not an integer or a string"),
    ("xr int-or-string rejects float", widget(port=80.5), "invalid", "not an integer or a string"),
    (
        "xr preserve-unknown allows anything below",
        widget(extra={"anything": {"nested": [1, {"deep": True}]}}),
        "valid",
        "",
    ),
    ("xr null of non-nullable field is dropped", widget(note=None), "valid", ""),
    ("xr list-type set duplicates", widget(tags=["a", "a"]), "invalid", "Duplicate value"),
    (
        "xr CEL rule violated (message)",
        widget(minReplicas=3, maxReplicas=2),
        "invalid",
        "spec.parameters: Invalid value: minReplicas must not exceed maxReplicas",
    ),
    (
        "xr CEL rule violated (messageExpression)",
        widget(replicas=0),
        "invalid",
        "Invalid value: replicas is 0",
    ),
    ("xr CEL rules see defaults", widget(), "valid", ""),
    (
        "xr name longer than 63",
        with_metadata(widget(), name="w" * 64),
        "invalid",
        "must be no more than 63 characters",
    ),
    (
        "xr bad label value",
        with_metadata(widget(), labels={"team": "a b"}),
        "invalid",
        "metadata.labels",
    ),
    (
        "xr labels must be strings",
        with_metadata(widget(), labels={"replicas": 2}),
        "invalid",
        "metadata.labels.replicas: 2 is not of type 'string'",
    ),
    (
        "legacy v1 XR machinery directly under spec",
        {
            "apiVersion": "test.dot-inference.io/v1alpha1",
            "kind": "XLegacy",
            "metadata": {"name": "l"},
            "spec": {"size": "small", "compositionRef": {"name": "c"}, "claimRef": {}},
        },
        "invalid",
        "spec.claimRef: 'apiVersion' is a required property",
    ),
    (
        "legacy claim",
        {
            "apiVersion": "test.dot-inference.io/v1alpha1",
            "kind": "Legacy",
            "metadata": {"name": "l", "namespace": "team-a"},
            "spec": {"size": "large", "writeConnectionSecretToRef": {"name": "s"}},
        },
        "valid",
        "",
    ),
    # meta kinds (CRD form)
    (
        "configuration package meta",
        {
            "apiVersion": "meta.pkg.crossplane.io/v1",
            "kind": "Configuration",
            "metadata": {"name": "dot-inference"},
            "spec": {
                "crossplane": {"version": ">=v2.0.0"},
                "dependsOn": [
                    {
                        "apiVersion": "pkg.crossplane.io/v1",
                        "kind": "Function",
                        "package": "xpkg.crossplane.io/crossplane-contrib/function-kcl",
                        "version": ">=v0.12.2",
                    }
                ],
            },
        },
        "valid",
        "",
    ),
    # provider-kubernetes Object: valid wrapper and manifest
    (
        "object with valid manifest",
        k8s_object({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vllm"}}),
        "valid",
        "",
    ),
    (
        "embedded resource needs kind",
        k8s_object({"apiVersion": "v1", "metadata": {"name": "vllm"}}),
        "invalid",
        "kind: Required value",
    ),
    # no schema
    (
        "unknown kind",
        {"apiVersion": "example.org/v1", "kind": "Nope", "metadata": {"name": "x"}},
        "no_schema",
        "",
    ),
    (
        "core group mismatch is not core",
        {"apiVersion": "apps.example.org/v1", "kind": "Deployment", "metadata": {"name": "x"}},
        "no_schema",
        "",
    ),
    ("not an object", {"kind": "Thing"}, "invalid", "apiVersion and kind must be strings"),
]


@pytest.mark.parametrize(
    ("obj", "expected", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cases(obj: dict[str, Any], expected: str, needle: str) -> None:
    report = validate_objects([obj], schema_paths=PATHS)
    oid = object_id(obj)
    if expected == "valid":
        assert oid in report.valid, report.summary()
        assert report.ok, report.summary()
    elif expected == "no_schema":
        assert report.no_schema == [oid], report.summary()
        assert not report.ok
    else:
        errors = dict(report.invalid).get(oid)
        assert errors is not None, report.summary()
        assert any(needle in e for e in errors), errors
        assert not report.ok


def test_object_manifest_is_validated_as_its_own_object() -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "vllm"},
        "spec": {"finalizerz": []},
    }
    obj = k8s_object(manifest)
    report = validate_objects([obj], schema_paths=PATHS)
    outer = object_id(obj)
    assert report.valid == [outer]
    assert len(report.invalid) == 1
    oid, errors = report.invalid[0]
    assert oid == f"v1/Namespace vllm (manifest of {outer})"
    assert errors == [
        'spec.finalizerz: unknown field "finalizerz": not in the schema, so the API server '
        'would prune it; did you mean "finalizers"?'
    ]


def test_cel_counts() -> None:
    # Rules on spec.parameters: 2 plain (evaluated), isURL (not supported here), oldSelf (skipped).
    plain = validate_objects([widget()], schema_paths=PATHS)
    assert (plain.cel_evaluated, plain.cel_not_evaluated, plain.cel_transition_rules_skipped) == (
        3,
        0,
        1,
    )
    url = validate_objects([widget(homepage="https://example.com")], schema_paths=PATHS)
    assert url.cel_evaluated == 2
    assert url.cel_not_evaluated == 1
    assert "isURL" in url.cel_not_evaluated_rules[0]
    assert url.cel_not_evaluated_rules[0].startswith(object_id(widget()))
    # A rule that is not evaluated is never reported as passed: the object stays valid
    # (the API server would decide), but the count says it was not checked.
    assert url.ok


def test_cel_upstream_rules_are_evaluated() -> None:
    bad = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "team-a"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "v1"}}],
                    "backendRefs": [{"name": "svc", "port": 80}],
                }
            ],
        },
    }
    report = validate_objects([bad], schema_paths=PATHS)
    assert report.cel_evaluated > 10
    assert report.cel_not_evaluated == 0
    ((_, errors),) = report.invalid
    assert any("must be an absolute path" in e for e in errors), errors


def test_many_objects_reuse_compiled_validators() -> None:
    objs = [release(), vllm_runtime(), ingress(), widget()] * 50
    report = validate_objects(objs, schema_paths=PATHS)
    assert len(report.valid) == 200
    assert report.ok


def test_report_ok_and_summary() -> None:
    report = ValidationReport(valid=["a"], invalid=[], no_schema=[])
    assert report.ok
    report.no_schema.append("b")
    assert not report.ok
    assert "NO SCHEMA b" in report.summary()


def test_load_yaml_stream_skips_empty_documents(tmp_path: Path) -> None:
    text = (
        "---\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n"
        "---\n# only a comment\n---\n"
    )
    assert [d["metadata"]["name"] for d in load_yaml_stream(text)] == ["a"]
    f = tmp_path / "objs.yaml"
    f.write_text(text + "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: b\n")
    assert [d["metadata"]["name"] for d in load_yaml_stream(f)] == ["a", "b"]
    assert [d["metadata"]["name"] for d in load_yaml_stream(str(f))] == ["a", "b"]


def test_schema_dirs_default_and_env(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.delenv("DOT_INFERENCE_SCHEMAS", raising=False)
    assert schema_dirs() == [repo / "schemas", repo / "package"]
    monkeypatch.setenv("DOT_INFERENCE_SCHEMAS", f"/a{__import__('os').pathsep}/b")
    assert schema_dirs() == [Path("/a"), Path("/b"), repo / "package"]


def test_object_id() -> None:
    assert object_id(ingress()) == "networking.k8s.io/v1/Ingress team-a/qwen"
    assert object_id(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"generateName": "x-"}}
    ) == ("v1/Namespace x-")


def test_schema_changes_are_picked_up(tmp_path: Path) -> None:
    xrd = (TESTDATA / "xrd.yaml").read_text()
    (tmp_path / "xrd.yaml").write_text(xrd)
    obj = widget(colour="blue")
    first = validate_objects([obj], schema_paths=[tmp_path])
    assert first.invalid, first.summary()
    (tmp_path / "xrd.yaml").write_text(
        xrd.replace(
            "                    note:\n",
            "                    colour: {type: string}\n                    note:\n",
            1,
        )
    )
    second = validate_objects([obj], schema_paths=[tmp_path])
    assert second.ok, second.summary()


def usage(of: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "protection.crossplane.io/v1beta1",
        "kind": "Usage",
        "metadata": {"name": "u", "namespace": "team-a"},
        "spec": {"of": of, **spec},
    }


OF_ELSEWHERE = {
    "apiVersion": "v1",
    "kind": "Secret",
    "resourceRef": {"name": "s", "namespace": "b"},
}
BY = {"apiVersion": "v1", "kind": "Pod", "resourceRef": {"name": "p"}}

# (case, object, the CEL message expected, or None when valid). Kubernetes names a property
# that is a CEL keyword __kw__ (and "-", ".", "/", "__" escaped): Crossplane's Usage refuses a
# cross-namespace `of` without `by` through self.of.resourceRef.__namespace__.
ESCAPED = [
    (
        "escaped name read: cross-namespace of without by",
        usage(OF_ELSEWHERE, reason="r"),
        'cross-namespace "spec.of" is not allowed',
    ),
    ("escaped name read: with by", usage(OF_ELSEWHERE, by=BY), None),
    (
        "escaped name absent",
        usage({**OF_ELSEWHERE, "resourceRef": {"name": "s"}}, reason="r"),
        None,
    ),
]


@pytest.mark.parametrize(("obj", "says"), [c[1:] for c in ESCAPED], ids=[c[0] for c in ESCAPED])
def test_cel_reads_escaped_property_names(obj: dict[str, Any], says: str | None) -> None:
    report = validate_objects([obj], schema_paths=PATHS)
    assert report.cel_not_evaluated == 0, report.cel_not_evaluated_rules
    if says is None:
        assert report.ok, report.summary()
    else:
        ((_, errors),) = report.invalid
        assert any(says in e for e in errors), errors


def test_cel_outcomes_are_reused_only_for_the_fields_a_rule_reads() -> None:
    """A rule's outcome is remembered per value of the fields it reads: two Usages that differ
    only in names share it, and one that differs in a field the rule reads does not."""
    first = usage(OF_ELSEWHERE, reason="r")
    renamed = copy.deepcopy(first)
    renamed["spec"]["of"]["resourceRef"]["name"] = "other"
    renamed["spec"]["reason"] = "another reason"
    local = usage({**OF_ELSEWHERE, "resourceRef": {"name": "other"}}, reason="r")
    for obj, ok in ((first, False), (renamed, False), (local, True), (first, False)):
        assert validate_objects([obj], schema_paths=PATHS).ok is ok


READS = [
    ("fields", "has(self.a.b) && self.c == 1", ((("c",),), (("a", "b"),))),
    (
        "an escaped name: the property, or a map key spelled so",
        "has(self.of.__namespace__) && self.x__dash__y",
        (
            (("x-y",), ("x__dash__y",)),
            (("of", "__namespace__"), ("of", "namespace")),
        ),
    ),
    ("bare self", "size(self) > 1 && has(self.a)", None),
    ("a method of self", "self.all(k, k.startsWith('x'))", None),
    ("a method of self, spaced", "self.size () <= 1", None),
    ("a method of a field", "self.l.exists(x, x > 1)", ((("l",),), ())),
    ("a method after has()", "has(self.m) && self.m.all(k, k != 'x')", ((("m",),), (("m",),))),
    ("a comment could hide the rest", "size(// has(\nself.a.b) == 3", None),
    (
        "has of a longer expression",
        "has(self.a) && has(self.a.b.c) == (self.a.d)",
        ((("a", "d"),), (("a",), ("a", "b", "c"))),
    ),
]


@pytest.mark.parametrize(("expr", "paths"), [c[1:] for c in READS], ids=[c[0] for c in READS])
def test_the_fields_a_rule_reads(expr: str, paths: tuple | None) -> None:
    assert _self_paths(expr) == paths


# (case, instance, value paths, has() paths, the part a rule reads)
PARTS = [
    ("missing stays missing", {"a": {"z": 1}, "c": 2}, (("a", "b"), ("c",)), (), {"a": {}, "c": 2}),
    ("a list is kept whole", {"l": [1, 2], "m": 3}, (("l", "exists"),), (), {"l": [1, 2]}),
    (
        "a shorter path keeps the whole value",
        {"a": {"b": 1, "z": 2}},
        (("a", "b"), ("a",)),
        (),
        {"a": {"b": 1, "z": 2}},
    ),
    (
        "and either order",
        {"a": {"b": 1, "z": 2}},
        (("a",), ("a", "b")),
        (),
        {"a": {"b": 1, "z": 2}},
    ),
    ("not an object", [1, 2], (("a",),), (), [1, 2]),
    (
        "has() reads only presence",
        {"a": {"b": {"n": 1}}, "c": 1},
        (),
        (("a", "b"), ("d",)),
        {"a": {"b": True}},
    ),
    (
        "a value read wins over has()",
        {"a": {"b": {"n": 1}}},
        (("a", "b"),),
        (("a", "b"),),
        {"a": {"b": {"n": 1}}},
    ),
    (
        "has() under a value kept whole",
        {"a": {"b": 1, "c": 2}},
        (("a",),),
        (("a", "b"),),
        {"a": {"b": 1, "c": 2}},
    ),
    (
        "has() of a field and of one under it",
        {"a": {"b": {"c": 1, "d": 2}}},
        (),
        (("a",), ("a", "b", "c")),
        {"a": {"b": {"c": True}}},
    ),
]


@pytest.mark.parametrize(
    ("instance", "values", "present", "part"), [c[1:] for c in PARTS], ids=[c[0] for c in PARTS]
)
def test_the_part_a_rule_reads(instance: Any, values: tuple, present: tuple, part: Any) -> None:
    assert _read_part(instance, values, present) == part


def test_a_rule_over_a_maps_keys_is_not_answered_from_another_map() -> None:
    """The Gateway's infrastructure labels are checked key by key (self.all(key, ...)): a
    Gateway with a bad key is refused even after one with good keys was validated."""

    def gateway(labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "g", "namespace": "team-a"},
            "spec": {
                "gatewayClassName": "c",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
                "infrastructure": {"labels": labels},
            },
        }

    assert validate_objects([gateway({"good": "v"})], schema_paths=PATHS).ok
    assert not validate_objects([gateway({"bad key!": "v"})], schema_paths=PATHS).ok


# --- agentgateway (schemas/agentgateway, the release kcl/versions.k:agentgateway pins) -------


def agentgateway(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    """An agentgateway.dev/v1alpha1 object (AgentgatewayBackend, AgentgatewayPolicy)."""
    return {
        "apiVersion": "agentgateway.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "m", "namespace": "team-a"},
        "spec": spec,
    }


ROUTE_REF = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "r"}

# (case, object, None when valid, else the message an error carries)
AGENTGATEWAY = [
    (
        "static backend",
        agentgateway(
            "AgentgatewayBackend",
            {
                "static": {"host": "models.example.com", "port": 443},
                "policies": {
                    "tls": {"sni": "models.example.com"},
                    "health": {"eviction": {"consecutiveFailures": 3, "duration": "30s"}},
                },
            },
        ),
        None,
    ),
    (
        "ai backend",
        agentgateway(
            "AgentgatewayBackend",
            {
                "ai": {
                    "provider": {
                        "openai": {"model": "x"},
                        "host": "api.together.xyz",
                        "port": 443,
                        "pathPrefix": "/v1",
                    }
                },
                "policies": {
                    "auth": {"secretRef": {"name": "k", "key": "apiKey"}},
                    "tls": {"sni": "api.together.xyz"},
                },
            },
        ),
        None,
    ),
    (
        "policy on a route",
        agentgateway(
            "AgentgatewayPolicy",
            {
                "targetRefs": [ROUTE_REF],
                "traffic": {"retry": {"attempts": 2, "codes": [502, 503, 504], "backoff": "100ms"}},
            },
        ),
        None,
    ),
    (
        "static backend with a host and no port",
        agentgateway("AgentgatewayBackend", {"static": {"host": "models.example.com"}}),
        "spec.static: Invalid value: must specify either unixPath or both host and port",
    ),
    (
        "policy with targetRefs and targetSelectors",
        agentgateway(
            "AgentgatewayPolicy",
            {
                "targetRefs": [ROUTE_REF],
                "targetSelectors": [
                    {
                        "group": "gateway.networking.k8s.io",
                        "kind": "HTTPRoute",
                        "matchLabels": {"app": "x"},
                    }
                ],
                "traffic": {"retry": {"attempts": 2}},
            },
        ),
        "exactly one of the fields in [targetRefs targetSelectors] must be set",
    ),
]


@pytest.mark.parametrize(
    ("obj", "says"), [c[1:] for c in AGENTGATEWAY], ids=[c[0] for c in AGENTGATEWAY]
)
def test_agentgateway_backends_and_policies(obj: dict[str, Any], says: str | None) -> None:
    """The CRDs of the release the clusters install, CEL rules included (every one evaluated)."""
    report = validate_objects([obj], schema_paths=PATHS)
    assert report.no_schema == [], "schemas/agentgateway holds the kind"
    assert report.cel_evaluated > 0 and report.cel_not_evaluated == 0, report.summary()
    if says is None:
        assert report.ok, report.summary()
    else:
        ((_, errors),) = report.invalid
        assert any(says in e for e in errors), errors


# --- The API server's order and limits for CEL (apiextensions-apiserver at the pinned release:
# strategy.go hasBlockingErr, schema/cel/validation.go; dot_inference/cel_cost.py)

_LISTS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: lists.example.org}
spec:
  group: example.org
  names: {kind: Lists, plural: lists}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              names:
                type: array
                maxItems: 200
                items: {type: string, maxLength: 16}
                x-kubernetes-validations:
                - rule: self.all(a, self.exists_one(b, b == a))
                  message: each name once
              others:
                type: array
                maxItems: 200
                items: {type: string}
                x-kubernetes-validations:
                - rule: self.all(a, self.exists_one(b, b == a))
"""


def _lists(tmp_path: Path, **spec: Any) -> ValidationReport:
    (tmp_path / "crd.yaml").write_text(_LISTS_CRD)
    obj = {
        "apiVersion": "example.org/v1",
        "kind": "Lists",
        "metadata": {"name": "l", "namespace": "a"},
        "spec": spec,
    }
    return validate_objects([obj], schema_paths=[tmp_path])


def _errors(report: ValidationReport) -> list[str]:
    return [e for _, errs in report.invalid for e in errs]


def test_a_list_over_max_items_blocks_every_rule(tmp_path: Path) -> None:
    """The schema's bounds first: a rule over a list past maxItems never runs (its cost would
    grow with the list), and the API server says so."""
    report = _lists(tmp_path, names=["x"] * 5000)
    assert _errors(report) == [
        "<root>: Invalid value: some validation rules were not checked because the object was "
        "invalid; correct the existing errors to complete validation",
        "spec.names: Too many: 5000: must have at most 200 items",
    ]
    assert report.cel_evaluated == 0


def test_a_pattern_does_not_block_the_rules(tmp_path: Path) -> None:
    """Only missing fields, enums, types and bounds block CEL (hasBlockingErr); the rule runs
    beside any other schema error."""
    (tmp_path / "crd.yaml").write_text(_LISTS_CRD.replace("maxLength: 16", "pattern: '^[a-z]+$'"))
    obj = {
        "apiVersion": "example.org/v1",
        "kind": "Lists",
        "metadata": {"name": "l", "namespace": "a"},
        "spec": {"names": ["X", "X"]},
    }
    errors = _errors(validate_objects([obj], schema_paths=[tmp_path]))
    assert "spec.names: Invalid value: each name once" in errors
    assert len(errors) == 3, errors


def test_a_rule_past_the_per_call_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule whose evaluation passes the per-call limit is cancelled, and no rule runs after
    it. (The limit is lowered here: the real one, 1,000,000, is what the uniqueness rule spends
    on about 580 names, which the schema's maxItems keeps out of reach.)"""
    from dot_inference import cel_cost

    monkeypatch.setattr(cel_cost, "PER_CALL_LIMIT", 20_000)
    report = _lists(tmp_path, names=[f"n{i}" for i in range(100)], others=["a", "a"])
    assert _errors(report) == [
        "spec.names: Invalid value: 'operation cancelled: actual cost limit exceeded': no "
        "further validation rules will be run due to call cost exceeds limit for rule: each "
        "name once"
    ]


def test_rules_past_the_object_s_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rule's cost comes out of one budget per object; the rule that overruns it stops
    every rule, its own failure unsaid."""
    from dot_inference import cel_cost

    monkeypatch.setattr(cel_cost, "RUNTIME_COST_BUDGET", 1_000)
    report = _lists(tmp_path, names=["a", "b"], others=[f"o{i}" for i in range(30)])
    assert _errors(report) == [
        "spec.others: Invalid value: validation failed due to running out of cost budget, no "
        "further validation rules will be run"
    ]


def test_a_value_not_of_its_format_blocks_every_rule(tmp_path: Path) -> None:
    """A format failure is a TypeInvalid error to the API server (kube-openapi
    validate/values.go FormatOf), which blocks the CEL rules as a wrong type does."""
    crd = _LISTS_CRD.replace("maxLength: 16", "format: cidr")
    (tmp_path / "crd.yaml").write_text(crd)
    obj = {
        "apiVersion": "example.org/v1",
        "kind": "Lists",
        "metadata": {"name": "l", "namespace": "a"},
        "spec": {"names": ["10.0.0.0/40", "10.0.0.0/40"]},
    }
    errors = _errors(validate_objects([obj], schema_paths=[tmp_path]))
    assert any("some validation rules were not checked" in e for e in errors), errors
    assert not any("each name once" in e for e in errors), errors


def test_a_duplicate_in_a_list_map_is_named_at_its_index() -> None:
    """structurallisttype reports a duplicate at the list's index, as the API server does."""
    report = validate_objects([widget(tags=["a", "a"])], schema_paths=PATHS)
    errors = [e for _, errs in report.invalid for e in errs]
    assert any(e.startswith("spec.parameters.tags[1]: Duplicate value") for e in errors), errors
