"""CEL's runtime cost, as the API server counts it, over cel-python's evaluator.

The API server stops a CustomResource's validation rules at two limits
(k8s.io/apiserver v0.35.4 pkg/apis/cel/config.go, the release `kcl/versions.k` pins):

* `PerCallLimit`: one rule's evaluation may cost at most 1,000,000; above it cel-go cancels
  the evaluation ("operation cancelled: actual cost limit exceeded");
* `RuntimeCELCostBudget`: all the rules of one object together may cost at most 10,000,000
  (apiextensions-apiserver pkg/registry/customresource/strategy.go passes it to the CEL
  validator); past it, no further rule runs.

The cost is cel-go v0.26.0's (the version k8s.io/apiserver v0.35.4 requires) runtime cost
(interpreter/runtimecost.go), with Kubernetes' estimator for its library functions
(k8s.io/apiserver pkg/cel/library/cost.go) and presence tests free (environment/base.go,
`PresenceTestHasCost(false)`):

* an identifier that holds a value, and each field selection or index, costs 1 (constants,
  type names and constant list literals cost nothing: the planner folds them);
* a call costs 1, or by the size of its arguments: equality and string comparison
  ceil(0.1 x the shorter operand's size), string concatenation ceil(0.1 x both sizes),
  `in` a list the list's size, startsWith/endsWith ceil(0.1 x the string's size), matches
  ceil(0.1 x (1 + string size)) x ceil(0.25 x regex size), and the Kubernetes library's
  string functions as its estimator says;
* `&&`, `||` and `?:` cost nothing themselves and stop early; a list literal that is not
  constant costs 10, a map literal 30;
* a comprehension is the loop cel-go's macros expand to: before each element its condition
  (`all`: 2, `exists`: 3, the others: nothing), then its step (the accumulator, 1, and the
  predicate; `exists_one` adds 2 for a match, `map` 12, `filter` 13 for a kept element),
  and at the end its result (1; `exists_one`: 2).

tests/contract/test_cel_cost.py holds this to the API server's own cost table
(apiextensions-apiserver pkg/apiserver/schema/cel/celcoststability_test.go at v0.35.4).
"""

from __future__ import annotations

import math
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.evaluation import CELEvalError, Evaluator

# k8s.io/apiserver v0.35.4 pkg/apis/cel/config.go.
PER_CALL_LIMIT = 1_000_000
RUNTIME_COST_BUDGET = 10_000_000

# cel-go v0.26.0 common/cost.go.
_STRING_TRAVERSAL = 0.1
_REGEX_LENGTH = 0.25
_LIST_CREATE = 10
_MAP_CREATE = 30

# What cel-go's errors say when the per-call limit cancels an evaluation.
CANCELLED = "operation cancelled: actual cost limit exceeded"

_MACROS = ("all", "exists", "exists_one", "map", "filter")


class CostLimitExceeded(Exception):
    """One evaluation cost more than its limit (cel-go's EvalCancelledError)."""

    def __init__(self, cost: int) -> None:
        super().__init__(CANCELLED)
        self.cost = cost


class _Tracker:
    def __init__(self, limit: int | None) -> None:
        self.cost = 0
        self.limit = limit

    def add(self, n: int) -> None:
        self.cost += n
        if self.limit is not None and self.cost > self.limit:
            raise CostLimitExceeded(self.cost)


def _size(value: Any) -> int:
    """cel-go's actualSize: a string's code points, bytes, a list's or map's length; 1
    for anything else."""
    if isinstance(value, str | bytes | list | dict):
        return len(value)
    return 1


def _ceil(x: float) -> int:
    return math.ceil(x)


def _traversal(value: Any) -> int:
    """Kubernetes' traversalCost (library/cost.go): a string's bytes x 0.1 (truncated), a
    list's or map's elements each."""
    if isinstance(value, str):
        return int(len(value.encode()) * _STRING_TRAVERSAL)
    if isinstance(value, bytes):
        return int(len(value) * _STRING_TRAVERSAL)
    if isinstance(value, list):
        return sum(_traversal(v) for v in value)
    if isinstance(value, dict):
        return sum(_traversal(k) + _traversal(v) for k, v in value.items())
    return 1


