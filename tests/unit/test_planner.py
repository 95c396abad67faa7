"""`dot-inference plan MODEL`: every row equals what a claim of the model renders in
status.plan on a cluster of that GPU (checked against the examples' own clusters, rendered
from YAML as `dot-inference render` renders them), the options narrow and shape it, the
claims it prints are valid and render to the same row, and the chart is drawn."""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, PACKAGE, ROOT, load_yaml, parse_yaml, parse_yaml_all

from dot_inference import planner
from dot_inference.apiserver import validate_objects
from dot_inference.cli import cli
from dot_inference.crossplane.documents import load_package
from dot_inference.crossplane.render import render_in_package
from function.limits import GPU_TYPES
from function.model import hub as hub_client
from function.model.catalog import GIB

PKG = load_package(PACKAGE)


@pytest.fixture(autouse=True)
def offline() -> Any:
    hub_client.reset_client(hub_client.HubClient(offline=True))
    yield


def independently(model: str, state: str, context: int | None = None) -> dict[str, Any]:
    """status.plan of a claim written out as YAML, on an example's own cluster."""
    cluster = load_yaml(EXAMPLES / "state" / state)[0]
    engine = f"\n    engine: {{maxModelLen: {context}}}" if context else ""
    claim = parse_yaml(
        f"""
apiVersion: inference.devopstoolkit.ai/v1alpha1
kind: LLMInference
metadata: {{name: m, namespace: a-team}}
spec:
  parameters:
    model: {model}
    clusterRef: {{name: {cluster["metadata"]["name"]}}}{engine}
"""
    )
    result = render_in_package(PKG, claim, required=[cluster])
    assert result.fatal is None, result.fatal
    return result.xr["status"]["plan"]


# (model, example cluster state, GPUs per node and nodes of that cluster, context)
CASES = [
    ("Qwen/Qwen2.5-7B-Instruct", "llm-qwen-on-aws.yaml", 4, 1, None),  # dense 7B
    ("meta-llama/Llama-3.1-8B-Instruct", "llm-qwen-on-aws.yaml", 4, 1, 16384),
    ("Qwen/Qwen3-30B-A3B", "llm-qwen-on-aws.yaml", 4, 1, None),  # MoE
    ("BAAI/bge-m3", "llm-qwen-on-aws.yaml", 4, 1, None),  # embedding
    ("google/gemma-3-27b-it", "llm-qwen-on-aws.yaml", 4, 1, 8192),  # sliding windows
    ("Qwen/Qwen2.5-72B-Instruct", "llm-kimi-k2-multinode.yaml", 8, 2, None),  # 70B class
    ("moonshotai/Kimi-K2-Instruct", "llm-kimi-k2-multinode.yaml", 8, 2, None),  # over nodes
    ("deepseek-ai/DeepSeek-V3", "llm-kimi-k2-multinode.yaml", 8, 2, 32768),
]


@pytest.mark.parametrize(
    ("model", "state", "per_node", "nodes", "context"), CASES, ids=[c[0] for c in CASES]
)
def test_a_row_is_what_a_claim_renders(model, state, per_node, nodes, context) -> None:
    gpu = load_yaml(EXAMPLES / "state" / state)[0]["status"]["gpu"]["type"]
    (row,) = planner.plan_rows(model, [gpu], context=context, per_node=per_node, nodes=nodes)
    plan = independently(model, state, context)
    per = plan["perGPU"]
    assert row.refused is None
    assert (row.gpus, row.topology, row.fits) == (plan["gpus"], plan["topology"], plan["fits"])
    assert row.weights_gib_per_gpu == per["weightsGiB"]
    assert row.kv_cache_gib_per_gpu == per["kvCacheGiB"]
    assert row.activation_gib_per_gpu == per["activationGiB"]
    assert row.max_model_len == plan["maxModelLen"]
    assert row.max_concurrency == plan["maxConcurrency"]
    if context:
        assert row.max_model_len == context


def test_every_gpu_type_gets_a_row_that_says_why_not() -> None:
    rows = planner.plan_rows("meta-llama/Llama-3.3-70B-Instruct")
    assert [r.gpu for r in rows] == list(GPU_TYPES)
    for r in rows:
        if r.refused:
            assert r.refused.startswith("spec.parameters.model: meta-llama/Llama-3.3-70B")
            assert "apps.lws" in r.refused, "a cluster that spans nodes would hold it"
        else:
            assert r.fits and r.gpus and r.max_model_len
    assert any(r.refused for r in rows) and any(r.fits for r in rows)


def test_spanning_nodes_holds_what_one_node_does_not() -> None:
    one = planner.plan_rows("moonshotai/Kimi-K2-Instruct", ["h200"])[0]
    two = planner.plan_rows("moonshotai/Kimi-K2-Instruct", ["h200"], nodes=2)[0]
    assert one.refused and not two.refused
    assert two.gpus == 16 and "expert parallel" in two.topology


def run(*args: str) -> Any:
    return CliRunner().invoke(cli, ["plan", *args], catch_exceptions=False)


def test_the_table() -> None:
    out = run("Qwen/Qwen2.5-7B-Instruct", "--gpu", "l4", "--gpu", "h100", "--context", "8192")
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0].split() == [
        "GPU",
        "GiB",
        "GPUs",
        "weights/GPU",
        "KV/GPU",
        "context",
        "seqs@8192",
        "fits",
        "topology",
    ]
    assert [line.split()[0] for line in lines[1:3]] == ["l4", "h100"]
    assert lines[3].startswith("(facts: catalog")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--gpu", "b300"], "unknown GPU type b300; known: t4, l4"),
        (["--context", "0"], "Invalid value for '--context'"),
        (["--nodes", "0"], "Invalid value for '--nodes'"),
    ],
    ids=["unknown GPU type", "no context", "no nodes"],
)
def test_bad_options_are_refused(args: list[str], says: str) -> None:
    out = run("Qwen/Qwen2.5-7B-Instruct", *args)
    assert out.exit_code == 2
    assert says in out.output


