"""Placement: which of the InferenceClusters a claim's `clusterSelector` matches runs it.

Pure decisions over plain data. A cluster is a candidate when it is Ready, runs the claim's
backend (the vLLM Production Stack, or llm-d), has a GPU that can hold the model (the
function's own sizing for that GPU: an llm-d replica on one node, a disaggregated model as
all its prefill and decode pods at once), and has the GPUs free for the model's smallest
count of replicas: its pool
(`gpu.maxNodes x gpu.perNode`) less what the models placed there hold (function/cluster/peers.py,
as the GPU budget counts them). Among candidates the rule is stated and deterministic:

1. the smallest GPU that fits (less memory per GPU first: keep large GPUs for large models),
2. then the most free GPUs,
3. then the cluster's name.

Placement is sticky: once placed (status.placement.cluster), a model stays on its cluster
until that cluster goes away (no longer matches the selector) or can no longer run it (the
claim changed so that it does not fit there, the cluster lost vLLM or its GPUs); a better
cluster appearing later, a moment not Ready, or an edit it still fits moves nothing. Where
no other cluster can take it, it stays and says why. `status.placement` lists every
matching cluster with the reason it was or was not chosen.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RULE = "smallest GPU that fits, then most free GPUs, then name"


@dataclass(frozen=True)
class Candidate:
    """One InferenceCluster as placement sees it. `problem` says why it cannot take any
    model (not Ready, no vLLM...), None when it can."""

    name: str
    problem: str | None = None
    gpu_type: str | None = None
    memory_gib: float = 0.0
    per_node: int = 0
    pool: int | None = None  # maxNodes x perNode; None: not published
    held: int = 0  # GPUs the models placed there hold
    span: int = 1  # nodes one replica may span there (apps.lws: its maxNodes)
    # Its value of the key placements spread by (function/cluster/spread.py); None: none.
    spread_value: str | None = None


@dataclass(frozen=True)
class Verdict:
    cluster: str
    chosen: bool
    reason: str
    gpus_per_replica: int | None = None
    free: int | None = None
    spread_value: str | None = None

    def as_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.cluster, "chosen": self.chosen, "reason": self.reason}
        if self.gpus_per_replica is not None:
            out["gpusPerReplica"] = self.gpus_per_replica
        if self.free is not None:
            out["freeGPUs"] = self.free
        if self.spread_value is not None:
            out["spreadValue"] = self.spread_value
        return out


@dataclass(frozen=True)
class Decision:
    cluster: str | None
    reason: str
    # What was asked, for `explain`.
    replicas: int = 1
    current: str | None = None
    kept: bool = False  # stayed where it runs


# What a model needs of a GPU shape (type, GiB per GPU, GPUs per node, nodes a replica may
# span): GPUs per replica, None when it does not fit; and why it does not (`explain` only).
Sizer = Callable[[str | None, float, int, int], int | None]
WhyNot = Callable[[str | None, float, int, int], str]


def place(
    candidates: Sequence[Candidate],
    size: Sizer,
    replicas: int,
    current: str | None = None,
    held: Mapping[str, int] | None = None,
) -> Decision:
    """Choose a cluster for a model that needs `size(gpu type, GiB per GPU, GPUs per node)`
    GPUs per replica and at least `replicas` replicas; `current` is where it runs now (kept
    while it still matches); `held` overrides each candidate's `held` (a fleet being
    filled). `explain` says why for each candidate."""
    here = next((c for c in candidates if c.name == current), None)
    if here is not None and _usable(here, size, replicas, held):
        return Decision(current, STAY, replicas, current, kept=True)
    best: tuple[float, int, str] | None = None
    for c in candidates:
        if c.problem:
            continue
        gpus = size(c.gpu_type, c.memory_gib, c.per_node, c.span)
        if gpus is None:
            continue
        if c.pool is not None:
            free = c.pool - (held[c.name] if held is not None else c.held)
            if gpus * replicas > free:
                continue
            key = (c.memory_gib, -free, c.name)
        else:
            key = (c.memory_gib, 0, c.name)
        if best is None or key < best:
            best = key
    if here is not None:
        lost = f"{current} can no longer run it"
    else:
        lost = f"{current} no longer matches the selector" if current else ""
    if best is None:
        if here is not None:
            # Nowhere better to go: it stays, and the reason says what is wrong there.
            return Decision(
                current,
                f"{lost} ({here.problem or 'too little room'}) and no other matching cluster "
                "can; it stays",
                replicas,
                current,
                kept=True,
            )
        what = "no matching cluster can run it" if candidates else "no cluster matches"
        return Decision(None, f"{lost}; {what}" if lost else what, replicas, current)
    chosen = best[2]
    reason = f"{chosen}: {RULE}" + (f" ({lost})" if lost else "")
    return Decision(chosen, reason, replicas, current)


def explain(
    decision: Decision,
    candidates: Sequence[Candidate],
    size: Sizer,
    why_not: WhyNot,
    held: Mapping[str, int] | None = None,
) -> tuple[Verdict, ...]:
    """Why each candidate was or was not chosen (status.placement.candidates)."""
    chosen = decision.cluster
    out = []
    for c in candidates:
        c_held = held[c.name] if held is not None else c.held
        free = None if c.pool is None else max(0, c.pool - c_held)
        if decision.kept:
            if c.name == chosen:
                out.append(Verdict(c.name, True, decision.reason, free=free))
            else:
                out.append(
                    Verdict(c.name, False, f"the model runs on {chosen}, which still matches")
                )
            continue
        if c.problem:
            out.append(Verdict(c.name, False, c.problem))
            continue
        gpus = size(c.gpu_type, c.memory_gib, c.per_node, c.span)
        if gpus is None:
            out.append(
                Verdict(c.name, False, why_not(c.gpu_type, c.memory_gib, c.per_node, c.span))
            )
            continue
        need = gpus * decision.replicas
        if free is not None and need > free:
            out.append(
                Verdict(
                    c.name,
                    False,
                    f"needs {need} GPUs ({decision.replicas} x {gpus}), {free} of {c.pool} free",
                    gpus,
                    free,
                )
            )
        elif c.name == chosen:
            out.append(Verdict(c.name, True, f"chosen: {RULE}", gpus, free))
        else:
            out.append(
                Verdict(c.name, False, f"fits, but {chosen} comes first ({RULE})", gpus, free)
            )
    return tuple(sorted(out, key=_order))


STAY = "placed here before; a model moves only when its cluster goes away or can no longer run it"


def usable(c: Candidate, size: Sizer, replicas: int, held: Mapping[str, int] | None = None) -> bool:
    """Whether the cluster a model runs on can still run `replicas` of it (a moment not
    Ready counts as running)."""
    return _usable(c, size, replicas, held)


def _usable(c: Candidate, size: Sizer, replicas: int, held: Mapping[str, int] | None) -> bool:
    """Whether the cluster a model runs on can still run it (a moment not Ready counts)."""
    if c.problem and c.problem != "not Ready":
        return False
    gpus = size(c.gpu_type, c.memory_gib, c.per_node, c.span)
    if gpus is None:
        return False
    if c.pool is None:
        return True
    return gpus * replicas <= c.pool - (held[c.name] if held is not None else c.held)


def _free(c: Candidate) -> int | None:
    return None if c.pool is None else max(0, c.pool - c.held)


def _order(v: Verdict) -> tuple[bool, str]:
    return (not v.chosen, v.cluster)


def claim_hash(params: Mapping[str, Any]) -> str:
    """A digest of what placement depends on in spec.parameters: a change re-places."""
    keys = ("model", "gpu", "replicas", "autoscaling", "clusterSelector", "engine")
    relevant = {k: params.get(k) for k in keys}
    engine = relevant.get("engine")
    relevant["engine"] = isinstance(engine, Mapping) and engine.get("simulate") is True
    data = json.dumps(relevant, sort_keys=True, default=str).encode()
    return hashlib.sha256(data).hexdigest()[:12]