def call_cost(name: str, args: list[Any], result: Any) -> int:
    """The cost of calling `name` (an operator as `_==_`, a function or a method, its receiver
    first) on `args`, as cel-go's tracker and Kubernetes' estimator count it."""
    if any(isinstance(a, CELEvalError) for a in args):
        # cel-go observes the call with the error in its place, whose size is 1.
        args = [1 if isinstance(a, CELEvalError) else a for a in args]
    if name in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
        return _traversal(args[0]) if args else 0
    if name in ("url", "lowerAscii", "upperAscii", "substring", "trim", "quantity", "isQuantity"):
        return _ceil(_size(args[0]) * _STRING_TRAVERSAL) if args else 1
    if name in ("replace", "split"):
        return _ceil(_size(args[0]) * 2 * _STRING_TRAVERSAL) if args else 1
    if name == "join":
        return _ceil(_size(result) * 2 * _STRING_TRAVERSAL)
    if name in ("find", "findAll", "matches") and len(args) >= 2:
        text = _ceil((1.0 + _size(args[0])) * _STRING_TRAVERSAL)
        return text * _ceil(_size(args[1]) * _REGEX_LENGTH)
    if name in ("startsWith", "endsWith") and args:
        return _ceil(_size(args[0]) * _STRING_TRAVERSAL)
    if name == "contains" and len(args) >= 2:
        return _ceil(_size(args[0]) * _STRING_TRAVERSAL) * _ceil(_size(args[1]) * _STRING_TRAVERSAL)
    if name == "_in_" and len(args) == 2 and isinstance(args[1], list):
        return _size(args[1])
    if name in ("_==_", "_!=_") and len(args) == 2:
        return _ceil(min(_size(args[0]), _size(args[1])) * _STRING_TRAVERSAL)
    if name in ("_<_", "_<=_", "_>_", "_>=_") and len(args) == 2:
        if isinstance(args[0], str | bytes) and isinstance(args[1], str | bytes):
            return _ceil(min(_size(args[0]), _size(args[1])) * _STRING_TRAVERSAL)
        return 1
    if name == "_+_" and len(args) == 2:
        if isinstance(args[0], str | bytes) and isinstance(args[1], str | bytes):
            return _ceil((_size(args[0]) + _size(args[1])) * _STRING_TRAVERSAL)
        return 1
    return 1


def _constant(tree: lark.Tree) -> bool:
    """Whether an expression is a literal, or a list or map literal of literals (cel-go's
    planner folds those into constants)."""
    if not isinstance(tree, lark.Tree):
        return True
    if tree.data in ("literal",):
        return True
    if tree.data in ("ident", "ident_arg", "member_dot", "member_dot_arg", "member_index"):
        return False
    if (
        tree.data
        in (
            "relation",
            "addition",
            "multiplication",
            "unary",
            "conditionalor",
            "conditionaland",
            "expr",
        )
        and len(tree.children) > 1
    ):
        return False
    return all(_constant(c) for c in tree.children)


def _is(value: Any, truth: bool) -> bool:
    """Whether `value` is the boolean `truth` (cel-python's BoolType is an int, not a bool)."""
    return isinstance(value, bool | celtypes.BoolType) and bool(value) is truth


def _and(a: Any, b: Any) -> Any:
    """CEL's commutative `&&`: false wins over an error."""
    if _is(a, False) or _is(b, False):
        return celtypes.BoolType(False)
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    return celtypes.BoolType(True)


def _or(a: Any, b: Any) -> Any:
    """CEL's commutative `||`: true wins over an error."""
    if _is(a, True) or _is(b, True):
        return celtypes.BoolType(True)
    if isinstance(a, CELEvalError):
        return a
    if isinstance(b, CELEvalError):
        return b
    return celtypes.BoolType(False)


