"""The replay of vLLM's `_compute_kwargs` (engine/arg_utils.py): a config dataclass's fields
to the argparse kwargs (type, nargs, choices, action) its `get_kwargs` gives."""

from __future__ import annotations

import ast
from typing import Any

from dot_inference.vllm_flags.source import (
    NONE,
    Ann,
    Cls,
    Ext,
    Lit,
    Prim,
    Union_,
    class_fields,
    module,
)


# ---------------------------------------------------------------- _compute_kwargs replay
def hints(t: Any) -> list:
    if isinstance(t, Ann):
        return hints(t.inner)
    if isinstance(t, Union_):
        return [h for m in t.members for h in hints(m)]
    return [t]


def is_type(h: Any, name: str) -> bool:
    return isinstance(h, Prim) and h.name == name


def contains(hs: list, name: str) -> bool:
    if name == "Literal":
        return any(isinstance(h, Lit) for h in hs)
    return any(is_type(h, name) for h in hs)


def not_builtin(h: Any) -> bool:  # type_hint.__module__ != "builtins"
    return isinstance(h, (Lit, Cls, Ext))


def literal_kwargs(hs: list) -> dict:
    opts = next(h for h in hs if isinstance(h, Lit)).values
    otype = type(opts[0]).__name__
    assert all(type(o) is type(opts[0]) for o in opts), opts
    key = "metavar" if contains(hs, "str") else "choices"
    return {"type": (otype,), key: sorted(opts)}


def collection_kwargs(hs: list, name: str) -> dict:
    th = next(h for h in hs if is_type(h, name))
    types = th.args
    elem = types[0]
    if isinstance(elem, Union_):
        assert Prim("str") in elem.members, elem
        elem = Prim("str")
    nargs = "+" if name != "tuple" or Ellipsis in types else len(types)
    return {"type": elem, "nargs": nargs}


HUMAN: dict[str, tuple] = {}  # field name -> type, read from _compute_kwargs below


def compute_kwargs(c: Cls) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for name, t in class_fields(c).items():
        hs = hints(t)
        dc = next((h for h in hs if isinstance(h, Cls) and h.is_dataclass), None)
        kw: dict[str, Any] = {}
        if dc is not None:
            kw["type"] = ("dataclass", dc.qualname.split(".")[-1])
        elif contains(hs, "bool"):
            kw["action"] = "bool"
        elif contains(hs, "Literal"):
            kw.update(literal_kwargs(hs))
        elif contains(hs, "tuple"):
            kw.update(collection_kwargs(hs, "tuple"))
        elif contains(hs, "list"):
            kw.update(collection_kwargs(hs, "list"))
        elif contains(hs, "set"):
            kw.update(collection_kwargs(hs, "set"))
        elif contains(hs, "int"):
            kw["type"] = HUMAN.get(name, ("int",))
        elif contains(hs, "float"):
            kw["type"] = ("float",)
        elif contains(hs, "dict") and (contains(hs, "str") or any(map(not_builtin, hs))):
            kw["type"] = ("json_or_str",)
        elif contains(hs, "dict"):
            kw["type"] = ("json",)
        elif contains(hs, "str") or any(map(not_builtin, hs)):
            kw["type"] = ("str",)
        else:
            raise ValueError(f"Unsupported type {hs} for argument {name}.")
        if isinstance(kw.get("type"), Lit):
            kw.update(literal_kwargs([kw["type"]]))
        elif isinstance(kw.get("type"), Prim):
            kw["type"] = (kw["type"].name,)
        if NONE in hs and not contains(hs, "bool"):
            kw["type"] = ("optional", kw["type"])
            if kw.get("choices"):
                kw["choices"].append("None")
        out[name] = kw
    return out


def read_human_ints() -> None:
    """`name == "max_model_len"` -> human_readable_int_or_auto etc., from _compute_kwargs."""
    m = module("vllm.engine.arg_utils")
    fn = m.bind["_compute_kwargs"][1]
    for n in ast.walk(fn):
        if (
            isinstance(n, ast.If)
            and isinstance(n.test, ast.Compare)
            and ast.unparse(n.test.left) == "name"
        ):
            rhs = n.test.comparators[0]
            names = [rhs.value] if isinstance(rhs, ast.Constant) else [x.value for x in rhs.elts]
            assign = n.body[0]
            fname = ast.unparse(assign.value)
            kind = {
                "human_readable_int_or_auto": ("human_int_auto",),
                "human_readable_int": ("human_int",),
            }[fname]
            for nm in names:
                HUMAN[nm] = kind
    assert HUMAN, "human-readable int fields not found"
