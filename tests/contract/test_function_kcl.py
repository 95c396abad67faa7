"""Tests of dot_inference.function_kcl: function-kcl v0.12.2 semantics on kcl-lib."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference.function_kcl import run

XR = {
    "apiVersion": "example.org/v1",
    "kind": "XCluster",
    "metadata": {"name": "gpu", "namespace": "team-a"},
    "spec": {"replicas": 2, "region": "eu"},
}
META = "meta.krm.kcl.dev/v1alpha1"


def request(
    source: str,
    *,
    params: dict[str, Any] | None = None,
    target: str | None = None,
    desired: dict[str, tuple[dict[str, Any], int]] | None = None,
    desired_xr: dict[str, Any] | None = None,
    observed: dict[str, tuple[dict[str, Any], dict[str, bytes]]] | None = None,
    context: dict[str, Any] | None = None,
    required: dict[str, list[dict[str, Any]]] | None = None,
    extra: dict[str, list[dict[str, Any]]] | None = None,
    spec: dict[str, Any] | None = None,
) -> fnv1.RunFunctionRequest:
    in_spec: dict[str, Any] = {"source": source, **(spec or {})}
    if params is not None:
        in_spec["params"] = params
    if target is not None:
        in_spec["target"] = target
    req = fnv1.RunFunctionRequest(
        meta=fnv1.RequestMeta(tag="t"),
        input=resource.dict_to_struct(
            {"apiVersion": "krm.kcl.dev/v1alpha1", "kind": "KCLInput", "spec": in_spec}
        ),
        observed=fnv1.State(composite=fnv1.Resource(resource=resource.dict_to_struct(XR))),
    )
    if desired_xr is not None:
        req.desired.composite.resource.CopyFrom(resource.dict_to_struct(desired_xr))
    for name, (obj, ready) in (desired or {}).items():
        req.desired.resources[name].CopyFrom(
            fnv1.Resource(resource=resource.dict_to_struct(obj), ready=ready)
        )
    for name, (obj, details) in (observed or {}).items():
        req.observed.resources[name].CopyFrom(
            fnv1.Resource(resource=resource.dict_to_struct(obj), connection_details=details)
        )
    if context is not None:
        req.context.CopyFrom(resource.dict_to_struct(context))
    for name, objs in (required or {}).items():
        req.required_resources[name].CopyFrom(
            fnv1.Resources(items=[fnv1.Resource(resource=resource.dict_to_struct(o)) for o in objs])
        )
    for name, objs in (extra or {}).items():
        req.extra_resources[name].CopyFrom(
            fnv1.Resources(items=[fnv1.Resource(resource=resource.dict_to_struct(o)) for o in objs])
        )
    return req


def desired_resources(rsp: fnv1.RunFunctionResponse) -> dict[str, dict[str, Any]]:
    return {k: resource.struct_to_dict(v.resource) for k, v in rsp.desired.resources.items()}


def fatal_messages(rsp: fnv1.RunFunctionResponse) -> list[str]:
    return [r.message for r in rsp.results if r.severity == fnv1.SEVERITY_FATAL]


def cm(name: str, **meta: Any) -> str:
    """KCL for a ConfigMap item."""
    extra = "".join(f", metadata.{k} = {json.dumps(v)}" for k, v in meta.items())
    return f'{{apiVersion = "v1", kind = "ConfigMap", metadata.name = "{name}"{extra}}}'


# ------------------------------------------------------------------------------------------
# option("params")


def test_params_shape() -> None:
    src = """
