"""Running a KCLInput's program with kcl-lib (through ``kcl_service``) and reading its output
and errors, as function-kcl does; and a fatal result as a user reads it."""

from __future__ import annotations

import json
import re
from typing import Any

from dot_inference.function_kcl.common import (
    _RSP_TYPE,
    INPUT_API_VERSION,
    PROGRAM_FILENAME,
    _Fatal,
    _plain,
)

# --------------------------------------------------------------------------------------------
# Running KCL


def execute_kcl(
    source: str, params: dict[str, Any], *, spec: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Run ``source`` with ``option("params") = params``; return the unwrapped items.

    Raises ``KCLFunctionError`` with upstream's message (the KCL error verbatim) on any error.
    """
    import kcl_lib.api as kcl_api  # imported lazily: the native library is large

    from dot_inference import kcl_service

    spec = spec or {}
    config = spec.get("config") or {}
    function_config = {
        "apiVersion": INPUT_API_VERSION,
        "kind": "KCLRun",
        "metadata": {},
        "spec": {k: v for k, v in spec.items() if k != "params"} | {"params": params},
    }
    resource_list = {
        "apiVersion": "config.kubernetes.io/v1",
        "kind": "ResourceList",
        "items": [],
        "functionConfig": function_config,
    }
    args = [
        kcl_api.Argument(name="resource_list", value=json.dumps(resource_list)),
        kcl_api.Argument(name="items", value="[]"),
        kcl_api.Argument(name="params", value=json.dumps(params)),
        # The function container's environment is not ours: keep renders reproducible.
        kcl_api.Argument(name="PATH", value=""),
        kcl_api.Argument(name="env", value="{}"),
    ]
    for arg in config.get("arguments") or []:
        key, _, value = str(arg).partition("=")
        args.append(kcl_api.Argument(name=key, value=value))
    exec_args = kcl_api.ExecProgramArgs(
        k_filename_list=[PROGRAM_FILENAME],
        k_code_list=[source],
        args=args,
        overrides=[str(o) for o in config.get("overrides") or []],
        path_selector=[str(p) for p in config.get("pathSelectors") or []],
        disable_none=bool(config.get("disableNone")),
        sort_keys=bool(config.get("sortKeys")),
        show_hidden=bool(config.get("showHidden")),
        strict_range_check=bool(config.get("strictRangeCheck")),
        debug=1 if config.get("debug") else 0,
    )
    try:
        result = kcl_service.exec_program(exec_args)
        error = result.err_message
    except Exception as err:  # kcl-lib raises for parse/compile errors
        error = str(err)
        result = None
    if error or result is None:
        raise _Fatal(f"failed to run kcl function pipelines: {_clean_kcl_error(error)}")
    try:
        docs = _json_stream(result.json_result)
    except json.JSONDecodeError as err:
        raise _Fatal(
            f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: {err}"
        ) from None
    # A program whose value is a list prints one document per element (a YAML stream), which
    # krm-kcl reads as that many resources (upstream's ComposedSameNameAsXR case).
    if len(docs) > 1:
        return [item for doc in docs for item in _unwrap(doc)]
    return _unwrap(docs[0] if docs else {})


def _json_stream(text: str) -> list[Any]:
    """Every JSON value in ``text``, one after another."""
    decoder, docs, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return docs
        doc, i = decoder.raw_decode(text, i)
        docs.append(doc)


def _clean_kcl_error(message: str) -> str:
    """kcl-lib colours its errors and repeats each parse error: strip the terminal colour codes
    (function-kcl runs without a terminal) and keep each distinct block once, in order."""
    message = re.sub(r"\x1b\[[0-9;]*m", "", message)
    blocks: list[str] = []
    for block in re.split(r"\n\s*\n", message.strip()):
        block = block.rstrip()
        if block and block not in blocks:
            blocks.append(block)
    return "\n".join(blocks) if blocks else "unknown KCL error"


def _unwrap(output: Any) -> list[dict[str, Any]]:
    """krm-kcl edit.UnwrapResources: ``items`` if present, else the output itself."""
    if not isinstance(output, dict):
        raise _Fatal(
            f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: "
            "the KCL output is not an object"
        )
    if "items" in output:
        items = output["items"]
        if not isinstance(items, list):
            raise _Fatal(
                "failed to run kcl function pipelines: wrong node kind: expected items to be a list"
            )
    elif output:
        items = [output]
    else:  # a program without output: nothing to do
        items = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Fatal(
                f"cannot parse data resources from the pipeline output in {_RSP_TYPE}: "
                f"items[{i}] is not an object: {json.dumps(item)}"
            )
    return _plain(items)


# function-kcl reports a failed KCL check or assertion with the evaluator's frames
# ("---> File prog.k:475: Check failed on the condition: <message>"); a user needs the
# message, which names the claim's field, not a line of the generated program.
_KCL_FAILURE = "failed to run kcl function pipelines"
_KCL_FRAME = re.compile(r"^---> File [^:]+:\d+(?::\d+)?: (?:Check failed on the condition: )?")


def user_message(fatal: str) -> str:
    """A fatal result as a user reads it: a function's message as it is; of the KCL
    program's, the failed check's own message (it starts with the claim's field path)."""
    if not fatal.startswith(_KCL_FAILURE):
        return fatal
    lines = [ln for ln in fatal.strip().splitlines() if ln.strip()]
    frames = [ln for ln in lines if _KCL_FRAME.match(ln)]
    if not frames:
        return fatal
    message = _KCL_FRAME.sub("", frames[-1]).strip()
    return message or fatal
