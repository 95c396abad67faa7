"""spec.parameters.adapters: parsing (every hostile input a SpecError naming the field), the
adapters' facts and LoRA plan, the buffers vLLM preallocates, the flags on vLLM and the
simulator (each command line passes vLLM 0.17.1's parser), and status.plan.adapters."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from function.claim.adapters import Adapter
from function.claim.spec import SpecError, parse
from function.compose import compose
from function.model import adapters, catalog_lookup, lora_memory
from function.model.hub import HubAnswer
from function.model.lora_memory import LoraShape
from function.outcome import Inputs
from function.policy import vllm_cli

MODEL = "Qwen/Qwen2.5-1.5B-Instruct"
SQL = {"name": "qwen-sql", "source": "a-team/qwen-sql-lora", "rank": 16}


def xr(**params: Any) -> dict[str, Any]:
    return {
        "apiVersion": "inference.devopstoolkit.ai/v1alpha1",
        "kind": "LLMInference",
        "metadata": {"name": "qwen", "namespace": "a-team"},
        "spec": {"parameters": {"model": MODEL, **params}},
    }


GOOD = [
    ("none", {}, ()),
    ("an id", {"adapters": [SQL]}, (Adapter("qwen-sql", "a-team/qwen-sql-lora", 16, 0),)),
    (
        "a Hub URL is read as its id; rank optional; a float rank from protobuf",
        {
            "adapters": [
                {"name": "a", "source": "https://huggingface.co/org/one/"},
                {"name": "b", "source": "org/two", "rank": 8.0},
            ]
        },
        (Adapter("a", "org/one", None, 0), Adapter("b", "org/two", 8, 1)),
    ),
]


@pytest.mark.parametrize(("name", "params", "expected"), GOOD, ids=[c[0] for c in GOOD])
def test_adapters_parse(name: str, params: dict, expected: tuple) -> None:
    assert parse(xr(**params)).adapters == expected


def _many(n: int) -> list[dict]:
    return [{"name": f"a{i}", "source": f"org/a{i}"} for i in range(n)]


BAD = [
    ("not a list", {"adapters": "org/a"}, "spec.parameters.adapters"),
    ("empty list", {"adapters": []}, "spec.parameters.adapters"),
    ("too many", {"adapters": _many(9)}, "spec.parameters.adapters"),
    ("item not an object", {"adapters": ["org/a"]}, "spec.parameters.adapters[0]"),
    ("unknown field", {"adapters": [{**SQL, "path": "/x"}]}, "spec.parameters.adapters[0]"),
    ("name missing", {"adapters": [{"source": "org/a"}]}, "spec.parameters.adapters[0].name"),
    (
        "name with a space",
        {"adapters": [{"name": "a b", "source": "org/a"}]},
        "spec.parameters.adapters[0].name",
    ),
    (
        "name with a quote",
        {"adapters": [{"name": 'a"b', "source": "org/a"}]},
        "spec.parameters.adapters[0].name",
    ),
    (
        "name too long",
        {"adapters": [{"name": "a" * 129, "source": "org/a"}]},
        "spec.parameters.adapters[0].name",
    ),
    (
        "name is the model",
        {"adapters": [{"name": MODEL, "source": "org/a"}]},
        "spec.parameters.adapters[0].name",
    ),
    (
        "name is an alias",
        {"aliases": ["qwen"], "adapters": [{"name": "qwen", "source": "org/a"}]},
        "spec.parameters.adapters[0].name",
    ),
    (
        "two adapters, one name",
        {"adapters": [SQL, {**SQL, "source": "org/b"}]},
        "spec.parameters.adapters[1].name",
    ),
    (
        "source another host",
        {"adapters": [{"name": "a", "source": "https://example.com/org/a"}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "source plain http",
        {"adapters": [{"name": "a", "source": "http://huggingface.co/org/a"}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "source a path",
        {"adapters": [{"name": "a", "source": "../../etc/passwd"}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "source a Hub file URL",
        {"adapters": [{"name": "a", "source": "https://huggingface.co/org/a/blob/main/x"}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "source a number",
        {"adapters": [{"name": "a", "source": 7}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "source too long",
        {"adapters": [{"name": "a", "source": "org/" + "a" * 300}]},
        "spec.parameters.adapters[0].source",
    ),
    (
        "one source twice",
        {"adapters": [SQL, {**SQL, "name": "other", "source": "A-Team/Qwen-SQL-LoRA"}]},
        "spec.parameters.adapters[1].source",
    ),
    ("rank 0", {"adapters": [{**SQL, "rank": 0}]}, "spec.parameters.adapters[0].rank"),
    (
        "rank above vLLM's largest",
        {"adapters": [{**SQL, "rank": 513}]},
        "spec.parameters.adapters[0].rank",
    ),
    ("rank a bool", {"adapters": [{**SQL, "rank": True}]}, "spec.parameters.adapters[0].rank"),
    ("rank a fraction", {"adapters": [{**SQL, "rank": 2.5}]}, "spec.parameters.adapters[0].rank"),
    ("with llm-d", {"backend": "llmd", "adapters": [SQL]}, "spec.parameters.adapters"),
    (
        "with an API key",
        {"apiKeySecretRef": {"name": "key"}, "adapters": [SQL]},
        "spec.parameters.adapters",
    ),
]


@pytest.mark.parametrize(("name", "params", "field"), BAD, ids=[c[0] for c in BAD])
def test_adapters_refused(name: str, params: dict, field: str) -> None:
    with pytest.raises(SpecError) as e:
        parse(xr(**params))
    assert e.value.field == field
    assert e.value.message.startswith(field)


CONFIG = {"peft_type": "LORA", "r": 32, "target_modules": ["v_proj", "q_proj"]}

CONFIGS_BAD = [
    ("not an object", ["r", 8]),
    ("another PEFT method", {"peft_type": "IA3", "r": 8}),
    ("no rank", {"peft_type": "LORA"}),
    ("rank a bool", {"r": True}),
    ("rank zero", {"r": 0}),
]


@pytest.mark.parametrize(("name", "doc"), CONFIGS_BAD, ids=[c[0] for c in CONFIGS_BAD])
def test_adapter_config_refused(name: str, doc: object) -> None:
    with pytest.raises(adapters.AdapterConfigError):
        adapters.read_config(doc)


def test_adapter_config_read() -> None:
    got = adapters.read_config({**CONFIG, "base_model_name_or_path": MODEL})
    assert got == adapters.AdapterConfig(32, ("q_proj", "v_proj"), MODEL)


def _plan(
    configs: dict, rank: int | None = None, model: str = MODEL
) -> tuple[adapters.LoraPlan | None, list[str]]:
    warnings: list[str] = []
    got = adapters.plan_adapters(
        (Adapter("sql", "org/sql", rank, 0),),
        model,
        catalog_lookup.lookup(model),
        configs,
        warnings,
    )
    return got, warnings


PLANS = [
    # name, configs, claim rank, max rank, rank source, warns
    ("hub config", {"org/sql": adapters.AdapterConfig(32, (), MODEL)}, None, 32, "hub", False),
    (
        "rank rounds up to vLLM's next",
        {"org/sql": adapters.AdapterConfig(20, (), None)},
        None,
        32,
        "hub",
        False,
    ),
    (
        "hub wins over the claim",
        {"org/sql": adapters.AdapterConfig(8, (), None)},
        64,
        8,
        "hub",
        True,
    ),
    ("claim when unread", {"org/sql": "unreachable"}, 64, 64, "claim", False),
    ("assumed when unknown", {}, None, 16, "assumed", True),
    (
        "base model from a local path of the same name",
        {"org/sql": adapters.AdapterConfig(8, (), "/models/qwen2.5-1.5b-instruct")},
        None,
        8,
        "hub",
        False,
    ),
]


@pytest.mark.parametrize(
    ("name", "configs", "rank", "max_rank", "source", "warns"), PLANS, ids=[c[0] for c in PLANS]
)
def test_lora_plan(
    name: str, configs: dict, rank: int | None, max_rank: int, source: str, warns: bool
) -> None:
    got, warnings = _plan(configs, rank)
    assert got is not None
    assert (got.max_rank, got.adapters[0].rank_source, bool(warnings)) == (max_rank, source, warns)


PLAN_REFUSALS = [
    (
        "trained on another model",
        {"org/sql": adapters.AdapterConfig(8, (), "meta-llama/Llama-3.2-3B-Instruct")},
        MODEL,
        "spec.parameters.adapters[0].source",
    ),
    (
        "rank above vLLM's largest",
        {"org/sql": adapters.AdapterConfig(1024, (), MODEL)},
        MODEL,
        "spec.parameters.adapters[0].source",
    ),
    ("mixture of experts", {}, "Qwen/Qwen3-30B-A3B", "spec.parameters.adapters[0].source"),
]


@pytest.mark.parametrize(
    ("name", "configs", "model", "field"), PLAN_REFUSALS, ids=[c[0] for c in PLAN_REFUSALS]
)
def test_lora_plan_refused(name: str, configs: dict, model: str, field: str) -> None:
    with pytest.raises(SpecError) as e:
        _plan(configs, None, model)
    assert e.value.field == field


def test_hub_answers_become_configs() -> None:
    got = adapters.configs_from(
        {
            "org/a": HubAnswer("found", adapter_config=CONFIG),
            "org/b": HubAnswer("found", adapter_config={"peft_type": "IA3", "r": 1}),
            "org/c": HubAnswer("not_found", message="org/c does not exist"),
        }
    )
    assert got["org/a"] == adapters.AdapterConfig(32, ("q_proj", "v_proj"), None)
    assert "IA3" in got["org/b"] and got["org/c"] == "org/c does not exist"


def test_lora_buffers_as_vllm_allocates_them() -> None:
    """Qwen2.5-1.5B (28 layers, 12 heads and 2 KV heads of 128, hidden 1536), by hand from
    vllm/lora/layers/*.py create_lora_weights: per layer and slot of rank 1, qkv A 3 x hidden,
    B q + 2 kv; o A q, B hidden; gate_up A 2 x hidden, B 2 x inter; down A inter, B hidden;
    embeddings 2 x (hidden + vocab)."""
    facts = catalog_lookup.lookup(MODEL)
    assert facts is not None
    hidden, q, kv = 1536, 12 * 128, 2 * 128
    inter = lora_memory._intermediate_from_params(facts, hidden, q)
    assert 8000 < inter < 10000  # the config says 8960
    per_layer = 3 * hidden + q + 2 * kv + q + hidden + 2 * hidden + 2 * inter + inter + hidden
    elements = 28 * per_layer + 2 * (hidden + 151936)
    got = lora_memory.buffer_gib(facts, 1, LoraShape(max_loras=3, max_rank=16))
    assert got == pytest.approx(elements * 16 * 3 * 2 / 1024**3)
    assert lora_memory.buffer_gib(facts, 1, None) == 0.0
    # Tensor parallel splits the output of column-parallel layers and the input of row ones.
    assert lora_memory.buffer_gib(facts, 2, LoraShape(3, 16)) < got


def _compose(**params: Any) -> Any:
    return compose(
        Inputs(
            xr=xr(gpu=1, **params),
            engine_image="vllm/vllm-openai:v0.17.1",
            simulator_image="ghcr.io/llm-d/llm-d-inference-sim:v0.10.2",
        )
    )


def _args(out: Any) -> list[str]:
    runtime = next(r for r in out.resources.values() if r.get("kind") == "VLLMRuntime")
    return runtime["spec"]["vllmConfig"]["extraArgs"]


def test_no_adapters_no_lora_flag() -> None:
    out = _compose()
    assert out.fatal is None
    assert not [a for a in _args(out) if "lora" in a]
    assert "adapters" not in out.status["plan"]


def test_adapters_on_vllm() -> None:
    out = _compose(adapters=[SQL, {"name": "qwen-chat", "source": "org/chat", "rank": 64}])
    assert out.fatal is None, out.fatal
    args = _args(out)
    assert vllm_cli.problems(args) == []
    i = args.index("--enable-lora")
    assert args[i : i + 10] == [
        "--enable-lora",
        "--max-loras",
        "2",
        "--max-lora-rank",
        "64",
        "--max-cpu-loras",
        "2",
        "--lora-modules",
        "qwen-sql=a-team/qwen-sql-lora",
        "qwen-chat=org/chat",
    ]
    plan = out.status["plan"]
    assert plan["adapters"]["names"] == ["qwen-sql", "qwen-chat"]
    assert (plan["adapters"]["maxLoraRank"], plan["adapters"]["slots"]) == (64, 2)
    assert plan["adapters"]["gibPerGPU"] > 0
    assert out.status["servedModelNames"] == [MODEL, "qwen-sql", "qwen-chat"]


def test_adapter_buffers_come_out_of_the_kv_cache() -> None:
    plain = _compose().status["plan"]
    with_lora = _compose(adapters=[{**SQL, "rank": 512}]).status["plan"]
    taken = with_lora["adapters"]["gibPerGPU"]
    assert taken > 0.5
    assert with_lora["kvCacheGiB"] == pytest.approx(plain["kvCacheGiB"] - taken, abs=0.1)


def test_adapters_on_the_simulator() -> None:
    out = _compose(adapters=[SQL], engine={"simulate": True})
    assert out.fatal is None, out.fatal
    deployment = next(r for r in out.resources.values() if r.get("kind") == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    i = args.index("--lora-modules")
    assert args[i + 1] == '{"name":"qwen-sql","path":"a-team/qwen-sql-lora"}'
    assert args[args.index("--max-loras") + 1] == "1"


def test_adapter_names_count_as_the_models_names_behind_the_router() -> None:
    """Another claim's adapters take their names on the router (peers), and a collision names
    the adapter's field."""
    from function.cluster import peers
    from function.policy.names import _name_field

    assert peers.adapter_names({"adapters": [SQL, {"name": 3}, "x"]}) == ("qwen-sql",)
    spec = parse(xr(aliases=["qwen"], adapters=[SQL, {"name": "b", "source": "org/b"}]))
    assert spec.routed_names == (MODEL, "qwen", "qwen-sql", "b")
    fields = [_name_field(spec, i) for i in range(4)]
    assert fields == [
        "spec.parameters.model",
        "spec.parameters.aliases[0]",
        "spec.parameters.adapters[0].name",
        "spec.parameters.adapters[1].name",
    ]


QUERIES = [
    # name, params, required, expected repos
    ("no adapters", {}, {"secret-hf-token": []}, ()),
    ("token Secret not fetched yet", {"adapters": [SQL]}, {}, ()),
    ("simulated", {"adapters": [SQL], "engine": {"simulate": True}}, {"secret-hf-token": []}, ()),
    ("asked", {"adapters": [SQL]}, {"secret-hf-token": []}, ("a-team/qwen-sql-lora",)),
]


@pytest.mark.parametrize(
    ("name", "params", "required", "expected"), QUERIES, ids=[c[0] for c in QUERIES]
)
def test_adapter_hub_queries(name: str, params: dict, required: dict, expected: tuple) -> None:
    """The Hub is asked about adapters as about a model: once Crossplane fetched the token
    Secret (the plan asks for it), never for a simulated model."""
    from function.model.facts import HF_TOKEN_REQUIREMENT, adapter_queries

    repos, _ = adapter_queries(Inputs(xr=xr(**params), required=required))
    assert repos == expected
    if expected:
        assert HF_TOKEN_REQUIREMENT in _compose(**params).requirements


def test_offline_hub_is_not_asked_about_adapters() -> None:
    from function.model.hub import HubClient

    answer = HubClient(offline=True).lookup_adapter("org/sql")
    assert answer.status == "offline" and answer.adapter_config is None


# The MLP width the LoRA estimate uses when the catalog lacks it, against the models' own
# config.json intermediate_size (Hugging Face): the estimate counts tied embeddings once, so
# for untied models it comes out high (more buffer planned, never less), by under 10%.
MLP_WIDTHS = [
    ("Qwen/Qwen2.5-0.5B-Instruct", 4864),
    ("Qwen/Qwen2.5-1.5B-Instruct", 8960),
    ("Qwen/Qwen2.5-7B-Instruct", 18944),
    ("meta-llama/Llama-3.1-8B-Instruct", 14336),
    ("Qwen/Qwen2.5-32B-Instruct", 27648),
]


@pytest.mark.parametrize(("model", "width"), MLP_WIDTHS, ids=[m for m, _ in MLP_WIDTHS])
def test_the_mlp_width_estimate_is_close_and_not_low(model: str, width: int) -> None:
    facts = catalog_lookup.lookup(model)
    assert facts is not None and not facts.intermediate_size
    hidden = facts.hidden_size or facts.attention_heads * facts.head_dim
    q = facts.attention_heads * facts.head_dim
    estimate = lora_memory._intermediate_from_params(facts, hidden, q)
    assert 0.98 * width <= estimate <= 1.10 * width, (estimate, width)


def test_without_a_parameter_count_the_mlp_is_four_times_hidden() -> None:
    facts = catalog_lookup.lookup(MODEL)
    assert facts is not None
    unknown = dataclasses.replace(facts, total_params_b=0)
    assert lora_memory._intermediate_from_params(unknown, 1536, 1536) == 4 * 1536


def test_a_pipeline_stage_holds_its_share_of_the_layers() -> None:
    facts = catalog_lookup.lookup(MODEL)
    assert facts is not None
    whole = lora_memory.elements_per_slot_rank(facts, 1)
    half = lora_memory.elements_per_slot_rank(facts, 1, layer_share=0.5)
    embeddings = 2 * (1536 + 151936)
    assert half - embeddings == pytest.approx((whole - embeddings) / 2)
    # Tensor parallel 2: the KV slices are one head's at least, 128 wide, not 2 x 128 x 2.
    two = lora_memory.elements_per_slot_rank(facts, 2)
    inter = lora_memory._intermediate_from_params(facts, 1536, 1536)
    per_layer = 7 * 1536 + (2 * 1536 + 3 * inter) / 2 + 2 * 128
    assert two == pytest.approx(28 * per_layer + embeddings)


# base_model_name_or_path against the claim's model: (case, base, model, the same model?)
BASE_MODELS = [
    ("the hub id", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", True),
    ("another case", "qwen/qwen2.5-1.5b-instruct", "Qwen/Qwen2.5-1.5B-Instruct", True),
    ("a local copy", "/models/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", True),
    (
        "a local copy, trailing slash",
        "/models/Qwen2.5-1.5B-Instruct/",
        "Qwen/Qwen2.5-1.5B-Instruct",
        True,
    ),
    ("a mirror id", "unsloth/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", True),
    ("the bare name", "Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", True),
    ("the base, not the instruct", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B-Instruct", False),
    ("another size", "Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", False),
    ("a name that only ends alike", "x/Instruct", "Qwen/Qwen2.5-1.5B-Instruct", False),
    ("the organisation only", "Qwen", "Qwen/Qwen2.5-1.5B-Instruct", False),
]


@pytest.mark.parametrize(
    ("base", "model", "same"), [b[1:] for b in BASE_MODELS], ids=[b[0] for b in BASE_MODELS]
)
def test_which_base_models_are_the_claims(base: str, model: str, same: bool) -> None:
    assert adapters._same_model(base, model) is same


# A rank vLLM cannot serve names the field it came from: (case, configs, claim rank, field, value)
RANK_REFUSALS = [
    ("from the claim", {"org/sql": "unreachable"}, 1024, "spec.parameters.adapters[0].rank", 1024),
    (
        "from adapter_config.json",
        {"org/sql": adapters.AdapterConfig(1024, (), MODEL)},
        None,
        "spec.parameters.adapters[0].source",
        "org/sql",
    ),
]


@pytest.mark.parametrize(
    ("configs", "rank", "field", "value"),
    [r[1:] for r in RANK_REFUSALS],
    ids=[r[0] for r in RANK_REFUSALS],
)
def test_a_rank_above_512_names_where_it_came_from(
    configs: dict, rank: int | None, field: str, value: object
) -> None:
    with pytest.raises(SpecError) as e:
        _plan(configs, rank)
    assert (e.value.field, e.value.value) == (field, value)
    assert "rank 1024 is above the largest LoRA rank vLLM 0.17.1 serves (512," in str(e.value)
    assert "use an adapter of rank 512 or less" in str(e.value)


def test_what_the_hub_said_is_in_the_plan_and_why_not_in_the_warning() -> None:
    config = adapters.AdapterConfig(16, ("q_proj", "v_proj"), MODEL)
    got, _ = _plan({"org/sql": config})
    assert got is not None
    (planned,) = got.adapters
    assert (planned.base_model, planned.target_modules) == (MODEL, ("q_proj", "v_proj"))
    _, warnings = _plan({"org/sql": "the Hub did not answer within 2 s"})
    assert warnings == [
        "spec.parameters.adapters[0]: the Hub did not answer within 2 s; planned with rank 16 "
        "(vLLM's default --max-lora-rank); vLLM refuses the adapter if its r is larger: state "
        "spec.parameters.adapters[0].rank"
    ]
