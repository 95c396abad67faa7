"""function/policy/vllm_flags.yaml as the extractor writes it: one entry per option, under
its header."""

from __future__ import annotations

import ast
import hashlib
import pathlib
import sys
from typing import Any

from dot_inference.vllm_flags.parser import ARGS, Arg
from dot_inference.vllm_flags.source import ROOT, Cls, module


def entry(a: Arg) -> dict:
    kw = dict(a.kw)
    e: dict[str, Any] = {}
    action = kw.pop("action", None)
    t = kw.pop("type", None)
    if action == "store_true":
        e["kind"] = "store_true"
    elif action == "bool":
        e["kind"] = "bool"
    elif action == "append":
        e["action"] = "append"
    elif action == "lora":
        e["kind"] = "lora"
    elif action is not None:
        raise ValueError(f"unknown action {action} for {a.flags}")
    if t is not None and t == ("optional", ("str",)) and e.get("kind") == "lora":
        e["optional"] = True
        t = None
    if t is not None and t[0] == "optional":
        e["optional"] = True
        t = t[1]
    if t is not None:
        if t[0] == "dataclass":
            e["kind"], e["schema"] = "json", t[1]
        elif t[0] == "human_int_auto":
            e["kind"], e["auto"] = "human_int", True
        elif t[0] == "normalize":
            assert t[1] == "lambda s: s.lower().replace('-', '_')", t[1]
            e["kind"], e["normalize"] = "str", "lower_dash_to_underscore"
        elif t[0] in ("int", "float", "str", "json", "json_or_str", "human_int"):
            e["kind"] = t[0]
        else:
            raise ValueError(f"unknown type {t} for {a.flags}")
    e.setdefault("kind", "str")  # argparse's default: the string itself
    for k in ("nargs", "choices", "const"):
        if k in kw:
            e[k] = kw.pop(k)
    if "metavar" in kw:
        e["known"] = kw.pop("metavar")
    if e.get("kind") == "lora":  # LoRAParserAction builds LoRAModulePath(**item) from JSON
        e["nargs"] = e.get("nargs", "+")
        lmp = module("vllm.entrypoints.openai.cli_args").resolve("LoRAModulePath")
        assert isinstance(lmp, Cls) and lmp.is_dataclass, lmp
        body = [x for x in lmp.node.body if isinstance(x, ast.AnnAssign)]
        e["keys"] = [x.target.id for x in body if x.value is None]
        e["more_keys"] = [x.target.id for x in body if x.value is not None]
    if kw:
        raise ValueError(f"unhandled kwargs {kw} for {a.flags}")
    longs = [f for f in a.flags if f.startswith("--")]
    shorts = [f for f in a.flags if not f.startswith("--")]
    e["_name"], e["aliases"] = longs[0], longs[1:] + shorts
    order = [
        "_name",
        "kind",
        "aliases",
        "nargs",
        "choices",
        "known",
        "optional",
        "schema",
        "auto",
        "normalize",
        "action",
        "const",
        "keys",
        "more_keys",
    ]
    assert set(e) <= set(order), e
    return {k: e[k] for k in order if k in e}


