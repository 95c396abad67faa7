"""The CEL cost model (dot_inference/cel_cost.py) against the API server's own cost table:
every expression of tests/contract/testdata/k8s/cel-costs.yaml, over its object, costs what
apiextensions-apiserver's TestCelCostStability says at the pinned release."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import parse_yaml

from dot_inference import apiserver, cel_cost

TABLE = parse_yaml((Path(__file__).parent / "testdata" / "k8s" / "cel-costs.yaml").read_text())


def _schema(kind: str) -> dict[str, Any]:
    """A structural schema for a type as the table names it ("integer", "list of integer",
    "map of integer")."""
    if kind.startswith("list of "):
        return {"type": "array", "items": _schema(kind.removeprefix("list of "))}
    if kind.startswith("map of "):
        return {"type": "object", "additionalProperties": _schema(kind.removeprefix("map of "))}
    return {"type": kind}


CASES = [
    (group["name"], expr, cost, group["object"], group.get("types") or {})
    for group in TABLE["groups"]
    for expr, cost in group["costs"].items()
]


@pytest.mark.parametrize(
    ("group", "expr", "cost", "obj", "types"), CASES, ids=[f"{c[0]}: {c[1]}" for c in CASES]
)
def test_cost_is_the_api_server_s(
    group: str, expr: str, cost: int, obj: dict[str, Any], types: dict[str, str]
) -> None:
    schema = {"type": "object", "properties": {k: _schema(t) for k, t in types.items()}}
    program = apiserver.cel_program(expr)
    assert not isinstance(program, str), program
    value, spent = program.evaluate_costed({"self": apiserver.to_cel(obj, schema)}, None)
    assert bool(value), f"{expr} is true over the object in the upstream table"
    assert spent == cost


def test_the_table_is_the_pinned_release_s() -> None:
    from dot_inference.pins import pin

    # k8s.io/apiextensions-apiserver v0.N.P is Kubernetes v1.N.P.
    assert TABLE["source"]["version"] == "v0." + pin("kubernetes").split(".", 1)[1]


def test_a_rule_past_its_limit_is_cancelled_as_soon_as_it_passes_it() -> None:
    """The uniqueness rule over n items costs about 3n^2: past the limit, evaluation stops
    there (cel-go panics out of the loop), not at the end of the list."""
    program = apiserver.cel_program("self.all(a, self.exists_one(b, b == a))")
    items = apiserver.to_cel(list(range(100)), {"type": "array", "items": {"type": "integer"}})
    _, whole = program.evaluate_costed({"self": items}, None)
    assert whole > 30_000
    with pytest.raises(cel_cost.CostLimitExceeded) as raised:
        program.evaluate_costed({"self": items}, 10_000)
    assert 10_000 < raised.value.cost < 10_100
    assert str(raised.value) == "operation cancelled: actual cost limit exceeded"
