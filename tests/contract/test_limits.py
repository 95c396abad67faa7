"""function/limits.yaml is the one home of the limits the layers share: the XRDs, the
cluster program as it ships inside the Composition, and the function all say what it says."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest
from conftest import PACKAGE, load_yaml
from kcl_lib import api

from function import limits


def _schema(api_name: str) -> dict[str, Any]:
    xrd = load_yaml(PACKAGE / api_name / "definition.yaml")[0]
    return xrd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def _at(schema: dict[str, Any], *path: str) -> dict[str, Any]:
    for key in path:
        schema = schema["items"] if key == "[]" else schema["properties"][key]
    return schema


@cache
def _program() -> dict[str, Any]:
    """The cluster program's GPU tables, evaluated from the source the Composition ships."""
    comp = load_yaml(PACKAGE / "inferencecluster" / "composition.yaml")[0]
    source = comp["spec"]["pipeline"][0]["input"]["spec"]["source"]
    probe = "\nprobe = {rows = _gpuCatalog, types = _gpuTypes, memory = _gpuMemoryGiB}\n"
    result = api.API().exec_program(
        api.ExecProgramArgs(k_filename_list=["prog.k"], k_code_list=[source + probe])
    )
    assert not result.err_message, result.err_message
    return json.loads(result.json_result)["probe"]


LLM = _schema("llminference")
CLUSTER = _schema("inferencecluster")

# (name, schema node, keyword, what function/limits.yaml says)
XRD_CASES = [
    (
        "LLMInference model pattern",
        _at(LLM, "parameters", "model"),
        "pattern",
        limits.HF_MODEL_ID.pattern,
    ),
    (
        "LLMInference model length",
        _at(LLM, "parameters", "model"),
        "maxLength",
        2 * limits.HF_MODEL_ID_MAX_PART + 1,
    ),
    (
        "LLMInference gpu maximum",
        _at(LLM, "parameters", "gpu"),
        "maximum",
        limits.MAX_GPUS_MULTI_NODE,
    ),
    (
        "InferenceCluster models[].model pattern",
        _at(CLUSTER, "parameters", "models", "[]", "model"),
        "pattern",
        limits.HF_MODEL_ID.pattern,
    ),
    (
        "InferenceCluster models[].gpu maximum",
        _at(CLUSTER, "parameters", "models", "[]", "gpu"),
        "maximum",
        limits.MAX_GPUS_MULTI_NODE,
    ),
    (
        "InferenceCluster gpu.type",
        _at(CLUSTER, "parameters", "gpu", "type"),
        "enum",
        list(limits.GPU_TYPES),
    ),
    (
        "InferenceCluster gpu.perNode",
        _at(CLUSTER, "parameters", "gpu", "perNode"),
        "enum",
        list(limits.TENSOR_PARALLEL_CANDIDATES),
    ),
]


@pytest.mark.parametrize(
    ("schema", "keyword", "expected"), [c[1:] for c in XRD_CASES], ids=[c[0] for c in XRD_CASES]
)
def test_the_xrds_say_what_limits_yaml_says(schema: dict, keyword: str, expected: Any) -> None:
    assert schema[keyword] == expected


def test_the_cluster_program_knows_the_same_gpus() -> None:
    program = _program()
    assert program["types"] == list(limits.GPU_TYPES)
    assert program["memory"] == {t: g.memory_gib for t, g in limits.GPU_TYPES.items()}


def test_every_node_pool_the_catalog_offers_fits_one_replica() -> None:
    rows = _program()["rows"]
    assert rows
    for row in rows:
        assert row["type"] in limits.GPU_TYPES, row
        assert row["memoryGiB"] == limits.GPU_TYPES[row["type"]].memory_gib, row
        assert row["perNode"] in limits.TENSOR_PARALLEL_CANDIDATES, row
    assert max(r["perNode"] for r in rows) == limits.MAX_GPUS


def test_the_function_refuses_past_the_same_maximum() -> None:
    from function.claim.spec import SpecError, parse

    xr = {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "m", "namespace": "a"},
    }
    parse({**xr, "spec": {"parameters": {"model": "a/b", "gpu": limits.MAX_GPUS_MULTI_NODE}}})
    with pytest.raises(SpecError, match=f"1 to {limits.MAX_GPUS_MULTI_NODE}"):
        parse(
            {**xr, "spec": {"parameters": {"model": "a/b", "gpu": limits.MAX_GPUS_MULTI_NODE + 1}}}
        )
