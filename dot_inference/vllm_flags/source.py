"""vLLM's source read with `ast`, no vllm import: its modules' top-level bindings, and
annotations evaluated (as at import time) into type values."""

from __future__ import annotations

import ast
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
