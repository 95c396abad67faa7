"""What the `dot-inference` commands share: the one-line failure (exit code 2), where the
package is, and the render module and validator they load on first use."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "package"


class CLIError(Exception):
    """A failure reported as one line and exit code 2."""


def _fail(message: str, code: int = 2) -> NoReturn:
    click.echo(f"dot-inference: {message}", err=True)
    sys.exit(code)


def _render_module() -> Any:
    from dot_inference.crossplane import render

    return render


def _validator() -> Any:
    try:
        from dot_inference.apiserver import validate_objects
    except ImportError as e:
        raise CLIError(f"validation is not available: {e}") from e
    return validate_objects


def _problem_lines(report: Any) -> list[str]:
    lines = [
        f"dot-inference: invalid: {name}: {err}"
        for name, errors in report.invalid
        for err in errors or ["invalid"]
    ]
    return lines + [f"dot-inference: no schema: {name}" for name in report.no_schema]
