"""Issue 12's measured errors, one case each: what the function planned against what vLLM
(the engine image's 0.17.1) allocates. Each case failed before the memory model followed
vLLM (commit c4e578a and earlier)."""

from __future__ import annotations

import pytest
from conftest import claim as xr
from conftest import request, run
from crossplane.function import resource

from function.limits import GPU_TYPES, GpuShape
from function.model import catalog, catalog_lookup, kv_cache, sizing, vllm_memory
from function.model.catalog import GIB


def shape(gpu: str, per_node: int = 8) -> GpuShape:
    return GpuShape(
        memory_gib=GPU_TYPES[gpu].memory_gib, per_node=per_node, type=gpu, assumed=False
    )


def facts(model: str) -> catalog.ModelFacts:
    found = catalog_lookup.lookup(model)
    assert found is not None, model
    return found


def request_gib(f: catalog.ModelFacts, plan: sizing.Plan) -> float:
    """KV memory one request of the plan's max_model_len takes on one GPU, as vLLM lays it
    out."""
    alloc = kv_cache.Allocator(
        tensor_parallel=plan.gpus,
        max_num_batched_tokens=plan.engine.max_num_batched_tokens,
        hybrid=f.hybrid_kv,
    )
    return kv_cache.request_bytes(f.kv_layers, alloc, plan.max_model_len) / GIB


# ------------------------------------------------------------------ KV packed to 100 %


# What vLLM itself leaves for the KV cache on one GPU: utilisation x CUDA's total, less the
# weights and what it profiled beside them (vLLM 0.19.0's figures on H100: 15.5 bytes per
# sampler logit, 0.25 GiB non-torch on one GPU, 2.1 with tensor parallelism;
# tests/contract/testdata/vllm). The function must plan below it.
def vllm_kv_gib(f: catalog.ModelFacts, gpus: int, gpu: GpuShape, seqs: int) -> float:
    sampler = 15.5 * seqs * f.vocab_size / GIB
    non_torch = 0.25 if gpus == 1 else 2.1
    return gpu.memory_gib * 0.9 - f.weights_gib / gpus - sampler - non_torch


PACKED = [
    # (case, model, GPUs, GPU, vLLM's KV memory per GPU when logged, else None)
    # Qwen3-32B on one H100: the function planned ~36K tokens (9 GiB of KV); vLLM has about
    # 7.7 GiB. (An older vLLM, whose sampler sorted the vocabulary, logged 4.45 GiB: llm-d-
    # benchmark @ 2593348; 0.17.1 takes the Triton top-k/top-p path, as 0.19.0 does.)
    ("qwen3-32b-1xh100", "Qwen/Qwen3-32B", 1, "h100", None),
    ("mixtral-8x22b-4xh100", "mistralai/Mixtral-8x22B-Instruct-v0.1", 4, "h100", None),
    ("phi-3-medium-128k-2xl4", "microsoft/Phi-3-medium-128k-instruct", 2, "l4", None),
]


@pytest.mark.parametrize(
    ("model", "gpus", "gpu", "logged"), [p[1:] for p in PACKED], ids=[p[0] for p in PACKED]
)
def test_one_request_of_the_planned_context_fits_what_vllm_allocates(
    model: str, gpus: int, gpu: str, logged: float | None
) -> None:
    f, g = facts(model), shape(gpu)
    plan = sizing.plan(f, gpus, g)
    assert plan.fits and plan.max_model_len > 0
    available = logged if logged is not None else vllm_kv_gib(f, gpus, g, plan.engine.max_num_seqs)
    # vLLM refuses to start when one request of max_model_len does not fit; the plan stays
    # below it by the stated safety margin.
    assert request_gib(f, plan) <= available - plan.kv_safety_gib * 0.5
    assert request_gib(f, plan) <= available


def test_kimi_k2_fp8_needs_more_than_one_h200_node() -> None:
    """1,029 GB of FP8 weights on 8 x 139.81 GiB: no room for vLLM's activation and
    non-torch memory, let alone a KV cache (Moonshot asks for 16 GPUs)."""
    f = facts("moonshotai/Kimi-K2-Instruct")
    plan = sizing.plan(f, 8, shape("h200"))
    assert plan.fits is False and plan.max_model_len == 0
    with pytest.raises(sizing.SizingError, match="needs more than one node"):
        sizing.choose_gpus(f, shape("h200"))
    two = sizing.plan(f, None, shape("h200"), None, 2)
    assert two.nodes == 2 and two.fits, "two nodes hold it"
    # A mixture of experts over nodes: data parallel attention and expert parallelism
    # (function/model/expert_parallel.py), not pipeline stages.
    split = (two.tensor_parallel_size, two.data_parallel_size, two.expert_parallel_size)
    assert split == (1, 16, 16)
    assert two.pipeline_parallel_size == 1


