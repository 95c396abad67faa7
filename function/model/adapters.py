"""What the function knows about a claim's LoRA adapters, read the way model facts are: the
adapter's own `adapter_config.json` from the Hugging Face Hub (function/model/hub.py asks,
with its deadline, cache and offline switch), else the `rank` the claim states, else vLLM's
default rank with a warning. From them, the LoRA settings vLLM is started with.

adapter_config.json is PEFT's `LoraConfig` as saved (peft `PeftConfigMixin.save_pretrained`):
`r` (the rank), `target_modules` (a list, or a regular expression as a string),
`base_model_name_or_path` (the model it was trained on), `peft_type` (`LORA`). vLLM 0.17.1
reads the same file (vllm/lora/peft_helper.py `PEFTHelper.from_local_dir`) and refuses an
adapter whose `r` exceeds --max-lora-rank (`PEFTHelper.validate_legal`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from function.claim.adapters import Adapter
from function.claim.fields import SpecError
from function.limits import LORA_RANKS
from function.model.catalog import ModelFacts
from function.model.lora_memory import LoraShape

# vLLM 0.17.1's default --max-lora-rank (vllm/config/lora.py LoRAConfig.max_lora_rank): what an
# adapter whose rank nobody knows is planned with.
DEFAULT_RANK = 16


class AdapterConfigError(ValueError):
    """An adapter_config.json that does not describe a LoRA adapter."""


@dataclass(frozen=True)
class AdapterConfig:
    rank: int
    target_modules: tuple[str, ...]  # one entry, a regular expression, when PEFT saved one
    base_model: str | None


@dataclass(frozen=True)
class PlannedAdapter:
    name: str
    repo: str
    rank: int
    rank_source: str  # hub (adapter_config.json), claim (its rank), assumed (vLLM's default)
    base_model: str | None = None
    target_modules: tuple[str, ...] = ()

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "source": self.repo,
            "rank": self.rank,
            "rankSource": self.rank_source,
        }
        if self.base_model:
            out["baseModel"] = self.base_model
        if self.target_modules:
            out["targetModules"] = list(self.target_modules)
        return out


@dataclass(frozen=True)
class LoraPlan:
    """The adapters as vLLM serves them: every adapter static (--lora-modules), one GPU slot
    each (--max-loras), slots of the smallest rank vLLM accepts that holds the largest
    adapter (--max-lora-rank)."""

    adapters: tuple[PlannedAdapter, ...]
    max_rank: int

    @property
    def slots(self) -> int:
        return len(self.adapters)

    @property
    def shape(self) -> LoraShape:
        return LoraShape(max_loras=self.slots, max_rank=self.max_rank)


def read_config(doc: object) -> AdapterConfig:
    """An adapter_config.json as plain data (raises AdapterConfigError)."""
    if not isinstance(doc, Mapping):
        raise AdapterConfigError("adapter_config.json is not a JSON object")
    peft_type = doc.get("peft_type", "LORA")
    if peft_type != "LORA":
        raise AdapterConfigError(
            f"adapter_config.json has peft_type {peft_type!r}; vLLM serves LoRA adapters only"
        )
    rank = doc.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterConfigError(f"adapter_config.json has no LoRA rank r (found {rank!r})")
    modules = doc.get("target_modules")
    if isinstance(modules, str):
        targets: tuple[str, ...] = (modules,)
    elif isinstance(modules, list) and all(isinstance(m, str) for m in modules):
        targets = tuple(sorted(modules))
    else:
        targets = ()
    base = doc.get("base_model_name_or_path")
    return AdapterConfig(
        rank=rank, target_modules=targets, base_model=base if isinstance(base, str) else None
    )


def configs_from(answers: Mapping[str, Any]) -> dict[str, AdapterConfig | str]:
    """Each repository's adapter_config.json as the Hub answered (function/model/hub.py
    HubAnswer with `adapter_config`), or why it could not be read."""
    out: dict[str, AdapterConfig | str] = {}
    for repo, answer in answers.items():
        doc = getattr(answer, "adapter_config", None)
        if getattr(answer, "status", None) == "found" and doc is not None:
            try:
                out[repo] = read_config(doc)
            except AdapterConfigError as e:
                out[repo] = f"{repo}: {e}"
        else:
            out[repo] = getattr(answer, "message", "") or f"{repo}: not described by the Hub"
    return out


def max_lora_rank(rank: int) -> int | None:
    """The smallest --max-lora-rank vLLM 0.17.1 accepts that holds `rank` (None: none does)."""
    return next((r for r in LORA_RANKS if r >= rank), None)


def _same_model(base: str, model: str) -> bool:
    """Whether an adapter's base_model_name_or_path names the claim's model: the same Hub id,
    or a path or mirror id ending in the same repository name (training often ran from a
    local copy: /models/Qwen2.5-1.5B-Instruct)."""
    base_name = base.rstrip("/").rsplit("/", 1)[-1].lower()
    return base.lower() == model.lower() or base_name == model.rsplit("/", 1)[-1].lower()


def plan_adapters(
    adapters: tuple[Adapter, ...],
    model: str,
    facts: ModelFacts | None,
    configs: Mapping[str, AdapterConfig | str | None],
    warnings: list[str],
) -> LoraPlan | None:
    """The LoRA plan, or None without adapters. `configs`: per repository, its read
    adapter_config.json, or why it could not be read (a message), or None (not asked).
    Raises SpecError for an adapter that cannot be served on this model."""
    if not adapters:
        return None
    if facts is not None and facts.experts_per_token:
        raise SpecError(
            f"{adapters[0].field}.source",
            adapters[0].repo,
            f"{adapters[0].field}: {model} is a mixture-of-experts model; vLLM 0.17.1 keeps "
            "LoRA buffers per expert for it (vllm/lora/layers/fused_moe.py) that the function "
            "cannot size from what it knows of the model, so adapters are served on dense "
            "models only; merge the adapter into the weights, or use a dense base model",
        )
    planned: list[PlannedAdapter] = []
    for a in adapters:
        found = configs.get(a.repo)
        if isinstance(found, AdapterConfig):
            if found.base_model and not _same_model(found.base_model, model):
                raise SpecError(
                    f"{a.field}.source",
                    a.repo,
                    f"{a.field}.source: {a.repo} was trained on {found.base_model} "
                    f"(its adapter_config.json base_model_name_or_path), not on {model}; "
                    "an adapter only works on the model it was trained on: serve it on "
                    "that model, or choose an adapter of this one",
                )
            if a.rank is not None and a.rank != found.rank:
                warnings.append(
                    f"{a.field}.rank: {a.rank}, but {a.repo}'s adapter_config.json says r "
                    f"{found.rank}; planned with {found.rank}"
                )
            rank, source = found.rank, "hub"
            base, targets = found.base_model, found.target_modules
        else:
            base, targets = None, ()
            if a.rank is not None:
                rank, source = a.rank, "claim"
            else:
                rank, source = DEFAULT_RANK, "assumed"
                why = found if isinstance(found, str) else "its adapter_config.json was not read"
                warnings.append(
                    f"{a.field}: {why}; planned with rank {DEFAULT_RANK} (vLLM's default "
                    f"--max-lora-rank); vLLM refuses the adapter if its r is larger: state "
                    f"{a.field}.rank"
                )
        if max_lora_rank(rank) is None:
            raise SpecError(
                f"{a.field}.rank" if source == "claim" else f"{a.field}.source",
                rank if source == "claim" else a.repo,
                f"{a.field}: rank {rank} is above the largest LoRA rank vLLM 0.17.1 serves "
                f"({LORA_RANKS[-1]}, vllm/config/lora.py MaxLoRARanks); use an adapter of rank "
                f"{LORA_RANKS[-1]} or less",
            )
        planned.append(PlannedAdapter(a.name, a.repo, rank, source, base, targets))
    top = max(p.rank for p in planned)
    return LoraPlan(adapters=tuple(planned), max_rank=max_lora_rank(top) or LORA_RANKS[-1])


def lora_status(lora: LoraPlan, gib_per_gpu: float | None) -> dict[str, Any]:
    """status.plan.adapters: the adapters, the rank and slots vLLM reserves, their memory."""
    out: dict[str, Any] = {
        "names": [a.name for a in lora.adapters],
        "maxLoraRank": lora.max_rank,
        "slots": lora.slots,
        "loading": "static",
        "adapters": [a.status() for a in lora.adapters],
    }
    if gib_per_gpu is not None:
        out["gibPerGPU"] = round(gib_per_gpu, 3)
    return out