def flow(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    s = str(v)
    plain = (
        s
        and s[0].isalpha()
        and all(c.isalnum() or c in "_-." for c in s)
        and s.lower() not in ("none", "null", "true", "false", "yes", "no", "on", "off", "y", "n")
    )
    return s if plain else '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


HEADER = """\
# Every option of `vllm serve` at vLLM {version}, as its argparse parser declares it.
# Read statically (vllm not imported, nothing run) from the vllm {version} sdist,
# vllm-{version}.tar.gz, sha256 {sha256}:
#   vllm/entrypoints/cli/serve.py        ServeSubcommand.subparser_init -> make_arg_parser
#   vllm/entrypoints/openai/cli_args.py  make_arg_parser: model_tag, --headless,
#       --api-server-count, --config; FrontendArgs (BaseFrontendArgs) fields via get_kwargs
#       and _customize_cli_kwargs; then AsyncEngineArgs.add_cli_args
#   vllm/engine/arg_utils.py             EngineArgs.add_cli_args (explicit flags and aliases),
#       get_kwargs/_compute_kwargs (kind, nargs, choices from the field annotations),
#       AsyncEngineArgs.add_cli_args (--enable-log-requests)
#   vllm/config/*.py and the modules they import: the config dataclass field annotations,
#       evaluated as at import time (a name bound under `if TYPE_CHECKING:` takes its `else:`
#       value, e.g. QuantizationMethods = Any)
#   vllm/entrypoints/openai/models/protocol.py  LoRAModulePath (--lora-modules)
#   vllm/utils/argparse_utils.py         FlexibleArgumentParser: sets no allow_abbrev, nor does
#       vllm/entrypoints/cli/main.py, so argparse's default allow_abbrev=True holds: unambiguous
#       prefixes of long options are accepted (`--tensor-parallel 2`)
# Not in this file: options that general plugins (load_general_plugins) or an out-of-tree
# platform (current_platform.pre_register_and_update) may add at run time; in-tree platforms
# add none.
# Regenerate: unpack the sdist and run the extractor, which replays those functions over the
# files' `ast` (with _compute_kwargs rewritten over the evaluated annotations) and stops where
# the source no longer matches what it understands:
#   tar xzf vllm-X.tar.gz -C /tmp
#   python -m dot_inference.vllm_flags /tmp/vllm-X function/policy/vllm_flags.yaml vllm-X.tar.gz
# (kcl/versions.k pins vllm_version; a test keeps `version` below equal to it.)
#
# Kinds (the value argparse accepts):
#   int, float    Python int()/float() of the value
#   str           any string
#   bool          argparse.BooleanOptionalAction: `--x` and `--no-x` (long forms only), no value
#   store_true    `--x`, no value
#   human_int     vLLM human_readable_int: 1000, 25.6k (x1000), 32K (x1024), k m g t / K M G T;
#                 auto: true -> human_readable_int_or_auto, also `auto` and -1
#   json          json.loads of the value; schema: X -> a JSON object that pydantic validates
#                 as the config dataclass X (its fields are not checked here)
#   json_or_str   vLLM union_dict_and_str: a value that looks like `{{...}}` must be JSON,
#                 anything else is kept as a string
#   lora          --lora-modules' LoRAParserAction: each value `name=path` or a JSON object
#                 for LoRAModulePath: all of `keys`, any of `more_keys`
#   help          argparse's help: prints help and exits
# Other keys:
#   aliases       other option strings for the same option (`-tp`)
#   nargs         "+": one or more values up to the next option; "?": zero or one
#   choices       the values argparse accepts (after type conversion; "None" is listed where vLLM
#                 appends it, but optional_type turns the string into None first, so argparse
#                 rejects it: the quirk is kept)
#   optional      vLLM optional_type: "" and "None" become None (before any choices check)
#   normalize     lower_dash_to_underscore: the value is s.lower().replace("-", "_") before the
#                 choices check
#   action        append: the option may repeat, one value each time
#   known         values vLLM's help lists (a Literal alongside str) but does not enforce
#   const         the value stored when a nargs "?" option is given without one
# FlexibleArgumentParser also accepts `--flag_with_underscores`, `--flag=value`, dotted JSON
# keys (`--json-flag.key value`, `--json-flag.list+ a,b`), `-O3`/`-O 3` for
# --optimization-level, `--help=<keyword>`, and `--model X` (moved in front as the model).
#
# Positional: model_tag (nargs "?", str): the model; `vllm serve <model_tag> [options]`. It may
# instead come from --config's YAML (`model:`) or `--model`; a second positional argument is
# rejected as unrecognized.
version: {version}
positional:
  model_tag: {{kind: str, nargs: "?"}}
flags:
"""


def render() -> str:
    version = ROOT.name.removeprefix("vllm-")
    tarball = pathlib.Path(sys.argv[3]) if len(sys.argv) > 3 else None
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest() if tarball else "(not given)"
    lines = [HEADER.format(version=version, sha256=sha).rstrip("\n")]
    lines.append("  --help: {kind: help, aliases: [-h]}  # argparse add_help")
    group = None
    for a in ARGS:
        if not a.flags[0].startswith("-"):
            assert a.flags == ["model_tag"], a.flags
            continue
        if a.group != group:
            group = a.group
            lines.append(f"  # {group or 'options (added to the parser itself, no group)'}")
        e = entry(a)
        name = e.pop("_name")
        if not e["aliases"]:
            del e["aliases"]
        body = ", ".join(f"{k}: {flow(v)}" for k, v in e.items())
        comment = f"  # {a.note}" if a.note else ""
        if name == "--config":
            comment = "  # `--config FILE.yaml`: FILE's options are inserted in its place"
        if name == "--model":
            comment = "  # moved in front as the model; unregistered under `vllm serve --help`"
        lines.append(f"  {name}: {{{body}}}{comment}")
    return "\n".join(lines) + "\n"