def test_one_gpu_table_as_cuda_reports_it() -> None:
    """Every GPU is sized at CUDA's total (below nvidia-smi's), and the H200 has one size."""
    from function import limits

    raw = limits._load()["gpus"]
    for name, gpu in GPU_TYPES.items():
        assert gpu.memory_gib == round(raw[name]["cudaMiB"] / 1024, 2)
        assert raw[name]["cudaMiB"] < raw[name]["smiMiB"]
    assert GPU_TYPES["h200"].memory_gib == 139.81
    assert GPU_TYPES["l4"].memory_gib == 21.95 and GPU_TYPES["h100"].memory_gib == 79.11


# ------------------------------------------------------------------ windowed layers

WINDOWED = [
    # (case, model, GPU, the context served, what counting every layer as full would give)
    ("gpt-oss-20b-1xl4", "openai/gpt-oss-20b", "l4", 131072, 86016),
    ("gemma-3-4b-1xl4", "google/gemma-3-4b-it", "l4", 131072, 67584),
]


@pytest.mark.parametrize(
    ("model", "gpu", "served", "as_full"), [w[1:] for w in WINDOWED], ids=[w[0] for w in WINDOWED]
)
def test_windowed_layers_hold_only_their_window(
    model: str, gpu: str, served: int, as_full: int
) -> None:
    f = facts(model)
    plan = sizing.plan(f, 1, shape(gpu, 1))
    assert plan.max_model_len == served
    full = [kv_cache.LayerGroup("full", g.count, g.kv_heads, g.head_dim) for g in f.kv_layers]
    as_if_full = sizing.plan(
        catalog.ModelFacts(**{**f.__dict__, "kv_layers": tuple(full)}), 1, shape(gpu, 1)
    )
    assert as_if_full.max_model_len == as_full < served


# ------------------------------------------------------------------ families and kinds


def composed(model: str, **params) -> tuple[list[str], dict]:
    rsp = run(request(xr(model, **params)))
    runtime = resource.struct_to_dict(rsp.desired.resources["vllm-runtime"].resource)
    status = resource.struct_to_dict(rsp.desired.composite.resource)["status"]
    return runtime["spec"]["vllmConfig"].get("extraArgs", []), status


