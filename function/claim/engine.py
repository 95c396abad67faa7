"""``spec.parameters.engine`` -> EngineOverrides: the image, the context length, extraArgs
(checked as vLLM's parser, or the inference simulator's, reads them), env, simulate, and the
settings the memory model reads from extraArgs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from function.claim.fields import (
    DNS_SUBDOMAIN,
    P,
    SecretRef,
    SpecError,
    boolean,
    secret_ref,
    short,
)
from function.limits import MAX_ENV, MAX_EXTRA_ARGS, MAX_PULL_SECRETS
from function.policy import engine_args, vllm_cli
from function.policy import simulator_cli as simulator

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A Hugging Face revision: a branch, tag or commit (no spaces, no path tricks).
REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# engine.shm: whole Mi or Gi, as the schema's pattern has it.
SHM = re.compile(r"^([1-9][0-9]*)(Mi|Gi)$")
# --kv-cache-dtype values vLLM 0.17.1 accepts on CUDA (vllm/config/cache.py CacheDType).
KV_CACHE_DTYPES = ("auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2")


@dataclass(frozen=True)
class EngineOverrides:
    image: str | None = None
    max_model_len: int | None = None
    extra_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # --max-model-len given in extra_args (a whole number of tokens), which vLLM then uses.
    extra_max_model_len: int | None = None
    # Settings the memory model depends on, when extra_args set them (vLLM reads the last).
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    revision: str | None = None
    # Run llm-d's inference simulator instead of vLLM (no GPU; extra_args go to it).
    simulate: bool = False
    # engine.shm: the /dev/shm the claim asks for, in MiB (None: the plan's).
    shm_mib: int | None = None
    # engine.env items read from a Secret of the claim's namespace: (index in env, variable,
    # Secret and key). Never a value: the pods read them.
    secret_env: tuple[tuple[int, str, SecretRef], ...] = ()
    # engine.imagePullSecrets: registry credentials of the claim's namespace, by name.
    image_pull_secrets: tuple[str, ...] = ()

    @property
    def context(self) -> int | None:
        """The context length the claim asks for, by field or by argument."""
        return self.max_model_len or self.extra_max_model_len


def parse_engine(params: dict) -> EngineOverrides:
    engine = params.get("engine")
    if engine is None:
        return EngineOverrides()
    f = f"{P}.engine"
    if not isinstance(engine, dict):
        raise SpecError(
            f, engine, f"{f} must be an object (image, maxModelLen, extraArgs, env, simulate)"
        )
    image = engine.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip() or " " in image):
        raise SpecError(f"{f}.image", image, f"{f}.image: {short(image)} is not an image reference")
    if isinstance(image, str) and "/" not in image:
        raise SpecError(
            f"{f}.image",
            image,
            f"{f}.image: {image} needs a registry and repository, e.g. "
            "docker.io/lmcache/vllm-openai:<tag>",
        )
    max_len = engine.get("maxModelLen")
    if isinstance(max_len, float) and max_len.is_integer():
        max_len = int(max_len)
    if max_len is not None and (
        isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 128
    ):
        raise SpecError(
            f"{f}.maxModelLen",
            max_len,
            f"{f}.maxModelLen: {short(max_len)} is not a context length; use a whole number "
            "of tokens, at least 128",
        )
    args = engine.get("extraArgs") or []
    if not isinstance(args, list) or not all(isinstance(a, str) and a for a in args):
        raise SpecError(f"{f}.extraArgs", args, f"{f}.extraArgs must be a list of strings")
    if len(args) > MAX_EXTRA_ARGS:
        raise SpecError(
            f"{f}.extraArgs",
            len(args),
            f"{f}.extraArgs holds {len(args)} arguments; at most {MAX_EXTRA_ARGS}",
        )
    env_items = engine.get("env") or []
    env: list[tuple[str, str]] = []
    if not isinstance(env_items, list) or len(env_items) > MAX_ENV:
        raise SpecError(
            f"{f}.env",
            env_items,
            f"{f}.env must be a list of at most {MAX_ENV} {{name, value}}",
        )
    secret_env: list[tuple[int, str, SecretRef]] = []
    checked: list[tuple[str, str]] = []  # every item, a Secret's as an empty value
    for i, item in enumerate(env_items):
        name = item.get("name") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if isinstance(item, dict) and "valueFrom" in item:
            secret_env.append((i, name, _secret_key_ref(item, f"{f}.env[{i}]")))
            value = ""  # checked below as a variable with no literal value
        if not isinstance(item, dict):
            raise SpecError(
                f"{f}.env[{i}]",
                item,
                f"{f}.env[{i}]: {short(item)} must be {{name, value}}, e.g. "
                "{name: VLLM_LOGGING_LEVEL, value: DEBUG}",
            )
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise SpecError(
                f"{f}.env[{i}].name",
                name,
                f"{f}.env[{i}].name: {short(name)} is not a variable name; use letters, digits "
                "and _ (not starting with a digit), e.g. VLLM_LOGGING_LEVEL",
            )
        if not isinstance(value, str):
            raise SpecError(
                f"{f}.env[{i}].value",
                value,
                f"{f}.env[{i}].value: {name} needs a string value (quote numbers and booleans)",
            )
        checked.append((name, value))
        if "valueFrom" not in item:
            env.append((name, value))
    from_secrets = frozenset(i for i, _, _ in secret_env)
    simulate = boolean(engine, "simulate", f"{f}.simulate")
    shm = engine.get("shm")
    shm_match = SHM.match(shm) if isinstance(shm, str) else None
    if shm is not None and shm_match is None:
        raise SpecError(
            f"{f}.shm",
            shm,
            f"{f}.shm: {short(shm)} is not a size; use whole Mi or Gi, e.g. 8Gi",
        )
    if simulate:
        # extraArgs go to the inference simulator; the variables are checked as for vLLM.
        found = simulator.problems(args) + engine_args.problems(
            [], checked, max_model_len_field=False, from_secrets=from_secrets
        )
        if image is not None:
            raise SpecError(
                f"{f}.image",
                image,
                f"{f}.image: applies to vLLM; with {f}.simulate the function runs the "
                "inference simulator it pins (kcl/versions.k)",
            )
    else:
        found = engine_args.problems(
            args, checked, max_model_len_field=max_len is not None, from_secrets=from_secrets
        )
        if not found:
            # What vLLM's own parser would refuse at start (function/policy/vllm_cli.py).
            found = [
                engine_args.Problem(
                    f"{f}.extraArgs",
                    f"{f}.extraArgs: vLLM {vllm_cli.VERSION}'s parser would refuse them, so the "
                    f"engine would not start: {problem}",
                )
                for problem in vllm_cli.problems(args)
            ]
    if found:
        raise SpecError(found[0].field, None, "; ".join(p.message for p in found))
    given = engine_args.last_value(args, engine_args.MAX_MODEL_LEN)
    given_len = engine_args.human_int(given) if given is not None else None
    return EngineOverrides(
        image=image,
        max_model_len=max_len,
        extra_args=tuple(args),
        env=tuple(env),
        extra_max_model_len=given_len if given_len and given_len > 0 else None,
        simulate=simulate,
        secret_env=tuple(secret_env),
        image_pull_secrets=_pull_secrets(engine.get("imagePullSecrets"), f"{f}.imagePullSecrets"),
        shm_mib=int(shm_match[1]) * (1024 if shm_match[2] == "Gi" else 1) if shm_match else None,
        **_memory_settings(args),
    )


def _memory_settings(args: list[str]) -> dict[str, Any]:
    """The extraArgs the memory model reads, checked the way vLLM's parser checks them."""
    where = f"{P}.engine.extraArgs"
    out: dict[str, Any] = {}
    util = engine_args.last_value(args, "--gpu-memory-utilization")
    if util is not None:
        try:
            value = float(util)
        except ValueError:
            value = -1.0
        if not 0 < value <= 1:
            raise SpecError(
                where,
                util,
                f"{where}: --gpu-memory-utilization {util!r} is not a fraction of the GPU's "
                "memory; use a number above 0 and at most 1, e.g. 0.95",
            )
        out["gpu_memory_utilization"] = value
    dtype = engine_args.last_value(args, "--kv-cache-dtype")
    if dtype is not None:
        if dtype not in KV_CACHE_DTYPES:
            raise SpecError(
                where,
                dtype,
                f"{where}: --kv-cache-dtype {dtype!r} is not one vLLM offers on NVIDIA GPUs; "
                f"use one of {', '.join(KV_CACHE_DTYPES)}",
            )
        out["kv_cache_dtype"] = dtype
    for flag, key in (
        ("--max-num-batched-tokens", "max_num_batched_tokens"),
        ("--max-num-seqs", "max_num_seqs"),
    ):
        given = engine_args.last_value(args, flag)
        if given is None:
            continue
        number = engine_args.human_int(given)
        if number is None or number < 1:
            raise SpecError(
                where, given, f"{where}: {flag} {given!r} is not a whole number above 0"
            )
        out[key] = number
    revision = engine_args.last_value(args, "--revision")
    if revision is not None:
        if not REVISION.match(revision):
            raise SpecError(
                where,
                revision,
                f"{where}: --revision {revision!r} is not a branch, tag or commit of the model "
                "repository",
            )
        out["revision"] = revision
    return out


