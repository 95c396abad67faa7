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
import hashlib
import itertools
import pathlib
import sys
from dataclasses import dataclass, field
from typing import Any

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "vllm-0.17.1")
WARN: list[str] = []


def warn(msg: str) -> None:
    WARN.append(msg)
    print("WARN:", msg, file=sys.stderr)


# ---------------------------------------------------------------- type values
@dataclass(frozen=True)
class Prim:  # a builtin class, optionally subscripted: int, list[int], dict[str, Any]
    name: str
    args: tuple = ()


@dataclass(frozen=True)
class Lit:  # typing.Literal[...] (nested literals flattened, as typing does)
    values: tuple


@dataclass(frozen=True)
class Cls:  # a class defined in vllm
    qualname: str
    is_dataclass: bool
    node: Any = field(compare=False, hash=False, repr=False)
    module: Any = field(compare=False, hash=False, repr=False)


@dataclass(frozen=True)
class Ext:  # anything else: torch.dtype, typing.Any, Callable[...], a module
    name: str


@dataclass(frozen=True)
class Union_:
    members: tuple


@dataclass(frozen=True)
class Ann:  # Annotated[X, ...] / pydantic SkipValidation[X]
    inner: Any


NONE = Prim("NoneType")
BUILTINS = {
    "int",
    "float",
    "str",
    "bool",
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "type",
    "object",
    "bytes",
}
TYPING_SPECIAL = {
    "Literal",
    "Annotated",
    "Union",
    "Optional",
    "SkipValidation",
    "InitVar",
    "ClassVar",
    "TypeAlias",
}


def union(*ms: Any) -> Any:
    out: list = []
    for m in ms:
        for x in m.members if isinstance(m, Union_) else (m,):
            if x not in out:
                out.append(x)
    return out[0] if len(out) == 1 else Union_(tuple(out))


# ---------------------------------------------------------------- module namespaces
MODULES: dict[str, Module] = {}


def module(name: str) -> Module | None:
    if name not in MODULES:
        base = ROOT.joinpath(*name.split("."))
        for p in (base.with_suffix(".py"), base / "__init__.py"):
            if p.exists():
                MODULES[name] = Module(name, p)
                break
        else:
            return None
    return MODULES[name]


