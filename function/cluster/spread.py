"""Placement over several clusters (`placement: {clusters: N, spreadBy: region}`): pure
decisions over plain data, by the same stated rule as one placement (function/cluster/
placement.py) with one more constraint: at most one placement per value of the spread key.

1. Each placement the model has (its clusters, in the order they were placed) stays while its
   cluster still matches and can run the model (a moment not Ready counts as running), and its
   spread value is not already taken by an earlier one. Losing a cluster moves only its own
   placement.
2. The empty places are filled one by one with the first candidate by the rule (the smallest
   GPU that fits, then the most free GPUs, then the name) whose cluster and spread value are
   not yet used.
3. When fewer clusters can take the model than asked, what fits runs and `missing` says how
   many are missing and why.

Placements never share a cluster, so one placement never takes GPUs another counts on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from function.cluster.placement import RULE, Candidate, Sizer, Verdict, WhyNot, usable


@dataclass(frozen=True)
class Placed:
    cluster: str
    spread_value: str
    kept: bool  # it ran there before
    reason: str


@dataclass(frozen=True)
class Spread:
    placed: tuple[Placed, ...]
    asked: int
    missing: str | None  # None when every placement found a cluster

    @property
    def clusters(self) -> tuple[str, ...]:
        return tuple(p.cluster for p in self.placed)


def spread(
    candidates: Sequence[Candidate],
    size: Sizer,
    replicas: int,
    asked: int,
    current: Sequence[str] = (),
    held: Mapping[str, int] | None = None,
) -> Spread:
    """Choose up to `asked` clusters, at most one per `Candidate.spread_value`, for a model
    that needs `size(...)` GPUs per replica and at least `replicas` replicas on each; `current`
    lists the clusters it runs on now, first placed first; `held` overrides each candidate's
    `held` (a fleet being filled)."""
    size = _memo(size)  # many clusters share a GPU shape
    by_name = {c.name: c for c in candidates}
    placed: list[Placed] = []
    used_values: set[str] = set()
    lost: list[str] = []
    stuck: list[tuple[str, str]] = []  # (cluster, why) of placements that cannot stay
    for name in dict.fromkeys(current):
        c = by_name.get(name)
        if c is None:
            lost.append(f"{name} no longer matches the selector")
            continue
        if not usable(c, size, replicas, held):
            why = f"{name} can no longer run it ({c.problem or 'too little room'})"
            lost.append(why)
            stuck.append((name, why))
            continue
        if c.spread_value is None:
            why = f"{name} has no value of the spread key now"
            lost.append(why)
            stuck.append((name, why))
            continue
        if c.spread_value in used_values:
            lost.append(f"{name} shares {c.spread_value} with another placement")
            continue
        if len(placed) == asked:
            lost.append(f"{name} is beyond the {asked} asked for")
            continue
        placed.append(Placed(name, c.spread_value, True, STAY))
        used_values.add(c.spread_value)
    ranked = sorted(
        (key, c) for c in candidates if (key := rank(c, size, replicas, held)) is not None
    )
    moved = f" (placed again: {'; '.join(lost)})" if lost else ""
    for _, c in ranked:
        if len(placed) == asked:
            break
        if c.spread_value is None or c.spread_value in used_values:
            continue
        if any(p.cluster == c.name for p in placed):
            continue
        placed.append(Placed(c.name, c.spread_value, False, f"chosen: {RULE}{moved}"))
        used_values.add(c.spread_value)
    # Where no other cluster can take a placement whose cluster can no longer run it (but
    # still matches), it stays and says why, as one placement does.
    for name, why in stuck:
        value = by_name[name].spread_value
        if len(placed) < asked and value not in used_values:
            placed.append(Placed(name, value or "", True, f"{why}; no other cluster can, it stays"))
            if value is not None:
                used_values.add(value)
    missing = None
    if len(placed) < asked:
        short = asked - len(placed)
        fitting = {c.spread_value for _, c in ranked if c.spread_value is not None}
        if not candidates:
            why = "no cluster matches the selector"
        elif not ranked:
            why = "no matching cluster can run it"
        else:
            why = (
                f"only {len(fitting)} value{'s' if len(fitting) != 1 else ''} of the spread "
                f"key ha{'ve' if len(fitting) != 1 else 's'} a cluster that can run it"
            )
        missing = f"{short} of {asked} placement{'s' if asked != 1 else ''} missing: {why}"
    return Spread(tuple(placed), asked, missing)


def _memo(size: Sizer) -> Sizer:
    known: dict[tuple[str | None, float, int, int], int | None] = {}

    def sized(gpu_type: str | None, memory_gib: float, per_node: int, span: int = 1) -> int | None:
        shape = (gpu_type, memory_gib, per_node, span)
        if shape not in known:
            known[shape] = size(gpu_type, memory_gib, per_node, span)
        return known[shape]

    return sized


def rank(
    c: Candidate, size: Sizer, replicas: int, held: Mapping[str, int] | None = None
) -> tuple[float, int, str] | None:
    """The rule's key for a candidate that can take the model (None: it cannot)."""
    if c.problem:
        return None
    gpus = size(c.gpu_type, c.memory_gib, c.per_node, c.span)
    if gpus is None:
        return None
    if c.pool is None:
        return (c.memory_gib, 0, c.name)
    free = c.pool - (held[c.name] if held is not None else c.held)
    if gpus * replicas > free:
        return None
    return (c.memory_gib, -free, c.name)


