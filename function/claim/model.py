"""The model a claim serves: ``model`` (its Hugging Face id), ``gpu``, ``parallelism`` and
``aliases`` (the other names it answers to)."""

from __future__ import annotations

from function.claim.fields import P, SpecError, boolean, int_in, short
from function.limits import (
    ALIAS,
    ALIAS_MAX_ITEMS,
    ALIAS_MAX_LENGTH,
    HF_MODEL_ID,
    HF_MODEL_ID_MAX_PART,
    MAX_GPUS_MULTI_NODE,
)


def parse_model(params: dict) -> str:
    value = params.get("model")
    if value is None or value == "":
        raise SpecError(
            f"{P}.model",
            value,
            f"{P}.model is required: a Hugging Face model id such as Qwen/Qwen2.5-1.5B-Instruct",
        )
    if (
        not isinstance(value, str)
        or not HF_MODEL_ID.match(value)
        or any(len(part) > HF_MODEL_ID_MAX_PART for part in value.split("/"))
    ):
        raise SpecError(
            f"{P}.model",
            value,
            f"{P}.model: {short(value)} is not a Hugging Face model id; write it as org/name, "
            "e.g. Qwen/Qwen2.5-1.5B-Instruct",
        )
    return value


def parse_gpu(params: dict) -> int | None:
    value = params.get("gpu")
    if value is None:
        return None
    number = int_in(value, 1, MAX_GPUS_MULTI_NODE)  # 2.0 is 2; 2.5 and bools are not
    if number is None:
        raise SpecError(
            f"{P}.gpu",
            value,
            f"{P}.gpu: {short(value)} is not a GPU count; use a whole number from 1 to "
            f"{MAX_GPUS_MULTI_NODE} (above a node's GPUs, whole nodes of a cluster with "
            "apps.lws), or omit it to let the function choose",
        )
    return number


def parse_expert_parallel(params: dict) -> bool | None:
    """spec.parameters.parallelism.expert: True or False, None when not given."""
    section = params.get("parallelism")
    if section is None:
        return None
    f = f"{P}.parallelism"
    if not isinstance(section, dict):
        raise SpecError(f, section, f"{f} must be an object with `expert: true` or `false`")
    if section.get("expert") is None:
        return None
    return boolean(section, "expert", f"{f}.expert")


def parse_aliases(params: dict) -> tuple[str, ...]:
    value = params.get("aliases")
    if value is None:
        return ()
    f = f"{P}.aliases"
    if not isinstance(value, list) or len(value) > ALIAS_MAX_ITEMS:
        raise SpecError(f, value, f"{f} must be a list of at most {ALIAS_MAX_ITEMS} names")
    out: list[str] = []
    for i, alias in enumerate(value):
        if not isinstance(alias, str) or len(alias) > ALIAS_MAX_LENGTH or not ALIAS.match(alias):
            raise SpecError(
                f"{f}[{i}]",
                alias,
                f"{f}[{i}]: {short(alias)} is not a model name; use letters, digits and . _ : "
                f"/ -, starting and ending with a letter or digit, at most {ALIAS_MAX_LENGTH} "
                "characters (e.g. qwen-small)",
            )
        if alias == params.get("model") or alias in out:
            raise SpecError(
                f"{f}[{i}]",
                alias,
                f"{f}[{i}]: {alias} is already a name of this model; list each alias once, "
                f"and not {P}.model itself",
            )
        out.append(alias)
    return tuple(out)
