"""Static extraction of `vllm serve` options from a vLLM source tree (no vllm import): the
generator of function/policy/vllm_flags.yaml, which function/policy/vllm_cli.py checks command
lines with.
Developer tooling, not in the function's image.

usage: python -m dot_inference.vllm_flags <vllm-src-root> function/policy/vllm_flags.yaml \
           [<sdist.tar.gz>, for its sha256]

Walks, with `ast`, the code that builds the `vllm serve` parser:
  vllm/entrypoints/cli/serve.py        ServeSubcommand.subparser_init -> make_arg_parser
  vllm/entrypoints/openai/cli_args.py  make_arg_parser, BaseFrontendArgs/FrontendArgs
  vllm/engine/arg_utils.py             EngineArgs/AsyncEngineArgs.add_cli_args, get_kwargs
  vllm/config/*.py (and what they import)  dataclass field annotations
and replays `_compute_kwargs` (arg_utils.py) on annotations evaluated the way Python
evaluates them at import time (the `else:` branch of `if TYPE_CHECKING:`).
"""

from __future__ import annotations

import ast
import pathlib
import sys

from dot_inference.vllm_flags.kwargs import read_human_ints
from dot_inference.vllm_flags.output import render
from dot_inference.vllm_flags.parser import ARGS, SKIPPED, Interp, find_method
from dot_inference.vllm_flags.source import WARN, module


# ---------------------------------------------------------------- main
def main() -> None:
    read_human_ints()
    serve = module("vllm.entrypoints.cli.serve")
    sc = serve.resolve("ServeSubcommand")
    _, init = find_method(sc, "subparser_init")
    assert "make_arg_parser(serve_parser)" in ast.unparse(init), "serve parser changed"
    cli = module("vllm.entrypoints.openai.cli_args")
    fn = cli.bind["make_arg_parser"][1]
    Interp(cli, None, fn, {"parser": "parser"}).run()
    check_support()
    out = pathlib.Path(sys.argv[2] if len(sys.argv) > 2 else "vllm_flags.yaml")
    out.write_text(render())
    n = sum(1 for a in ARGS if a.flags[0].startswith("-"))
    print(f"{n} options, {len(WARN)} warnings; skipped statements:", file=sys.stderr)
    for s in SKIPPED:
        print("  ", s, file=sys.stderr)


def check_support() -> None:
    """Things the replay assumes: fail loudly if the source moved on."""
    au = module("vllm.utils.argparse_utils")
    flex = au.bind["FlexibleArgumentParser"][1]
    src = ast.unparse(flex)
    assert "allow_abbrev" not in src, "FlexibleArgumentParser now sets allow_abbrev"
    main_src = module("vllm.entrypoints.cli.main").path.read_text()
    assert "allow_abbrev" not in main_src
