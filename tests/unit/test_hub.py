"""function/model/hub.py against the recorded Hub (tests/hub_server.py on loopback): what it asks,
what it answers for each situation, the cache, the deadline, offline mode, the token."""

from __future__ import annotations

import base64

import hub_server
import pytest
from conftest import claim as xr
from conftest import request, run
from crossplane.function import resource

from function.model import hub
from function.model.hub import HubClient

MODEL = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture
def recorded():
    with hub_server.serve() as server:
        yield server


def client(server: hub_server.Hub, **kwargs) -> HubClient:
    return HubClient(server.endpoint, offline=False, **kwargs)


# (case, model, revision, the status, a part of the message)
ANSWERS = [
    ("a model the Hub has", MODEL, None, "found", ""),
    ("its commit as the revision", MODEL, "*sha*", "found", ""),
    ("a revision it does not have", MODEL, "v9", "not_found", "has no revision 'v9'"),
    (
        "an id it does not have",
        "acme/Nothing-7B",
        None,
        "not_found",
        "does not exist on the Hugging",
    ),
]


@pytest.mark.parametrize(
    ("model", "revision", "status", "says"), [a[1:] for a in ANSWERS], ids=[a[0] for a in ANSWERS]
)
def test_answers(recorded, model: str, revision: str | None, status: str, says: str) -> None:
    if revision == "*sha*":
        revision = recorded.models[MODEL]["sha"]
    answer = client(recorded).lookup(model, revision)
    assert answer.status == status
    assert says in answer.message
    if status == "found":
        assert answer.model is not None and answer.model.id == model
        assert answer.model.config["architectures"] == ["Qwen2ForCausalLM"]
        assert answer.model.parameters == {"BF16": 7615616512}
        assert answer.model.files["model.safetensors"] == 15231233024


def test_the_token_goes_only_to_the_hub_and_reads_a_gated_model(recorded) -> None:
    recorded.gated_tokens[MODEL] = "hf_" + "s" * 30
    without = client(recorded).lookup(MODEL)
    assert without.status == "gated" and "need a Hugging Face token" in without.message
    assert "hf_" not in without.message
    answer = client(recorded).lookup(MODEL, token="hf_" + "s" * 30)
    assert answer.status == "found" and answer.model.gated is True
    assert (
        "GET",
        f"/{MODEL}/resolve/{answer.revision}/config.json",
        "Bearer hf_" + "s" * 30,
    ) in recorded.requests


def test_answers_are_cached_per_model_revision_and_token(recorded) -> None:
    c = client(recorded)
    first = c.lookup(MODEL)
    asked = len(recorded.requests)
    assert c.lookup(MODEL) is first and c.lookup(MODEL.lower()) is first
    assert len(recorded.requests) == asked
    c.lookup(MODEL, token="another")
    assert len(recorded.requests) > asked


def test_a_cached_answer_expires(recorded) -> None:
    now = [0.0]
    c = client(recorded, clock=lambda: now[0])
    c.lookup(MODEL)
    asked = len(recorded.requests)
    now[0] += hub.CACHE_TTL_S + 1
    c.lookup(MODEL)
    assert len(recorded.requests) > asked


def test_the_cache_is_bounded(recorded, monkeypatch) -> None:
    monkeypatch.setattr(hub, "CACHE_ENTRIES", 3)
    c = client(recorded)
    for i in range(6):
        c.lookup(f"acme/Model-{i}")
    assert len(c._cache) == 3


def test_a_slow_hub_is_answered_at_the_deadline_and_filled_in_the_background(recorded) -> None:
    recorded.delay_s = 0.6
    c = client(recorded, deadline_s=0.2)
    late = c.lookup(MODEL)
    assert (
        late.status == "unreachable"
        and "did not answer" in late.message
        and "0.2 s" in late.message
    )
    c._pending[(MODEL.lower(), "main", "")].result(timeout=10)
    assert c.lookup(MODEL).status == "found"


def test_an_unreachable_hub_is_an_answer_not_an_error() -> None:
    c = HubClient("http://127.0.0.1:9", offline=False)
    answer = c.lookup(MODEL)
    assert answer.status == "unreachable" and "could not be reached" in answer.message


def test_a_failing_hub_is_unreachable(recorded) -> None:
    recorded.fail_with = 503
    assert client(recorded).lookup(MODEL).status == "unreachable"