class _CostedEvaluator(Evaluator):
    """cel-python's evaluator, counting cel-go's runtime cost as it goes (module docstring),
    with `&&` and `||` stopping early and the comprehension macros run as cel-go runs them."""

    def __init__(self, ast: lark.Tree, activation: Any, tracker: _Tracker) -> None:
        super().__init__(ast, activation)
        self.tracker = tracker
        self._values: dict[int, Any] = {}

    def sub_evaluator(self, ast: lark.Tree) -> Evaluator:
        return _CostedEvaluator(ast, self.activation, self.tracker)

    def _visit_tree(self, tree: lark.Tree) -> Any:  # every visit of a node passes here
        value = super()._visit_tree(tree)
        self._values[id(tree)] = value
        return value

    def _value(self, tree: Any) -> Any:
        return self._values.get(id(tree))

    # --- operators -------------------------------------------------------------------------

    def _binary(self, tree: lark.Tree, method: Any, names: dict[str, str]) -> Any:
        result = method(tree)
        if len(tree.children) == 2:
            op = tree.children[0]
            left = self._value(op.children[0]) if isinstance(op, lark.Tree) else None
            right = self._value(tree.children[1])
            self.tracker.add(call_cost(names[op.data], [left, right], result))
        return result

    def relation(self, tree: lark.Tree) -> Any:
        names = {
            "relation_lt": "_<_",
            "relation_le": "_<=_",
            "relation_ge": "_>=_",
            "relation_gt": "_>_",
            "relation_eq": "_==_",
            "relation_ne": "_!=_",
            "relation_in": "_in_",
        }
        return self._binary(tree, super().relation, names)

    def addition(self, tree: lark.Tree) -> Any:
        return self._binary(tree, super().addition, {"addition_add": "_+_", "addition_sub": "_-_"})

    def multiplication(self, tree: lark.Tree) -> Any:
        names = {
            "multiplication_mul": "_*_",
            "multiplication_div": "_/_",
            "multiplication_mod": "_%_",
        }
        return self._binary(tree, super().multiplication, names)

    def unary(self, tree: lark.Tree) -> Any:
        result = super().unary(tree)
        if len(tree.children) == 2:
            self.tracker.add(1)
        return result

    def conditionalor(self, tree: lark.Tree) -> Any:
        if len(tree.children) != 2:
            return super().conditionalor(tree)
        left = self.visit(tree.children[0])
        if _is(left, True):
            return celtypes.BoolType(True)
        return _or(left, self.visit(tree.children[1]))

    def conditionaland(self, tree: lark.Tree) -> Any:
        if len(tree.children) != 2:
            return super().conditionaland(tree)
        left = self.visit(tree.children[0])
        if _is(left, False):
            return celtypes.BoolType(False)
        return _and(left, self.visit(tree.children[1]))

    # --- names, fields, calls ----------------------------------------------------------------

    def primary(self, tree: lark.Tree) -> Any:
        child = tree.children[0] if tree.children else None
        kind = child.data if isinstance(child, lark.Tree) else None
        if kind == "ident_arg" and child.children[0].value == "has":
            before = self.tracker.cost
            result = super().primary(tree)
            # The presence test is free; what it tests the presence in is not.
            if self.tracker.cost > before:
                self.tracker.cost -= 1
            return result
        result = super().primary(tree)
        if kind == "ident":
            if not isinstance(result, type):  # a type name is a constant
                self.tracker.add(1)
        elif kind == "ident_arg":
            name = child.children[0].value
            exprs = child.children[1].children if len(child.children) > 1 else []
            args = [self._value(e) for e in exprs]
            self.tracker.add(call_cost(name, args, result))
        elif kind == "list_lit" and not _constant(child):
            self.tracker.add(_LIST_CREATE)
        elif kind == "map_lit" and not _constant(child):
            self.tracker.add(_MAP_CREATE)
        return result

    def member_dot(self, tree: lark.Tree) -> Any:
        result = super().member_dot(tree)
        self.tracker.add(1)
        return result

    def member_index(self, tree: lark.Tree) -> Any:
        index = tree.children[1]
        before = self.tracker.cost
        result = super().member_index(tree)
        if _simple(index):
            # A literal or a variable index is one qualifier of the attribute (cel-go).
            self.tracker.cost = before + (self.tracker.cost - before - _own_cost(index))
        self.tracker.add(1)
        return result

    def member_dot_arg(self, tree: lark.Tree) -> Any:
        method = tree.children[1].value
        if method in _MACROS:
            return self._fold(tree, method)
        result = super().member_dot_arg(tree)
        receiver = self._value(tree.children[0])
        exprs = tree.children[2].children if len(tree.children) > 2 else []
        self.tracker.add(call_cost(method, [receiver, *(self._value(e) for e in exprs)], result))
        return result

    # --- comprehensions ------------------------------------------------------------------------

    def _fold(self, tree: lark.Tree, macro: str) -> Any:
        items = self.visit(tree.children[0])
        if isinstance(items, CELEvalError):
            return items
        var_tree, body_tree = tree.children[2].children
        name = next(var_tree.find_data("ident")).children[0].value
        body = _CostedEvaluator(body_tree, self.activation, self.tracker)

        def predicate(item: Any) -> Any:
            body.set_activation({name: item})
            try:
                return body.visit(body_tree)
            except CELEvalError as err:
                return err

        add = self.tracker.add
        accu: Any
        if macro == "all":
            accu = celtypes.BoolType(True)
            for item in items:
                add(2)  # @not_strictly_false(accu)
                if _is(accu, False):
                    break
                add(1)
                accu = _and(accu, predicate(item))
        elif macro == "exists":
            accu = celtypes.BoolType(False)
            for item in items:
                add(3)  # @not_strictly_false(!accu)
                if _is(accu, True):
                    break
                add(1)
                accu = _or(accu, predicate(item))
        elif macro == "exists_one":
            # `p ? accu + 1 : accu`, then `accu == 1`: an error in any predicate is the result.
            count: Any = 0
            for item in items:
                hit = predicate(item)
                if isinstance(hit, CELEvalError):
                    count = hit
                elif hit:
                    add(2)
                    count = count if isinstance(count, CELEvalError) else count + 1
            add(2)
            return count if isinstance(count, CELEvalError) else celtypes.BoolType(count == 1)
        elif macro == "map":
            # `accu + [f]`: a list of one element, then a concatenation.
            values: list[Any] = []
            error: Any = None
            for item in items:
                value = predicate(item)
                add(_LIST_CREATE + 2)
                error = error or (value if isinstance(value, CELEvalError) else None)
                values.append(value)
            accu = error or celtypes.ListType(values)
        else:
            # filter: `p ? accu + [x] : accu`.
            kept: list[Any] = []
            error = None
            for item in items:
                keep = predicate(item)
                if isinstance(keep, CELEvalError):
                    error = error or keep
                elif keep:
                    add(_LIST_CREATE + 3)
                    kept.append(item)
            accu = error or celtypes.ListType(kept)
        add(1)  # the result
        return accu


