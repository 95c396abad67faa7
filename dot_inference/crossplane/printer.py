"""Printing objects byte-for-byte as `crossplane composition render` prints them."""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

import yaml

from dot_inference.crossplane.convert import jsonable as _jsonable

# --------------------------------------------------------------------------- YAML output
#
# Crossplane prints with k8s.io/apimachinery's JSON serializer in YAML mode: encoding/json,
# then sigs.k8s.io/yaml.JSONToYAML (go-yaml v2). That means: keys sorted in go-yaml's
# "natural" order, strings quoted (double quotes) when they would read back as something
# else, multi-line strings as literal blocks, lines folded at 80 columns, sequences not
# indented under their key, floats in Go's shortest 'g' format.

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

_GO_MAP = {
    **dict.fromkeys(
        ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], _BOOL
    ),
    **dict.fromkeys(
        ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], _BOOL
    ),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], _NULL),
    **dict.fromkeys(
        [
            ".nan",
            ".NaN",
            ".NAN",
            ".inf",
            ".Inf",
            ".INF",
            "+.inf",
            "+.Inf",
            "+.INF",
            "-.inf",
            "-.Inf",
            "-.INF",
        ],
        _FLOAT,
    ),
    "<<": "tag:yaml.org,2002:merge",
}
_GO_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_GO_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_GO_TIMESTAMPS = (
    re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})$"),
    re.compile(
        r"^(\d{4})-(\d{1,2})-(\d{1,2})[Tt](\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?"
        r"(Z|[+-]\d{2}:\d{2})$"
    ),
    re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2}) (\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d+)?$"),
)
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_GO_FLOAT_LITERAL = re.compile(
    r"^[-+]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|inf|infinity|nan)$", re.I
)


def _go_timestamp(s: str) -> bool:
    for rx in _GO_TIMESTAMPS:
        m = rx.match(s)
        if not m:
            continue
        g = [int(x) for x in m.groups()[:6] if x is not None and x.isdigit()]
        month, day = g[1], g[2]
        if not (1 <= month <= 12 and 1 <= day <= 31):
            return False
        return len(g) < 6 or (g[3] < 24 and g[4] < 60 and g[5] < 60)
    return False


def _go_resolve(s: str) -> str:
    """The tag go-yaml v2 would resolve a plain scalar to (yaml.v2 resolve.go)."""
    if s in _GO_MAP:
        return _GO_MAP[s]
    first = s[0]
    if first == ".":
        return _FLOAT if _GO_FLOAT_LITERAL.match(s) else _STR
    if first in "+-0123456789":
        if first.isdigit() and len(s) > 4 and s[4] == "-" and _go_timestamp(s):
            return _TIMESTAMP
        plain = s.replace("_", "")
        if _GO_INT.match(plain):
            return _INT
        if _GO_YAML_FLOAT.match(plain):
            return _FLOAT
    return _STR


def _needs_quotes(s: str) -> bool:
    return _go_resolve(s) != _STR or bool(_GO_BASE60.match(s))


def _go_float(f: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64) after a JSON round trip."""
    if math.isnan(f):
        return ".nan"
    if math.isinf(f):
        return ".inf" if f > 0 else "-.inf"
    if f.is_integer() and abs(f) < 1e21:
        return str(int(f))
    digits, exp = _shortest_digits(f)
    sign = "-" if f < 0 else ""
    x = exp - 1  # exponent of the first digit
    if x < -4 or x >= 6:  # shortest formatting decides with precision 6
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if exp <= 0:
        return f"{sign}0.{'0' * -exp}{digits}"
    if exp >= len(digits):
        return f"{sign}{digits}{'0' * (exp - len(digits))}"
    return f"{sign}{digits[:exp]}.{digits[exp:]}"


def _shortest_digits(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of |f| and the decimal point position."""
    r = repr(abs(f))
    mant, _, e = r.partition("e")
    exp = int(e) if e else 0
    int_part, _, frac = mant.partition(".")
    digits = (int_part + frac).lstrip("0")
    point = len(int_part) + exp
    lead = len(int_part + frac) - len((int_part + frac).lstrip("0"))
    point -= lead
    digits = digits.rstrip("0") or "0"
    return digits, point


