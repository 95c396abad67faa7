"""The offline emulations held to the upstream projects' own test cases, at the versions we
pin: each fixture in tests/contract/upstream/ names the repository, tag and commit its cases
were transcribed from (as data), and lists what does not apply to us and why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import parse_yaml
from crossplane.function import resource
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from google.protobuf import json_format

from dot_inference import function_auto_ready, function_kcl

UPSTREAM = Path(__file__).with_name("upstream")


def _fixture(name: str) -> dict[str, Any]:
    return parse_yaml((UPSTREAM / name).read_text())


def _pin(name: str) -> str:
    text = (Path(__file__).resolve().parents[2] / "kcl" / "versions.k").read_text()
    for line in text.splitlines():
        if line.startswith(f"{name} = "):
            return line.split("=", 1)[1].strip().strip('"')
    raise AssertionError(f"kcl/versions.k pins no {name}")


AUTO_READY = _fixture("function-auto-ready.yaml")


def test_the_auto_ready_cases_come_from_the_version_we_pin() -> None:
    assert AUTO_READY["upstream"]["tag"] == _pin("function_auto_ready")
    assert len(AUTO_READY["upstream"]["commit"]) == 40


@pytest.mark.parametrize(
    "case", AUTO_READY["healthchecks"], ids=[c["name"] for c in AUTO_READY["healthchecks"]]
)
def test_auto_ready_health_checks(case: dict[str, Any]) -> None:
    assert function_auto_ready.is_ready(case["object"]) is case["ready"]


@pytest.mark.parametrize(
    "case", AUTO_READY["pipeline"], ids=[c["name"] for c in AUTO_READY["pipeline"]]
)
def test_auto_ready_run_function(case: dict[str, Any]) -> None:
    name = case["resource"]
    req = fnv1.RunFunctionRequest(
        meta=fnv1.RequestMeta(tag="hello"),
        observed=fnv1.State(
            composite=fnv1.Resource(resource=resource.dict_to_struct(case["composite"])),
            resources={name: fnv1.Resource(resource=resource.dict_to_struct(case["observed"]))},
        ),
        desired=fnv1.State(resources={name: fnv1.Resource(resource=resource.dict_to_struct({}))}),
    )
    rsp = function_auto_ready.run(req)
    assert list(rsp.desired.resources) == [name]
    assert resource.struct_to_dict(rsp.desired.resources[name].resource) == {}
    assert rsp.desired.resources[name].ready == fnv1.Ready.Value(case["ready"])
    assert rsp.meta.tag == "hello"
    assert list(rsp.results) == []


KCL = _fixture("function-kcl.yaml")


def test_the_function_kcl_cases_come_from_the_version_we_pin() -> None:
    assert KCL["upstream"]["tag"] == _pin("function_kcl")
    assert len(KCL["upstream"]["commit"]) == 40


@pytest.mark.parametrize("case", KCL["cases"], ids=[c["name"] for c in KCL["cases"]])
def test_function_kcl_run_function(case: dict[str, Any]) -> None:
    """The whole response, as upstream compares it (protocmp: every field, presence too)."""
    req = json_format.ParseDict(case["request"], fnv1.RunFunctionRequest())
    want = json_format.ParseDict(case["want"], fnv1.RunFunctionResponse())
    got = function_kcl.run(req)
    assert json_format.MessageToDict(got) == json_format.MessageToDict(want), case["reason"]