import json
items = [{
    apiVersion = "v1", kind = "ConfigMap", metadata.name = "p"
    data.params = json.encode(option("params"))
}]
"""
    req = request(
        src,
        params={"answer": 42, "oxr": "overwritten by the function"},
        desired_xr={"status": {"phase": "x"}},
        desired={"prev": ({"apiVersion": "v1", "kind": "Secret"}, fnv1.READY_TRUE)},
        observed={"obs": ({"apiVersion": "v1", "kind": "Secret"}, {"password": b"s3cret"})},
        context={"apiextensions.crossplane.io/environment": {"tier": "gold"}},
        required={"cfg": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}]},
        extra={"old": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"}}]},
    )
    rsp = run(req)
    assert not fatal_messages(rsp)
    params = json.loads(desired_resources(rsp)["p"]["data"]["params"])
    assert set(params) == {
        "answer",
        "oxr",
        "dxr",
        "ocds",
        "dcds",
        "ctx",
        "extraResources",
        "requiredResources",
    }
    assert params["answer"] == 42
    assert params["oxr"] == XR
    assert isinstance(params["oxr"]["spec"]["replicas"], int)  # 2, not 2.0, as protojson prints it
    assert params["dxr"] == {
        "apiVersion": "example.org/v1",
        "kind": "XCluster",
        "status": {"phase": "x"},
    }
    assert params["dcds"] == {
        "prev": {"Resource": {"apiVersion": "v1", "kind": "Secret"}, "Ready": "True"}
    }
    assert params["ocds"] == {
        "obs": {
            "Resource": {"apiVersion": "v1", "kind": "Secret"},
            "ConnectionDetails": {"password": base64.b64encode(b"s3cret").decode()},
        }
    }
    assert params["ctx"] == {"apiextensions.crossplane.io/environment": {"tier": "gold"}}
    assert params["requiredResources"] == {
        "cfg": [{"Resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}}]
    }
    assert params["extraResources"] == {
        "old": [{"Resource": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "e"}}}]
    }


def test_params_empty_state() -> None:
    src = """
import json
items = [{
    apiVersion = "v1", kind = "ConfigMap", metadata.name = "p"
    data.params = json.encode(option("params"))
}]
"""
    params = json.loads(desired_resources(run(request(src)))["p"]["data"]["params"])
    assert params["dcds"] == {} and params["ocds"] == {} and params["ctx"] == {}
    assert params["requiredResources"] == {} and params["extraResources"] == {}


# ------------------------------------------------------------------------------------------
# items -> desired composed resources


@dataclass
class ItemCase:
    id: str
    source: str
    names: dict[str, str] = field(default_factory=dict)  # resource name -> metadata.name
    ready: dict[str, int] = field(default_factory=dict)
    annotations: dict[str, dict[str, str] | None] = field(default_factory=dict)
    fatal: str = ""


ITEM_CASES = [
    ItemCase(
        "named by metadata.name", f"items = [{cm('a')}, {cm('b')}]", names={"a": "a", "b": "b"}
    ),
    ItemCase(
        "named by annotation, annotation stripped",
        "items = ["
        + cm("cm-1", annotations={"krm.kcl.dev/composition-resource-name": "config", "keep": "me"})
        + "]",
        names={"config": "cm-1"},
        annotations={"config": {"keep": "me"}},
    ),
    ItemCase(
        "stripping leaves an empty annotations map, as upstream",
        "items = [" + cm("x", annotations={"krm.kcl.dev/composition-resource-name": "y"}) + "]",
        names={"y": "x"},
        annotations={"y": {}},
    ),
    ItemCase(
        "readiness annotation True and False, stripped",
        "items = ["
        + cm("a", annotations={"krm.kcl.dev/ready": "True"})
        + ", "
        + cm("b", annotations={"krm.kcl.dev/ready": "False"})
        + ", "
        + cm("c")
        + "]",
        names={"a": "a", "b": "b", "c": "c"},
        ready={"a": fnv1.READY_TRUE, "b": fnv1.READY_FALSE, "c": fnv1.READY_UNSPECIFIED},
        annotations={"a": {}, "b": {}, "c": None},
    ),
    ItemCase(
        "invalid readiness value",
        "items = [" + cm("a", annotations={"krm.kcl.dev/ready": "Yes"}) + "]",
        fatal='invalid "krm.kcl.dev/ready" annotation value "Yes": must be True, False, or',
    ),
    ItemCase(
        "duplicate names",
        "items = ["
        + cm("a")
        + ", "
        + cm("b", annotations={"krm.kcl.dev/composition-resource-name": "a"})
        + "]",
        fatal='multiple composed resources with name "a" returned: ConfigMap/a and ConfigMap/b.',
    ),
    ItemCase(
        "output without items is one resource",
        'apiVersion = "v1"\nkind = "ConfigMap"\nmetadata = {name = "solo"}',
        names={"solo": "solo"},
    ),
    ItemCase("hidden variables only: nothing", "_x = 1", names={}),
    ItemCase(
        "unknown meta kind",
        f'items = [{{apiVersion = "{META}", kind = "Nope"}}]',
        fatal='invalid kind "Nope" for apiVersion "meta.krm.kcl.dev/v1alpha1"',
    ),
    ItemCase("item that is not an object", "items = [1]", fatal="items[0] is not an object"),
]


@pytest.mark.parametrize("case", ITEM_CASES, ids=[c.id for c in ITEM_CASES])
def test_items(case: ItemCase) -> None:
    rsp = run(request(case.source))
    if case.fatal:
        (msg,) = fatal_messages(rsp)
        assert case.fatal in msg
        assert msg.startswith("cannot process xr and state with the pipeline output") or (
            "cannot parse data resources" in msg
        )
        assert not rsp.desired.resources
        return
    assert not fatal_messages(rsp)
    got = desired_resources(rsp)
    assert {k: v.get("metadata", {}).get("name") for k, v in got.items()} == case.names
    for name, ready in case.ready.items():
        assert rsp.desired.resources[name].ready == ready
    for name, want in case.annotations.items():
        assert got[name]["metadata"].get("annotations") == want


# ------------------------------------------------------------------------------------------
# The XR item and the meta items


def test_xr_item_contributes_only_its_status() -> None:
    src = """