def test_hf_hub_offline_asks_nothing(recorded, monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_ENDPOINT", recorded.endpoint)
    c = HubClient()
    assert c.endpoint == recorded.endpoint and c.offline is True
    assert c.lookup(MODEL).status == "offline"
    assert recorded.requests == []


def test_hf_endpoint_names_the_hub(recorded, monkeypatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", recorded.endpoint + "/")
    c = HubClient()
    assert c.endpoint == recorded.endpoint
    assert c.lookup(MODEL).status == "found"


# --------------------------------------------------------------------------- through the function


def token_secret(value: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf-token", "namespace": "a-team"},
        "data": {"token": base64.b64encode(value.encode()).decode()},
    }


@pytest.fixture
def function_hub(recorded):
    hub.reset_client(HubClient(recorded.endpoint, offline=False))
    yield recorded
    hub.reset_client(None)


def status_of(rsp) -> dict:
    return resource.struct_to_dict(rsp.desired.composite.resource).get("status", {})


def messages(rsp) -> list[str]:
    return [r.message for r in rsp.results]


def test_a_model_the_catalog_lacks_is_sized_from_its_config(function_hub) -> None:
    # First call: the function asks Crossplane for the token Secret, and sizes from the name.
    first = run(request(xr("mistralai/Mistral-Nemo-Instruct-2407", gpu=1)))
    assert "secret-hf-token" in first.requirements.resources
    assert function_hub.requests == []
    # Second call, the Secret fetched (none here): the Hub is asked, the plan is its config's.
    rsp = run(request(xr("mistralai/Mistral-Nemo-Instruct-2407"), required={"secret-hf-token": []}))
    plan = status_of(rsp)["plan"]
    assert plan["modelSource"] == "hub" and plan["architecture"] == "MistralForCausalLM"
    assert plan["facts"]["origin"]["config"].startswith("config.json of mistralai/Mistral-Nemo")
    assert plan["facts"]["origin"]["family"] == "mistral (architecture MistralForCausalLM)"
    assert plan["maxModelLen"] > 4096  # 131072 positions, not the 4096 a name alone gives
    assert not any("estimated from its name" in m for m in messages(rsp))


def test_the_claims_token_reads_a_gated_model(function_hub) -> None:
    function_hub.gated_tokens["meta-llama/Llama-2-13b-hf"] = "hf_" + "t" * 30
    required = {"secret-hf-token": [token_secret("hf_" + "t" * 30)]}
    rsp = run(request(xr("meta-llama/Llama-2-13b-hf"), required=required))
    plan = status_of(rsp)["plan"]
    assert plan["modelSource"] == "hub"
    assert "hf_" not in str(resource.struct_to_dict(rsp.desired.composite.resource))
    assert all("hf_" not in m for m in messages(rsp))
    # The Hub says the model is gated, so the engine reads the token too, by reference.
    runtime = resource.struct_to_dict(rsp.desired.resources["vllm-runtime"].resource)
    assert runtime["spec"]["model"]["hfTokenSecret"] == {
        "hfTokenSecretName": "hf-token",
        "hfTokenKeyName": "token",
    }


def test_without_the_token_a_gated_model_says_which_field_to_set(function_hub) -> None:
    function_hub.gated_tokens["meta-llama/Llama-2-13b-hf"] = "hf_" + "t" * 30
    rsp = run(request(xr("meta-llama/Llama-2-13b-hf"), required={"secret-hf-token": []}))
    warning = next(m for m in messages(rsp) if "is gated" in m)
    assert warning.startswith("spec.parameters.hfTokenSecretRef:")
    assert status_of(rsp)["plan"]["modelSource"] == "estimated"


def test_an_id_the_hub_does_not_have_is_refused_with_the_catalog_id_it_is_close_to(
    function_hub,
) -> None:
    rsp = run(request(xr("Qwen/Qwen2.5-1.5B-Instrut"), required={"secret-hf-token": []}))
    (fatal,) = [r.message for r in rsp.results if r.severity == 1]
    assert fatal.startswith("spec.parameters.model: Qwen/Qwen2.5-1.5B-Instrut does not exist")
    assert "did you mean Qwen/Qwen2.5-1.5B-Instruct?" in fatal
    assert not rsp.desired.resources


def test_an_unknown_id_with_no_close_match_says_what_to_check(function_hub) -> None:
    rsp = run(request(xr("acme/Nothing-7B"), required={"secret-hf-token": []}))
    (fatal,) = [r.message for r in rsp.results if r.severity == 1]
    assert "does not exist on the Hugging Face Hub" in fatal
    assert "set spec.parameters.hfTokenSecretRef to a token that can see it" in fatal


def test_an_unreachable_hub_falls_back_to_the_name(monkeypatch) -> None:
    hub.reset_client(HubClient("http://127.0.0.1:9", offline=False))
    try:
        rsp = run(request(xr("acme/Foo-7B-Instruct"), required={"secret-hf-token": []}))
    finally:
        hub.reset_client(None)
    assert status_of(rsp)["plan"]["modelSource"] == "estimated"
    assert any("could not be reached" in m for m in messages(rsp))


def test_the_catalog_is_not_asked_about(function_hub) -> None:
    rsp = run(request(xr("Qwen/Qwen2.5-7B-Instruct"), required={"secret-hf-token": []}))
    assert status_of(rsp)["plan"]["modelSource"] == "catalog"
    assert function_hub.requests == []


def test_a_revision_in_extra_args_is_the_one_asked_for_and_downloaded(function_hub) -> None:
    sha = function_hub.models["mistralai/Mistral-Nemo-Instruct-2407"]["sha"]
    params = {"engine": {"extraArgs": ["--revision", sha]}}
    rsp = run(
        request(
            xr("mistralai/Mistral-Nemo-Instruct-2407", **params), required={"secret-hf-token": []}
        )
    )
    assert any(f"/revision/{sha}" in path for _, path, _ in function_hub.requests)
    jobs = [
        resource.struct_to_dict(r.resource)
        for k, r in rsp.desired.resources.items()
        if k.startswith("model-fetch")
    ]
    (job,) = jobs
    assert job["spec"]["template"]["spec"]["containers"][0]["command"][-1] == sha


def test_hub_answers_never_crash_the_function(function_hub) -> None:
    # A config.json that is not what a model's config looks like.
    function_hub.models["acme/Broken-7B"] = {
        "id": "acme/Broken-7B",
        "sha": "b" * 40,
        "siblings": [{"rfilename": "config.json", "size": 2}],
        "files": {"config.json": {"architectures": "not a list", "num_hidden_layers": "many"}},
    }
    rsp = run(request(xr("acme/Broken-7B"), required={"secret-hf-token": []}))
    assert status_of(rsp)["plan"]["modelSource"] == "estimated"
    assert any("config.json of acme/Broken-7B" in m for m in messages(rsp))


# A LoRA adapter repository as the Hub serves it: a test fixture (not a recording), the
# shape of a PEFT adapter_config.json; `lookup_adapter` reads it through huggingface_hub.
ADAPTER = "a-team/qwen-sql-lora"
ADAPTER_DOC = {
    "id": ADAPTER,
    "sha": "0" * 40,
    "siblings": [{"rfilename": "adapter_config.json", "size": 600}],
    "files": {
        "adapter_config.json": {
            "base_model_name_or_path": "Qwen/Qwen2.5-7B-Instruct",
            "peft_type": "LORA",
            "r": 32,
            "lora_alpha": 64,
            "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"],
            "task_type": "CAUSAL_LM",
        }
    },
}

# (case, repository, what the Hub holds for it, the status, a part of the message)
ADAPTER_ANSWERS = [
    ("an adapter the Hub has", ADAPTER, ADAPTER_DOC, "found", ""),
    ("an adapter it does not have", "a-team/nothing-lora", None, "not_found", "does not exist"),
    (
        "a repository without adapter_config.json",
        ADAPTER,
        {**ADAPTER_DOC, "files": {}},
        "not_found",
        "has no adapter_config.json",
    ),
]


@pytest.mark.parametrize(
    ("repo", "doc", "status", "says"),
    [a[1:] for a in ADAPTER_ANSWERS],
    ids=[a[0] for a in ADAPTER_ANSWERS],
)
def test_adapter_answers(recorded, repo: str, doc: dict | None, status: str, says: str) -> None:
    if doc is not None:
        recorded.models[ADAPTER] = doc
    answer = client(recorded).lookup_adapter(repo)
    assert answer.status == status, answer.message
    assert says in answer.message
    if status == "found":
        assert answer.adapter_config == ADAPTER_DOC["files"]["adapter_config.json"]


def test_an_adapter_answer_is_cached_apart_from_a_model_of_the_same_name(recorded) -> None:
    recorded.models[ADAPTER] = ADAPTER_DOC
    hub_client = client(recorded)
    assert hub_client.lookup_adapter(ADAPTER).status == "found"
    asked = len(recorded.requests)
    assert hub_client.lookup_adapter(ADAPTER).status == "found"
    assert len(recorded.requests) == asked, "the second answer came from the cache"
    assert hub_client.lookup(ADAPTER).adapter_config is None


def test_the_plan_takes_the_adapters_rank_from_the_hub(function_hub) -> None:
    function_hub.models[ADAPTER] = ADAPTER_DOC
    claim = xr(MODEL, "qwen", adapters=[{"name": "qwen-sql", "source": ADAPTER}])
    # Asked once Crossplane has looked for the token Secret (here: there is none).
    rsp = run(request(claim, required={"secret-hf-token": []}))
    (adapter,) = status_of(rsp)["plan"]["adapters"]["adapters"]
    assert (adapter["rank"], adapter["rankSource"]) == (32, "hub")
    assert status_of(rsp)["plan"]["adapters"]["maxLoraRank"] == 32


def test_an_adapter_for_another_model_on_the_hub_is_refused(function_hub) -> None:
    other = {**ADAPTER_DOC["files"]["adapter_config.json"], "base_model_name_or_path": "x/Llama-3"}
    function_hub.models[ADAPTER] = {**ADAPTER_DOC, "files": {"adapter_config.json": other}}
    claim = xr(MODEL, "qwen", adapters=[{"name": "qwen-sql", "source": ADAPTER}])
    # Asked once Crossplane has looked for the token Secret (here: there is none).
    rsp = run(request(claim, required={"secret-hf-token": []}))
    fatal = [r.message for r in rsp.results if r.severity == 1]
    assert fatal and "spec.parameters.adapters[0]" in fatal[0] and "x/Llama-3" in fatal[0], fatal