def test_a_model_nobody_can_size_says_so_per_row() -> None:
    rows = planner.plan_rows("acme/mystery-model", ["h100"])
    assert rows[0].refused is not None
    assert "set spec.parameters.gpu" in rows[0].refused


def test_the_claims_it_prints_are_valid_and_render_to_the_same_row() -> None:
    out = run(
        "Qwen/Qwen3-30B-A3B", "--gpu", "l4", "--gpu", "h200", "--context", "16384", "-o", "yaml"
    )
    assert out.exit_code == 0, out.output
    claims = parse_yaml_all(out.output)
    assert [c["metadata"]["name"] for c in claims] == ["qwen3-30b-a3b-l4", "qwen3-30b-a3b-h200"]
    # A model no GPU of a node holds gets no claim.
    none = run("moonshotai/Kimi-K2-Instruct", "--gpu", "h100", "-o", "yaml")
    assert none.exit_code == 0 and parse_yaml_all(none.output) in ([], [None])
    report = validate_objects(claims, schema_paths=[PACKAGE])
    assert report.ok, report.summary()
    claim = claims[0]
    assert claim["spec"]["parameters"]["engine"] == {"maxModelLen": 16384}
    # On the cluster it would name, the claim renders what the row said.
    state = planner.cluster_state(PKG, 8, 1)
    claim["spec"]["parameters"]["clusterRef"] = {"name": planner.CLUSTER}
    result = render_in_package(PKG, claim, required=[planner.on_gpu(state, "l4")])
    (row,) = planner.plan_rows("Qwen/Qwen3-30B-A3B", ["l4"], context=16384)
    plan = result.xr["status"]["plan"]
    assert (plan["gpus"], plan["topology"], plan["maxConcurrency"]) == (
        row.gpus,
        row.topology,
        row.max_concurrency,
    )


def test_json_rows() -> None:
    out = run("BAAI/bge-m3", "--gpu", "t4", "-o", "json")
    assert out.exit_code == 0
    (row,) = parse_yaml(out.output)
    assert row["gpu"] == "t4" and row["fits"] is True


def test_the_chart_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "plan.png"
    out = run(
        "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "l4", "--gpu", "h100", "--chart", str(path)
    )
    assert out.exit_code == 0, out.output
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_without_matplotlib_the_chart_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = builtins.__import__

    def no_matplotlib(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    out = run("Qwen/Qwen2.5-7B-Instruct", "--gpu", "l4", "--chart", str(tmp_path / "x.png"))
    assert out.exit_code == 2
    assert "pip install 'dot-inference[chart]'" in out.output
    assert not (tmp_path / "x.png").exists()


# --------------------------------------------------------------------------- concurrency


def test_concurrency_of_a_dense_model_by_hand() -> None:
    """Qwen2.5-7B (28 layers x 4 KV heads x 128 x 2 x 2 bytes = 57344 bytes a token) on one
    H100 at 32768 tokens: 2048 blocks of 16 tokens a request; the KV cache over that."""
    (row,) = planner.plan_rows("Qwen/Qwen2.5-7B-Instruct", ["h100"], context=32768)
    per_request = 2048 * 16 * 28 * 4 * 128 * 2 * 2
    expected = row.kv_cache_gib_per_gpu * GIB / per_request
    assert row.max_concurrency == pytest.approx(expected, rel=0.01)


def test_concurrency_of_a_sliding_window_model_by_hand() -> None:
    """gpt-oss-20b: 12 layers with a 128-token window and 12 full ones (8 KV heads x 64), one
    pool of pages in groups of 12 layers (a page: 16 tokens x 8 x 64 x 2 x 2 bytes). vLLM
    prices a request of 32768 tokens at 2048 pages of the full group and, for the windowed
    one, min(128 - 1 + 8192 batched tokens, 32768) tokens in pages of 16 plus one
    (SlidingWindowSpec.max_memory_usage_bytes): 521."""
    (row,) = planner.plan_rows("openai/gpt-oss-20b", ["h100"], context=32768)
    page = 16 * 8 * 64 * 2 * 2
    windowed = -(-(128 - 1 + 8192) // 16) + 1
    per_request = 12 * page * (2048 + windowed)
    expected = row.kv_cache_gib_per_gpu * GIB / per_request
    assert row.max_concurrency == pytest.approx(expected, rel=0.01)
    full_length = 24 * page * 2048  # were every layer full attention
    assert row.max_concurrency > 1.5 * row.kv_cache_gib_per_gpu * GIB / full_length


# --------------------------------------------------------------------------- README


README_COMMAND = planner.README_COMMAND


def test_the_readme_shows_what_the_command_prints() -> None:
    """The README's planner output is the command's (regenerate: ./task readme-plan)."""
    text = (ROOT / "README.md").read_text()
    start = text.index(f"$ {README_COMMAND}\n") + len(f"$ {README_COMMAND}\n")
    shown = text[start : text.index("```", start)]
    out = run(*README_COMMAND.split()[2:])
    assert out.exit_code == 0
    assert shown == out.output, "run ./task readme-plan"
