"""Errors are typed: a refusal carries its field, its value and its problem, and a caller that
must say it differently (for one-pod llm-d replicas, another field, a placement reason)
renders or reads those fields; no caller reads a message back."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from function.errors import FieldError
from function.model.sizing import SizingError
from function.model.sizing_hints import MULTINODE, SPAN

FUNCTION = Path(__file__).resolve().parents[2] / "function"

# (case, error, render kwargs, expected message)
RENDERS = [
    (
        "names its field",
        SizingError("spec.parameters.gpu", 3, "3 is not a GPU count", names_field=True),
        {},
        "spec.parameters.gpu: 3 is not a GPU count",
    ),
    (
        "names another field (a disaggregated side's)",
        SizingError("spec.parameters.gpu", 3, "3 is not a GPU count", names_field=True),
        {"field": "spec.parameters.disaggregation.prefill.gpu"},
        "spec.parameters.disaggregation.prefill.gpu: 3 is not a GPU count",
    ),
    (
        "a field that leads a sentence",
        SizingError(
            "spec.parameters.gpu", "x", "must be a whole number", names_field=True, lead=" "
        ),
        {},
        "spec.parameters.gpu must be a whole number",
    ),
    (
        "the function's own choice names no field",
        SizingError("spec.parameters.gpu", None, f"needs more than one node{MULTINODE}"),
        {},
        "needs more than one node, an InferenceCluster with apps.lws",
    ),
    (
        "spanning hint where replicas span nodes",
        SizingError("spec.parameters.gpu", 16, f"one node{SPAN}, so", names_field=True),
        {},
        "spec.parameters.gpu: one node (an InferenceCluster with apps.lws spans nodes), so",
    ),
    (
        "one-pod replicas (llm-d)",
        SizingError("spec.parameters.gpu", 16, f"one node{SPAN}, so", names_field=True),
        {"one_pod": True},
        "spec.parameters.gpu: one node (llm-d serves a replica from one pod), so",
    ),
    (
        "one-pod replicas point at the production stack",
        SizingError("spec.parameters.gpu", None, f"more than one node{MULTINODE})"),
        {"one_pod": True},
        "more than one node; llm-d serves a replica from one pod: use the productionStack "
        "backend on an InferenceCluster with apps.lws)",
    ),
]


@pytest.mark.parametrize(
    ("error", "kwargs", "expected"), [c[1:] for c in RENDERS], ids=[c[0] for c in RENDERS]
)
def test_sizing_refusals_render_for_their_reader(
    error: SizingError, kwargs: dict, expected: str
) -> None:
    assert error.render(**kwargs) == expected


def test_the_default_rendering_is_the_message() -> None:
    e = SizingError("spec.parameters.gpu", 3, f"3 spans{SPAN}", names_field=True)
    assert e.message == e.render() == str(e)
    assert e.problem == "3 spans (an InferenceCluster with apps.lws spans nodes)"


def test_a_problem_alone_makes_the_message() -> None:
    e = FieldError("spec.parameters.ingressHost", "a.b", problem="a.b is taken")
    assert (e.message, e.problem) == ("spec.parameters.ingressHost: a.b is taken", "a.b is taken")
    whole = FieldError("spec.parameters.x", 1, "anything said whole")
    assert whole.problem is None
    with pytest.raises(TypeError):
        FieldError("f", 1)


_STRING_READS = {
    "startswith",
    "endswith",
    "removeprefix",
    "removesuffix",
    "split",
    "rsplit",
    "partition",
    "replace",
    "index",
    "find",
}


def _reads_message(expr: ast.AST, names: set[str]) -> bool:
    """Whether `expr` is an error's message: `<...>.message`, a name set from one, or what a
    call makes of one (`helper(e.message)`)."""
    if isinstance(expr, ast.Attribute) and expr.attr == "message":
        return True
    if isinstance(expr, ast.Call):
        return any(_reads_message(a, names) for a in expr.args)
    return isinstance(expr, ast.Name) and expr.id in names


def test_no_caller_reads_a_message_back() -> None:
    """No code in function/ takes a message apart: `e.message.startswith(...)`, or a name set
    from a message (`text = e.message`, `text = helper(e.message)`) taken apart later."""
    found = []
    for path in sorted(FUNCTION.glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, ast.FunctionDef):
                continue
            from_message = {
                t.id
                for node in ast.walk(fn)
                if isinstance(node, ast.Assign)
                and any(_reads_message(n, set()) for n in ast.walk(node.value))
                for t in node.targets
                if isinstance(t, ast.Name)
            }
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _STRING_READS
                    and _reads_message(node.func.value, from_message)
                ):
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []


# A cluster publishing a GPU shape no node has (a hand-edited status, a provider bug) is read
# as not published, for vLLM and the simulator alike; sizing never sees it (found by
# test_fn_property: perNode 65 crashed a simulated model's plan).
IMPOSSIBLE_GPUS = [
    ("65 per node", {"perNode": 65}, "perNode 65"),
    ("5 TiB each", {"memoryGiB": 5000}, "memoryGiB 5000"),
]


@pytest.mark.parametrize("simulate", [False, True], ids=["vllm", "simulator"])
@pytest.mark.parametrize(
    ("gpu", "says"), [c[1:] for c in IMPOSSIBLE_GPUS], ids=[c[0] for c in IMPOSSIBLE_GPUS]
)
def test_a_gpu_shape_no_node_has_waits_instead_of_crashing(
    gpu: dict, says: str, simulate: bool
) -> None:
    from conftest import EXAMPLES, claim, load_yaml, on_cluster

    state = load_yaml(EXAMPLES / "state" / "llm-qwen-on-aws.yaml")
    cluster = copy.deepcopy(next(o for o in state if o["kind"] == "InferenceCluster"))
    cluster["status"]["gpu"].update(gpu)
    engine = {"simulate": True} if simulate else {}
    xr = claim(
        "Qwen/Qwen2.5-7B-Instruct", clusterRef={"name": cluster["metadata"]["name"]}, engine=engine
    )
    out = on_cluster(xr, cluster)
    assert out.fatal is None and not out.resources
    messages = [c.message for c in out.conditions] + out.warnings
    assert any(says in m and "no GPU node has" in m for m in messages), messages
