"""Engine arguments and variables a claim may not set: read the way vLLM reads them.

vLLM's `FlexibleArgumentParser` (vllm/utils/argparse_utils.py) accepts, for the same
option: dashes or underscores after `--` (`--tensor_parallel_size`), `--flag=value`,
dotted JSON keys (`--flag.key value`), the short aliases its engine arguments declare (`-tp`,
`-pp`, `-dp`, `-dpl`), argparse's unambiguous prefixes (`--tensor-parallel 4`), arguments
pulled from a YAML file (`--config`), and `--model` moved in front of the served model. A
guard on spelled-out flags alone is bypassed by any of these; `problems` reads every form.

What the claim owns elsewhere is refused with the field that owns it; a credential written
as a literal (a flag that takes one, a variable named like one, a value shaped like one) is
refused because everything in `extraArgs` and `env` is readable in the LLMInference, its
VLLMRuntime and its status. No message repeats the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from function.limits import RESERVED_ENV_PREFIXES

P = "spec.parameters"

# vLLM EngineArgs short aliases (vllm/engine/arg_utils.py `add_cli_args`).
ALIASES = {
    "-tp": "--tensor-parallel-size",
    "-pp": "--pipeline-parallel-size",
    "-dp": "--data-parallel-size",
    "-dpl": "--data-parallel-size-local",
    "-ep": "--enable-expert-parallel",
    "-n": "--nnodes",
    "-r": "--node-rank",
}

_SINGLE_NODE = (
    f"{P}.gpu",
    f"the function splits a replica's {P}.gpu GPUs: tensor parallel inside a node, a pipeline "
    "stage per node when a dense model spans several (a cluster with apps.lws), data and "
    f"expert parallel for a mixture of experts ({P}.parallelism.expert)",
)
# The multi-node wiring (function/backends/resources.py vllm_serve_args): nodes, ranks, the leader.
_NODES = (
    None,
    "the function wires the nodes of a multi-node replica (LeaderWorkerSet) itself",
)

_EXPERTS = (
    f"{P}.parallelism.expert",
    f"expert parallelism is {P}.parallelism.expert (the function sizes the experts per rank)",
)

# flag -> (the claim's field that owns it, or None when nothing in the claim does; why)
OWNED: dict[str, tuple[str | None, str]] = {
    "--tensor-parallel-size": (f"{P}.gpu", f"the tensor parallel size is {P}.gpu"),
    "--pipeline-parallel-size": _SINGLE_NODE,
    "--data-parallel-size": _SINGLE_NODE,
    "--data-parallel-size-local": _SINGLE_NODE,
    "--enable-expert-parallel": _EXPERTS,
    "--no-enable-expert-parallel": _EXPERTS,
    "--nnodes": _NODES,
    "--node-rank": _NODES,
    "--master-addr": _NODES,
    "--master-port": _NODES,
    "--headless": _NODES,
    "--distributed-executor-backend": _NODES,
    "--data-parallel-address": _NODES,
    "--data-parallel-rpc-port": _NODES,
    "--data-parallel-rank": _NODES,
    "--data-parallel-start-rank": _NODES,
    "--port": (None, "the production-stack operator serves on port 8000 behind its Service"),
    "--host": (None, "the production-stack operator binds 0.0.0.0 so its Service reaches it"),
    "--served-model-name": (f"{P}.model", "the model is served under its Hugging Face id"),
    "--model": (f"{P}.model", "vLLM would serve that model instead"),
    "--config": (
        None,
        "a config file could set any argument a field owns; write the arguments you need directly",
    ),
    "--download-dir": (f"{P}.storage", "the weights live in the model cache"),
    "--api-key": (
        f"{P}.apiKeySecretRef",
        "a key written in extraArgs is readable in the LLMInference, its VLLMRuntime and "
        "status; put it in a Secret and name it in apiKeySecretRef",
    ),
    "--hf-token": (
        f"{P}.hfTokenSecretRef",
        "a token written in extraArgs is readable in the LLMInference, its VLLMRuntime and "
        "status; put it in a Secret and name it in hfTokenSecretRef",
    ),
}
MAX_MODEL_LEN = "--max-model-len"

# Variables the function sets, and who owns them.
OWNED_ENV: dict[str, str] = {
    "HF_HOME": f"{P}.storage (the model cache)",
    "VLLM_CACHE_ROOT": f"{P}.storage (the model cache)",
    "HF_TOKEN": f"{P}.hfTokenSecretRef",
    "HUGGING_FACE_HUB_TOKEN": f"{P}.hfTokenSecretRef",
    "VLLM_API_KEY": f"{P}.apiKeySecretRef",
}

# KV connectors' own libraries read settings the function never sees: LMCache reads its
# remote URL, storage plugins, scripts and a remote config service from LMCACHE_* variables,
# from the file LMCACHE_CONFIG_FILE names, and from `lmcache.*` keys of the connector's
# kv_connector_extra_config (LMCache 0.4.2, the engine image's: integration/vllm/utils.py
# lmcache_get_or_create_config, integration/vllm/vllm_v1_adapter.py _apply_extra_config,
# v1/config.py remote_config_url, runtime_plugin_locations, storage_plugins); Mooncake its
# store from MOONCAKE_* (MOONCAKE_CONFIG_PATH): function/limits.yaml engine. kvCache is
# how a claim configures LMCache.
KV_LIBRARY_ENV = RESERVED_ENV_PREFIXES
LMCACHE_EXTRA_KEY = "lmcache."
KV_TRANSFER_FLAG = "--kv-transfer-config"
_KV_LIBRARY_WHY = (
    "LMCache and Mooncake read their settings (remote URLs, plugins, a config file, a remote "
    "config service) from places the function never sees, so the KV cache, which holds the "
    f"prompts, could go anywhere; remove it ({P}.kvCache configures LMCache, in the pod)"
)

# Parts of a variable name that mark a credential (split at `_`), and the words that make a
# following KEY one (API_KEY, ACCESS_KEY...). TOKENIZERS_PARALLELISM is not one.
_SECRET_PARTS = {
    "TOKEN",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
}
_KEY_KINDS = {"API", "ACCESS", "PRIVATE", "SECRET", "AUTH", "SIGNING", "ENCRYPTION", "MASTER"}

# Values shaped like credentials, whatever they are called.
_SECRET_VALUES = (
    ("a Hugging Face token", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("an API key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
    ("an AWS access key", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("a GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    (
        "a JSON Web Token",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ),
    ("a private key", re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")),
    ("a URL with a password", re.compile(r"://[^/\s:@]+:[^/\s@]+@")),
)


@dataclass(frozen=True)
class Problem:
    field: str  # the claim's field that is wrong
    message: str


def flag_name(arg: str) -> str | None:
    """The option `arg` names as vLLM's parser reads it (`--tensor_parallel_size=4` ->
    `--tensor-parallel-size`, `-tp` -> `--tensor-parallel-size`), or None for a value."""
    if arg.startswith("--") and len(arg) > 2:
        key = arg.split("=", 1)[0]
        return "--" + key[2:].split(".", 1)[0].replace("_", "-")
    if arg.startswith("-") and len(arg) > 1 and not arg[1].isdigit() and arg[1] != ".":
        key = arg.split("=", 1)[0]
        return ALIASES.get(key, key)
    return None


def sets(args: Sequence[str], flag: str) -> bool:
    """Whether `args` set `flag`, in any spelling vLLM's parser reads."""
    return any(
        (name := flag_name(a)) is not None and _owner(name, {flag: ("", "")}) == flag for a in args
    )