def _go_key_less(a: str, b: str) -> bool:
    """go-yaml v2 sorter.go keyList.Less for string keys."""
    for i in range(min(len(a), len(b))):
        ca, cb = a[i], b[i]
        if ca == cb:
            continue
        al, bl = _is_letter(ca), _is_letter(cb)
        if al and bl:
            return ca < cb
        if al or bl:
            return bl
        an = bn = 0
        if ca == "0" or cb == "0":
            j = i - 1
            while j >= 0 and a[j].isdigit():
                if a[j] != "0":
                    an = bn = 1
                    break
                j -= 1
        ai = i
        while ai < len(a) and a[ai].isdigit():
            an = an * 10 + (ord(a[ai]) - 48)
            ai += 1
        bi = i
        while bi < len(b) and b[bi].isdigit():
            bn = bn * 10 + (ord(b[bi]) - 48)
            bi += 1
        if an != bn:
            return an < bn
        if ai != bi:
            return ai < bi
        return ca < cb
    return len(a) < len(b)


def _is_letter(c: str) -> bool:
    return unicodedata.category(c).startswith("L")


def _go_key_cmp(a: str, b: str) -> int:
    if _go_key_less(a, b):
        return -1
    if _go_key_less(b, a):
        return 1
    return 0


# libyaml's escapes in double-quoted scalars (emitter.c yaml_emitter_write_double_quoted).
_ESCAPES = {
    "\0": "0",
    "\x07": "a",
    "\x08": "b",
    "\t": "t",
    "\n": "n",
    "\x0b": "v",
    "\x0c": "f",
    "\r": "r",
    "\x1b": "e",
    '"': '"',
    "\\": "\\",
    "\x85": "N",
    "\xa0": "_",
    "\u2028": "L",
    "\u2029": "P",
}


def _printable(code: int) -> bool:
    """libyaml's IS_PRINTABLE (a tab is not)."""
    return (
        code == 0x0A
        or 0x20 <= code <= 0x7E
        or code == 0x85
        or 0xA0 <= code <= 0xD7FF
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    )


class _GoEmitter(yaml.emitter.Emitter):
    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """libyaml's (and go-yaml's) double-quoted scalar: everything not printable escaped,
        a line folded at a single space past the width (the space is the fold; a following
        space is escaped), never elsewhere. PyYAML's own escapes every fold."""
        self.write_indicator('"', True)
        spaces = False
        last = len(text) - 1
        for i, ch in enumerate(text):
            code = ord(ch)
            if (
                not _printable(code)
                or (not self.allow_unicode and code > 0x7F)
                or ch in '"\\\r\n\x85\u2028\u2029'
            ):
                escape = _ESCAPES.get(ch) or (
                    f"x{code:02X}"
                    if code <= 0xFF
                    else (f"u{code:04X}" if code <= 0xFFFF else f"U{code:08X}")
                )
                self._put("\\" + escape)
                spaces = False
            elif ch == " ":
                if split and not spaces and self.column > self.best_width and 0 < i < last:
                    self.write_indent()
                    if text[i + 1] == " ":
                        self._put("\\")
                else:
                    self._put(" ")
                spaces = True
            else:
                self._put(ch)
                spaces = False
        self.write_indicator('"', False)

    def _put(self, data: str) -> None:
        self.column += len(data)
        self.stream.write(data)

    def choose_scalar_style(self) -> str:
        # libyaml's yaml_emitter_select_scalar_style, which go-yaml ports: a literal
        # block that is not allowed falls back to double quotes (PyYAML: single).
        if self.analysis is None:
            self.analysis = self.analyze_scalar(self.event.value)
        style = self.event.style
        a = self.analysis
        if style == '"' or self.canonical:
            return '"'
        if style and style in "|>":
            if not self.flow_level and not self.simple_key_context and a.allow_block:
                return style
            return '"'
        if self.simple_key_context and a.multiline:
            return '"'
        plain_ok = (self.flow_level and a.allow_flow_plain) or (
            not self.flow_level and a.allow_block_plain
        )
        if (
            self.event.implicit[0]
            and plain_ok
            and not (a.empty and (self.flow_level or self.simple_key_context))
        ):
            return ""
        if a.allow_single_quoted:
            return "'"
        return '"'


