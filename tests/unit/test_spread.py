"""Placement over several clusters (function/cluster/spread.py): N placements over M clusters,
at most one per spread value, sticky placement by placement, table-driven."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from function.cluster.placement import Candidate
from function.cluster.spread import NO_SPREAD_VALUE, STAY, explain, spread

L4, H100 = 22.0, 79.2


def size(gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1) -> int | None:
    """The model needs one GPU of at least 20 GiB, or two of 10 GiB and more on one node."""
    if memory_gib >= 20:
        return 1
    return 2 if memory_gib >= 10 and per_node >= 2 else None


def why_not(gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1) -> str:
    return f"{memory_gib:g} GiB is too small"


def c(
    name: str, value: str | None, memory: float = L4, pool: int = 8, held: int = 0, **kw
) -> Candidate:
    return Candidate(
        name, gpu_type="gpu", memory_gib=memory, per_node=4, pool=pool, held=held,
        spread_value=value, **kw,
    )  # fmt: skip


@dataclass
class Case:
    id: str
    candidates: list[Candidate]
    asked: int
    expected: list[str]  # the clusters chosen, in order
    current: list[str] = field(default_factory=list)
    replicas: int = 1
    kept: list[str] = field(default_factory=list)
    missing: str | None = None


CASES = [
    Case(
        "spread by region: one placement per region, by the rule within each",
        [
            c("aws-1", "aws/us-east-1"),
            c("aws-2", "aws/us-east-1", held=4),
            c("gcp-1", "google/us-central1"),
            c("az-1", "azure/eastus"),
        ],
        3,
        ["aws-1", "az-1", "gcp-1"],
    ),
    Case(
        "two clusters in one region: the one with more free GPUs, not both",
        [c("aws-1", "aws/us-east-1", held=6), c("aws-2", "aws/us-east-1", held=2)],
        2,
        ["aws-2"],
        missing="1 of 2 placements missing: only 1 value of the spread key has a cluster that "
        "can run it",
    ),
    Case(
        "ties (same GPU, same free GPUs) go by name",
        [c("b", "r2"), c("a", "r1"), c("c", "r3")],
        2,
        ["a", "b"],
    ),
    Case(
        "the smallest GPU that fits comes first, large GPUs stay free",
        [c("big", "r1", memory=H100), c("small", "r2", memory=L4)],
        1,
        ["small"],
    ),
    Case(
        "fewer fit than asked: what fits runs and the rest is missing",
        [c("aws-1", "aws/us-east-1"), c("gcp-1", "google/us-central1"), c("tiny", "r3", memory=8)],
        4,
        ["aws-1", "gcp-1"],
        missing="2 of 4 placements missing: only 2 values of the spread key have a cluster that "
        "can run it",
    ),
    Case(
        "capacity full: a cluster without the GPUs free is passed over for another region",
        [c("full", "r1", pool=8, held=8), c("room", "r2"), c("also", "r3", pool=4, held=3)],
        2,
        ["room", "also"],
    ),
    Case(
        "capacity counts every replica of the placement",
        [c("three-free", "r1", pool=8, held=5), c("plenty", "r2")],
        2,
        ["plenty"],
        replicas=4,
        missing="1 of 2 placements missing: only 1 value of the spread key has a cluster that "
        "can run it",
    ),
    Case(
        "one cluster lost: only its placement moves, the other stays",
        [c("aws-1", "aws/us-east-1"), c("gcp-2", "google/us-central1")],
        2,
        ["aws-1", "gcp-2"],
        current=["aws-1", "gcp-1"],
        kept=["aws-1"],
    ),
    Case(
        "sticky: a better cluster appearing moves nothing",
        [c("old", "r1", memory=H100), c("new-l4", "r1", memory=L4)],
        1,
        ["old"],
        current=["old"],
        kept=["old"],
    ),
    Case(
        "a moment not Ready moves nothing",
        [c("aws-1", "r1", problem="not Ready"), c("aws-2", "r1")],
        1,
        ["aws-1"],
        current=["aws-1"],
        kept=["aws-1"],
    ),
    Case(
        "a placement whose cluster fills up moves when another region has room",
        [c("aws-1", "r1", held=8), c("gcp-1", "r2")],
        1,
        ["gcp-1"],
        current=["aws-1"],
    ),
    Case(
        "a placement no other cluster can take stays where it is",
        [c("aws-1", "r1", held=8)],
        1,
        ["aws-1"],
        current=["aws-1"],
        kept=["aws-1"],
    ),
    Case(
        "relabelled into one region: the first placed stays, the other moves",
        [c("a", "r1"), c("b", "r1"), c("c", "r2")],
        2,
        ["a", "c"],
        current=["a", "b"],
        kept=["a"],
    ),
    Case(
        "fewer asked: the first placed stay",
        [c("a", "r1"), c("b", "r2"), c("c", "r3")],
        1,
        ["b"],
        current=["b", "a"],
        kept=["b"],
    ),
    Case(
        "more asked: the placements stay and new ones join",
        [c("a", "r1"), c("b", "r2"), c("c", "r3", memory=H100)],
        3,
        ["b", "a", "c"],
        current=["b"],
        kept=["b"],
    ),
    Case(
        "a cluster without a value of the spread key is no candidate",
        [c("unlabelled", None), c("labelled", "r1", memory=H100)],
        2,
        ["labelled"],
        missing="1 of 2 placements missing: only 1 value of the spread key has a cluster that "
        "can run it",
    ),
    Case(
        "no cluster matches",
        [],
        2,
        [],
        missing="2 of 2 placements missing: no cluster matches the selector",
    ),
    Case(
        "no matching cluster can run it",
        [c("tiny", "r1", memory=8), c("down", "r2", problem="being deleted")],
        1,
        [],
        missing="1 of 1 placement missing: no matching cluster can run it",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[x.id for x in CASES])
def test_spread(case: Case) -> None:
    decision = spread(case.candidates, size, case.replicas, case.asked, case.current)
    assert list(decision.clusters) == case.expected
    assert [p.cluster for p in decision.placed if p.kept] == case.kept
    assert decision.missing == case.missing
    values = [p.spread_value for p in decision.placed]
    assert len(values) == len(set(values)), "two placements share a spread value"


def test_only_the_lost_placement_moves_over_many_rounds() -> None:
    """Five regions, three placements: removing one chosen cluster at a time moves exactly
    that placement each time."""
    fleet = [c(f"r{i}-{j}", f"r{i}") for i in range(5) for j in range(2)]
    current = list(spread(fleet, size, 1, 3).clusters)
    assert current == ["r0-0", "r1-0", "r2-0"]
    for gone in ("r1-0", "r0-0", "r2-0"):
        fleet = [x for x in fleet if x.name != gone]
        after = list(spread(fleet, size, 1, 3, current).clusters)
        assert [x for x in current if x != gone] == [x for x in after if x in current]
        assert len(set(after) - set(current)) == 1
        current = after


def reasons(candidates: list[Candidate], asked: int, current: list[str] = ()) -> dict[str, str]:
    decision = spread(candidates, size, 1, asked, current)
    return {v.cluster: v.reason for v in explain(decision, candidates, size, why_not, 1)}


def test_every_candidate_has_its_reason() -> None:
    got = reasons(
        [
            c("chosen", "r1"),
            c("same-region", "r1", held=2),
            c("full", "r2", held=8),
            c("small", "r3", memory=8),
            c("down", "r4", problem="not Ready"),
            c("unlabelled", None),
            c("spare", "r5"),
        ],
        1,
    )
    assert got["chosen"].startswith("chosen: smallest GPU that fits")
    assert got["same-region"] == (
        "fits, but r1 already has a placement (chosen; at most one per value of the spread key)"
    )
    assert got["full"] == "needs 1 GPUs (1 x 1), 0 of 8 free"
    assert got["small"] == "8 GiB is too small"
    assert got["down"] == "not Ready"
    assert got["unlabelled"] == NO_SPREAD_VALUE
    assert got["spare"].startswith("fits, but the 1 placement asked for come first")


def test_a_kept_placement_says_so_and_a_moved_one_says_why() -> None:
    got = reasons([c("a", "r1"), c("b2", "r2")], 2, current=["a", "b"])
    assert got["a"] == STAY
    assert "placed again: b no longer matches the selector" in got["b2"]


SPREAD_VALUES = [
    ("a cloud cluster: its provider and the region it publishes",
     {"spec": {"parameters": {"provider": "aws"}}, "status": {"region": "us-east-1"}},
     "region", "aws/us-east-1"),
    ("the region it asks for, before it publishes one",
     {"spec": {"parameters": {"provider": "google", "region": "europe-west4"}}},
     "region", "google/europe-west4"),
    ("an existing or local cluster: the region label",
     {"metadata": {"labels": {"inference.devopstoolkit.ai/region": "dc-1"}},
      "spec": {"parameters": {"provider": "local"}}},
     "region", "local/dc-1"),
    ("no region at all: no value",
     {"spec": {"parameters": {"provider": "existing"}}}, "region", None),
    ("any other key is a label",
     {"metadata": {"labels": {"topology.kubernetes.io/zone": "us-east-1a"}},
      "status": {"region": "us-east-1"}},
     "topology.kubernetes.io/zone", "us-east-1a"),
    ("a cluster without that label: no value",
     {"status": {"region": "us-east-1"}}, "topology.kubernetes.io/zone", None),
    ("half-written objects never crash",
     {"metadata": {"labels": None}, "spec": {"parameters": "x"}, "status": {"region": 5}},
     "region", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cluster", "spread_by", "expected"),
    [s[1:] for s in SPREAD_VALUES],
    ids=[s[0] for s in SPREAD_VALUES],
)
def test_spread_value(cluster: dict, spread_by: str, expected: str | None) -> None:
    from function.cluster.place import spread_value

    assert spread_value(cluster, spread_by) == expected


def test_status_of_every_candidate_field_by_field() -> None:
    """status.placement.candidates as the claim shows it: chosen or not, GPUs per replica,
    free GPUs, spread value, for each kind of verdict (exactly full counts as fitting)."""
    candidates = [
        c("a-kept", "r1", pool=8, held=3, problem="not Ready"),
        c("b-exact", "r2", pool=4, held=2),  # 2 replicas x 1 GPU = exactly the 2 free
        c("c-short", "r3", pool=4, held=3),
        c("d-small", "r4", memory=8),
        c("e-down", "r5", problem="being deleted"),
        c("f-nolabel", None),
        c("g-same", "r2", pool=2),
        c("h-unpooled", "r6", pool=None),
        c("i-next", "r7", pool=2),
    ]
    decision = spread(candidates, size, 2, 3, ["a-kept"])
    assert decision.clusters == ("a-kept", "b-exact", "i-next")
    got = [v.as_status() for v in explain(decision, candidates, size, why_not, 2)]
    rule = "smallest GPU that fits, then most free GPUs, then name"
    assert got == [
        {"name": "a-kept", "chosen": True, "reason": STAY, "freeGPUs": 5, "spreadValue": "r1"},
        {
            "name": "b-exact",
            "chosen": True,
            "reason": f"chosen: {rule}",
            "gpusPerReplica": 1,
            "freeGPUs": 2,
            "spreadValue": "r2",
        },
        {
            "name": "i-next",
            "chosen": True,
            "reason": f"chosen: {rule}",
            "gpusPerReplica": 1,
            "freeGPUs": 2,
            "spreadValue": "r7",
        },
        {
            "name": "c-short",
            "chosen": False,
            "reason": "needs 2 GPUs (2 x 1), 1 of 4 free",
            "gpusPerReplica": 1,
            "freeGPUs": 1,
            "spreadValue": "r3",
        },
        {"name": "d-small", "chosen": False, "reason": "8 GiB is too small", "spreadValue": "r4"},
        {"name": "e-down", "chosen": False, "reason": "being deleted", "spreadValue": "r5"},
        {
            "name": "f-nolabel",
            "chosen": False,
            "reason": NO_SPREAD_VALUE,
            "gpusPerReplica": 1,
            "freeGPUs": 8,
        },
        {
            "name": "g-same",
            "chosen": False,
            "reason": "fits, but r2 already has a placement (b-exact; at most one per value of "
            "the spread key)",
            "gpusPerReplica": 1,
            "freeGPUs": 2,
            "spreadValue": "r2",
        },
        {
            "name": "h-unpooled",
            "chosen": False,
            "reason": f"fits, but the 3 placements asked for come first ({rule})",
            "gpusPerReplica": 1,
            "spreadValue": "r6",
        },
    ]


def test_a_fleet_being_filled_counts_what_it_took() -> None:
    """`held` overrides each candidate's own count (the bench fills a fleet this way)."""
    fleet = [c("a", "r1", pool=2), c("b", "r2", pool=2), c("c", "r3", pool=2)]
    assert spread(fleet, size, 1, 2).clusters == ("a", "b")
    taken = {"a": 2, "b": 1, "c": 0}
    assert spread(fleet, size, 1, 2, held=taken).clusters == ("c", "b")
    assert spread(fleet, size, 1, 1, ["a"], held=taken).clusters == ("c",)


def test_the_size_is_asked_of_each_cluster_shape() -> None:
    """What the sizer is asked: the cluster's GPU type, memory, GPUs per node and span."""
    asked: list[tuple] = []

    def record(gpu_type: str | None, memory: float, per_node: int, span: int = 1) -> int | None:
        asked.append((gpu_type, memory, per_node, span))
        return None

    one = Candidate("x", gpu_type="h100", memory_gib=H100, per_node=8, pool=16, span=2,
                    spread_value="r1")  # fmt: skip
    decision = spread([one], record, 1, 1)
    explain(decision, [one], record, lambda *a: str(a), 1)
    assert set(asked) == {("h100", H100, 8, 2)}