class Module:
    def __init__(self, name: str, path: pathlib.Path):
        self.name, self.path = name, path
        self.is_pkg = path.name == "__init__.py"
        self.tree = ast.parse(path.read_text())
        self.bind: dict[str, tuple] = {}
        self.cache: dict[str, Any] = {}
        self._scan(self.tree.body)

    def _abs(self, mod: str | None, level: int) -> str:
        if not level:
            return mod or ""
        parts = self.name.split(".")
        if not self.is_pkg:
            parts = parts[:-1]
        parts = parts[: len(parts) - (level - 1)]
        return ".".join(parts + ([mod] if mod else []))

    def _scan(self, body: list) -> None:  # runtime order; later bindings win
        for s in body:
            if isinstance(s, ast.Import):
                for a in s.names:
                    if a.asname:
                        self.bind[a.asname] = ("module", a.name)
                    else:
                        top = a.name.split(".")[0]
                        self.bind[top] = ("module", top)
            elif isinstance(s, ast.ImportFrom):
                mod = self._abs(s.module, s.level)
                for a in s.names:
                    self.bind[a.asname or a.name] = ("from", mod, a.name)
            elif isinstance(s, ast.Assign):
                for t in s.targets:
                    if isinstance(t, ast.Name):
                        self.bind[t.id] = ("expr", s.value)
            elif isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value:
                self.bind[s.target.id] = ("expr", s.value)
            elif isinstance(s, ast.ClassDef):
                self.bind[s.name] = ("class", s)
            elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.bind[s.name] = ("func", s)
            elif isinstance(s, ast.If):
                if ast.unparse(s.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                    self._scan(s.orelse)  # what runs at import time
                else:
                    self._scan(s.body)
                    self._scan(s.orelse)
            elif isinstance(s, ast.Try):
                self._scan(s.body)

    def resolve(self, name: str) -> Any:
        if name in self.cache:
            return self.cache[name]
        b = self.bind.get(name)
        if b is None:
            if name in BUILTINS:
                v: Any = Prim(name)
            else:
                raise KeyError(f"{self.name}: unbound name {name}")
        elif b[0] == "module":
            v = module(b[1]) if b[1].startswith("vllm") else Ext(b[1])
        elif b[0] == "from":
            mod, attr = b[1], b[2]
            if mod in ("typing", "typing_extensions", "pydantic") and attr in TYPING_SPECIAL:
                v = ("special", attr)
            elif mod in ("typing", "typing_extensions") and attr == "Any":
                v = Ext("typing.Any")
            elif mod.startswith("vllm"):
                m = module(mod)
                if m is not None and attr in m.bind:
                    v = m.resolve(attr)
                else:
                    sub = module(f"{mod}.{attr}")
                    if sub is None:
                        raise KeyError(f"cannot resolve {mod}.{attr}")
                    v = sub
            else:
                v = Ext(f"{mod}.{attr}")
        elif b[0] == "expr":
            v = self.eval(b[1])
        elif b[0] == "class":
            v = Cls(f"{self.name}.{name}", self._is_dataclass(b[1]), b[1], self)
        else:
            v = Ext(f"{self.name}.{name}()")
        self.cache[name] = v
        return v

    def _is_dataclass(self, node: ast.ClassDef) -> bool:
        for d in node.decorator_list:
            f = d.func if isinstance(d, ast.Call) else d
            if ast.unparse(f).split(".")[-1] in ("config", "dataclass"):
                return True
        for base in node.bases:
            try:
                bv = self.eval(base)
            except KeyError:
                continue
            if isinstance(bv, Cls) and bv.is_dataclass:
                return True
        return False

    def eval(self, e: ast.expr) -> Any:
        if isinstance(e, ast.Constant):
            if e.value is None:
                return NONE
            if isinstance(e.value, str):
                raise ValueError(f"string annotation {e.value!r} in {self.name}")
            return e.value
        if isinstance(e, ast.Name):
            return self.resolve(e.id)
        if isinstance(e, ast.Attribute):
            base = self.eval(e.value)
            if isinstance(base, Module):
                return base.resolve(e.attr)
            if isinstance(base, Ext):
                return Ext(f"{base.name}.{e.attr}")
            raise ValueError(f"attribute {ast.unparse(e)} in {self.name}")
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
            return union(self.eval(e.left), self.eval(e.right))
        if isinstance(e, ast.Subscript):
            base = self.eval(e.value)
            elts = e.slice.elts if isinstance(e.slice, ast.Tuple) else [e.slice]
            if isinstance(base, tuple) and base[0] == "special":
                kind = base[1]
                if kind == "Literal":
                    vals: list = []
                    for x in elts:
                        if isinstance(x, ast.Constant):
                            vals.append(x.value)
                        else:
                            lv = self.eval(x)
                            if not isinstance(lv, Lit):
                                raise ValueError(f"Literal member {ast.unparse(x)}")
                            vals.extend(lv.values)
                    return Lit(tuple(dict.fromkeys(vals)))
                if kind in ("Annotated", "SkipValidation"):
                    return Ann(self.eval(elts[0]))
                if kind == "Optional":
                    return union(self.eval(elts[0]), NONE)
                if kind == "Union":
                    return union(*[self.eval(x) for x in elts])
                return ("special", kind, self.eval(elts[0]))  # InitVar / ClassVar
            if isinstance(base, Prim):
                args = []
                for x in elts:
                    if isinstance(x, ast.List):  # Callable[[...], ...] style
                        args.append(tuple(self.eval(y) for y in x.elts))
                    elif isinstance(x, ast.Constant) and x.value is Ellipsis:
                        args.append(Ellipsis)
                    else:
                        args.append(self.eval(x))
                return Prim(base.name, tuple(args))
            if isinstance(base, Ext):
                return Ext(f"{base.name}[...]")
            raise ValueError(f"subscript {ast.unparse(e)} in {self.name}")
        if isinstance(e, ast.Call):
            return Ext(f"<call {ast.unparse(e)[:40]}>")
        raise ValueError(f"cannot evaluate {ast.unparse(e)} in {self.name}")


def class_fields(c: Cls) -> dict[str, Any]:
    """dataclasses.fields order: bases first (MRO), then this class's annotations."""
    out: dict[str, Any] = {}
    for base in c.node.bases:
        bv = c.module.eval(base)
        if isinstance(bv, Cls) and bv.is_dataclass:
            out.update(class_fields(bv))
    for s in c.node.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            t = c.module.eval(s.annotation)
            if isinstance(t, tuple) and t[0] == "special":  # InitVar / ClassVar: no field
                continue
            out[s.target.id] = t
    return out


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


if __name__ == "__main__":
    main()
