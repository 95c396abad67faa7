"""What the catalog answers: a model id's entry (or the catalog id it is most likely a typo
of), an architecture's rule and family, facts built from a catalog-shaped entry; ``resolve``
falls back to ``function/model/name_estimate.py``."""

from __future__ import annotations

import functools
import re
from typing import Any

from function.model.catalog import TASKS, ModelFacts, Task
from function.model.catalog_loader import ArchRule, Rules, build_model, default_catalog
from function.model.name_estimate import estimate_from_name


def catalog_ids() -> list[str]:
    """Canonical ids of every catalog entry, in file order."""
    return list(default_catalog().ids)


def lookup(model_id: str) -> ModelFacts | None:
    """The catalog entry for a Hugging Face id (case-insensitive; aliases count), or None."""
    if not isinstance(model_id, str):
        return None
    return default_catalog().models.get(model_id.strip().lower())


# An id at most this many single-character edits from a catalog id, with the same numbers in
# it, is most likely a typo of it (`Qwen2.5-1.5B-Instrut`). Numbers are versions and sizes:
# `Llama-3.2-1B-Instruct` is 2 edits from `Llama-3.1-8B-Instruct` and another model.
NEAR_EDITS = 2
_NUMBERS = re.compile(r"[0-9]+")


def near_id(model_id: str) -> str | None:
    """The catalog id `model_id` is at most NEAR_EDITS edits from (case-insensitive), when it
    is not one itself: the closest, the first in the catalog on a tie."""
    if not isinstance(model_id, str) or lookup(model_id) is not None:
        return None
    return _near_id(model_id.strip().lower())


@functools.lru_cache(maxsize=1024)
def _near_id(given: str) -> str | None:
    best: tuple[int, str] | None = None
    for canonical in default_catalog().ids:
        candidate = canonical.lower()
        if abs(len(candidate) - len(given)) > NEAR_EDITS:
            continue
        if _NUMBERS.findall(candidate) != _NUMBERS.findall(given):
            continue
        d = _edits(given, candidate, NEAR_EDITS)
        if d <= NEAR_EDITS and (best is None or d < best[0]):
            best = (d, canonical)
    return best[1] if best else None


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of a and b, or limit + 1 once it must exceed limit."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


def arch_rule(architecture: str) -> ArchRule:
    """How vLLM serves `architecture` (catalog.yaml architectures)."""
    c = default_catalog()
    return Rules(c.classes, c.suffixes).rule(architecture)


def family_for(model_id: str, architecture: str) -> str | None:
    """The catalog family a model of `architecture` belongs to: among the families that list
    the architecture, the one whose `match` prefix is the longest prefix of the id, else one
    that matches any id of the architecture (no `match`). An id prefix alone never decides:
    `deepseek-ai/DeepSeek-R1-Distill-Qwen-7B` is a Qwen2ForCausalLM, not a DeepSeek-V3."""
    low = model_id.strip().lower()
    best: tuple[int, str] | None = None
    for family in default_catalog().families:
        if architecture not in family.architectures:
            continue
        if not family.match:
            best = best or (0, family.name)
        for prefix in family.match:
            if low.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), family.name)
    return best[1] if best else None


def family_task(family: str) -> Task | None:
    """The task a family states for all its models, if it states one."""
    task = default_catalog().family_data.get(family, {}).get("task")
    return task if task in TASKS else None


@functools.cache
def known_architectures() -> frozenset[str]:
    """Every architecture the catalog names, in a family or among its rules."""
    c = default_catalog()
    return frozenset(c.classes) | frozenset(a for f in c.families for a in f.architectures)


def build(family: str | None, entry: dict[str, Any]) -> ModelFacts:
    """Facts of a model described by a catalog-shaped entry (the Hub reader's output), with
    the defaults of `family` (None: none). CatalogError when the entry cannot be sized."""
    c = default_catalog()
    fam = dict(c.family_data.get(family, {})) if family else {}
    fam.pop("sources", None)
    return build_model(family or "unknown", fam, entry, Rules(c.classes, c.suffixes))


def resolve(model_id: str) -> ModelFacts | None:
    """``lookup``, else ``estimate_from_name``."""
    return lookup(model_id) or estimate_from_name(model_id)
