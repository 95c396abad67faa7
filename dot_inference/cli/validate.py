"""`dot-inference validate`: validate Kubernetes objects against the upstream schemas."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from dot_inference.cli.common import CLIError, _fail, _problem_lines, _render_module, _validator
from dot_inference.crossplane import documents


def _print_problems(report: Any) -> bool:
    lines = _problem_lines(report)
    for line in lines:
        click.echo(line, err=True)
    return bool(lines)


# --------------------------------------------------------------------------- validate


@click.command("validate")
@click.argument("source", metavar="FILE|DIR|-", type=click.Path(path_type=Path, allow_dash=True))
def validate_cmd(source: Path) -> int:
    """Validate Kubernetes objects against the upstream schemas.

    Reads a YAML file, a directory of YAML files, or `-` for standard input. Documents of
    `crossplane render`'s own kinds (render.crossplane.io Result, Context) are skipped.
    """
    try:
        rmod = _render_module()
        if str(source) == "-":
            objs = documents.load_yaml_documents(sys.stdin.read(), "<stdin>")
            for doc in objs:
                if not isinstance(doc, dict):
                    raise CLIError(
                        f"<stdin>: expected Kubernetes objects, found a {type(doc).__name__}"
                    )
        else:
            objs = documents.load_objects(source)
        objs = [
            o for o in objs if not str(o.get("apiVersion", "")).startswith("render.crossplane.io/")
        ]
        report = _validator()(objs)
    except CLIError as e:
        _fail(str(e))
    except Exception as e:
        rmod = sys.modules.get("dot_inference.crossplane.render")
        if rmod is not None and isinstance(e, documents.RenderError):
            _fail(str(e))
        _fail(f"internal error: {type(e).__name__}: {e}")

    for name in report.valid:
        click.echo(f"valid: {name}")
    bad = _print_problems(report)
    summary = (
        f"{len(report.valid)} valid, {len(report.invalid)} invalid, "
        f"{len(report.no_schema)} without a schema"
    )
    click.echo(summary, err=bad)
    return 1 if bad or not report.ok else 0