def explain(
    decision: Spread,
    candidates: Sequence[Candidate],
    size: Sizer,
    why_not: WhyNot,
    replicas: int,
) -> tuple[Verdict, ...]:
    """Why each candidate was or was not chosen (status.placement.candidates)."""
    chosen = {p.cluster: p for p in decision.placed}
    holder = {p.spread_value: p.cluster for p in decision.placed}
    out = []
    for c in candidates:
        free = None if c.pool is None else max(0, c.pool - c.held)
        gpus = None if c.problem else size(c.gpu_type, c.memory_gib, c.per_node, c.span)
        here = chosen.get(c.name)
        if here is not None:
            out.append(Verdict(c.name, True, here.reason, gpus, free, c.spread_value))
        elif c.problem:
            out.append(Verdict(c.name, False, c.problem, spread_value=c.spread_value))
        elif gpus is None:
            reason = why_not(c.gpu_type, c.memory_gib, c.per_node, c.span)
            out.append(Verdict(c.name, False, reason, spread_value=c.spread_value))
        elif free is not None and gpus * replicas > free:
            need = gpus * replicas
            out.append(
                Verdict(
                    c.name,
                    False,
                    f"needs {need} GPUs ({replicas} x {gpus}), {free} of {c.pool} free",
                    gpus,
                    free,
                    c.spread_value,
                )
            )
        elif c.spread_value is None:
            out.append(Verdict(c.name, False, NO_SPREAD_VALUE, gpus, free))
        elif c.spread_value in holder:
            out.append(
                Verdict(
                    c.name,
                    False,
                    f"fits, but {c.spread_value} already has a placement "
                    f"({holder[c.spread_value]}; at most one per value of the spread key)",
                    gpus,
                    free,
                    c.spread_value,
                )
            )
        else:
            out.append(
                Verdict(
                    c.name,
                    False,
                    f"fits, but the {decision.asked} placement"
                    f"{'s' if decision.asked != 1 else ''} asked for come first ({RULE})",
                    gpus,
                    free,
                    c.spread_value,
                )
            )
    return tuple(sorted(out, key=lambda v: (not v.chosen, v.cluster)))


STAY = (
    "placed here before; a placement moves only when its cluster goes away or can no longer run it"
)
NO_SPREAD_VALUE = "fits, but has no value of the spread key"
