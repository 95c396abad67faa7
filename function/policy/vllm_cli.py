"""The arguments after `vllm serve <model>`, checked the way vLLM 0.17.1's parser reads them.

Options: vllm_flags.yaml beside this file, read statically from the vLLM 0.17.1 sdist (its
header names the files). `problems` replays FlexibleArgumentParser.parse_args
(vllm/utils/argparse_utils.py): `--model X` moved in front as the model, `--config FILE`
pulled out, `--a_b` as `--a-b`, `-O3`, `--help=<keyword>`, dotted JSON keys (`--x.key v`,
`--x.key+ a,b`) merged into one JSON value; then parses as CPython 3.11's argparse does:
aliases, `--x=v`, `-tp8`, `--no-x`, unambiguous prefixes of long options (vLLM leaves
allow_abbrev at True), nargs, each value's type and choices, `--`. Every problem is reported
(argparse stops at the first), and so is `--help`. Not checked: the file of --config, what
pydantic checks inside a config's JSON object, and what vLLM checks after parsing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from function import datafile

FLAGS_FILE = Path(__file__).with_name("vllm_flags.yaml")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse: a value, not an option
MODEL = "<the positional model>"  # `vllm serve <model> ARGS`
_DASHES = ("--", None)
_SERVED_NAME = r"^--served[-_]model[-_]name(=.+|$)"
_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


@cache
def _data() -> dict[str, Any]:
    loaded: dict[str, Any] = datafile.load(FLAGS_FILE)
    return loaded


VERSION: str = str(_data()["version"])


@cache
def flags() -> dict[str, dict[str, Any]]:
    """Option name -> its entry in vllm_flags.yaml."""
    loaded: dict[str, dict[str, Any]] = _data()["flags"]
    return loaded


@cache
def _strings() -> dict[str, str]:
    """Every option string argparse registers (aliases, `--no-x`) -> the option's name."""
    out: dict[str, str] = {}
    for name, spec in flags().items():
        for string in [name, *spec.get("aliases", [])]:
            out[string] = name
            if spec["kind"] == "bool" and string.startswith("--"):
                out["--no-" + string[2:]] = name
    return out


def _merge(into: dict[str, Any], update: dict[str, Any]) -> None:
    for k, v in update.items():  # argparse_utils recursive_dict_update
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        elif isinstance(v, list) and isinstance(into.get(k), list):
            into[k] += v
        else:
            into[k] = v


def _flexible(args: list[str], out: list[str]) -> list[str]:
    """FlexibleArgumentParser.parse_args, up to argparse."""
    at = next((i for i, a in enumerate(args) if re.match(r"^--model(=.+|$)", a)), None)
    if at is not None and args[at] == "--model" and at + 1 == len(args):
        out.append("--model: expected one argument")
        del args[at]
    elif at is not None:  # moved in front, before the positional model
        value = args[at + 1] if args[at] == "--model" else args[at].removeprefix("--model=")
        args = [value, *args[:at], *args[at + (2 if args[at] == "--model" else 1) :]]
    no_model = args[0].startswith("-")  # only after `--model -x`
    config = any(re.match(r"^--config(=.+|$)", a) for a in args)
    if no_model and not config and any(re.match(_SERVED_NAME, a) for a in args):
        out.append("the model must come first, before --served-model-name")
    if "--config" in args:  # its options come from the file, not read here
        at = args.index("--config")
        path = args[at + 1] if at + 1 < len(args) else ""
        if args.count("--config") > 1 or path.split(".")[-1] not in ("yaml", "yml"):
            out.append(f"--config: expected one YAML file (.yaml or .yml), not {path!r}")
        if no_model:
            out.append("no model before the options: --config's file would have to set it")
        del args[at : at + 2]
    done: list[str] = []
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            key, eq, value = arg.partition("=")
            head, dot, tail = key[2:].partition(".")
            done.append(f"--{head.replace('_', '-')}{dot}{tail}{eq}{value}")
            done[-1] = "--help" if arg.startswith("--help=") else done[-1]
        elif arg.startswith("-O") and arg != "-O":
            done += ["--optimization-level", arg[3:] if arg[2] == "=" else arg[2:]]
        elif arg == "-O" and i + 1 < len(args) and args[i + 1] in {"0", "1", "2", "3"}:
            done.append("--optimization-level")
        else:
            done.append(arg)
    drop: set[int] = set()
    dict_args: dict[str, dict[str, Any]] = {}
    for i, arg in enumerate(done):
        if i in drop or not arg.startswith("-") or "." not in arg:
            continue
        if "=" in arg:
            arg, value = arg.split("=", 1)
            if "." not in arg:
                continue
        elif i + 1 < len(done):
            value = done[i + 1]
            drop.add(i + 1)
        else:
            out.append(f"{arg}: expected one argument")
            drop.add(i)
            continue
        if arg.endswith("+"):
            arg, value = arg[:-1], json.dumps(value.split(","))
        key, *keys = arg.split(".")
        try:
            parsed: Any = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        for k in reversed(keys):
            parsed = {k: parsed}
        _merge(dict_args.setdefault(key, {}), parsed)
        drop.add(i)
    return [a for i, a in enumerate(done) if i not in drop] + [
        x for key, value in dict_args.items() for x in (key, json.dumps(value))
    ]