items = [{
    apiVersion = "example.org/v1"
    kind = "XCluster"
    metadata.labels.ignored = "yes"
    spec.ignored = True
    status = {nested.b = 2, endpoint = "https://x"}
}]
"""
    rsp = run(request(src, desired_xr={"status": {"nested": {"a": 1}, "keep": "me"}}))
    assert not fatal_messages(rsp)
    assert not rsp.desired.resources
    assert resource.struct_to_dict(rsp.desired.composite.resource) == {
        "apiVersion": "example.org/v1",
        "kind": "XCluster",
        "status": {"nested": {"a": 1, "b": 2}, "keep": "me", "endpoint": "https://x"},
    }


def test_context_is_merged() -> None:
    src = f"""
items = [{{
    apiVersion = "{META}", kind = "Context"
    data = {{"apiextensions.crossplane.io/environment" = {{b = 2}}, "other" = "x"}}
}}]
"""
    rsp = run(
        request(src, context={"apiextensions.crossplane.io/environment": {"a": 1}, "kept": True})
    )
    assert not fatal_messages(rsp)
    assert resource.struct_to_dict(rsp.context) == {
        "apiextensions.crossplane.io/environment": {"a": 1, "b": 2},
        "kept": True,
        "other": "x",
    }


def test_conditions() -> None:
    src = f"""
items = [{{apiVersion = "{META}", kind = "Conditions", conditions = [
    {{condition = {{
        type = "GPUReady", status = "False", reason = "Waiting", message = "no nodes"
    }}}}
    {{target = "CompositeAndClaim", condition = {{type = "Other", status = "True", reason = "Ok"}}}}
    {{condition = {{type = "GPUReady", status = "True", reason = "Ignored"}}}}
]}}]
"""
    rsp = run(request(src))
    assert not fatal_messages(rsp)
    got = [(c.type, c.status, c.reason, c.message, c.target) for c in rsp.conditions]
    assert got == [
        ("GPUReady", fnv1.STATUS_CONDITION_FALSE, "Waiting", "no nodes", fnv1.TARGET_COMPOSITE),
        ("Other", fnv1.STATUS_CONDITION_TRUE, "Ok", "", fnv1.TARGET_COMPOSITE_AND_CLAIM),
    ]
    assert not rsp.conditions[1].HasField("message")


def test_reserved_condition_is_fatal_and_keeps_request_state() -> None:
    src = f"""
items = [{cm("new")}, {{
    apiVersion = "{META}", kind = "Conditions"
    conditions = [{{condition = {{type = "Ready", status = "True", reason = "x"}}}}]
}}]
"""
    rsp = run(
        request(src, desired={"prev": ({"apiVersion": "v1", "kind": "Secret"}, fnv1.READY_TRUE)})
    )
    assert fatal_messages(rsp) == [
        "cannot set ClaimCondition type: Ready is a reserved Crossplane Condition"
    ]
    assert set(rsp.desired.resources) == {"prev"}


def test_events() -> None:
    src = f"""