def last_value(args: Sequence[str], flag: str) -> str | None:
    """The value vLLM's parser ends up with for `flag`: its last occurrence, in any spelling
    (`--max-model-len 8192`, `--max_model_len=8192`, a unique prefix), or None."""
    value = None
    for i, arg in enumerate(args):
        name = flag_name(arg)
        if name is None or _owner(name, {flag: ("", "")}) != flag:
            continue
        if "=" in arg:
            value = arg.split("=", 1)[1]
        elif i + 1 < len(args):
            value = args[i + 1]
    return value


_HUMAN_INT = re.compile(r"^(\d+(?:\.\d+)?)([kKmMgGtT])?$")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_int(value: str) -> int | None:
    """A number as vLLM's `human_readable_int` reads it (vllm/engine/arg_utils.py): `32k` is
    32000, `32K` 32768 (binary suffixes take whole numbers only), or None."""
    match = _HUMAN_INT.match(value.strip())
    if not match:
        return None
    number, suffix = match.groups()
    if suffix is None:
        return int(number) if number.isdigit() else None
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    return int(number) * _BINARY[suffix] if number.isdigit() else None


def owner(name: str, flags: Sequence[str]) -> str | None:
    """Which of `flags` the option `name` means: itself, or the one it abbreviates."""
    return _owner(name, dict.fromkeys(flags, ("", "")))


