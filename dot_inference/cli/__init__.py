"""`dot-inference`: render, validate and generate, offline.

Exit codes: 0 success; 1 a pipeline returned a fatal result, validation found problems,
or generated files are stale; 2 the command could not run (bad input, missing file, no
Composition). Every failure is one line on stderr, never a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from dot_inference.cli.common import PACKAGE_DIR as PACKAGE_DIR
from dot_inference.cli.common import CLIError as CLIError
from dot_inference.cli.common import _fail
from dot_inference.cli.maintenance import (
    generate_cmd,
    lint_workflows_cmd,
    pin_cmd,
    renovate_extract_cmd,
    vendor_cmd,
)
from dot_inference.cli.plan import plan_cmd
from dot_inference.cli.release import release_group
from dot_inference.cli.render import STATE_DIR as STATE_DIR
from dot_inference.cli.render import render_cmd
from dot_inference.cli.render import state_file as state_file
from dot_inference.cli.validate import validate_cmd


class _Group(click.Group):
    """Report usage errors and unexpected exceptions as one line, never a traceback."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            _fail("aborted", 130)
        except click.ClickException as e:
            _fail(e.format_message(), e.exit_code)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except BrokenPipeError:
            # The reader went away (`| head`): stop quietly, without a second error at exit.
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
            except (OSError, ValueError):
                pass
            sys.exit(1)
        if isinstance(rv, int):
            sys.exit(rv)
        sys.exit(0)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("dot-inference")
    except Exception:  # not installed as a distribution (a bare checkout)
        return "unknown"


@click.group(cls=_Group)
@click.version_option(_version(), "--version", prog_name="dot-inference")
def cli() -> None:
    """Offline tooling for the dot-inference Crossplane Configuration."""


cli.add_command(render_cmd)
cli.add_command(plan_cmd)
cli.add_command(validate_cmd)
cli.add_command(generate_cmd)
cli.add_command(vendor_cmd)
cli.add_command(pin_cmd)
cli.add_command(renovate_extract_cmd)
cli.add_command(lint_workflows_cmd)
cli.add_command(release_group)