def test_llama4_scout_is_109b_not_17b() -> None:
    f = facts("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert (f.total_params_b, f.active_params_b) == (108.64, 17.0)
    assert f.weights_gib > 200  # 2 bytes x 108.64B, loaded 1.05 x (vLLM's log)


def test_e5_mistral_has_a_decoders_context() -> None:
    f = facts("intfloat/e5-mistral-7b-instruct")
    assert (f.task, f.context_length, f.architecture) == ("embed", 4096, "MistralModel")
    assert f.kv_bytes_per_token > 0  # a decoder keeps a KV cache, unlike the e5 BERTs


RERANKERS = [
    ("BAAI/bge-reranker-v2-m3", []),
    (
        "Qwen/Qwen3-Reranker-0.6B",
        [
            "--hf-overrides",
            '{"architectures":["Qwen3ForSequenceClassification"],'
            '"classifier_from_token":["no","yes"],"is_original_qwen3_reranker":true}',
        ],
    ),
]


@pytest.mark.parametrize(("model", "extra"), RERANKERS, ids=[r[0] for r in RERANKERS])
def test_rerankers_score_with_the_pooling_runner(model: str, extra: list[str]) -> None:
    args, status = composed(model)
    assert status["plan"]["task"] == "score"
    assert args[args.index("--runner") + 1] == "pooling"
    for flag in extra[::2]:
        assert args[args.index(flag) + 1] == extra[extra.index(flag) + 1]


VISION = [
    ("Qwen/Qwen2.5-VL-7B-Instruct", '{"image":4,"video":1}'),
    ("google/gemma-3-27b-it", '{"image":4}'),
    ("mistralai/Mistral-Small-3.1-24B-Instruct-2503", '{"image":4}'),
]


@pytest.mark.parametrize(("model", "limits"), VISION, ids=[v[0] for v in VISION])
def test_vision_language_models_bound_their_inputs(model: str, limits: str) -> None:
    args, _ = composed(model)
    assert args[args.index("--limit-mm-per-prompt") + 1] == limits


MISTRAL_FORMAT = [
    "mistralai/Mistral-Small-3.1-24B-Instruct-2503",
    "mistralai/Magistral-Small-2506",
    "mistralai/Devstral-Small-2505",
]


@pytest.mark.parametrize("model", MISTRAL_FORMAT)
def test_mistral_format_models_say_so(model: str) -> None:
    args, _ = composed(model, gpu=2)
    for flag in ("--tokenizer-mode", "--config-format", "--load-format"):
        assert args[args.index(flag) + 1] == "mistral"


def test_magistral_reasons_with_mistrals_parser() -> None:
    args, _ = composed("mistralai/Magistral-Small-2506", gpu=2)
    assert args[args.index("--reasoning-parser") + 1] == "mistral"


def test_a_model_of_unknown_family_lets_vllm_fit_its_context() -> None:
    """Nobody knows the context of `acme/Foo-7B`: vLLM fits it (--max-model-len auto)
    instead of the 4096 the function used to guess."""
    args, status = composed("acme/Foo-7B-Instruct")
    assert args[args.index("--max-model-len") + 1] == "auto"
    assert status["plan"]["maxModelLen"] == "auto"


# ------------------------------------------------------------------ what the claim overrides

OVERRIDES = [
    # (case, extraArgs, the status.plan fields that follow them)
    (
        "utilisation",
        ["--gpu-memory-utilization", "0.95"],
        {"gpuMemoryUtilization": 0.95},
    ),
    ("fp8 KV cache", ["--kv-cache-dtype=fp8"], {"engine": {"kvCacheDtype": "fp8"}}),
    ("fewer sequences", ["--max-num-seqs", "64"], {"engine": {"maxNumSeqs": 64}}),
    (
        "batched tokens",
        ["--max-num-batched-tokens", "16k"],
        {"engine": {"maxNumBatchedTokens": 16000}},
    ),
]


@pytest.mark.parametrize(
    ("args", "expected"), [o[1:] for o in OVERRIDES], ids=[o[0] for o in OVERRIDES]
)
def test_status_plan_follows_the_claims_engine_args(args: list[str], expected: dict) -> None:
    _, status = composed("meta-llama/Llama-3.1-8B-Instruct", engine={"extraArgs": args})
    plan = status["plan"]
    for key, value in expected.items():
        if isinstance(value, dict):
            for k, v in value.items():
                assert plan[key][k] == v
        else:
            assert plan[key] == value
    assert plan["engine"]["overrides"] == [args[0].split("=")[0]]


def test_an_fp8_kv_cache_doubles_the_tokens_a_gpu_holds() -> None:
    f = facts("Qwen/Qwen3-32B")
    auto = sizing.plan(f, 1, shape("h100"))
    fp8 = sizing.plan(f, 1, shape("h100"), vllm_memory.EngineSettings(kv_cache_dtype="fp8"))
    assert fp8.kv_bytes_per_token * 2 == auto.kv_bytes_per_token
    assert fp8.max_model_len > auto.max_model_len


def test_a_bad_override_is_refused_naming_the_argument() -> None:
    rsp = run(
        request(
            xr(
                "Qwen/Qwen2.5-7B-Instruct",
                engine={"extraArgs": ["--gpu-memory-utilization", "1.5"]},
            )
        )
    )
    (fatal,) = [r.message for r in rsp.results if r.severity == 1]
    assert fatal.startswith("spec.parameters.engine.extraArgs: --gpu-memory-utilization '1.5'")


# (case, GPU count the claim gives, backend serves a replica from one pod) -> how the
# refusal ends, on a cluster whose replicas may not span nodes
LWS_WORDS = [
    (
        "chosen count, productionStack",
        None,
        False,
        "(e.g. H200 141 GB); or let one replica span nodes: an InferenceCluster with apps.lws "
        "(and gpu.maxNodes above 1)",
    ),
    (
        "chosen count, llm-d",
        None,
        True,
        "(e.g. H200 141 GB); llm-d serves a replica from one pod: to span nodes, use the "
        "productionStack backend on an InferenceCluster with apps.lws",
    ),
    (
        "the claim's count, productionStack",
        8,
        False,
        "(e.g. H200 141 GB); or let one replica span nodes: an InferenceCluster with apps.lws "
        "(and gpu.maxNodes above 1)",
    ),
]


@pytest.mark.parametrize(
    ("gpus", "one_pod", "ends"), [c[1:] for c in LWS_WORDS], ids=[c[0] for c in LWS_WORDS]
)
def test_larger_than_a_node_without_lws_says_what_would_span(gpus, one_pod, ends) -> None:
    f = facts("meta-llama/Llama-3.1-405B-Instruct")
    if gpus is None:
        with pytest.raises(sizing.SizingError) as e:
            sizing.plan(f, None, shape("h100"), None, 1, one_pod=one_pod)
        message = e.value.render(one_pod=one_pod)
    else:
        message = sizing.plan(f, gpus, shape("h100"), None, 1, one_pod=one_pod).shortfall
    assert message is not None and message.endswith(ends), message
    assert "{" not in message, "no placeholder left"
    # Where replicas may span nodes, the plan spans them instead of refusing.
    assert sizing.plan(f, None, shape("h100"), None, 2).nodes == 2


def test_no_placeholder_reaches_a_shortfall() -> None:
    """Kimi-K2 on one H200 node: no GPU is large enough, the words say more than one node."""
    plan = sizing.plan(facts("moonshotai/Kimi-K2-Instruct"), 8, shape("h200"))
    assert plan.shortfall is not None and "{" not in plan.shortfall
    assert plan.shortfall.endswith("more than one node, an InferenceCluster with apps.lws)")