def _owner(name: str, owned: dict[str, tuple[str, str]]) -> str | None:
    """The owned flag `name` means: itself, or the one it abbreviates (argparse accepts a
    unique prefix of a long option)."""
    if name in owned:
        return name
    if name.startswith("--") and len(name) > 4:
        matches = [flag for flag in owned if flag.startswith(name)]
        if matches:
            return min(matches, key=len)
    return None


def secret_shape(text: str) -> str | None:
    """What kind of credential `text` looks like, or None."""
    return next((what for what, rx in _SECRET_VALUES if rx.search(text)), None)


def secret_name(name: str) -> bool:
    """Whether a variable named `name` holds a credential (HF_TOKEN, OPENAI_API_KEY...)."""
    parts = name.upper().split("_")
    if _SECRET_PARTS & set(parts):
        return True
    return any(p == "KEY" and i > 0 and parts[i - 1] in _KEY_KINDS for i, p in enumerate(parts))


@dataclass(frozen=True)
class JsonOption:
    """One JSON option in a command line, as vLLM's parser reads it: the option (`flag`),
    where it is (`--kv-transfer-config` or `--kv-transfer-config.kv_ip` for a dotted key),
    the dotted key (None for the whole object) and the value: parsed JSON, or the text when
    it cannot be read (`readable` False) or is a dotted key's plain value."""

    index: int  # of the option in the command line
    flag: str
    where: str
    sub: str | None
    value: Any
    readable: bool = True


def json_options(args: Sequence[str], flags: Sequence[str]) -> Iterator[JsonOption]:
    """Every occurrence of one of `flags` (JSON options such as --kv-transfer-config) in
    `args`, in any spelling vLLM's parser reads: `_`, a unique prefix, `=`, dotted keys."""
    for i, arg in enumerate(args):
        name = flag_name(arg)
        flag = owner(name, flags) if name else None
        if flag is None:
            continue
        key = arg.split("=", 1)[0]
        value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
        sub = key.split(".", 1)[1] if "." in key else None
        where = f"{flag}.{sub}" if sub else flag
        if value.lstrip().startswith(("{", "[")) or sub is None:
            try:
                yield JsonOption(i, flag, where, sub, json.loads(value))
            except ValueError:
                yield JsonOption(i, flag, where, sub, value, readable=False)
        else:
            yield JsonOption(i, flag, where, sub, value)


def _lmcache_settings(value: Any, where: str, key: str = "") -> Iterator[str]:
    """Where a KV transfer config (or a dotted key's value) sets LMCache's own settings, at
    any depth (MultiConnector nests connectors). An LMCache connector without them reads
    LMCache's defaults: the CPU of its own pod."""
    if key.startswith(LMCACHE_EXTRA_KEY):
        yield f"{where} sets LMCache's {key[len(LMCACHE_EXTRA_KEY) :]}"
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _lmcache_settings(v, f"{where}.{k}", str(k))
    elif isinstance(value, list):
        for n, v in enumerate(value):
            yield from _lmcache_settings(v, f"{where}[{n}]", key)


