"""A claim whose model the catalog lacks, rendered through the recorded Hub: configs read
through transformers' config classes (llava) and architectures vLLM 0.17.1 does not serve
refused, not estimated."""

from __future__ import annotations

from typing import Any

import hub_server
import pytest
from conftest import claim as xr
from conftest import request, run
from crossplane.function import resource

from function.backends.production_stack import engine_command
from function.model import hub
from function.model.hub import HubClient
from function.policy import vllm_cli

LLAVA = "llava-hf/llava-1.5-7b-hf"


@pytest.fixture
def function_hub():
    with hub_server.serve() as server:
        hub.reset_client(HubClient(server.endpoint, offline=False))
        yield server
        hub.reset_client(None)


def status_of(rsp) -> dict:
    return resource.struct_to_dict(rsp.desired.composite.resource).get("status", {})


def test_llava_renders_as_vllm_reads_its_config(function_hub) -> None:
    rsp = run(request(xr(LLAVA, gpu=1), required={"secret-hf-token": []}))
    plan = status_of(rsp)["plan"]
    assert plan["modelSource"] == "hub"
    assert plan["maxModelLen"] == 4096  # not "auto": the text config's positions
    assert "read transformers config class" in plan["facts"]["origin"]["config"]
    assert plan["facts"]["origin"]["architecture"].startswith("vLLM 0.17.1 serves Llava")
    runtime = resource.struct_to_dict(rsp.desired.resources["vllm-runtime"].resource)
    args = runtime["spec"]["vllmConfig"]["extraArgs"]
    assert args[args.index("--limit-mm-per-prompt") + 1] == '{"image":4}'
    assert runtime["spec"]["model"]["maxModelLen"] == 4096
    assert not [r.message for r in rsp.results if r.severity == 1]


# (case, config.json the Hub serves, a part of the refusal)
UNSUPPORTED = [
    (
        "unknown architecture",
        {"architectures": ["AcmeForCausalLM"], "model_type": "acme", "num_hidden_layers": 2},
        "neither vLLM's model registry nor transformers defines it",
    ),
    (
        "remote-code architecture",
        {
            "architectures": ["AcmeChatForCausalLM"],
            "model_type": "acme_chat",
            "auto_map": {"AutoModelForCausalLM": "modeling_acme.AcmeChatForCausalLM"},
        },
        "the repository's own code defines it, auto_map",
    ),
]


@pytest.mark.parametrize(
    ("config", "says"), [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED]
)
def test_an_architecture_vllm_does_not_serve_is_refused_not_estimated(
    function_hub, config: dict, says: str
) -> None:
    function_hub.models["acme/Chat-7B"] = {
        "id": "acme/Chat-7B",
        "sha": "c" * 40,
        "safetensors": {"parameters": {"BF16": 7 * 10**9}, "total": 7 * 10**9},
        "siblings": [{"rfilename": "config.json", "size": 200}],
        "files": {"config.json": config},
    }
    rsp = run(request(xr("acme/Chat-7B"), required={"secret-hf-token": []}))
    (fatal,) = [r.message for r in rsp.results if r.severity == 1]
    arch = config["architectures"][0]
    assert fatal.startswith("spec.parameters.model: acme/Chat-7B: vLLM 0.17.1 does not serve")
    assert f"architecture {arch}" in fatal and says in fatal
    assert "serve a model whose architecture vLLM lists" in fatal
    assert not rsp.desired.resources


def _whole(value: Any) -> Any:
    """Protobuf Structs carry every number as a float: 8000.0 is the port 8000."""
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def test_the_llava_command_line_passes_vllms_parser(function_hub) -> None:
    rsp = run(request(xr(LLAVA, gpu=1), required={"secret-hf-token": []}))
    runtime = _whole(resource.struct_to_dict(rsp.desired.resources["vllm-runtime"].resource))
    args = engine_command(runtime)[3:]  # after `vllm serve <model>`
    assert "--limit-mm-per-prompt" in args
    assert vllm_cli.problems([a.replace("$(HF_TOKEN)", "key") for a in args]) == []