def _classify(token: str) -> tuple[str, str | None] | None:
    """argparse `_parse_optional`: None for a value, else (option string or "", explicit)."""
    strings = _strings()
    if not token.startswith("-") or token == "-":
        return None
    if token in strings:
        return token, None
    if "=" in token and (split := token.split("=", 1))[0] in strings:
        return split[0], split[1]
    if token.startswith("--"):  # allow_abbrev: a unique prefix of a long option
        prefix, eq, explicit = token.partition("=")
        found = [(s, explicit if eq else None) for s in strings if s.startswith(prefix)]
    else:  # `-tp8`: a short option and its value, or a prefix of a short option
        found = [(s, token[2:] if s == token[:2] else None) for s in strings]
        found = [(s, e) for s, e in found if s == token[:2] or s.startswith(token)]
    if len(found) > 1:
        raise ValueError(f"ambiguous option: {token} could match {', '.join(dict(found))}")
    if found:
        return found[0]
    return None if _NEGATIVE_NUMBER.match(token) or " " in token else ("", None)


def _convert(spec: dict[str, Any], value: str) -> Any:
    kind, stripped = spec["kind"], value.strip()
    if spec.get("optional") and value in ("", "None"):
        return None
    if kind in ("int", "float"):
        return int(value) if kind == "int" else float(value)
    if kind == "human_int" and spec.get("auto") and stripped.lower() in ("-1", "auto"):
        return -1
    if kind == "human_int" and (match := _HUMAN.fullmatch(stripped)):
        number, suffix = match.groups()
        if suffix in "kmgt":
            return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1))
        return int(number) * 1024 ** ("KMGT".index(suffix) + 1)  # no decimals: ValueError
    if kind == "human_int":
        return int(stripped)
    if kind == "json" or (kind == "json_or_str" and re.match(r"(?s)^\s*{.*}\s*$", value)):
        parsed = json.loads(value)
        if spec.get("schema") and not isinstance(parsed, dict):
            raise ValueError(f"{spec['schema']} needs a JSON object")
        return parsed
    if kind == "lora" and "=" in value and "," not in value:
        if value.count("=") != 1:
            raise ValueError("neither name=path nor JSON")
    elif kind == "lora":
        item = json.loads(value)
        keys = set(item) if isinstance(item, dict) else {"?"}
        if not set(spec["keys"]) <= keys <= set(spec["keys"] + spec["more_keys"]):
            raise ValueError(f"not an object of {spec['keys'] + spec['more_keys']}")
    return value.lower().replace("-", "_") if spec.get("normalize") else value


def _check(name: str, spec: dict[str, Any], value: str) -> str | None:
    try:
        converted = _convert(spec, value)
    except ValueError as e:  # json.JSONDecodeError too
        why = "" if spec["kind"] in ("int", "float") else f" ({e})"
        return f"argument {name}: invalid {spec['kind']} value: {value!r}{why}"
    choices = spec.get("choices")
    if choices is not None and converted not in choices:
        return f"argument {name}: invalid choice: {converted!r} (choose from {choices})"
    return None


def problems(args: Sequence[str]) -> list[str]:
    """What vLLM 0.17.1's parser rejects in `vllm serve <model> ARGS`; [] when nothing."""
    out: list[str] = []
    tokens = _flexible([MODEL, *args], out)
    cut = tokens.index("--") if "--" in tokens else len(tokens)  # then all are positional
    kinds: list[tuple[str, str | None] | None] = []
    for token in tokens[:cut]:
        try:
            kinds.append(_classify(token))
        except ValueError as e:  # argparse stops here; skip the values that follow
            out.append(str(e))
            kinds.append(("?", None))
    kinds += [_DASHES, *[None] * (len(tokens) - cut - 1)] if cut < len(tokens) else []
    extras: list[str] = []
    model, i = False, 0
    while i < len(tokens):
        end = next((j for j in range(i + 1, len(tokens)) if kinds[j] is not None), len(tokens))
        if kinds[i] in (None, _DASHES):  # values no option takes; the model is nargs "?"
            end = next((j for j in range(i, cut) if kinds[j] is not None), len(tokens))
            pattern = "".join("-" if k == _DASHES else "A" for k in kinds[i:end])
            taken = len(match[0]) if not model and (match := re.match("-*A?-*", pattern)) else 0
            extras += tokens[i + taken : end]
            model, i = True, end
            continue
        string, explicit = kinds[i] or ("", None)
        if string in ("", "?"):  # unknown: unrecognized; ambiguous: reported, argparse stops
            extras += [] if string else [tokens[i]]
            i = end if string else i + 1
            continue
        name = _strings()[string]
        spec = flags()[name]
        nargs = 0 if spec["kind"] in ("bool", "store_true", "help") else spec.get("nargs")
        if explicit is not None:
            given, i = ([] if nargs == 0 else [explicit]), i + 1
            if nargs == 0:
                out.append(f"argument {name}: ignored explicit argument {explicit!r}")
        else:
            want = {0: 0, "?": min(1, end - i - 1), "+": max(1, end - i - 1)}.get(nargs, 1)
            given = tokens[i + 1 : min(end, i + 1 + want)]
            i += 1 + len(given)
            if len(given) < want:
                need = "at least one argument" if nargs == "+" else "one argument"
                out.append(f"argument {name}: expected {need}")
        if spec["kind"] == "help":
            out.append(f"{string}: prints the help and exits; no server starts")
        out += [p for v in given if (p := _check(name, spec, v))]
    if extras:
        out.append(f"unrecognized arguments: {' '.join(extras)}")
    return out