items = [{{apiVersion = "{META}", kind = "Events", events = [
    {{event = {{message = "hello"}}}}
    {{
        target = "CompositeAndClaim"
        event = {{type = "Warning", reason = "Slow", message = "careful"}}
    }}
]}}]
"""
    rsp = run(request(src))
    got = [
        (r.severity, r.message, r.reason if r.HasField("reason") else None, r.target)
        for r in rsp.results
    ]
    assert got == [
        (fnv1.SEVERITY_NORMAL, "hello", None, fnv1.TARGET_COMPOSITE),
        (fnv1.SEVERITY_WARNING, "careful", "Slow", fnv1.TARGET_COMPOSITE_AND_CLAIM),
    ]
    bad = f"""items = [{{
    apiVersion = "{META}", kind = "Events"
    events = [{{event = {{type = "Loud", message = "x"}}}}]
}}]"""
    assert fatal_messages(run(request(bad))) == [
        "invalid type Loud, must be one of [Normal, Warning]"
    ]


REQUIRED_SRC = f"""
rr = option("params").requiredResources
items = [
    {{
        apiVersion = "{META}"
        kind = "RequiredResources"
        requirements = {{
            cfg = {{
                apiVersion = "v1", kind = "ConfigMap", name = "gpu-catalog", namespace = "team-a"
            }}
            nodes = {{
                apiVersion = "v1", kind = "Node"
                matchLabels = {{"nvidia.com/gpu.present" = "true"}}
            }}
        }}
    }}
] + [{{
    apiVersion = "v1"
    kind = "ConfigMap"
    metadata.name = "copy-" + r.Resource.metadata.name
    data = r.Resource.data
}} for r in rr?.cfg or []]
"""


def test_required_resources_round_trip() -> None:
    first = run(request(REQUIRED_SRC))
    assert not fatal_messages(first)
    assert not first.desired.resources
    reqs = first.requirements.resources
    assert set(reqs) == {"cfg", "nodes"}
    assert (
        reqs["cfg"].api_version,
        reqs["cfg"].kind,
        reqs["cfg"].match_name,
        reqs["cfg"].namespace,
    ) == (
        "v1",
        "ConfigMap",
        "gpu-catalog",
        "team-a",
    )
    assert reqs["nodes"].WhichOneof("match") == "match_labels"
    assert dict(reqs["nodes"].match_labels.labels) == {"nvidia.com/gpu.present": "true"}
    assert not reqs["nodes"].HasField("namespace")

    catalog = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "gpu-catalog"},
        "data": {"a10g": "24"},
    }
    second = run(request(REQUIRED_SRC, required={"cfg": [catalog], "nodes": []}))
    assert not fatal_messages(second)
    assert desired_resources(second)["copy-gpu-catalog"]["data"] == {"a10g": "24"}
    assert set(second.requirements.resources) == {"cfg", "nodes"}  # asked again: stable


def test_extra_resources_and_duplicate_keys() -> None:
    src = f"""
items = [{{apiVersion = "{META}", kind = "ExtraResources", requirements = {{
    a = {{apiVersion = "v1", kind = "ConfigMap", matchName = "x", matchNamespace = "ns"}}
    b = {{apiVersion = "v1", kind = "ConfigMap", matchLabels = {{}}}}
}}}}]
"""
    rsp = run(request(src))
    extra = rsp.requirements.extra_resources
    assert extra["a"].match_name == "x" and extra["a"].namespace == "ns"
    assert extra["b"].WhichOneof("match") == "match_labels" and not extra["b"].match_labels.labels
    dup = f"""
