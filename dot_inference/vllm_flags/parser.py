"""The replay of the functions that build the `vllm serve` parser (make_arg_parser,
add_cli_args): an interpreter of their statements that records every add_argument."""

from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import Any

from dot_inference.vllm_flags.kwargs import compute_kwargs
from dot_inference.vllm_flags.source import Cls, Module


# ---------------------------------------------------------------- replay of add_cli_args
@dataclass
class Arg:
    flags: list[str]
    kw: dict
    group: str
    note: str = ""


ARGS: list[Arg] = []
SKIPPED: list[str] = []


class Interp:
    def __init__(self, mod: Module, cls: Cls | None, func: ast.FunctionDef, env: dict):
        self.mod, self.cls, self.func, self.env = mod, cls, func, env
        self.group = env.get("__group__", "")
        self.note = env.get("__note__", "")

    def run(self, body: list | None = None) -> Any:
        for s in body if body is not None else self.func.body:
            r = self.stmt(s)
            if r is not None:
                return r
        return None

    def lookup_kwtable(self, e: ast.expr) -> dict | None:
        """`x_kwargs["f"]` or `x_kwargs["f"]["k"]`-base or alias -> the field dict."""
        if isinstance(e, ast.Name) and isinstance(self.env.get(e.id), dict):
            return self.env[e.id]
        if isinstance(e, ast.Subscript):
            base = self.lookup_kwtable(e.value)
            key = self.value(e.slice)
            if isinstance(base, dict) and isinstance(key, str):
                return base.get(key)
        return None

    def value(self, e: ast.expr) -> Any:
        """Evaluate the few value forms used for argparse kwargs."""
        src = ast.unparse(e)
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, ast.Name):
            if e.id in self.env:
                return self.env[e.id]
            return {
                "int": ("int",),
                "str": ("str",),
                "float": ("float",),
                "LoRAParserAction": "lora",
            }.get(e.id, ("?", src))
        if isinstance(e, ast.Attribute) and e.attr == "__name__" and ast.unparse(e.value) == "cls":
            return self.env["cls"].qualname.split(".")[-1]
        if src == "json.loads":
            return ("json",)
        if src == "argparse.BooleanOptionalAction":
            return "bool"
        if isinstance(e, ast.Call) and ast.unparse(e.func) in ("optional_type", "parse_type"):
            inner = self.value(e.args[0])
            return ("optional", inner) if ast.unparse(e.func) == "optional_type" else inner
        if isinstance(e, ast.Lambda):
            return ("normalize", src)
        if isinstance(e, ast.JoinedStr):
            parts = []
            for v in e.values:
                parts.append(v.value if isinstance(v, ast.Constant) else str(self.value(v.value)))
            return "".join(parts)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            obj = (
                self.value(e.func.value)
                if not isinstance(e.func.value, ast.Subscript)
                else self.lookup_kwtable(e.func.value)
            )
            args = [self.value(a) for a in e.args]
            if isinstance(obj, str) and e.func.attr == "replace":
                return obj.replace(*args)
            if isinstance(obj, dict) and e.func.attr == "pop":
                return obj.pop(*args)
            if isinstance(obj, dict) and e.func.attr == "items":
                return list(obj.items())
        if isinstance(e, ast.Subscript):
            t = self.lookup_kwtable(e)
            if t is not None:
                return t
        if isinstance(e, (ast.List, ast.Tuple)):
            return [self.value(x) for x in e.elts]
        return ("?", src)

    def stmt(self, s: ast.stmt) -> Any:
        src = ast.unparse(s)
        if isinstance(s, ast.Return):
            return self.value(s.value) if s.value is not None else True
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
            return None  # docstring
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call):
            f = s.value.func
            if isinstance(f, ast.Attribute) and f.attr == "add_argument":
                self.add_argument(s.value)
            else:
                SKIPPED.append(f"{self.func.name}: {src}")
            return None
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            t, v = s.targets[0], s.value
            if isinstance(t, ast.Name) and isinstance(v, ast.Call):
                fn = ast.unparse(v.func)
                if fn == "get_kwargs":
                    c = self.cls_value(v.args[0])
                    self.env[t.id] = compute_kwargs(c)
                    return None
                if fn.endswith("add_argument_group"):
                    self.env["__group__"] = self.group = (
                        self.value(v.keywords[0].value)
                        if v.keywords and v.keywords[0].arg == "title"
                        else ""
                    )
                    return None
                if fn.endswith(("add_cli_args", "_customize_cli_kwargs")):
                    self.env[t.id] = self.call_method(v)
                    return None
            if isinstance(t, ast.Name) and isinstance(v, ast.Subscript):
                tbl = self.lookup_kwtable(v)
                if isinstance(tbl, dict):
                    self.env[t.id] = tbl  # alias (moe_backend_kwargs = kernel_kwargs[...])
                    return None
            if isinstance(t, ast.Subscript):
                tbl = self.lookup_kwtable(t.value)
                key = self.value(t.slice)
                if isinstance(tbl, dict) and key in ("type", "action", "nargs"):
                    tbl[key] = self.value(v)
                    return None
                if isinstance(tbl, dict) and key in ("metavar", "default", "help"):
                    return None
            if isinstance(t, ast.Name):
                val = self.value(v)
                self.env[t.id] = val
                if isinstance(val, tuple) and val[:1] == ("?",):
                    SKIPPED.append(f"{self.func.name}: {src}")
                return None
            SKIPPED.append(f"{self.func.name}: {src}")
            return None
        if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add):
            tbl = self.lookup_kwtable(s.target.value)
            key = self.value(s.target.slice)
            if isinstance(tbl, dict) and key == "choices":
                tbl["choices"] = tbl["choices"] + self.permutation_choices(s.value)
                return None
        if isinstance(s, ast.Delete):
            for t in s.targets:
                tbl = self.lookup_kwtable(t.value)
                del tbl[self.value(t.slice)]
            return None
        if isinstance(s, ast.If):
            test = s.test
            if (
                isinstance(test, ast.Compare)
                and isinstance(test.ops[0], ast.In)
                and isinstance(test.left, ast.Constant)
            ):
                tbl = self.lookup_kwtable(test.comparators[0])
                if isinstance(tbl, dict):
                    return self.run(s.body if test.left.value in tbl else s.orelse)
            if ast.unparse(test) == "not async_args_only":  # make_arg_parser passes none
                return self.run(s.body)
            old = self.note
            self.note = self.env["__note__"] = f"registered only if {ast.unparse(test)}"
            r = self.run(s.body)
            self.note = self.env["__note__"] = old
            if s.orelse:
                SKIPPED.append(f"{self.func.name}: else-branch of `if {ast.unparse(test)}`")
            return r
        if isinstance(s, ast.For) and isinstance(s.target, ast.Tuple):
            items = self.value(s.iter)
            for k, v in items:
                self.env[s.target.elts[0].id] = k
                self.env[s.target.elts[1].id] = v
                self.run(s.body)
            return None
        if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name):
            self.env[s.targets[0].id] = self.value(s.value)
            return None
        SKIPPED.append(f"{self.func.name}: {src}")
        return None

    def permutation_choices(self, e: ast.expr) -> list:
        # [",".join(p) for p in permutations(get_args(Alias), r=N)]
        assert isinstance(e, ast.ListComp), ast.unparse(e)
        call = e.generators[0].iter
        assert ast.unparse(call.func) == "permutations", ast.unparse(e)
        inner = call.args[0]
        assert ast.unparse(inner.func) == "get_args"
        lit = self.mod.eval(inner.args[0])
        r = next(k.value.value for k in call.keywords if k.arg == "r")
        sep = e.elt.func.value.value
        return [sep.join(p) for p in itertools.permutations(lit.values, r=r)]

    def cls_value(self, e: ast.expr) -> Cls:
        if isinstance(e, ast.Name) and e.id == "cls":
            return self.env["cls"]
        c = self.mod.eval(e)
        assert isinstance(c, Cls), ast.unparse(e)
        return c

    def call_method(self, call: ast.Call) -> Any:
        f = call.func
        assert isinstance(f, ast.Attribute)
        if isinstance(f.value, ast.Call) and ast.unparse(f.value.func) == "super":
            owner = self.cls.module.eval(self.cls.node.bases[0])
            bound = self.env["cls"]
        else:
            owner = self.cls_value(f.value)
            bound = owner
        defcls, fn = find_method(owner, f.attr)
        env = {"__group__": self.group, "__note__": self.note, "cls": bound}
        params = [a.arg for a in fn.args.args]
        if params and params[0] == "cls":
            params = params[1:]
        for p, a in zip(params, call.args, strict=False):
            env[p] = self.env.get(a.id) if isinstance(a, ast.Name) else self.value(a)
        return Interp(defcls.module, defcls, fn, env).run()

    def add_argument(self, call: ast.Call) -> None:
        flags: list[str] = []
        for a in call.args:
            if isinstance(a, ast.Starred):
                flags += list(self.value(a.value))
            else:
                flags.append(self.value(a))
        kw: dict[str, Any] = {}
        for k in call.keywords:
            if k.arg is None:  # **x_kwargs["f"]  or  **{**x_kwargs["f"], "default": None}
                if isinstance(k.value, ast.Dict):
                    for kk, vv in zip(k.value.keys, k.value.values, strict=True):
                        if kk is None:
                            kw.update(self.value(vv))
                        elif kk.value not in ("help", "default"):
                            kw[kk.value] = self.value(vv)
                else:
                    kw.update(self.value(k.value))
            elif k.arg not in ("help", "default", "metavar", "deprecated"):
                kw[k.arg] = self.value(k.value)
        on_parser = ast.unparse(call.func.value) == "parser"  # not in an argument group
        ARGS.append(Arg(flags, dict(kw), "" if on_parser else self.group, self.note))


def find_method(c: Cls, name: str) -> tuple[Cls, ast.FunctionDef]:
    for s in c.node.body:
        if isinstance(s, ast.FunctionDef) and s.name == name:
            return c, s
    for base in c.node.bases:
        bv = c.module.eval(base)
        if isinstance(bv, Cls):
            return find_method(bv, name)
    raise KeyError(f"{c.qualname}.{name}")
