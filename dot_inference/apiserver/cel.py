"""CEL rules (``x-kubernetes-validations``): the cost budget of the object being validated,
each rule compiled and evaluated with cel-python (its cost counted by
dot_inference/cel_cost.py, its outcomes memoised), JSON typed as CEL values with Kubernetes's
escaping of field names, and the Kubernetes library functions cel-python lacks."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import itertools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jsonschema import ValidationError

from dot_inference import cel_cost

# --------------------------------------------------------------------------------------------
# The CEL budget of the object being validated


@dataclass
class _CelStats:
    object_id: str
    evaluated: int = 0
    not_evaluated: list[str] = field(default_factory=list)
    transition_skipped: int = 0
    # What is left of the object's CEL budget (cel_cost.RUNTIME_COST_BUDGET); once a rule
    # overruns it or its own limit, no further rule runs (apiextensions-apiserver
    # pkg/apiserver/schema/cel/validation.go).
    budget: int = field(default_factory=lambda: cel_cost.RUNTIME_COST_BUDGET)
    stopped: bool = False


_CEL_STATS: contextvars.ContextVar[_CelStats | None] = contextvars.ContextVar(
    "dot_inference_cel_stats", default=None
)


# --------------------------------------------------------------------------------------------
# CEL


_OLD_SELF = re.compile(r"\boldSelf\b")


def _evaluate_rule(
    rule: dict[str, Any], instance: Any, schema: dict[str, Any], stats: _CelStats | None
) -> Iterator[ValidationError]:
    expr: str = rule["rule"]

    def not_evaluated(why: str) -> None:
        if stats is not None:
            stats.not_evaluated.append(f"{stats.object_id}: {expr} ({why})")

    if _OLD_SELF.search(expr):
        if rule.get("optionalOldSelf"):
            not_evaluated("optionalOldSelf transition rule")
        elif stats is not None:
            stats.transition_skipped += 1
        return
    program = cel_program(expr)
    if isinstance(program, str):
        not_evaluated(program)
        return
    outcome = _cel_run_memo(expr, program, instance, schema)
    if outcome.unsupported:
        not_evaluated(outcome.unsupported)
        return
    if stats is not None:
        stats.evaluated += 1
        # The API server charges the rule's cost to the object's budget first, then looks at
        # its own limit (apiextensions-apiserver pkg/apiserver/schema/cel/validation.go
        # validateExpressions); either stops every rule after it. Both errors are at the
        # rule's node, whatever its fieldPath.
        if outcome.cost > stats.budget:
            stats.stopped = True
            yield ValidationError(f"Invalid value: {CEL_BUDGET_EXCEEDED}")
            return
        stats.budget -= outcome.cost
        if outcome.cancelled:
            stats.stopped = True
            said = (rule.get("message") or expr).strip()
            yield ValidationError(
                f"Invalid value: '{cel_cost.CANCELLED}': no further validation rules will be "
                f"run due to call cost exceeds limit for rule: {said}"
            )
            return
    if outcome.error:
        yield _cel_error(rule, f"{outcome.error} (evaluating rule: {expr})")
        return
    if outcome.value is True:
        return
    message = rule.get("message") or f"failed rule: {expr}"
    if isinstance(rule.get("messageExpression"), str):
        mprog = cel_program(rule["messageExpression"])
        if not isinstance(mprog, str):
            m = _cel_run(mprog, instance, schema)
            if stats is not None:
                stats.budget -= m.cost
            if not m.unsupported and not m.error and isinstance(m.value, str) and m.value.strip():
                message = m.value
    yield _cel_error(rule, message)


def _cel_error(rule: dict[str, Any], message: str) -> ValidationError:
    err = ValidationError(f"Invalid value: {message}")
    fp = rule.get("fieldPath")
    if isinstance(fp, str) and fp:
        for part in re.findall(r"\.([A-Za-z0-9_\-]+)|\['([^']*)'\]|\[(\d+)\]", fp):
            name, quoted, idx = part
            err.path.append(int(idx) if idx else (name or quoted))
    return err


@dataclass
class _CelOutcome:
    value: Any = None
    error: str | None = None
    unsupported: str | None = None
    # What the evaluation cost (cel_cost), and whether it went past the per-call limit.
    cost: int = 0
    cancelled: bool = False


# What the API server says when an object's rules overrun RuntimeCELCostBudget.
CEL_BUDGET_EXCEEDED = (
    "validation failed due to running out of cost budget, no further validation rules will be run"
)


@functools.cache
def _cel_environment() -> Any:
    """One CEL environment: building one builds its parser (tens of milliseconds)."""
    import celpy

    return celpy.Environment()


@functools.lru_cache(maxsize=4096)
def cel_program(expr: str) -> Any:
    """A rule compiled to run with its cost counted (dot_inference/cel_cost.py), or why it
    cannot be compiled here (a string)."""
    env = _cel_environment()
    try:
        ast = env.compile(expr)
        return cel_cost.program(env, ast, _cel_functions())
    except Exception as err:
        return (
            f"cannot compile here: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
        )


# A rule's outcome for a value: the same rules meet the same values many times in one run (a
# claim, then the XR rendered from it; the examples share most of their specs).
_CEL_MEMO: dict[tuple[str, str, int], tuple[dict[str, Any], _CelOutcome]] = {}


# `self` and the field names after it: self.a.b['c'] reads self.a.b (and what is under it),
# has(self.a.b) only whether a has b.
_SELF_CHAIN = re.compile(r"\bself((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HAS_OPEN = re.compile(r"\bhas\s*\(\s*$")

Path_ = tuple[str, ...]


@functools.lru_cache(maxsize=4096)
def _self_paths(expr: str) -> tuple[tuple[Path_, ...], tuple[Path_, ...]] | None:
    """The field paths under `self` a rule reads: those whose value it reads, and those it
    only tests with has(); None when it may read all of `self` (a bare `self`, a method
    called on `self`, or a comment, which could hide what follows it).

    A name followed by `(` is a method (self.labels.all(k, ...)): its receiver is read whole.
    A name Kubernetes escapes (__namespace__) is a property's escaped name or a map's literal
    key: both spellings are kept."""
    if "//" in expr:
        return None
    values: list[Path_] = []
    present: list[Path_] = []
    for m in _SELF_CHAIN.finditer(expr):
        names = tuple(_NAME.findall(m.group(1)))
        after = expr[m.end() :].lstrip()[:1]
        if after == "(":
            names = names[:-1]  # a method of what comes before it
        if not names:
            return None
        only_has = after == ")" and _HAS_OPEN.search(expr, 0, m.start()) is not None
        spellings = itertools.product(*(sorted({n, _unescape(n)}) for n in names))
        (present if only_has else values).extend(tuple(p) for p in spellings)
    return tuple(values), tuple(present)


# How Kubernetes names a property as a CEL field (apiserver pkg/cel/escaping.go, documented
# at kubernetes.io/docs/reference/using-api/cel/#escaping): a CEL keyword becomes __kw__, and
# "__", ".", "-", "/" become __underscores__, __dot__, __dash__, __slash__.
_CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_CEL_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_CEL_ESCAPE = re.compile(r"__|[./-]")
_CEL_UNESCAPE = re.compile(r"__(underscores|dot|dash|slash)__")
_CEL_UNESCAPES = {v[2:-2]: k for k, v in _CEL_ESCAPES.items()}


def _cel_escape(name: str) -> str:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    return _CEL_ESCAPE.sub(lambda m: _CEL_ESCAPES[m.group(0)], name)


def _unescape(name: str) -> str:
    inner = name[2:-2] if name.startswith("__") and name.endswith("__") else ""
    if inner in _CEL_RESERVED:
        return inner
    return _CEL_UNESCAPE.sub(lambda m: _CEL_UNESCAPES[m.group(1)], name)


def _read_part(instance: Any, values: tuple[Path_, ...], present: tuple[Path_, ...] = ()) -> Any:
    """The part of `instance` a rule reads: each of `values` with what is under it, and for
    each of `present` only that the field is there (as true). A missing field stays missing,
    and a value that is not an object where a path goes on is kept whole (a list, or a
    method call's receiver). A rule that reads only these evaluates the same over this part
    as over the whole instance."""
    if not isinstance(instance, dict):
        return instance
    part: dict[str, Any] = {}
    for paths, whole in ((values, True), (present, False)):
        for path in paths:
            src, dst = instance, part
            for i, name in enumerate(path):
                if name not in src:
                    break
                value = src[name]
                if i == len(path) - 1 and not whole:
                    dst.setdefault(name, True)  # has(): only that it is there
                    break
                if i == len(path) - 1 or not isinstance(value, dict):
                    dst[name] = value
                    break
                nxt = dst.get(name)
                if nxt is value:
                    break  # a shorter path keeps it whole
                if not isinstance(nxt, dict):
                    nxt = dst[name] = {}
                src, dst = value, nxt
    return part


def _cel_run_memo(expr: str, program: Any, instance: Any, schema: dict[str, Any]) -> _CelOutcome:
    paths = _self_paths(expr)
    read = instance if paths is None else _read_part(instance, *paths)
    try:
        key = (expr, json.dumps(read, sort_keys=True), id(schema))
    except (TypeError, ValueError):
        return _cel_run(program, instance, schema)
    hit = _CEL_MEMO.get(key)
    if hit is not None and hit[0] is schema:  # the same schema, not one at a reused id
        return hit[1]
    if len(_CEL_MEMO) > 65536:
        _CEL_MEMO.clear()
    outcome = _cel_run(program, instance, schema)
    _CEL_MEMO[key] = (schema, outcome)
    return outcome


def _cel_run(program: Any, instance: Any, schema: dict[str, Any]) -> _CelOutcome:
    import celpy

    try:
        result, cost = program.evaluate_costed(
            {"self": to_cel(instance, schema)}, cel_cost.PER_CALL_LIMIT
        )
    except cel_cost.CostLimitExceeded as over:
        return _CelOutcome(cost=over.cost, cancelled=True)
    except celpy.CELEvalError as err:
        return _classify_cel_error(err)
    except Exception as err:  # an emulation gap, not the object's fault
        return _CelOutcome(unsupported=f"evaluator error: {type(err).__name__}: {err}")
    if isinstance(result, celpy.CELEvalError):
        return dataclasses.replace(_classify_cel_error(result), cost=cost)
    return _CelOutcome(value=_from_cel(result), cost=cost)


def _classify_cel_error(err: Exception) -> _CelOutcome:
    args = getattr(err, "args", ())
    msg = str(args[0]) if args else str(err)
    cause = args[1] if len(args) > 1 else None
    if "undeclared reference" in msg or "unknown function" in msg:
        name = re.search(r"undeclared reference to '([^']+)'", msg)
        return _CelOutcome(unsupported=f"unsupported function {name.group(1) if name else '?'}")
    if cause is KeyError or "no such" in msg:
        return _CelOutcome(error=f"no such key: {msg}")
    # Overload and type errors: the API server type-checks rules against the schema, so at
    # run time these come from our emulation (for instance int/double), not from the object.
    return _CelOutcome(unsupported=f"evaluation gap: {msg[:120]}")


def to_cel(value: Any, schema: dict[str, Any] | None) -> Any:
    """JSON to CEL values, typed by the schema as the API server types them."""
    from celpy import celtypes

    s = schema if isinstance(schema, dict) else {}
    if value is None:
        return None
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        if s.get("type") == "number":
            return celtypes.DoubleType(float(value))
        return celtypes.IntType(value)
    if isinstance(value, float):
        if s.get("type") == "integer" and value.is_integer():
            return celtypes.IntType(int(value))
        return celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = s.get("items") if isinstance(s.get("items"), dict) else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, dict):
        props = s.get("properties") or {}
        addl = (
            s.get("additionalProperties")
            if isinstance(s.get("additionalProperties"), dict)
            else None
        )
        # A declared property is a CEL field, under its escaped name (self.__namespace__);
        # a map's keys stay as they are (self['a-key']).
        return celtypes.MapType(
            {
                celtypes.StringType(_cel_escape(k) if k in props else k): to_cel(
                    v, props.get(k, addl)
                )
                for k, v in value.items()
            }
        )
    return value


def _from_cel(value: Any) -> Any:
    from celpy import celtypes

    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    return value


@functools.cache
def _cel_functions() -> dict[str, Any]:
    """Kubernetes CEL library functions cel-python lacks (strings, lists, regex)."""
    from celpy import celtypes

    s = celtypes.StringType

    def split(v: str, sep: str, n: int = -1) -> Any:
        parts = str(v).split(str(sep)) if int(n) < 0 else str(v).split(str(sep), max(int(n) - 1, 0))
        return celtypes.ListType([s(p) for p in parts][: None if int(n) < 0 else int(n)])

    def index_of(v: Any, x: Any, start: int = 0) -> Any:
        if isinstance(v, list):
            return celtypes.IntType(next((i for i, e in enumerate(v) if e == x), -1))
        return celtypes.IntType(str(v).find(str(x), int(start)))

    def last_index_of(v: Any, x: Any) -> Any:
        if isinstance(v, list):
            return celtypes.IntType(max((i for i, e in enumerate(v) if e == x), default=-1))
        return celtypes.IntType(str(v).rfind(str(x)))

    def substring(v: str, start: int, end: int | None = None) -> Any:
        return s(str(v)[int(start) : None if end is None else int(end)])

    def find(v: str, pattern: str) -> Any:
        import re2

        m = re2.search(str(pattern), str(v))
        return s(m.group(0) if m else "")

    def find_all(v: str, pattern: str, n: int = -1) -> Any:
        import re2

        found = [s(m.group(0)) for m in re2.finditer(str(pattern), str(v))]
        return celtypes.ListType(found if int(n) < 0 else found[: int(n)])

    return {
        "lowerAscii": lambda v: s(str(v).lower()),
        "upperAscii": lambda v: s(str(v).upper()),
        "trim": lambda v: s(str(v).strip()),
        "replace": lambda v, a, b, n=-1: s(str(v).replace(str(a), str(b), int(n))),
        "split": split,
        "join": lambda v, sep="": s(str(sep).join(str(x) for x in v)),
        "charAt": lambda v, i: s(str(v)[int(i) : int(i) + 1]),
        "indexOf": index_of,
        "lastIndexOf": last_index_of,
        "substring": substring,
        "isSorted": lambda v: celtypes.BoolType(list(v) == sorted(v)),
        "sum": lambda v: sum(v[1:], v[0]) if len(v) else celtypes.IntType(0),
        "min": lambda v: min(v),
        "max": lambda v: max(v),
        "find": find,
        "findAll": find_all,
    }