r = {{
    apiVersion = "{META}", kind = "RequiredResources"
    requirements.k = {{apiVersion = "v1", kind = "Secret", name = "s"}}
}}
items = [r, r]
"""
    (msg,) = fatal_messages(run(request(dup)))
    assert msg.endswith('duplicate required resource key "k"')


def test_composite_connection_details() -> None:
    src = f'items = [{{apiVersion = "{META}", kind = "CompositeConnectionDetails", data.url = "{base64.b64encode(b"https://x").decode()}"}}]'
    rsp = run(request(src))
    assert dict(rsp.desired.composite.connection_details) == {"url": b"https://x"}


# ------------------------------------------------------------------------------------------
# Errors become fatal results


@pytest.mark.parametrize(
    ("source", "needles"),
    [
        (
            "r = option('params').oxr.spec.replicas\n"
            'assert r > 5, "need more than 5 replicas: got ${r}"\nitems = []',
            ["failed to run kcl function pipelines: ", "need more than 5 replicas: got 2"],
        ),
        (
            'schema C:\n    n: int\n    check:\n        n > 1, "n must exceed 1"\n'
            "items = [C {n = 0}]",
            ["n must exceed 1"],
        ),
        ("items = [\n  {a = 1\n", ["failed to run kcl function pipelines: ", "InvalidSyntax"]),
        ("items = [undefined_name]", ["failed to run kcl function pipelines: "]),
    ],
    ids=["assert", "schema check", "syntax error", "undefined name"],
)
def test_kcl_errors_are_fatal(source: str, needles: list[str]) -> None:
    req = request(
        source, desired={"prev": ({"apiVersion": "v1", "kind": "Secret"}, fnv1.READY_TRUE)}
    )
    rsp = run(req)
    (msg,) = fatal_messages(rsp)
    for needle in needles:
        assert needle in msg
    (result,) = rsp.results
    assert result.target == fnv1.TARGET_COMPOSITE
    assert rsp.desired == req.desired  # the accumulated desired state passes through


def test_syntax_errors_are_not_repeated() -> None:
    (msg,) = fatal_messages(run(request("items = [\n  {a = 1\n")))
    blocks = [line for line in msg.splitlines() if line.startswith("---> File")]
    assert len(blocks) == len(set(blocks))


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"source": ""}, "spec.source: Required value: kcl source cannot be empty"),
        ({"source": 3}, "cannot get Function input"),
        ({"source": "oci://ghcr.io/x/y"}, "only inline KCL sources"),
        ({"dependencies": 'k8s = "1.31"'}, "cannot fetch spec.dependencies"),
        *(
            ({"target": t}, f"target Default offline, not {t}")
            for t in ("Resources", "PatchDesired", "PatchResources", "XR")
        ),
        ({"ttl": "soon"}, 'invalid duration "soon"'),
    ],
)
def test_bad_input_is_fatal(spec: dict[str, Any], needle: str) -> None:
    (msg,) = fatal_messages(run(request("items = []", spec=spec)))
    assert needle in msg


def test_missing_input_never_raises() -> None:
    (msg,) = fatal_messages(run(fnv1.RunFunctionRequest()))
    assert "kcl source cannot be empty" in msg


# ------------------------------------------------------------------------------------------
# Accumulated desired state; targets


def test_desired_state_of_earlier_steps_preserved() -> None:
    prev = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "prev"}}
    req = request(
        f"items = [{cm('new')}]",
        desired={"prev": (prev, fnv1.READY_TRUE)},
        desired_xr={"status": {"from": "step-1"}},
        context={"k": "v"},
    )
    rsp = run(req)
    assert set(rsp.desired.resources) == {"prev", "new"}
    assert rsp.desired.resources["prev"].ready == fnv1.READY_TRUE
    assert resource.struct_to_dict(rsp.desired.resources["prev"].resource) == prev
    assert resource.struct_to_dict(rsp.desired.composite.resource)["status"] == {"from": "step-1"}
    assert resource.struct_to_dict(rsp.context) == {"k": "v"}
    assert rsp.meta.tag == "t"


def test_same_name_as_earlier_step_replaces_it() -> None:
    prev = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "a"},
        "data": {"old": "1"},
    }
    rsp = run(request(f"items = [{cm('a')}]", desired={"a": (prev, fnv1.READY_TRUE)}))
    assert "data" not in desired_resources(rsp)["a"]
    assert rsp.desired.resources["a"].ready == fnv1.READY_UNSPECIFIED


def test_an_unknown_target_is_default_as_upstream() -> None:
    rsp = run(request(f"items = [{cm('a')}]", target="Whatever"))
    assert not fatal_messages(rsp)
    assert set(desired_resources(rsp)) == {"a"}


def test_ttl() -> None:
    rsp = run(request("items = []", spec={"ttl": "1m30s"}))
    assert rsp.meta.ttl.seconds == 90
