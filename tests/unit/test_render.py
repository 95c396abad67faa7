"""Offline render: engine semantics, auto-ready, output format and the CLI.

Everything runs against a toy XRD/Composition (tests/unit/testdata/render/package) with tiny
in-test step runners, not the product's compositions.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from conftest import EXAMPLES as EXAMPLE_DIR
from conftest import ROOT
from crossplane.function import resource, response
from crossplane.function.proto.v1 import run_function_pb2 as fnv1

from dot_inference import cli, release
from dot_inference import function_auto_ready as autoready
from dot_inference.crossplane import documents, printer, render
from dot_inference.crossplane.convert import jsonable
from dot_inference.crossplane.documents import RenderError

DATA = Path(__file__).parent / "testdata" / "render"
PACKAGE = DATA / "package"


# --------------------------------------------------------------------------- toy runners


def toy_compose(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    """Composes a Deployment and a ConfigMap from the XR, reports its plan in status."""
    rsp = response.to(req)
    xr = resource.struct_to_dict(req.observed.composite.resource)
    params = xr["spec"]["parameters"]
    image = resource.struct_to_dict(req.input).get("image", "none")
    resource.update(
        rsp.desired.resources["app"],
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "spec": {
                "replicas": params.get("replicas", 1),
                "template": {"spec": {"containers": [{"name": "app", "image": image}]}},
            },
        },
    )
    resource.update(
        rsp.desired.resources["config"],
        {"apiVersion": "v1", "kind": "ConfigMap", "data": {"size": params.get("size", "")}},
    )
    resource.update(rsp.desired.composite, {"status": {"size": params.get("size")}})
    response.normal(rsp, f"composed {xr['metadata']['name']}")
    rsp.conditions.append(
        fnv1.Condition(
            type="Planned",
            status=fnv1.STATUS_CONDITION_TRUE,
            reason="Sized",
            message="2 replicas",
            target=fnv1.TARGET_COMPOSITE,
        )
    )
    return rsp


TOY_RUNNERS = {"toy-compose": toy_compose, render.FN_AUTO_READY: autoready.run}


def load(name: str) -> list[dict]:
    return documents.load_objects(DATA / name)


def the_xr() -> dict:
    return load("xr.yaml")[0]


def pkg() -> documents.Package:
    return documents.load_package(PACKAGE)


def composition(*steps: dict) -> dict:
    return {
        "apiVersion": "apiextensions.crossplane.io/v1",
        "kind": "Composition",
        "metadata": {"name": "test"},
        "spec": {
            "compositeTypeRef": {"apiVersion": "example.org/v1alpha1", "kind": "XWidget"},
            "mode": "Pipeline",
            "pipeline": list(steps),
        },
    }


def step(name: str, fn: str | None = None, **extra: object) -> dict:
    return {"step": name, "functionRef": {"name": fn or name}, **extra}


def do_render(runners: dict, *steps: dict, **kw: object) -> render.RenderResult:
    return render.render(the_xr(), composition(*steps), runners, **kw)


def condition(result: render.RenderResult, type_: str) -> dict:
    return next(c for c in result.xr["status"]["conditions"] if c["type"] == type_)


# --------------------------------------------------------------------------- defaults


@pytest.mark.parametrize(
    ("case", "parameters", "want"),
    [
        (
            "absent keys filled, present kept",
            {"replicas": 2},
            {"replicas": 2, "size": "small", "tier": {"name": "standard"}},
        ),
        (
            "defaulted object is itself defaulted",
            {},
            {"replicas": 1, "size": "small", "tier": {"name": "standard"}},
        ),
        (
            "array items are defaulted",
            {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]},
            {
                "replicas": 1,
                "size": "small",
                "tier": {"name": "standard"},
                "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            },
        ),
        (
            "explicit values win, nested too",
            {"size": "large", "tier": {"name": "gold"}},
            {"replicas": 1, "size": "large", "tier": {"name": "gold"}},
        ),
    ],
)
def test_xrd_defaults(case: str, parameters: dict, want: dict) -> None:
    xr = the_xr()
    xr["spec"]["parameters"] = parameters
    xrd = pkg().xrds[0]
    got = render.apply_xrd_defaults(xr, xrd)
    assert got["spec"]["parameters"] == want, case
    assert xr["spec"]["parameters"] == parameters, "the input must not be modified"


def test_defaults_reach_the_functions() -> None:
    seen: list[dict] = []

    def record(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        seen.append(resource.struct_to_dict(req.observed.composite.resource))
        return response.to(req)

    do_render({"record": record}, step("record"), xrd=pkg().xrds[0])
    assert seen[0]["spec"]["parameters"]["size"] == "small"
    assert seen[0]["spec"]["parameters"]["ports"] == [{"port": 80, "protocol": "TCP"}]


# --------------------------------------------------------------------------- pipeline


def test_desired_state_is_passed_not_merged() -> None:
    seen: list[set[str]] = []

    def first(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        for name in ("a", "b"):
            resource.update(rsp.desired.resources[name], {"apiVersion": "v1", "kind": "Secret"})
        return rsp

    def second(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        seen.append(set(req.desired.resources))
        # Returns a fresh desired state without a and b: they must disappear.
        rsp = fnv1.RunFunctionResponse(context=req.context)
        resource.update(rsp.desired.resources["c"], {"apiVersion": "v1", "kind": "Secret"})
        return rsp

    result = do_render({"first": first, "second": second}, step("first"), step("second"))
    assert seen == [{"a", "b"}]
    names = [c["metadata"]["annotations"][render.ANNOTATION_RESOURCE_NAME] for c in result.composed]
    assert names == ["c"]


def test_first_step_sees_empty_desired_observed_xr_input_and_context() -> None:
    seen: list[fnv1.RunFunctionRequest] = []

    def record(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        seen.append(copy.deepcopy(req))
        rsp = response.to(req)
        rsp.context.update({"seen-by": "record"})
        return rsp

    observed = load("observed.yaml")
    do_render(
        {"record": record, "next": record},
        step("record", input={"apiVersion": "x/v1", "kind": "Input", "answer": 42}),
        step("next"),
        observed=observed,
        context={"apiextensions.crossplane.io/environment": {"region": "eu"}},
    )
    first, second = seen
    assert len(first.desired.resources) == 0
    assert resource.struct_to_dict(first.input)["answer"] == 42
    assert set(first.observed.resources) == {"app", "config"}
    assert resource.struct_to_dict(first.observed.composite.resource)["metadata"]["name"] == "demo"
    assert resource.struct_to_dict(first.context) == {
        "apiextensions.crossplane.io/environment": {"region": "eu"}
    }
    assert len(first.credentials) == 0
    assert not second.HasField("input")
    assert resource.struct_to_dict(second.context)["seen-by"] == "record"


# --------------------------------------------------------------------------- requirements


CLUSTER = {
    "apiVersion": "example.org/v1alpha1",
    "kind": "XCluster",
    "metadata": {"name": "c1", "namespace": "team-a", "labels": {"gpu": "true"}},
    "spec": {"gpus": 8},
}
OTHER_NS = copy.deepcopy(CLUSTER) | {
    "metadata": {"name": "c1", "namespace": "team-b", "labels": {"gpu": "true"}}
}


def asking(selector: dict, *, legacy: bool = False):
    """A runner that asks for `selector` every call and records what it was given."""
    calls: list[fnv1.RunFunctionRequest] = []

    def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        calls.append(copy.deepcopy(req))
        rsp = response.to(req)
        if selector:
            response.require_resources(
                rsp, "cluster", "example.org/v1alpha1", "XCluster", **selector
            )
            if legacy:
                rsp.requirements.extra_resources["cluster"].CopyFrom(
                    rsp.requirements.resources["cluster"]
                )
                del rsp.requirements.resources["cluster"]
        return rsp

    return run, calls


def got_required(req: fnv1.RunFunctionRequest, legacy: bool = False) -> dict | None:
    field = req.extra_resources if legacy else req.required_resources
    if "cluster" not in field:
        return None
    return {"items": [resource.struct_to_dict(i.resource) for i in field["cluster"].items]}


@pytest.mark.parametrize(
    ("case", "selector", "required", "legacy", "want_calls", "want_last"),
    [
        ("not asked: called once, nothing required", {}, [CLUSTER], False, 1, None),
        (
            "asked and absent: called again with an empty answer",
            {"match_name": "c1", "namespace": "team-a"},
            [],
            False,
            2,
            {"items": []},
        ),
        (
            "present by name and namespace",
            {"match_name": "c1", "namespace": "team-a"},
            [OTHER_NS, CLUSTER],
            False,
            2,
            {"items": [CLUSTER]},
        ),
        (
            "wrong namespace is absent",
            {"match_name": "c1", "namespace": "team-c"},
            [OTHER_NS, CLUSTER],
            False,
            2,
            {"items": []},
        ),
        (
            "by labels, every namespace",
            {"match_labels": {"gpu": "true"}},
            [CLUSTER, OTHER_NS],
            False,
            2,
            {"items": [CLUSTER, OTHER_NS]},
        ),
        (
            "legacy extra_resources",
            {"match_name": "c1"},
            [CLUSTER],
            True,
            2,
            {"items": [CLUSTER]},
        ),
    ],
)
def test_requirements_loop(
    case: str,
    selector: dict,
    required: list[dict],
    legacy: bool,
    want_calls: int,
    want_last: dict | None,
) -> None:
    run, calls = asking(selector, legacy=legacy)
    do_render({"ask": run}, step("ask"), required=required)
    assert len(calls) == want_calls, case
    assert got_required(calls[0], legacy) is None, "the first call never has requirements"
    assert got_required(calls[-1], legacy) == want_last, case


def test_requirements_that_never_settle_fail_after_five_iterations() -> None:
    calls: list[int] = []

    def restless(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        calls.append(1)
        rsp = response.to(req)
        response.require_resources(rsp, f"r{len(calls)}", "v1", "Secret", match_name="x")
        return rsp

    with pytest.raises(RenderError, match="didn't stabilize after the maximum number of"):
        do_render({"restless": restless}, step("restless"))
    assert len(calls) == render.MAX_REQUIREMENTS_ITERATIONS + 1


def test_requirements_withdrawn_settle_like_crossplane() -> None:
    # Asked once, then not: Crossplane calls again with nothing until two answers agree.
    calls: list[fnv1.RunFunctionRequest] = []

    def once(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        calls.append(copy.deepcopy(req))
        rsp = response.to(req)
        if len(calls) == 1:
            response.require_resources(rsp, "cluster", "v1", "Secret", match_name="x")
        return rsp

    do_render({"once": once}, step("once"))
    assert [sorted(c.required_resources) for c in calls] == [[], ["cluster"], []]


def test_bootstrap_requirements_are_filled_on_the_first_call() -> None:
    run, calls = asking({})
    sel = {
        "requirementName": "cluster",
        "apiVersion": "example.org/v1alpha1",
        "kind": "XCluster",
        "name": "c1",
        "namespace": "team-a",
    }
    do_render(
        {"ask": run}, step("ask", requirements={"requiredResources": [sel]}), required=[CLUSTER]
    )
    assert got_required(calls[0]) == {"items": [CLUSTER]}


# --------------------------------------------------------------------------- fatal


def fatal_runner(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
    rsp = response.to(req)
    response.fatal(rsp, "spec.parameters.size: 'huge' is not a size; use small or large")
    return rsp


def test_fatal_stops_the_pipeline() -> None:
    after: list[int] = []

    def never(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        after.append(1)
        return response.to(req)

    result = do_render(
        {"toy-compose": toy_compose, "boom": fatal_runner, "never": never},
        step("compose", "toy-compose"),
        step("boom"),
        step("never"),
    )
    assert result.fatal == "spec.parameters.size: 'huge' is not a size; use small or large"
    assert result.fatal_step == "boom"
    assert result.composed == []
    assert after == []


def test_unknown_function_and_failing_runner_are_render_errors() -> None:
    with pytest.raises(RenderError, match='no step runner for Function "missing"'):
        do_render({}, step("s", "missing"))

    def broken(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        raise ValueError("kaput")

    with pytest.raises(RenderError, match='cannot run pipeline step "s": ValueError: kaput'):
        do_render({"broken": broken}, step("s", "broken"))


# --------------------------------------------------------------------------- readiness


def readiness(*names_ready: tuple[str, int], composite: int | None = None):
    def run(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        for name, ready in names_ready:
            resource.update(rsp.desired.resources[name], {"apiVersion": "v1", "kind": "Secret"})
            rsp.desired.resources[name].ready = ready
        if composite is not None:
            rsp.desired.composite.ready = composite
        return rsp

    return run


T, F, U = fnv1.READY_TRUE, fnv1.READY_FALSE, fnv1.READY_UNSPECIFIED


@pytest.mark.parametrize(
    ("case", "resources", "composite", "want"),
    [
        ("nothing composed", [], None, ("True", "Available", None)),
        ("all ready", [("a", T), ("b", T)], None, ("True", "Available", None)),
        (
            "one not ready",
            [("a", T), ("b", U)],
            None,
            ("False", "Creating", "Unready resources: b"),
        ),
        (
            "three unready, sorted",
            [("c", F), ("a", U), ("b", U)],
            None,
            ("False", "Creating", "Unready resources: a, b, and c"),
        ),
        (
            "five unready",
            [(n, U) for n in "edcba"],
            None,
            ("False", "Creating", "Unready resources: a, b, c, and 2 more"),
        ),
        ("composite says ready", [("a", U)], T, ("True", "Available", None)),
        ("composite says not ready", [("a", T)], F, ("False", "Creating", None)),
    ],
)
def test_xr_readiness(case: str, resources: list, composite: int | None, want: tuple) -> None:
    result = do_render({"r": readiness(*resources, composite=composite)}, step("r"))
    ready = condition(result, "Ready")
    assert (ready["status"], ready["reason"], ready.get("message")) == want, case
    assert ready["lastTransitionTime"] == "2024-01-01T00:00:00Z"


def test_auto_ready_marks_existing_ready_resources() -> None:
    result = render.render(
        the_xr(), pkg().compositions[0], TOY_RUNNERS, observed=load("observed.yaml")
    )
    assert condition(result, "Ready")["status"] == "True"

    unavailable = load("observed.yaml")
    unavailable[0]["status"]["availableReplicas"] = 1
    result = render.render(the_xr(), pkg().compositions[0], TOY_RUNNERS, observed=unavailable)
    assert condition(result, "Ready")["message"] == "Unready resources: app"

    result = render.render(the_xr(), pkg().compositions[0], TOY_RUNNERS)
    assert condition(result, "Ready")["message"] == "Unready resources: app, config"


def ready_cond(status: str) -> dict:
    return {"status": {"conditions": [{"type": "Ready", "status": status}]}}


@pytest.mark.parametrize(
    ("case", "observed", "want"),
    [
        (
            "managed resource Ready=True",
            {"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket", **ready_cond("True")},
            True,
        ),
        (
            "managed resource Ready=False",
            {"apiVersion": "s3.aws.m.upbound.io/v1beta1", "kind": "Bucket", **ready_cond("False")},
            False,
        ),
        (
            "custom resource without conditions",
            {"apiVersion": "x.example.org/v1", "kind": "Thing"},
            False,
        ),
        ("ConfigMap exists", {"apiVersion": "v1", "kind": "ConfigMap"}, True),
        ("Secret exists", {"apiVersion": "v1", "kind": "Secret"}, True),
        ("ServiceAccount exists", {"apiVersion": "v1", "kind": "ServiceAccount"}, True),
        ("ClusterIP Service", {"apiVersion": "v1", "kind": "Service"}, True),
        (
            "LoadBalancer Service pending",
            {"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}},
            False,
        ),
        (
            "LoadBalancer Service assigned",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "spec": {"type": "LoadBalancer"},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
            },
            True,
        ),
        (
            "Ingress without address",
            {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress"},
            False,
        ),
        (
            "Ingress with address",
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "status": {"loadBalancer": {"ingress": [{"hostname": "lb"}]}},
            },
            True,
        ),
        (
            "Deployment available",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "spec": {"replicas": 2},
                "status": {
                    "updatedReplicas": 2,
                    "availableReplicas": 2,
                    "conditions": [{"type": "Available", "status": "True"}],
                },
            },
            True,
        ),
        (
            "Deployment rolling",
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "spec": {"replicas": 2},
                "status": {
                    "updatedReplicas": 1,
                    "availableReplicas": 2,
                    "conditions": [{"type": "Available", "status": "True"}],
                },
            },
            False,
        ),
        (
            "Job complete",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "status": {"conditions": [{"type": "Complete", "status": "True"}]},
            },
            True,
        ),
        (
            "PVC pending",
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}},
            False,
        ),
    ],
)
def test_auto_ready_health_checks(case: str, observed: dict, want: bool) -> None:
    assert autoready.is_ready(observed) is want, case


def test_auto_ready_respects_explicit_readiness_and_missing_resources() -> None:
    req = fnv1.RunFunctionRequest()
    for name in ("explicit-false", "unspecified", "not-observed"):
        resource.update(req.desired.resources[name], {"apiVersion": "v1", "kind": "ConfigMap"})
    req.desired.resources["explicit-false"].ready = fnv1.READY_FALSE
    for name in ("explicit-false", "unspecified"):
        resource.update(req.observed.resources[name], {"apiVersion": "v1", "kind": "ConfigMap"})
    req.context.update({"k": "v"})
    rsp = autoready.run(req)
    ready = {n: r.ready for n, r in rsp.desired.resources.items()}
    assert ready == {"explicit-false": F, "unspecified": T, "not-observed": U}
    assert resource.struct_to_dict(rsp.context) == {"k": "v"}
    assert len(rsp.results) == 0


# --------------------------------------------------------------------------- output


def test_composed_resource_metadata() -> None:
    result = render.render(
        the_xr(), pkg().compositions[0], TOY_RUNNERS, observed=load("observed.yaml")
    )
    app, config = result.composed
    owner = {
        "apiVersion": "example.org/v1alpha1",
        "kind": "XWidget",
        "name": "demo",
        "uid": "",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    for cd, name in ((app, "app"), (config, "config")):
        meta = cd["metadata"]
        assert meta["annotations"] == {"crossplane.io/composition-resource-name": name}
        assert meta["labels"] == {"crossplane.io/composite": "demo"}
        assert meta["namespace"] == "team-a"
        assert meta["ownerReferences"] == [owner]
    # Resources that exist keep their observed name and generateName (or lack of one).
    assert app["metadata"]["name"] == "demo-app-x1"
    assert app["metadata"]["generateName"] == "demo-"
    assert config["metadata"]["name"] == "demo-config-x2"
    assert "generateName" not in config["metadata"]


def test_new_resources_get_generate_name_and_forced_namespace() -> None:
    def compose(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        resource.update(
            rsp.desired.resources["elsewhere"],
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "kube-system"}},
        )
        resource.update(
            rsp.desired.resources["named"],
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "fixed"}},
        )
        return rsp

    xr = the_xr()
    xr["metadata"]["uid"] = "1234"
    result = render.render(xr, composition(step("c")), {"c": compose})
    elsewhere, named = result.composed
    assert elsewhere["metadata"]["namespace"] == "team-a"
    assert elsewhere["metadata"]["generateName"] == "demo-"
    assert "name" not in elsewhere["metadata"]
    assert named["metadata"]["name"] == "fixed"
    assert "generateName" not in named["metadata"]
    assert named["metadata"]["ownerReferences"][0]["uid"] == "1234"


def test_xr_output_status_conditions_and_results() -> None:
    result = render.render(
        the_xr(),
        pkg().compositions[0],
        TOY_RUNNERS,
        xrd=pkg().xrds[0],
        observed=load("observed.yaml"),
    )
    assert result.xr["metadata"] == {"name": "demo", "namespace": "team-a"}
    assert "spec" not in result.xr
    assert result.xr["status"]["size"] == "small"
    assert condition(result, "Planned") == {
        "type": "Planned",
        "status": "True",
        "reason": "Sized",
        "message": "2 replicas",
        "lastTransitionTime": "2024-01-01T00:00:00Z",
    }
    assert result.results == [
        {
            "apiVersion": "render.crossplane.io/v1beta1",
            "kind": "Result",
            "step": "compose",
            "severity": "SEVERITY_NORMAL",
            "message": "composed demo",
        }
    ]


def test_functions_cannot_set_system_conditions() -> None:
    def claims_ready(req: fnv1.RunFunctionRequest) -> fnv1.RunFunctionResponse:
        rsp = response.to(req)
        resource.update(rsp.desired.resources["a"], {"apiVersion": "v1", "kind": "Secret"})
        rsp.conditions.append(
            fnv1.Condition(type="Ready", status=fnv1.STATUS_CONDITION_TRUE, reason="Lies")
        )
        return rsp

    result = do_render({"c": claims_ready}, step("c"))
    assert condition(result, "Ready")["reason"] == "Creating"


EXPECTED = """\
---
apiVersion: example.org/v1alpha1
kind: XWidget
metadata:
  name: demo
  namespace: team-a