def _simple(tree: Any) -> bool:
    """An index that is a literal or a plain variable (through the grammar's wrappers)."""
    while (
        isinstance(tree, lark.Tree)
        and len(tree.children) == 1
        and tree.data
        not in (
            "ident",
            "literal",
        )
    ):
        tree = tree.children[0]
    return isinstance(tree, lark.Tree) and tree.data in ("ident", "literal")


def _own_cost(tree: Any) -> int:
    """What a simple index itself was charged: 1 for a variable, nothing for a literal."""
    while isinstance(tree, lark.Tree) and len(tree.children) == 1 and tree.data != "ident":
        tree = tree.children[0]
    return 1 if isinstance(tree, lark.Tree) and tree.data == "ident" else 0


class CostedRunner(celpy.InterpretedRunner):
    """A compiled rule that evaluates with a cost limit and says what it cost."""

    def evaluate_costed(self, context: dict[str, Any], limit: int | None) -> tuple[Any, int]:
        """(value, cost): the value may be a CELEvalError (what the rule evaluated to);
        raises CostLimitExceeded past `limit`."""
        tracker = _Tracker(limit)
        evaluator = _CostedEvaluator(self.ast, self.new_activation(), tracker)
        evaluator.set_activation(context)
        return evaluator.visit(self.ast), tracker.cost

    def evaluate(self, context: dict[str, Any]) -> Any:
        value = self.evaluate_costed(context, None)[0]
        if isinstance(value, CELEvalError):
            raise value
        return value


def program(env: celpy.Environment, ast: lark.Tree, functions: dict[str, Any]) -> CostedRunner:
    return CostedRunner(env, ast, functions)
