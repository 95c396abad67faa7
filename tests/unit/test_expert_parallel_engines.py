"""Expert parallelism in the engines' command lines: the data and expert parallel flags a
plan gives (function/policy/parallel_args.py), on a VLLMRuntime (one node), on a
LeaderWorkerSet's leader and workers (several nodes) and on an llm-d pod, each accepted by
vLLM 0.17.1's parser, and the data parallel ranks vLLM derives from them where a replica
spans nodes. The sizing that chooses the topology is tested in test_expert_parallel.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import as_kubelet

from function.backends import pods
from function.backends.production_stack import engine_command, vllm_runtime
from function.limits import GPU_TYPES, GpuShape
from function.model import sizing
from function.model.catalog_lookup import lookup
from function.policy import vllm_cli
from function.policy.parallel_args import vllm_parallel_args

H200 = GpuShape(GPU_TYPES["h200"].memory_gib, 8, "h200", False)


def shaped(tp: int, pp: int, dp: int, ep: bool, nodes: int) -> sizing.Plan:
    """A plan of DeepSeek-V3 with the given split (only the split matters here)."""
    base = sizing.plan(lookup("deepseek-ai/DeepSeek-V3"), 8, H200)
    return dataclasses.replace(
        base,
        gpus=tp * pp * dp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        data_parallel_size=dp,
        expert_parallel=ep,
        nodes=nodes,
    )


EP = "--enable-expert-parallel"
DP, DPL = "--data-parallel-size", "--data-parallel-size-local"
# (name, tp, pp, dp, ep, nodes) -> the data and expert parallel flags
FLAGS = [
    ("tensor parallel only", 8, 1, 1, False, 1, []),
    ("tensor parallel with EP", 4, 1, 1, True, 1, [EP]),
    (
        "DP attention on one node",
        1,
        1,
        8,
        True,
        1,
        [DP, "8", EP],
    ),
    (
        "DP+EP over two nodes (MLA)",
        1,
        1,
        16,
        True,
        2,
        [
            "--data-parallel-size",
            "16",
            "--data-parallel-size-local",
            "8",
            "--enable-expert-parallel",
        ],
    ),
    (
        "DP+EP over two nodes (GQA: TP inside a node)",
        8,
        1,
        2,
        True,
        2,
        [
            "--data-parallel-size",
            "2",
            "--data-parallel-size-local",
            "1",
            "--enable-expert-parallel",
        ],
    ),
    ("pipeline over two nodes", 8, 2, 1, False, 2, []),
]


@pytest.mark.parametrize(
    ("tp", "pp", "dp", "ep", "nodes", "expected"),
    [c[1:] for c in FLAGS],
    ids=[c[0] for c in FLAGS],
)
def test_the_flags_of_each_split(tp, pp, dp, ep, nodes, expected) -> None:
    plan = shaped(tp, pp, dp, ep, nodes)
    assert vllm_parallel_args(plan) == expected
    assert plan.expert_parallel_size == (tp * dp if ep else 1)


def runtime(plan: sizing.Plan) -> dict[str, Any]:
    return vllm_runtime(
        name="deepseek-v3",
        namespace="a-team",
        model="deepseek-ai/DeepSeek-V3",
        image="lmcache/vllm-openai:v0.4.2",
        gpus=plan.gpus,
        tensor_parallel=plan.tensor_parallel_size,
        cpu=plan.cpu,
        memory=plan.memory,
        shm_size=plan.shm_size,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        max_model_len=4096,
        tool_call_parser=None,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
        extra_args=vllm_parallel_args(plan),
        env=[],
        engine_secret=None,
    )


@pytest.mark.parametrize(
    ("tp", "dp", "ep", "tensor_parallel_field"),
    [(8, 1, False, 8), (4, 1, True, 4), (1, 8, True, None), (2, 4, True, 2)],
    ids=["TP8", "TP4 EP", "DP8 EP", "TP2 DP4 EP"],
)
def test_one_node_runtime_has_every_gpu_and_the_split_in_its_arguments(
    tp: int, dp: int, ep: bool, tensor_parallel_field: int | None
) -> None:
    plan = shaped(tp, 1, dp, ep, 1)
    r = runtime(plan)
    assert r["spec"]["deploymentConfig"]["resources"]["gpu"] == str(tp * dp), "the pod's GPUs"
    assert r["spec"]["vllmConfig"].get("tensorParallelSize") == tensor_parallel_field
    args = engine_command(r)[3:]  # after `vllm serve MODEL`
    assert vllm_cli.problems(args) == [], "vLLM 0.17.1's parser accepts it"
    assert ("--enable-expert-parallel" in args) is ep
    world = int(args[args.index("--tensor-parallel-size") + 1]) if tp > 1 else 1
    if dp > 1:
        world *= int(args[args.index("--data-parallel-size") + 1])
    assert world == tp * dp, "vLLM's world size is the pod's GPUs"


def parsed(args: list[str]) -> dict[str, str | bool]:
    """The options of a command line (the value after each, or True for a switch)."""
    out: dict[str, str | bool] = {}
    for i, a in enumerate(args):
        if a.startswith("--"):
            nxt = args[i + 1] if i + 1 < len(args) else None
            out[a] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out


def dp_rank_vllm_infers(o: dict[str, str | bool]) -> tuple[int, int]:
    """(first DP rank of this node, DP ranks on it) as vLLM 0.17.1 derives them from
    --nnodes and --node-rank (engine/arg_utils.py `create_engine_config`): the node's share
    of the world size, in groups of TP x PP."""
    tp = int(o.get("--tensor-parallel-size", 1))
    pp = int(o.get("--pipeline-parallel-size", 1))
    dp = int(o.get("--data-parallel-size", 1))
    nnodes, rank = int(o["--nnodes"]), int(o["--node-rank"])
    world = dp * pp * tp
    assert world % nnodes == 0, "vLLM asserts world_size % nnodes == 0"
    local_world = world // nnodes
    inferred = rank * local_world // (pp * tp)
    local = int(o.get("--data-parallel-size-local", max(local_world // (pp * tp), 1)))
    return int(o.get("--data-parallel-start-rank", inferred)), local


@pytest.mark.parametrize(
    ("tp", "pp", "dp", "ep"),
    [(1, 1, 16, True), (8, 1, 2, True), (8, 2, 1, False)],
    ids=["DP16 EP (MLA)", "TP8 DP2 EP (GQA)", "TP8 PP2 (dense)"],
)
def test_every_pod_of_a_group_gets_its_own_ranks(tp: int, pp: int, dp: int, ep: bool) -> None:
    plan = shaped(tp, pp, dp, ep, 2)
    args = pods.vllm_serve_args(
        model="deepseek-ai/DeepSeek-V3",
        tensor_parallel=plan.tensor_parallel_size,
        nodes=plan.nodes,
        pipeline=plan.pipeline_parallel_size,
        max_model_len=4096,
        dtype=plan.dtype,
        gpu_memory_utilization=plan.gpu_memory_utilization,
        enable_prefix_caching=True,
        enable_chunked_prefill=True,
        tool_call_parser=None,
        extra_args=vllm_parallel_args(plan),
    )
    seen: list[int] = []
    for index in range(plan.nodes):
        pod = as_kubelet(args + (["--headless"] if index else []), index)
        assert vllm_cli.problems(pod[1:]) == [], "vLLM 0.17.1's parser accepts it"
        o = parsed(pod)
        assert ("--pipeline-parallel-size" in o) is (pp > 1)
        if dp > 1:
            first, local = dp_rank_vllm_infers(o)
            assert local == plan.data_parallel_local == dp // 2
            seen += range(first, first + local)
    if dp > 1:
        assert seen == list(range(dp)), "every DP rank once, none twice"


# --------------------------------------------------------------------------- the examples


def _render(example: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from conftest import EXAMPLES, PACKAGE, load_yaml

    from dot_inference.crossplane.documents import load_package
    from dot_inference.crossplane.render import render_in_package

    state = EXAMPLES / "state" / example
    result = render_in_package(
        load_package(PACKAGE), load_yaml(EXAMPLES / example)[0], required=load_yaml(state)
    )
    assert result.fatal is None, result.fatal
    manifests = [
        (o.get("spec", {}).get("forProvider", {}).get("manifest") or o) for o in result.composed
    ]
    return result.xr["status"]["plan"], manifests


# (example, topology in status.plan, (tp, dp, ep), the engine's parallel flags)
EXAMPLES_EP = [
    (
        "llm-deepseek-v3-multinode.yaml",
        "2 nodes x 8 h200: data parallel 16 (8 per node) of tensor parallel 1, experts split "
        "over 16 ranks (expert parallel)",
        (1, 16, 16),
        ["--data-parallel-size", "16", "--data-parallel-size-local", "8", EP],
    ),
    (
        "llm-qwen3-moe.yaml",
        "1 node x 4 l4: tensor parallel 4, experts split over 4 ranks (expert parallel)",
        (4, 1, 4),
        [EP],
    ),
    (
        "llm-kimi-k2-multinode.yaml",
        "2 nodes x 8 h200: data parallel 16 (8 per node) of tensor parallel 1, experts split "
        "over 16 ranks (expert parallel)",
        (1, 16, 16),
        ["--data-parallel-size", "16", "--data-parallel-size-local", "8", EP],
    ),
]


@pytest.mark.parametrize(
    ("example", "topology", "split", "flags"), EXAMPLES_EP, ids=[e[0] for e in EXAMPLES_EP]
)
def test_the_moe_examples_serve_with_expert_parallelism(
    example: str, topology: str, split: tuple[int, int, int], flags: list[str]
) -> None:
    plan, manifests = _render(example)
    assert plan["topology"] == topology
    got = (plan["tensorParallelSize"], plan["dataParallelSize"], plan["expertParallelSize"])
    assert got == split
    command = plan["engineArgs"]
    i = command.index(flags[0])
    assert command[i : i + len(flags)] == flags, "in the engine's command line"
    engines = [m for m in manifests if m.get("kind") in ("VLLMRuntime", "LeaderWorkerSet")]
    assert len(engines) == 1
    (engine,) = engines
    if engine["kind"] == "LeaderWorkerSet":
        group = engine["spec"]["leaderWorkerTemplate"]
        for role, index in (("leaderTemplate", 0), ("workerTemplate", 1)):
            c = group[role]["spec"]["containers"][0]
            args = as_kubelet(c["args"], index)
            assert vllm_cli.problems(args[1:]) == []
            assert c["resources"]["limits"]["nvidia.com/gpu"] == "8"
            first, local = dp_rank_vllm_infers(parsed(args))
            assert (first, local) == (8 * index, 8)
    else:
        args = engine_command(engine)[3:]
        assert vllm_cli.problems(args) == []
        assert engine["spec"]["deploymentConfig"]["resources"]["gpu"] == str(split[0] * split[1])
