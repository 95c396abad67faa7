"""`dot-inference release`: the project's version and where its release goes."""

from __future__ import annotations

import click

from dot_inference.cli.common import _fail

# --------------------------------------------------------------------------- release


@click.group("release")
def release_group() -> None:
    """The project's version and where its release goes (pyproject.toml)."""


@release_group.command("info")
@click.argument("field", required=False)
def release_info_cmd(field: str | None) -> int:
    """Print KEY=value lines (version, tag, registry, packages), or one FIELD's value."""
    from dataclasses import asdict

    from dot_inference import release

    try:
        rel = release.release()
    except (release.ReleaseError, OSError, ValueError) as e:
        _fail(f"release: {e}")
    values = asdict(rel)
    if field is None:
        click.echo(rel.env(), nl=False)
    elif field in values:
        click.echo(values[field])
    else:
        _fail(f"release info: no field {field!r} (fields: {', '.join(values)})")
    return 0


@release_group.command("check-tag")
@click.argument("tag")
def release_check_tag_cmd(tag: str) -> int:
    """Exit 1 unless TAG (e.g. $GITHUB_REF_NAME) is v<the project's version>."""
    from dot_inference import release

    try:
        click.echo(f"releasing {release.check_tag(tag)}")
    except release.ReleaseError as e:
        _fail(f"release: {e}", 1)
    return 0