def kv_library_problems(args: Sequence[str], env: Sequence[tuple[str, str]]) -> list[Problem]:
    """A claim's own settings of the KV connectors' libraries, whether kvCache is on or off:
    LMCACHE_* and MOONCAKE_* variables, and `lmcache.*` keys in its --kv-transfer-config."""
    out: list[Problem] = []
    for i, (name, _) in enumerate(env):
        if name.startswith(KV_LIBRARY_ENV):
            where = f"{P}.engine.env[{i}]"
            why = f"{name} is not yours to set, with kvCache on or off: {_KV_LIBRARY_WHY}"
            out.append(Problem(where, f"{where}: {why}"))
    for opt in json_options(args, (KV_TRANSFER_FLAG,)):
        where = f"{P}.engine.extraArgs[{opt.index}]"
        # A dotted key names what it sets: --kv-transfer-config.kv_connector X, or
        # --kv-transfer-config.kv_connector_extra_config.lmcache.remote_url Y.
        sub = opt.sub or ""
        key = (
            sub[sub.index(LMCACHE_EXTRA_KEY) :]
            if LMCACHE_EXTRA_KEY in sub
            else sub.rsplit(".", 1)[-1]
        )
        found = next(_lmcache_settings(opt.value, opt.where, key), None)
        if found is not None:
            out.append(
                Problem(where, f"{where}: {found}, which is not yours to set: {_KV_LIBRARY_WHY}")
            )
    return out


def problems(
    args: Sequence[str],
    env: Sequence[tuple[str, str]],
    *,
    max_model_len_field: bool,
    from_secrets: frozenset[int] = frozenset(),
) -> list[Problem]:
    """Every argument or variable a claim may not set, each with the field to use instead.
    `max_model_len_field`: engine.maxModelLen is set, so --max-model-len is owned too.
    `from_secrets`: the indexes of env read from a Secret (valueFrom.secretKeyRef), which
    may hold a credential."""
    owned = dict(OWNED)
    if max_model_len_field:
        owned[MAX_MODEL_LEN] = (
            f"{P}.engine.maxModelLen",
            "it is set there already; give the context length once",
        )
    out: list[Problem] = []
    for i, arg in enumerate(args):
        where = f"{P}.engine.extraArgs[{i}]"
        name = flag_name(arg)
        flag = _owner(name, owned) if name else None
        if flag:
            field, why = owned[flag]
            spelled = (
                ""
                if arg.split("=", 1)[0] == flag
                else f" (vLLM reads {arg.split('=', 1)[0]!r} as {flag})"
            )
            instead = f"use {field}" if field else "remove it from extraArgs"
            out.append(
                Problem(where, f"{where}: {flag}{spelled} is not yours to set: {why}; {instead}")
            )
            continue
        shape = secret_shape(arg)
        if shape:
            out.append(
                Problem(
                    where,
                    f"{where}: looks like {shape}; a credential written in extraArgs is readable "
                    f"in the LLMInference, its VLLMRuntime and status. Keep it in a Secret: "
                    f"{P}.apiKeySecretRef for vLLM's API key, {P}.hfTokenSecretRef for a "
                    "Hugging Face token",
                )
            )
    library = kv_library_problems(args, env)
    out.extend(library)
    for i, (name, value) in enumerate(env):
        where = f"{P}.engine.env[{i}]"
        if any(p.field == where for p in library):
            continue
        if name in OWNED_ENV:
            out.append(
                Problem(where, f"{where}: {name} is set by the function; use {OWNED_ENV[name]}")
            )
        elif i not in from_secrets and (secret_name(name) or secret_shape(value)):
            out.append(
                Problem(
                    where,
                    f"{where}: {name} holds a credential and a literal value is readable in the "
                    f"LLMInference, its VLLMRuntime and status. Keep credentials in Secrets: "
                    f"{P}.hfTokenSecretRef (Hugging Face), {P}.apiKeySecretRef (vLLM's API "
                    f"key), {where}.valueFrom.secretKeyRef for any other (with backend llmd "
                    "or a replica over several nodes: a one-node production-stack engine's "
                    "pinned VLLMRuntime takes literal variables only)",
                )
            )
    return out
