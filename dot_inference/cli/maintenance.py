"""The repository's upkeep: `dot-inference generate`, `vendor`, `pin`, `renovate-extract` and
`lint-workflows`."""

from __future__ import annotations

from pathlib import Path

import click

from dot_inference.cli.common import _fail

# --------------------------------------------------------------------------- generate


@click.command("generate")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 if package/ is stale.")
def generate_cmd(check: bool) -> int:
    """Generate package/ from the KCL sources in kcl/."""
    try:
        from dot_inference.generate import generate

        return int(generate(check=check))
    except Exception as e:
        _fail(f"generate: {type(e).__name__}: {e}")


# --------------------------------------------------------------------------- vendor, pin


@click.command("vendor")
@click.argument("folders", nargs=-1)
@click.option("--check", is_flag=True, help="Change nothing; exit 1 if a folder is stale.")
@click.option(
    "--git-url",
    help="Fetch from this git URL instead of the SOURCE's GitHub repository (one folder).",
)
def vendor_cmd(folders: tuple[str, ...], check: bool, git_url: str | None) -> int:
    """Re-vendor schemas/: every folder whose pin moved, or the FOLDERS named."""
    from dot_inference import vendor

    try:
        code, lines = vendor.vendor(list(folders), git_url=git_url, check=check)
    except (vendor.VendorError, OSError) as e:
        _fail(f"vendor: {e}")
    for line in lines:
        click.echo(line, err=code != 0)
    return code


@click.command("pin")
@click.argument("name")
def pin_cmd(name: str) -> int:
    """Print a pinned version: NAME in kcl/versions.k, or devbox.json:<package>."""
    from dot_inference import pins

    try:
        click.echo(pins.pin(name))
    except (pins.PinError, OSError, ValueError) as e:
        _fail(f"pin: {e}")
    return 0


@click.command("renovate-extract")
@click.argument(
    "repo", type=click.Path(exists=True, file_okay=False, path_type=Path), default=Path(".")
)
def renovate_extract_cmd(repo: Path) -> int:
    """Print every dependency Renovate finds in REPO (its tracked files), offline."""
    from dot_inference import renovate

    try:
        deps = renovate.extract(repo.resolve())
    except renovate.RenovateError as e:
        _fail(f"renovate-extract: {e}", 1)
    click.echo(renovate.rows(deps), nl=False)
    click.echo(f"{len(deps)} dependencies found", err=True)
    return 0


@click.command("lint-workflows")
def lint_workflows_cmd() -> int:
    """actionlint on .github/workflows (installed on first use where it can be)."""
    from dot_inference import workflows

    try:
        code, message = workflows.lint()
    except (OSError, ValueError) as e:
        _fail(f"lint-workflows: {e}")
    click.echo(message, err=code != 0)
    return code