status:
  conditions:
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    reason: Available
    status: "True"
    type: Ready
  - lastTransitionTime: "2024-01-01T00:00:00Z"
    message: 2 replicas
    reason: Sized
    status: "True"
    type: Planned
  size: small
---
apiVersion: apps/v1
kind: Deployment
metadata:
  annotations:
    crossplane.io/composition-resource-name: app
  generateName: demo-
  labels:
    crossplane.io/composite: demo
  name: demo-app-x1
  namespace: team-a
  ownerReferences:
  - apiVersion: example.org/v1alpha1
    blockOwnerDeletion: true
    controller: true
    kind: XWidget
    name: demo
    uid: ""
spec:
  replicas: 2
  template:
    spec:
      containers:
      - image: nginx:1.27
        name: app
---
apiVersion: v1
data:
  size: small
kind: ConfigMap
metadata:
  annotations:
    crossplane.io/composition-resource-name: config
  labels:
    crossplane.io/composite: demo
  name: demo-config-x2
  namespace: team-a
  ownerReferences:
  - apiVersion: example.org/v1alpha1
    blockOwnerDeletion: true
    controller: true
    kind: XWidget
    name: demo
    uid: ""
---
apiVersion: render.crossplane.io/v1beta1
kind: Result
message: composed demo
severity: SEVERITY_NORMAL
step: compose
---
apiVersion: render.crossplane.io/v1beta1
fields: {}
kind: Context
"""


def test_printed_stream_matches_crossplane_render() -> None:
    result = render.render(
        the_xr(),
        pkg().compositions[0],
        TOY_RUNNERS,
        xrd=pkg().xrds[0],
        observed=load("observed.yaml"),
    )
    objs = result.objects(include_function_results=True, include_context=True)
    assert printer.dump_stream(objs) == EXPECTED


@pytest.mark.parametrize(
    ("case", "value", "want"),
    [
        ("plain string", "hello", "hello"),
        ("empty string", "", '""'),
        ("bool-like words", "yes", '"yes"'),
        ("go-yaml one-letter bool", "y", '"y"'),
        ("number-like", "1.5", '"1.5"'),
        ("hex int", "0x1F", '"0x1F"'),
        ("exponent", "1e3", '"1e3"'),
        ("base 60", "12:30", '"12:30"'),
        ("date", "2024-01-01", '"2024-01-01"'),
        ("version", "v1.2.3", "v1.2.3"),
        ("colon space", "a: b", "'a: b'"),
        ("leading dash", "- a", "'- a'"),
        ("multi-line", "a\nb", "|-\n  a\n  b"),
        ("integral float", 2.0, "2"),
        ("fraction", 0.9, "0.9"),
        ("large float", 1234567.5, "1.2345675e+06"),
        ("tiny float", 1e-7, "1e-07"),
        ("null", None, "null"),
    ],
)
def test_scalars_are_written_like_go_yaml(case: str, value: object, want: str) -> None:
    python = yaml.dump({"k": value}, Dumper=printer._GoDumper)
    assert python == f"k: {want}\n", f"{case} (pure-Python emitter)"
    assert printer.dump_yaml({"k": value}) == f"k: {want}\n", case


def test_keys_sort_in_go_yaml_order() -> None:
    text = printer.dump_yaml({"b": 1, "a10": 1, "a9": 1, "a_b": 1, "aB": 1, "A": 1})
    assert [line.split(":")[0] for line in text.splitlines()] == [
        "A",
        "a_b",
        "a9",
        "a10",
        "aB",
        "b",
    ]


# --------------------------------------------------------------------------- selection


def test_select_composition() -> None:
    p = pkg()
    xr = the_xr()
    assert render.select_composition(p, xr)["metadata"]["name"] == "xwidgets"

    other = copy.deepcopy(p.compositions[0])
    other["metadata"] = {"name": "xwidgets-large", "labels": {"size": "large"}}
    p.compositions.append(other)
    with pytest.raises(RenderError, match="several Compositions compose"):
        render.select_composition(p, xr)

    xr["spec"]["crossplane"] = {"compositionRef": {"name": "xwidgets-large"}}
    assert render.select_composition(p, xr)["metadata"]["name"] == "xwidgets-large"

    xr["spec"]["crossplane"] = {"compositionSelector": {"matchLabels": {"size": "large"}}}
    assert render.select_composition(p, xr)["metadata"]["name"] == "xwidgets-large"

    xr["spec"]["crossplane"] = {"compositionRef": {"name": "nope"}}
    with pytest.raises(RenderError, match="the package does not have"):
        render.select_composition(p, xr)

    stranger = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    with pytest.raises(RenderError, match="no Composition in the package composes v1 ConfigMap"):
        render.select_composition(p, stranger)


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def toy_cli(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(render, "default_runners", lambda: dict(TOY_RUNNERS))
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None):
        return runner.invoke(cli.cli, list(args), input=stdin)

    return invoke


def test_cli_render_file(toy_cli) -> None:
    res = toy_cli(
        "render",
        str(DATA / "xr.yaml"),
        "--package",
        str(PACKAGE),
        "-o",
        str(DATA / "observed.yaml"),
        "-r",
        "-c",
    )
    assert res.exit_code == 0, res.output
    assert res.stdout == EXPECTED


def test_cli_render_directory_skips_non_xr_files(toy_cli) -> None:
    res = toy_cli("render", str(DATA / "dir"), "--package", str(PACKAGE))
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert out.startswith(f"# {DATA / 'dir' / 'a.yaml'}\n---\n")
    assert f"# {DATA / 'dir' / 'nested' / 'b.yaml'}\n---\n" in out
    assert "functions.yaml" not in out
    assert out.count("\nkind: XWidget\n") == 2
    alpha, beta = out.split("# ")[1:]
    assert "  name: alpha\n" in alpha and "  name: beta\n" in beta
    # alpha gets the XRD default; beta keeps its own value (status and ConfigMap data).
    assert alpha.count("  size: small\n") == 2
    assert beta.count("  size: large\n") == 2


def test_cli_fatal_exits_1_with_the_message(toy_cli, tmp_path: Path) -> None:
    comp = composition(step("boom"))
    (tmp_path / "comp.yaml").write_text(printer.dump_yaml(comp))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(render, "default_runners", lambda: {"boom": fatal_runner})
        res = toy_cli(
            "render",
            str(DATA / "xr.yaml"),
            "--package",
            str(PACKAGE),
            "--composition",
            str(tmp_path / "comp.yaml"),
        )
    assert res.exit_code == 1
    assert res.stdout == ""
    assert res.stderr == (
        "dot-inference: XWidget team-a/demo: spec.parameters.size: 'huge' is not a size; "
        "use small or large\n"
    )


@pytest.mark.parametrize(
    ("case", "files", "args", "want"),
    [
        ("missing XR file", {}, ["render", "{tmp}/nope.yaml"], "nope.yaml: no such file"),
        (
            "bad YAML",
            {"xr.yaml": "kind: [unclosed\n"},
            ["render", "{tmp}/xr.yaml"],
            "invalid YAML (line 2, column 1)",
        ),
        (
            "no XR in the file",
            {"xr.yaml": "apiVersion: v1\nkind: ConfigMap\n"},
            ["render", "{tmp}/xr.yaml"],
            "it holds no composite resource",
        ),
        (
            "no composition for the XR ref",
            {
                "xr.yaml": (DATA / "xr.yaml")
                .read_text()
                .replace("spec:\n", "spec:\n  crossplane:\n    compositionRef:\n      name: nope\n")
            },
            ["render", "{tmp}/xr.yaml"],
            'compositionRef names "nope"',
        ),
        (
            "missing package",
            {},
            ["render", str(DATA / "xr.yaml"), "--package", "{tmp}/pkg"],
            "package directory not found",
        ),
        (
            "missing observed file",
            {},
            ["render", str(DATA / "xr.yaml"), "-o", "{tmp}/observed.yaml"],
            "observed.yaml: no such file",
        ),
        ("unknown option", {}, ["render", "--bogus"], "No such option"),
    ],
)
def test_cli_errors_exit_2_with_one_line(
    toy_cli, tmp_path: Path, case: str, files: dict, args: list[str], want: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--package" not in args and args[-1] != "--bogus":
        args += ["--package", str(PACKAGE)]
    res = toy_cli(*args)
    assert res.exit_code == 2, (case, res.output)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, (case, res.stderr)
    assert lines[0].startswith("dot-inference: "), case
    assert want in lines[0], (case, lines[0])
    assert "Traceback" not in res.output


def test_cli_validate_flag_reports_problems(toy_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    seen: list[list[dict]] = []

    class Report:
        def __init__(self, objs: list[dict], **_: object) -> None:
            self.valid = []
            self.invalid = []
            self.no_schema = []
            self.ok = True
            if len(objs) <= 1:
                return  # the schemas loaded up front, or the claim alone: valid
            seen.append(objs)
            self.invalid = [("Deployment/demo-app-x1", ["spec.replicas: must be >= 3"])]
            self.no_schema = ["XWidget/demo"]
            self.ok = False

    fake = types.ModuleType("dot_inference.apiserver")
    fake.validate_objects = Report
    monkeypatch.setitem(sys.modules, "dot_inference.apiserver", fake)
    res = toy_cli(
        "render",
        str(DATA / "xr.yaml"),
        "--package",
        str(PACKAGE),
        "--validate",
        "-o",
        str(DATA / "observed.yaml"),
        "-r",
        "--quiet",
    )
    assert res.exit_code == 1
    assert [o["kind"] for o in seen[0]] == ["XWidget", "Deployment", "ConfigMap"]
    assert res.stderr.splitlines() == [
        "dot-inference: invalid: Deployment/demo-app-x1: spec.replicas: must be >= 3",
        "dot-inference: no schema: XWidget/demo",
    ]
    assert res.stdout.startswith("---\napiVersion: example.org/v1alpha1\n")


def test_cli_generate_passes_the_exit_code(toy_cli, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    calls: list[bool] = []
    fake = types.ModuleType("dot_inference.generate")

    def generate(check: bool = False) -> int:
        calls.append(check)
        return 1

    fake.generate = generate
    monkeypatch.setitem(sys.modules, "dot_inference.generate", fake)
    res = toy_cli("generate", "--check")
    assert (res.exit_code, calls) == (1, [True])


def fake_validate(monkeypatch: pytest.MonkeyPatch, ok: bool) -> list[list[dict]]:
    import sys
    import types

    seen: list[list[dict]] = []

    class Report:
        def __init__(self, objs: list[dict], **_: object) -> None:
            seen.append(objs)
            self.valid = [f"{o['kind']}/{o['metadata'].get('name')}" for o in objs] if ok else []
            self.invalid = [] if ok else [("XWidget/demo", ["status.size: wrong"])]
            self.no_schema = []
            self.ok = ok

    fake = types.ModuleType("dot_inference.apiserver")
    fake.validate_objects = Report
    monkeypatch.setitem(sys.modules, "dot_inference.apiserver", fake)
    return seen


@pytest.mark.parametrize(("ok", "want_exit"), [(True, 0), (False, 1)])
def test_cli_validate_reads_stdin_and_skips_render_kinds(
    toy_cli, monkeypatch: pytest.MonkeyPatch, ok: bool, want_exit: int
) -> None:
    seen = fake_validate(monkeypatch, ok)
    res = toy_cli("validate", "-", stdin=EXPECTED)
    assert res.exit_code == want_exit, res.output
    assert [o["kind"] for o in seen[0]] == ["XWidget", "Deployment", "ConfigMap"]
    if ok:
        assert "valid: Deployment/demo-app-x1" in res.stdout
    else:
        assert "dot-inference: invalid: XWidget/demo: status.size: wrong" in res.stderr


def test_cli_validate_without_the_validator_exits_2(
    toy_cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "dot_inference.apiserver", None)
    res = toy_cli("render", str(DATA / "xr.yaml"), "--package", str(PACKAGE), "--validate")
    assert res.exit_code == 2
    assert res.stdout == ""
    assert res.stderr.startswith("dot-inference: validation is not available")
    assert len(res.stderr.splitlines()) == 1


def test_default_runners_are_lazy_and_await_async_functions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys
    import types

    runners = render.default_runners()
    assert set(runners) == {
        "crossplane-contrib-function-kcl",
        "crossplane-contrib-function-auto-ready",
        release.release().function_name,
    }

    class FunctionRunner:
        async def RunFunction(self, req, _context):
            rsp = response.to(req)
            resource.update(rsp.desired.resources["a"], {"apiVersion": "v1", "kind": "Secret"})
            return rsp

    fake = types.ModuleType("toy_async_fn")
    fake.FunctionRunner = FunctionRunner
    monkeypatch.setitem(sys.modules, "toy_async_fn", fake)
    lazy = render._LazyRunner("toy_async_fn", "RunFunction", cls="FunctionRunner")
    result = do_render({"async": lazy}, step("async"))
    assert [c["kind"] for c in result.composed] == ["Secret"]


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
@pytest.mark.parametrize("path", sorted(p.name for p in EXAMPLE_DIR.glob("*.yaml")))
def test_libyaml_and_the_python_emitter_print_the_same(path: str) -> None:
    """The render of each example, printed by both emitters: byte for byte the same."""
    objs = documents.load_objects(EXAMPLE_DIR / path)
    pkg = documents.load_package(ROOT / "package")
    for xr in objs:
        if not render.is_handled_xr(pkg, xr):
            continue
        for obj in render.render_in_package(pkg, xr).objects():
            data = jsonable(obj)
            assert yaml.dump(data, Dumper=printer._GoCDumper) == yaml.dump(
                data, Dumper=printer._GoDumper
            )


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
def test_both_emitters_fold_and_escape_double_quoted_strings_alike() -> None:
    """Long strings with double spaces, tabs, breaks, quotes and non-ASCII characters (the
    CRDs apps.llmd installs hold such descriptions): libyaml and the Python emitter agree."""
    import random

    rng = random.Random(7)
    alphabet = ["a", "b", " ", " ", "  ", "\t", "\n", '"', "\\", "é", "\u2028", "x" * 9, ":"]
    for _ in range(300):
        # Starting and ending with a letter, as descriptions do (a scalar ending in a space or
        # a lone break is printed open-ended, a case neither emitter's user meets).
        inner = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
        text = f"a{inner}z"
        data = {
            "k": {"nested": [{"description": text, "other": "word " * rng.randint(0, 30) + "end"}]}
        }
        assert yaml.dump(data, Dumper=printer._GoCDumper) == yaml.dump(
            data, Dumper=printer._GoDumper
        ), repr(text)


def _cm(namespace: str, name: str, **labels: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


SELECTED = [
    _cm("a", "x", cluster="c1"),
    _cm("a-b", "x", cluster="c1", team="t"),
    _cm("a", "y", cluster="c2"),
    _cm("a", "z", cluster=""),
    _cm("a", "w"),
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "a"}},
]


@pytest.mark.parametrize(
    ("case", "labels", "namespace", "want"),
    [
        ("equal value, extra labels allowed", {"cluster": "c1"}, "", ["a-b/x", "a/x"]),
        ("in one namespace", {"cluster": "c1"}, "a", ["a/x"]),
        ("every label must match", {"cluster": "c1", "team": "t"}, "", ["a-b/x"]),
        ("an empty value needs the label", {"cluster": ""}, "a", ["a/z"]),
        ("no label: everything of the kind", {}, "a", ["a/w", "a/x", "a/y", "a/z"]),
        ("no match", {"cluster": "c3"}, "", []),
    ],
)
def test_required_resources_by_label_as_crossplanes_fetcher(
    case: str, labels: dict[str, str], namespace: str, want: list[str]
) -> None:
    """internal/xfn/required_resources.go at v2.3.4: a List in the namespace (every one when
    none) with client.MatchingLabels (each label present with that value; none selects
    all), sorted by "<namespace>/<name>" as one string."""
    selector = fnv1.ResourceSelector(api_version="v1", kind="ConfigMap")
    selector.match_labels.labels.update(labels)
    if namespace:
        selector.namespace = namespace
    found = render.fetch_required(selector, SELECTED)
    got = [
        f"{i.resource['metadata']['namespace']}/{i.resource['metadata']['name']}"
        for i in found.items
    ]
    assert got == want, case
