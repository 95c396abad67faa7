"""A clone of this repository is all a user, a contributor or a runner has: nothing here
reads a path outside it. (.ci/run shows it for real: the README's commands in a fresh clone,
alone in a temporary folder.)"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT

# Written in two parts, so that this file does not name what it looks for.
SIBLING = re.compile(
    re.escape("..") + r"/" + "shared" + r"\b|" + "shared" + r"/(schemas|docs|tools|seeds)\b"
)
_PARENTS = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / p for p in out if (ROOT / p).is_file()]


FILES = files()


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def test_no_file_names_a_folder_beside_the_repository() -> None:
    found = []
    for path in FILES:
        text = _text(path)
        for n, line in enumerate((text or "").splitlines(), 1):
            if SIBLING.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "path",
    [p for p in FILES if p.suffix == ".py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_no_python_path_climbs_out_of_the_repository(path: Path) -> None:
    depth = len(path.relative_to(ROOT).parts) - 1  # parents[depth] is the repository
    text = _text(path) or ""
    for m in _PARENTS.finditer(text):
        assert int(m.group(1)) <= depth, f"parents[{m.group(1)}] is outside the repository"
    assert "ROOT" + ".parent" not in text


def test_schemas_default_to_the_vendored_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    from dot_inference.apiserver import schema_dirs

    monkeypatch.delenv("DOT_INFERENCE_SCHEMAS", raising=False)
    assert schema_dirs()[0] == ROOT / "schemas"