def _secret_key_ref(item: dict[str, Any], f: str) -> SecretRef:
    """env[i].valueFrom: a secretKeyRef (name and key) only, with no literal value beside it."""
    source = item.get("valueFrom")
    ref = source.get("secretKeyRef") if isinstance(source, dict) else None
    if "value" in item or not isinstance(ref, dict) or set(source) != {"secretKeyRef"}:
        raise SpecError(
            f"{f}.valueFrom",
            source,
            f"{f}: a variable has a value or valueFrom.secretKeyRef {{name, key}} (a Secret "
            "of the claim's namespace), nothing else",
        )
    # The key has no default here: the schema requires it, and "" is no Secret key.
    found = secret_ref(source, "secretKeyRef", "", where=f"{f}.valueFrom")
    assert found is not None  # checked above
    return found


def _pull_secrets(items: Any, f: str) -> tuple[str, ...]:
    if items is None:
        return ()
    if not isinstance(items, list) or len(items) > MAX_PULL_SECRETS:
        raise SpecError(
            f, items, f"{f} must be a list of at most {MAX_PULL_SECRETS} {{name}} of Secrets"
        )
    names: list[str] = []
    for i, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
            raise SpecError(
                f"{f}[{i}].name",
                name,
                f"{f}[{i}].name: {short(name)} is not the name of a Secret of the claim's "
                "namespace",
            )
        if name in names:
            raise SpecError(f"{f}[{i}].name", name, f"{f}[{i}].name: {name} is listed twice")
        names.append(name)
    return tuple(names)
