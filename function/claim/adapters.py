"""spec.parameters.adapters: LoRA adapters served beside the base model, each under its own
name. No field, no LoRA: the engine gets no LoRA flag at all.

Each adapter is `{name, source, rank?}`:

- `name`: what a request's `model` says to use the adapter (vLLM `--lora-modules name=...`);
  the same characters as an alias, and unique among the model's names;
- `source`: a Hugging Face repository id (`org/name`), or its Hub URL
  (`https://huggingface.co/org/name`), which is read as that id. vLLM 0.17.1 loads an
  adapter from a local path or a Hub repository only (vllm/lora/utils.py
  `get_adapter_absolute_path`), so no other URL is accepted;
- `rank`: the adapter's LoRA rank `r`, when its adapter_config.json cannot be read (a private
  repository the function's token cannot see); the recorded or fetched config wins when it
  disagrees, with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from function.claim.fields import P, SpecError, int_in, short
from function.limits import (
    ADAPTER_MAX_ITEMS,
    ADAPTER_SOURCE_MAX_LENGTH,
    ADAPTER_URL,
    ALIAS,
    ALIAS_MAX_LENGTH,
    HF_MODEL_ID,
    HF_MODEL_ID_MAX_PART,
    HUB_URL_PREFIX,
    LORA_RANKS,
)

F = f"{P}.adapters"


@dataclass(frozen=True)
class Adapter:
    """One adapter: the name it is served under, its Hub repository, the rank the claim
    states (None: read from its adapter_config.json)."""

    name: str
    repo: str
    rank: int | None = None
    index: int = 0  # its place in spec.parameters.adapters, for messages

    @property
    def field(self) -> str:
        return f"{F}[{self.index}]"


def repo_of(source: str) -> str | None:
    """The Hub repository a source names (an id, or the Hub URL of one); None otherwise."""
    repo = source
    if source.startswith(HUB_URL_PREFIX):
        if not ADAPTER_URL.match(source):
            return None
        repo = source[len(HUB_URL_PREFIX) :].rstrip("/")
    if not HF_MODEL_ID.match(repo) or any(len(p) > HF_MODEL_ID_MAX_PART for p in repo.split("/")):
        return None
    return repo


def parse_adapters(params: dict) -> tuple[Adapter, ...]:
    value = params.get("adapters")
    if value is None:
        return ()
    if not isinstance(value, list) or not 1 <= len(value) <= ADAPTER_MAX_ITEMS:
        raise SpecError(
            F,
            value,
            f"{F} must be a list of 1 to {ADAPTER_MAX_ITEMS} adapters ({{name, source}}); "
            "remove the field to serve no adapter",
        )
    model = params.get("model")
    aliases = params.get("aliases") if isinstance(params.get("aliases"), list) else []
    out: list[Adapter] = []
    for i, item in enumerate(value):
        f = f"{F}[{i}]"
        if not isinstance(item, dict):
            raise SpecError(f, item, f"{f} must be an object with name and source")
        unknown = sorted(str(k) for k in item if k not in ("name", "source", "rank"))
        if unknown:
            raise SpecError(
                f, unknown, f"{f}: {', '.join(unknown)} is not a field (name, source, rank)"
            )
        name = item.get("name")
        if not isinstance(name, str) or len(name) > ALIAS_MAX_LENGTH or not ALIAS.match(name):
            raise SpecError(
                f"{f}.name",
                name,
                f"{f}.name: {short(name)} is not a model name; use letters, digits and . _ : / "
                f"-, starting and ending with a letter or digit, at most {ALIAS_MAX_LENGTH} "
                "characters (e.g. qwen-sql)",
            )
        if name == model or name in aliases:
            raise SpecError(
                f"{f}.name",
                name,
                f"{f}.name: {name} is already a name of the base model ({P}.model or "
                f"{P}.aliases); a request naming it would get the base model, not the "
                "adapter: choose another name",
            )
        if any(a.name == name for a in out):
            raise SpecError(
                f"{f}.name",
                name,
                f"{f}.name: {name} names two adapters; each adapter needs its own name",
            )
        source = item.get("source")
        repo = (
            repo_of(source)
            if isinstance(source, str) and len(source) <= ADAPTER_SOURCE_MAX_LENGTH
            else None
        )
        if repo is None:
            raise SpecError(
                f"{f}.source",
                source,
                f"{f}.source: {short(source)} is not a Hugging Face repository; write its id "
                "(org/name, e.g. Tech-Lead/qwen-sql-lora) or its URL "
                f"({HUB_URL_PREFIX}org/name): vLLM 0.17.1 loads adapters from the Hub only",
            )
        if any(a.repo.lower() == repo.lower() for a in out):
            raise SpecError(
                f"{f}.source",
                source,
                f"{f}.source: {repo} is already served as "
                f"{next(a.name for a in out if a.repo.lower() == repo.lower())}; serve each "
                "adapter once (a second name would take a second LoRA slot of GPU memory)",
            )
        rank = None
        if item.get("rank") is not None:
            rank = int_in(item["rank"], 1, LORA_RANKS[-1])
            if rank is None:
                raise SpecError(
                    f"{f}.rank",
                    item["rank"],
                    f"{f}.rank: {short(item['rank'])} is not a LoRA rank vLLM 0.17.1 serves; "
                    f"use a whole number from 1 to {LORA_RANKS[-1]} (the adapter's `r`)",
                )
        out.append(Adapter(name=name, repo=repo, rank=rank, index=i))
    return tuple(out)