class _GoRepresenter(yaml.representer.SafeRepresenter):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def represent_str(self, data: str) -> Any:
        if "\n" in data:
            style = "|"
        elif _needs_quotes(data):
            style = '"'
        else:
            style = None
        return self.represent_scalar(_STR, data, style=style)

    def represent_float(self, data: float) -> Any:
        text = _go_float(data)
        return self.represent_scalar(_INT if re.fullmatch(r"-?\d+", text) else _FLOAT, text)

    def represent_dict(self, data: dict) -> Any:
        items = sorted(
            ((str(k), v) for k, v in data.items()),
            key=functools.cmp_to_key(lambda x, y: _go_key_cmp(x[0], y[0])),
        )
        return self.represent_mapping("tag:yaml.org,2002:map", items)


_GoRepresenter.add_representer(str, _GoRepresenter.represent_str)
_GoRepresenter.add_representer(float, _GoRepresenter.represent_float)
_GoRepresenter.add_representer(dict, _GoRepresenter.represent_dict)
_GoRepresenter.add_representer(tuple, yaml.representer.SafeRepresenter.represent_list)


class _GoResolver(yaml.resolver.BaseResolver):
    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _go_resolve(value) if implicit[0] else _STR
        if kind is yaml.SequenceNode:
            return self.DEFAULT_SEQUENCE_TAG
        return self.DEFAULT_MAPPING_TAG


class _GoDumper(_GoEmitter, yaml.serializer.Serializer, _GoRepresenter, _GoResolver):
    def __init__(self, stream: Any, **kw: Any) -> None:
        _GoEmitter.__init__(
            self,
            stream,
            canonical=False,
            indent=2,
            width=80,
            allow_unicode=True,
            line_break="\n",
        )
        yaml.serializer.Serializer.__init__(self, explicit_start=False, explicit_end=False)
        _GoRepresenter.__init__(self, default_style=None, default_flow_style=False, sort_keys=False)
        _GoResolver.__init__(self)


# libyaml when PyYAML was built with it (its wheels are), else the pure-Python emitter made to
# choose styles the same way; tests/unit/test_render.py holds the two to the same output.
_DUMPER: Any = _GoDumper
if yaml.__with_libyaml__:

    class _GoCDumper(yaml.cyaml.CEmitter, _GoRepresenter, _GoResolver):  # type: ignore[misc]
        """The same, emitted by libyaml, which go-yaml is a port of (its scalar style choice is
        go-yaml's: a literal block that is not allowed falls back to double quotes)."""

        def __init__(self, stream: Any, **kw: Any) -> None:
            yaml.cyaml.CEmitter.__init__(
                self,
                stream,
                canonical=False,
                indent=2,
                width=80,
                allow_unicode=True,
                line_break="\n",
                explicit_start=False,
                explicit_end=False,
            )
            _GoRepresenter.__init__(
                self, default_style=None, default_flow_style=False, sort_keys=False
            )
            _GoResolver.__init__(self)

    _DUMPER = _GoCDumper


def dump_yaml(obj: Any) -> str:
    """One object as Crossplane's YAML serializer writes it (no leading `---`)."""
    return yaml.dump(_jsonable(obj), Dumper=_DUMPER)


def dump_stream(objs: Iterable[Any]) -> str:
    """Objects as `crossplane render` prints them: each preceded by a `---` line."""
    return "".join(f"---\n{dump_yaml(o)}" for o in objs)
